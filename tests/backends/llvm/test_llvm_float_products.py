"""The LLVM backend's float products, reductions and norms (backends/llvm/lower/float_ops.py):
dense, gemm and batch_matmul (register tiles and tails, two threads), softmax, layer norm,
sums, the dynamic int8 fields, each against the reference interpreter on random data; and the
BERT-style encoders built of them against ONNX Runtime. The elementwise kernels and views:
test_llvm_float.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from float_checks import check, rand
from hypothesis import given, settings
from hypothesis import strategies as st

import partita as P
from partita import relay

MODELS = Path(__file__).resolve().parents[2] / "models" / "transformers"


@pytest.mark.parametrize("weight_constant", [True, False])
@given(m=st.integers(1, 5), k=st.integers(1, 9), n=st.integers(1, 9))
@settings(max_examples=8, deadline=None)
def test_dense(weight_constant, m, k, n):
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    x = relay.var("x", shape=(m, k))
    w = rng.standard_normal((n, k)).astype(np.float32)
    data = rand(rng, (m, k), "float32")
    if weight_constant:
        fn, feeds = relay.Function([x], relay.nn.dense(x, relay.const(w))), [data]
    else:
        wv = relay.var("w", shape=(n, k))
        fn, feeds = relay.Function([x, wv], relay.nn.dense(x, wv)), [data, w]
    check(fn, feeds, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("m, k, n", [(9, 7, 80), (4, 33, 64), (1, 5, 16), (6, 3, 48)])
def test_vectorized_dense_tiles_and_tails(m, k, n):
    """N a multiple of 16: float_gemm's 4 x 4-vector register tiles, with row and column
    tails (float32 FMA accumulation: 1e-5 relative)."""
    rng = np.random.default_rng(m * 7 + n)
    x = relay.var("x", shape=(m, k))
    w = relay.const(rng.standard_normal((n, k)).astype(np.float32))
    check(relay.Function([x], relay.nn.dense(x, w)), [rand(rng, (m, k), "float32")],
           rtol=1e-5, atol=1e-5)
    b = relay.var("b", shape=(2, k, n))
    xb = relay.var("xb", shape=(2, m, k))
    out = relay.nn.batch_matmul(xb, b, transpose_b=False)
    feeds = [rand(rng, (2, m, k), "float32"), rand(rng, (2, k, n), "float32")]
    check(relay.Function([xb, b], out), feeds, rtol=1e-5, atol=1e-5)
    # transpose_b with K a multiple of 16 (attention's Q K^T): chunked dot products
    q, kt = relay.var("q", shape=(2, m, n)), relay.var("kt", shape=(1, k + 2, n))
    out = relay.nn.batch_matmul(q, kt, transpose_b=True)
    feeds = [rand(rng, (2, m, n), "float32"), rand(rng, (1, k + 2, n), "float32")]
    check(relay.Function([q, kt], out), feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ta, tb", [(False, True), (False, False), (True, True)])
@pytest.mark.parametrize("batches", [(2, 2), (1, 3)])
def test_batch_matmul(ta, tb, batches):
    rng = np.random.default_rng(6)
    m, k, n = 3, 5, 4
    xs = (batches[0], k, m) if ta else (batches[0], m, k)
    ys = (batches[1], n, k) if tb else (batches[1], k, n)
    x, y = relay.var("x", shape=xs), relay.var("y", shape=ys)
    out = relay.nn.batch_matmul(x, y, transpose_a=ta, transpose_b=tb)
    check(relay.Function([x, y], out), [rand(rng, xs, "float32"), rand(rng, ys, "float32")],
           rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax_and_layer_norm(axis):
    rng = np.random.default_rng(7)
    x = relay.var("x", shape=(2, 3, 5))
    data = rand(rng, (2, 3, 5), "float32") * 4
    check(relay.Function([x], relay.nn.softmax(x, axis=axis)), [data])
    n = 5 if axis == -1 else 3
    g, b = relay.const(rng.random(n).astype(np.float32)), relay.var("beta", shape=(n,))
    out = relay.nn.layer_norm(x, g, b, axis=axis, epsilon=1e-5)
    check(relay.Function([x, b], out), [data, rng.random(n).astype(np.float32)])


@pytest.mark.parametrize("op", ["sum", "mean", "max"])
@pytest.mark.parametrize("axis, keepdims", [((1,), False), ((0, 2), True), (None, False)])
def test_reductions(op, axis, keepdims):
    rng = np.random.default_rng(8)
    x = relay.var("x", shape=(3, 4, 5))
    out = getattr(relay, op)(x, axis=axis, keepdims=keepdims)
    check(relay.Function([x], out), [rand(rng, (3, 4, 5), "float32")])


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "uint8", "int16"])
def test_integer_sums_wrap(dtype):
    rng = np.random.default_rng(14)
    x = relay.var("x", shape=(3, 4, 5), dtype=dtype)
    data = rand(rng, (3, 4, 5), dtype)
    data[0, 0, :] = np.iinfo(dtype).max  # the sum wraps
    check(relay.Function([x], relay.sum(x, axis=(2,))), [data])
    check(relay.Function([x], relay.sum(x, axis=(0, 2), keepdims=True)), [data])


@pytest.mark.parametrize(
    "name",
    ["bert_tiny.dynamo.onnx", "bert_tiny.onnx", "bert_tiny.opset14.onnx",
     "bert_tiny.ort_fused.onnx", "bert_tiny.qdq.onnx", "bert_tiny.dyn_int8.onnx",
     "bert_tiny.dyn_int8.ort_opt.onnx"],
)
def test_float_bert_encoders_equal_onnx_runtime(name):
    ort = pytest.importorskip("onnxruntime")
    from partita.frontends import from_onnx

    path = MODELS / name
    mod = from_onnx(str(path), input_shapes={"input_ids": (1, 16), "attention_mask": (1, 16)})
    exe = P.build(mod, "llvm")
    rng = np.random.default_rng(10)
    ids = rng.integers(0, 100, (1, 16)).astype(np.int64)
    mask = np.ones((1, 16), np.int64)
    mask[0, 11:] = 0
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    want = sess.run(None, dict(zip(names, [ids, mask])))[0]
    got = exe.run(ids, mask)
    got = got[0] if isinstance(got, (list, tuple)) else got
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    ref = P.interpret(mod, [ids, mask])[0]
    if "qdq" in name or "int8" in name:  # integer parts and the same float steps: same bits
        assert got.tobytes() == ref.tobytes()
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("ort_cpu", ["avx2", "vnni"])
@pytest.mark.parametrize("name", ["bert_tiny.dyn_int8.onnx", "bert_tiny.dyn_int8.ort_opt.onnx"])
def test_dynamic_int8_encoders_equal_the_interpreter_under_each_ort_cpu(name, ort_cpu):
    """Both of ONNX Runtime's x86 integer kernels, forced on any machine: the dynamic-int8
    products saturate pairs of u8 x s8 products to int16 ("avx2") or sum exactly ("vnni"), and
    the LLVM build computes the interpreter's bits under each (which differ: the pair term is
    not zero on these weights)."""
    from partita.frontends import from_onnx

    path = MODELS / name
    shapes = {"input_ids": (1, 16), "attention_mask": (1, 16)}
    mod = from_onnx(str(path), input_shapes=shapes, ort_cpu=ort_cpu)
    rng = np.random.default_rng(10)
    ids = rng.integers(0, 100, (1, 16)).astype(np.int64)
    mask = np.ones((1, 16), np.int64)
    mask[0, 11:] = 0
    got = P.build(mod, "llvm").run(ids, mask)
    got = got[0] if isinstance(got, (list, tuple)) else got
    ref = P.interpret(mod, [ids, mask])[0]
    assert got.tobytes() == ref.tobytes()
    other = "vnni" if ort_cpu == "avx2" else "avx2"
    elsewhere = P.interpret(from_onnx(str(path), input_shapes=shapes, ort_cpu=other), [ids, mask])
    assert elsewhere[0].tobytes() != ref.tobytes()


@pytest.mark.parametrize("tb", [True, False])
@pytest.mark.parametrize("bias_shape", [(), (32,), (5, 32)])
@pytest.mark.parametrize("weight_constant", [True, False])
def test_gemm(tb, bias_shape, weight_constant):
    """ONNX Gemm (nn.gemm): weight [N, K] or [K, N], a bias broadcast to the product."""
    rng = np.random.default_rng(12)
    m, k, n = 5, 7, 32
    x = relay.var("x", shape=(m, k))
    wshape = (n, k) if tb else (k, n)
    w = rand(rng, wshape, "float32")
    bias = relay.const(rand(rng, bias_shape, "float32"))
    feeds = [rand(rng, (m, k), "float32")]
    if weight_constant:
        fn = relay.Function([x], relay.nn.gemm(x, relay.const(w), bias, transpose_b=tb))
    else:
        wv = relay.var("w", shape=wshape)
        fn = relay.Function([x, wv], relay.nn.gemm(x, wv, bias, transpose_b=tb))
        feeds.append(w)
    check(fn, feeds, rtol=1e-5, atol=1e-5)


def test_dynamic_quantization_fields_and_int32_dense():
    """DynamicQuantizeLinear's three fields and MatMulInteger's int32 product (ONNX Runtime's
    dynamic int8 BERT) equal the reference bit for bit."""
    rng = np.random.default_rng(17)
    x = relay.var("x", shape=(4, 24))
    dq = relay.qnn.op.dynamic_quantize(x)
    w = relay.const(rng.integers(-128, 128, (16, 24)).astype(np.int8))
    zx = relay.cast(relay.TupleGetItem(dq, 2), dtype="int32")
    acc = relay.qnn.op.dense(relay.TupleGetItem(dq, 0), w, zx, relay.const(np.int32(0)),
                             relay.TupleGetItem(dq, 1), relay.const(np.float32(0.02)),
                             out_dtype="int32")
    out = relay.Tuple([acc, relay.TupleGetItem(dq, 1), relay.TupleGetItem(dq, 2)])
    data = rand(rng, (4, 24), "float32")
    check(relay.Function([x], out), [data], rtol=0, atol=0)
    check(relay.Function([x], out), [np.zeros((4, 24), np.float32)], rtol=0, atol=0)


def test_two_threads_give_the_same_bits():
    """``-threads=2``: a large product's second half of rows runs on a POSIX thread; each row
    is computed as with one thread, so the outputs are the same bits."""
    rng = np.random.default_rng(18)
    x = relay.var("x", shape=(66, 256))
    w = relay.const(rng.standard_normal((256, 256)).astype(np.float32))
    bias = relay.const(rng.standard_normal((66, 256)).astype(np.float32))
    fn = relay.Function([x], relay.nn.gemm(x, w, bias))
    mod = relay.transform.InferType()(relay.IRModule.from_expr(fn))
    data = rand(rng, (66, 256), "float32")
    one = P.build(mod, "llvm").run(data)[0]
    two = P.build(mod, "llvm -threads=2").run(data)[0]
    assert one.tobytes() == two.tobytes()
    np.testing.assert_allclose(two, P.interpret(mod, [data])[0], rtol=1e-4, atol=1e-4)
    with pytest.raises(P.PartitaError, match="threads"):
        P.build(mod, "llvm -threads=3")
    # few rows against many weights: the halves take halves of the 64-column panels (the
    # second with the 16-column tail), each row's bias and outputs at their columns
    x = relay.var("x", shape=(16, 1024))
    w = relay.const(rng.standard_normal((336, 1024)).astype(np.float32))
    bias = relay.const(rng.standard_normal((16, 336)).astype(np.float32))
    wide = relay.transform.InferType()(relay.IRModule.from_expr(
        relay.Function([x], relay.nn.gemm(x, w, bias))))
    data = rand(rng, (16, 1024), "float32")
    one = P.build(wide, "llvm").run(data)[0]
    assert one.tobytes() == P.build(wide, "llvm -threads=2").run(data)[0].tobytes()
    np.testing.assert_allclose(one, P.interpret(wide, [data])[0], rtol=1e-4, atol=1e-4)
    # a large elementwise chain: its first axis longer than 1 is halved over the two threads
    z = relay.var("z", shape=(1, 300, 500))
    chain = relay.Function([z], relay.tanh(relay.add(relay.multiply(z, z), relay.const(1.0))))
    cmod = relay.transform.InferType()(relay.IRModule.from_expr(chain))
    zd = rand(rng, (1, 300, 500), "float32")
    one = P.build(cmod, "llvm").run(zd)[0]
    assert one.tobytes() == P.build(cmod, "llvm -threads=2").run(zd)[0].tobytes()
