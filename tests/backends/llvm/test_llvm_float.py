"""The LLVM backend's float / integer / bool kernels (backends/llvm/lower/float_ops.py): each op
built for "llvm" against the reference interpreter on random data, and the float BERT-style
encoders against ONNX Runtime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import partita as P
from partita import relay

MODELS = Path(__file__).resolve().parents[2] / "models" / "transformers"


def _check(fn, feeds, rtol=1e-6, atol=1e-7):
    mod = relay.transform.InferType()(relay.IRModule.from_expr(fn))
    exe = P.build(mod, "llvm")
    want = P.interpret(mod, feeds)
    got = exe.run(*feeds)
    got = got if isinstance(got, (list, tuple)) else [got]
    for w, g in zip(want, got):
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)
    return exe


def _rand(rng, shape, dtype):
    if dtype in ("float16", "float32"):
        return rng.standard_normal(shape).astype(dtype)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dtype)


SHAPES = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((1, 3, 1), (2, 1, 5)), ((), (3, 2))]


@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide", "maximum", "minimum"])
@pytest.mark.parametrize("shapes", SHAPES)
def test_binary_float_ops_broadcast(op, shapes):
    rng = np.random.default_rng(0)
    x, y = (relay.var(n, shape=s, dtype="float32") for n, s in zip("xy", shapes))
    feeds = [_rand(rng, s, "float32") for s in shapes]
    _check(relay.Function([x, y], getattr(relay, op)(x, y)), feeds)


@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "maximum", "minimum"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_binary_integer_ops_wrap_as_the_reference(op, dtype):
    rng = np.random.default_rng(1)
    x, y = relay.var("x", shape=(3, 4), dtype=dtype), relay.var("y", shape=(4,), dtype=dtype)
    feeds = [_rand(rng, (3, 4), dtype), _rand(rng, (4,), dtype)]
    feeds[0][0, 0] = np.iinfo(dtype).max  # wraps
    _check(relay.Function([x, y], getattr(relay, op)(x, y)), feeds)


UNARY = ["negative", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "floor",
         "round"]  # fmt: skip


@pytest.mark.parametrize("op", UNARY)
def test_unary_float_ops(op):
    rng = np.random.default_rng(2)
    data = rng.standard_normal((4, 5)).astype(np.float32) * 3
    if op in ("log", "sqrt", "rsqrt"):
        data = np.abs(data) + np.float32(0.1)
    data[0, :3] = [0.5, -2.5, 1.5]  # round: half away from zero
    x = relay.var("x", shape=(4, 5), dtype="float32")
    # exp/log/tanh/sigmoid: the reference rounds numpy's float32 functions (within an ulp);
    # llvm rounds libm's double ones once (correctly rounded): they may differ by an ulp
    tol = 1e-6 if op in ("exp", "log", "tanh", "sigmoid") else 0
    _check(relay.Function([x], getattr(relay, op)(x)), [data], rtol=tol, atol=tol)


@pytest.mark.parametrize("op", ["equal", "not_equal", "less", "less_equal", "greater",
                                "greater_equal"])  # fmt: skip
def test_comparisons_give_bools(op):
    rng = np.random.default_rng(3)
    x, y = relay.var("x", shape=(3, 4)), relay.var("y", shape=(1, 4))
    a = rng.integers(-2, 3, (3, 4)).astype(np.float32)
    b = rng.integers(-2, 3, (1, 4)).astype(np.float32)
    a[0, 0] = np.nan
    if not hasattr(relay, op):
        pytest.skip(f"no {op} op")
    _check(relay.Function([x, y], getattr(relay, op)(x, y)), [a, b])


def test_where_cast_logical_and_clip():
    rng = np.random.default_rng(4)
    m = relay.var("m", shape=(1, 6), dtype="int64")
    x = relay.var("x", shape=(2, 6), dtype="float32")
    mask = relay.equal(m, relay.const(np.int64(0)))
    masked = relay.where(mask, relay.const(np.float32(-1e4)), x)
    out = relay.clip(relay.add(masked, relay.cast(m, dtype="float32")), a_min=-5.0, a_max=5.0)
    feeds = [rng.integers(0, 2, (1, 6)).astype(np.int64), _rand(rng, (2, 6), "float32")]
    _check(relay.Function([m, x], out), feeds)
    f = relay.var("f", shape=(8,), dtype="float32")
    big = np.array([1e10, -1e10, np.nan, np.inf, 2.7, -2.7, 3e9, 0], np.float32)
    _check(relay.Function([f], relay.cast(f, dtype="int32")), [big])
    b = relay.var("b", shape=(5,), dtype="bool")
    _check(relay.Function([b], relay.logical_not(b)), [rng.random(5) < 0.5])


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("per_channel", [False, True])
def test_dequantize(axis, per_channel):
    rng = np.random.default_rng(5)
    x = relay.var("x", shape=(3, 4), dtype="int8")
    n = (3, 4)[axis] if per_channel else 1
    scale = relay.const(rng.random(n).astype(np.float32) if per_channel else np.float32(0.02))
    zp = relay.const(rng.integers(-3, 3, n).astype(np.int32) if per_channel else np.int32(1))
    out = relay.qnn.op.dequantize(x, scale, zp, axis=axis)
    _check(relay.Function([x], out), [_rand(rng, (3, 4), "int8")], rtol=0, atol=0)


@pytest.mark.parametrize("weight_constant", [True, False])
@given(m=st.integers(1, 5), k=st.integers(1, 9), n=st.integers(1, 9))
@settings(max_examples=8, deadline=None)
def test_dense(weight_constant, m, k, n):
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    x = relay.var("x", shape=(m, k))
    w = rng.standard_normal((n, k)).astype(np.float32)
    data = _rand(rng, (m, k), "float32")
    if weight_constant:
        fn, feeds = relay.Function([x], relay.nn.dense(x, relay.const(w))), [data]
    else:
        wv = relay.var("w", shape=(n, k))
        fn, feeds = relay.Function([x, wv], relay.nn.dense(x, wv)), [data, w]
    _check(fn, feeds, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("m, k, n", [(9, 7, 80), (4, 33, 64), (1, 5, 16), (6, 3, 48)])
def test_vectorized_dense_tiles_and_tails(m, k, n):
    """N a multiple of 16: float_gemm's 4 x 4-vector register tiles, with row and column
    tails (float32 FMA accumulation: 1e-5 relative)."""
    rng = np.random.default_rng(m * 7 + n)
    x = relay.var("x", shape=(m, k))
    w = relay.const(rng.standard_normal((n, k)).astype(np.float32))
    _check(relay.Function([x], relay.nn.dense(x, w)), [_rand(rng, (m, k), "float32")],
           rtol=1e-5, atol=1e-5)
    b = relay.var("b", shape=(2, k, n))
    xb = relay.var("xb", shape=(2, m, k))
    out = relay.nn.batch_matmul(xb, b, transpose_b=False)
    feeds = [_rand(rng, (2, m, k), "float32"), _rand(rng, (2, k, n), "float32")]
    _check(relay.Function([xb, b], out), feeds, rtol=1e-5, atol=1e-5)
    # transpose_b with K a multiple of 16 (attention's Q K^T): chunked dot products
    q, kt = relay.var("q", shape=(2, m, n)), relay.var("kt", shape=(1, k + 2, n))
    out = relay.nn.batch_matmul(q, kt, transpose_b=True)
    feeds = [_rand(rng, (2, m, n), "float32"), _rand(rng, (1, k + 2, n), "float32")]
    _check(relay.Function([q, kt], out), feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ta, tb", [(False, True), (False, False), (True, True)])
@pytest.mark.parametrize("batches", [(2, 2), (1, 3)])
def test_batch_matmul(ta, tb, batches):
    rng = np.random.default_rng(6)
    m, k, n = 3, 5, 4
    xs = (batches[0], k, m) if ta else (batches[0], m, k)
    ys = (batches[1], n, k) if tb else (batches[1], k, n)
    x, y = relay.var("x", shape=xs), relay.var("y", shape=ys)
    out = relay.nn.batch_matmul(x, y, transpose_a=ta, transpose_b=tb)
    _check(relay.Function([x, y], out), [_rand(rng, xs, "float32"), _rand(rng, ys, "float32")],
           rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax_and_layer_norm(axis):
    rng = np.random.default_rng(7)
    x = relay.var("x", shape=(2, 3, 5))
    data = _rand(rng, (2, 3, 5), "float32") * 4
    _check(relay.Function([x], relay.nn.softmax(x, axis=axis)), [data])
    n = 5 if axis == -1 else 3
    g, b = relay.const(rng.random(n).astype(np.float32)), relay.var("beta", shape=(n,))
    out = relay.nn.layer_norm(x, g, b, axis=axis, epsilon=1e-5)
    _check(relay.Function([x, b], out), [data, rng.random(n).astype(np.float32)])


@pytest.mark.parametrize("op", ["sum", "mean", "max"])
@pytest.mark.parametrize("axis, keepdims", [((1,), False), ((0, 2), True), (None, False)])
def test_reductions(op, axis, keepdims):
    rng = np.random.default_rng(8)
    x = relay.var("x", shape=(3, 4, 5))
    out = getattr(relay, op)(x, axis=axis, keepdims=keepdims)
    _check(relay.Function([x], out), [_rand(rng, (3, 4, 5), "float32")])


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "uint8", "int16"])
def test_integer_sums_wrap(dtype):
    rng = np.random.default_rng(14)
    x = relay.var("x", shape=(3, 4, 5), dtype=dtype)
    data = _rand(rng, (3, 4, 5), dtype)
    data[0, 0, :] = np.iinfo(dtype).max  # the sum wraps
    _check(relay.Function([x], relay.sum(x, axis=(2,))), [data])
    _check(relay.Function([x], relay.sum(x, axis=(0, 2), keepdims=True)), [data])


@pytest.mark.parametrize("mode", ["wrap", "clip", "fast"])
@pytest.mark.parametrize("dtype", ["float32", "uint8", "int64"])
def test_take(mode, dtype):
    """"fast" takes indices in [-size, size): a negative one counts from the end (it was clamped
    to 0 once; the op survey of session 8 found it)."""
    rng = np.random.default_rng(9)
    data = relay.var("d", shape=(7, 3), dtype=dtype)
    idx = relay.var("i", shape=(2, 4), dtype="int64")
    ids = np.array([[0, 6, -1, 9], [3, -8, 2, 2]], np.int64)
    if mode == "fast":  # out of range is the reference's error: only valid indices
        ids = np.array([[0, 6, -1, -7], [3, -2, 2, 2]], np.int64)
    out = relay.take(data, idx, axis=0, mode=mode)
    _check(relay.Function([data, idx], out), [_rand(rng, (7, 3), dtype), ids])
    out = relay.take(data, relay.const(np.array([2, 0], np.int32)), axis=1, mode=mode)
    _check(relay.Function([data], out), [_rand(rng, (7, 3), dtype)])


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


def test_elementwise_chains_fuse_into_one_kernel():
    """GELU's five elementwise ops (and a dequantize feeding an add) become one EWISE kernel
    each, computing exactly what the separate kernels would (each step rounded to float32)."""
    rng = np.random.default_rng(11)
    x = relay.var("x", shape=(4, 48))
    half, one, root2 = (relay.const(np.float32(v)) for v in (0.5, 1.0, 1.4142135))
    phi = relay.add(relay.erf(relay.divide(x, root2)), one)
    gelu = relay.multiply(relay.multiply(x, half), phi)
    exe = _check(relay.Function([x], gelu), [_rand(rng, (4, 48), "float32")], rtol=0, atol=0)
    prof = exe.profile(_rand(rng, (4, 48), "float32"))
    kernels = [op.metrics.get("kernel") for step in prof.steps for op in step.ops]
    assert kernels == ["EWISE"]
    q = relay.var("q", shape=(4, 48), dtype="int8")
    deq = relay.qnn.op.dequantize(q, relay.const(np.float32(0.05)), relay.const(np.int32(3)))
    _check(relay.Function([q, x], relay.add(deq, x)),
           [_rand(rng, (4, 48), "int8"), _rand(rng, (4, 48), "float32")], rtol=0, atol=0)


@pytest.mark.parametrize("tb", [True, False])
@pytest.mark.parametrize("bias_shape", [(), (32,), (5, 32)])
@pytest.mark.parametrize("weight_constant", [True, False])
def test_gemm(tb, bias_shape, weight_constant):
    """ONNX Gemm (nn.gemm): weight [N, K] or [K, N], a bias broadcast to the product."""
    rng = np.random.default_rng(12)
    m, k, n = 5, 7, 32
    x = relay.var("x", shape=(m, k))
    wshape = (n, k) if tb else (k, n)
    w = _rand(rng, wshape, "float32")
    bias = relay.const(_rand(rng, bias_shape, "float32"))
    feeds = [_rand(rng, (m, k), "float32")]
    if weight_constant:
        fn = relay.Function([x], relay.nn.gemm(x, relay.const(w), bias, transpose_b=tb))
    else:
        wv = relay.var("w", shape=wshape)
        fn = relay.Function([x, wv], relay.nn.gemm(x, wv, bias, transpose_b=tb))
        feeds.append(w)
    _check(fn, feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "int8", "int64", "float16"])
def test_split_fields_and_strided_slices(dtype):
    """Views copy elements of any dtype (float16 too: moved, never computed on)."""
    """split's fields (a tuple inside the segment, read by TupleGetItem) and strided_slice are
    copies at affine index maps derived from the ops' own reference implementations."""
    rng = np.random.default_rng(13)
    x = relay.var("x", shape=(2, 6, 5), dtype=dtype)
    parts = relay.split(x, indices_or_sections=3, axis=1)
    uneven = relay.split(x, indices_or_sections=(1, 4), axis=2)
    out = relay.Tuple([relay.TupleGetItem(parts, 2), relay.TupleGetItem(uneven, 1),
                       relay.strided_slice(x, begin=(1, 5, 0), end=(2, 0, 5), strides=(1, -2, 2))])
    _check(relay.Function([x], out), [_rand(rng, (2, 6, 5), dtype)])


@settings(max_examples=15, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data(),
       scale=st.booleans(), center=st.booleans(), eps=st.sampled_from([1e-5, 1e-3, 0.1]),
       whole=st.booleans())
def test_batch_norm_equals_the_interpreter_bit_for_bit(shape, data, scale, center, eps, whole):
    """nn.batch_norm (relay graphs; the frontends fold it) is BNORM: the reference's float64
    arithmetic per element, so the same bits; its other two fields are the moving mean and
    variance, passed through."""
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    c = shape[axis]
    rng = np.random.default_rng(len(shape) * 7 + c)
    x = relay.var("x", shape=tuple(shape))
    consts = [relay.const(rng.standard_normal(c).astype(np.float32)) for _ in range(3)]
    var = relay.const(rng.uniform(0.01, 3.0, c).astype(np.float32))
    bn = relay.nn.batch_norm(x, *consts, var, axis=axis, epsilon=eps, center=center, scale=scale)
    fields = [relay.TupleGetItem(bn, i) for i in range(3)]
    out = relay.Tuple([relay.nn.relu(fields[0]), fields[2], fields[1]]) if whole else fields[0]
    _check(relay.Function([x], out), [_rand(rng, tuple(shape), "float32")], rtol=0, atol=0)


def test_batch_norm_with_run_time_parameters():
    """Run-time gamma (and a constant rest) is read from its buffer: the same bits (more in
    test_llvm_survey_fixes.py)."""
    x, gamma = relay.var("x", shape=(4, 3)), relay.var("gamma", shape=(3,))
    one = relay.const(np.ones(3, np.float32))
    bn = relay.nn.batch_norm(x, gamma, one, one, one, axis=1)
    rng = np.random.default_rng(3)
    _check(relay.Function([x, gamma], relay.TupleGetItem(bn, 0)),
           [_rand(rng, (4, 3), "float32"), _rand(rng, (3,), "float32")], rtol=0, atol=0)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_and_relu(approximate):
    rng = np.random.default_rng(15)
    x = relay.var("x", shape=(3, 40))
    data = _rand(rng, (3, 40), "float32") * 3
    data[0, 0] = np.nan
    tol = 0 if approximate == "none" else 1e-6  # libm erf is the reference's; tanh may not be
    _check(relay.Function([x], relay.nn.gelu(x, approximate=approximate)), [data],
           rtol=tol, atol=tol)
    _check(relay.Function([x], relay.nn.relu(x)), [data], rtol=0, atol=0)
    i = relay.var("i", shape=(7,), dtype="int32")
    _check(relay.Function([i], relay.nn.relu(i)), [np.arange(-3, 4, dtype=np.int32)])


def test_a_fused_producer_is_never_left_behind():
    """An int8 add whose only reader is an int8 relu (which alone would be a 256-entry table)
    is fused with it into one EWISE kernel."""
    rng = np.random.default_rng(16)
    a, c = relay.var("a", shape=(3, 8), dtype="int8"), relay.var("c", shape=(3, 8), dtype="int8")
    _check(relay.Function([a, c], relay.nn.relu(relay.add(a, c))),
           [_rand(rng, (3, 8), "int8"), _rand(rng, (3, 8), "int8")])


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
    data = _rand(rng, (4, 24), "float32")
    _check(relay.Function([x], out), [data], rtol=0, atol=0)
    _check(relay.Function([x], out), [np.zeros((4, 24), np.float32)], rtol=0, atol=0)


def test_two_threads_give_the_same_bits():
    """``-threads=2``: a large product's second half of rows runs on a POSIX thread; each row
    is computed as with one thread, so the outputs are the same bits."""
    rng = np.random.default_rng(18)
    x = relay.var("x", shape=(66, 256))
    w = relay.const(rng.standard_normal((256, 256)).astype(np.float32))
    bias = relay.const(rng.standard_normal((66, 256)).astype(np.float32))
    fn = relay.Function([x], relay.nn.gemm(x, w, bias))
    mod = relay.transform.InferType()(relay.IRModule.from_expr(fn))
    data = _rand(rng, (66, 256), "float32")
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
    data = _rand(rng, (16, 1024), "float32")
    one = P.build(wide, "llvm").run(data)[0]
    assert one.tobytes() == P.build(wide, "llvm -threads=2").run(data)[0].tobytes()
    np.testing.assert_allclose(one, P.interpret(wide, [data])[0], rtol=1e-4, atol=1e-4)
    # a large elementwise chain: its first axis longer than 1 is halved over the two threads
    z = relay.var("z", shape=(1, 300, 500))
    chain = relay.Function([z], relay.tanh(relay.add(relay.multiply(z, z), relay.const(1.0))))
    cmod = relay.transform.InferType()(relay.IRModule.from_expr(chain))
    zd = _rand(rng, (1, 300, 500), "float32")
    one = P.build(cmod, "llvm").run(zd)[0]
    assert one.tobytes() == P.build(cmod, "llvm -threads=2").run(zd)[0].tobytes()


_BIN = ["add", "subtract", "multiply", "maximum", "minimum", "divide"]
_UNARY = ["negative", "abs", "tanh", "sigmoid", "erf", "floor", "nn.relu"]


@st.composite
def elementwise_dags(draw):
    """A random DAG of float32 elementwise ops over broadcasting inputs: values shared by
    several readers (not fused) and chains (fused), compares feeding where."""
    shapes = [(2, 3, 4), (3, 4), (1, 4), (2, 1, 1)]
    values = [relay.var(f"v{i}", shape=s) for i, s in enumerate(shapes[: draw(st.integers(1, 4))])]
    params = list(values)
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["bin", "bin", "unary", "where", "const"]))
        pick = lambda: values[draw(st.integers(0, len(values) - 1))]  # noqa: E731
        if kind == "bin":
            values.append(getattr(relay, draw(st.sampled_from(_BIN)))(pick(), pick()))
        elif kind == "unary":
            name = draw(st.sampled_from(_UNARY))
            fn = relay.nn.relu if name == "nn.relu" else getattr(relay, name)
            values.append(fn(pick()))
        elif kind == "where":
            a, b = pick(), pick()
            values.append(relay.where(relay.less(a, b), a, relay.multiply(b, relay.const(2.0))))
        else:
            values.append(relay.add(pick(), relay.const(np.float32(draw(st.floats(-3, 3))))))
    outs = [values[-1]] + draw(st.lists(st.sampled_from(values[len(params):]), max_size=2))
    body = outs[0] if len(outs) == 1 else relay.Tuple(outs)
    return relay.Function(params, body), [p.type_annotation.shape for p in params]


@given(elementwise_dags(), st.integers(0, 2**16))
@settings(max_examples=25, deadline=None)
def test_random_elementwise_dags_equal_the_interpreter(case, seed):
    """Fusion keeps every value the interpreter computes: each step is rounded to float32 as
    a separate kernel would store it, so only the float32 math functions may differ (an ulp)."""
    fn, shapes = case
    rng = np.random.default_rng(seed)
    feeds = [rng.standard_normal(s).astype(np.float32) * 2 for s in shapes]
    _check(fn, feeds, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis", [1, -1])
def test_bias_add(axis):
    rng = np.random.default_rng(19)
    x = relay.var("x", shape=(2, 3, 4))
    n = 3 if axis == 1 else 4
    b = relay.var("b", shape=(n,))
    out = relay.nn.relu(relay.nn.bias_add(x, b, axis=axis))
    _check(relay.Function([x, b], out), [_rand(rng, (2, 3, 4), "float32"),
                                         _rand(rng, (n,), "float32")], rtol=0, atol=0)


_HALF_EXACT = ["negative", "abs", "floor", "round", "nn.relu", "nn.hardswish", "nn.leaky_relu",
               "add", "subtract", "multiply", "divide", "maximum", "minimum", "sqrt"]
_HALF_MATH = ["exp", "log", "rsqrt", "tanh", "sigmoid", "erf", "nn.gelu"]


@pytest.mark.parametrize("op", _HALF_EXACT + _HALF_MATH + ["chain", "cast", "compare"])
def test_float16_elementwise(op):
    """float16 data in EWISE kernels: each op computed in float64 and rounded to half, as the
    reference (numpy's float16: float32 then half) stores it: arithmetic bit-exact, libm
    functions within one half ulp (they were refused until session 8)."""
    from partita.ir import Function as F
    from partita.ir import IRModule, TensorType, Var
    from partita.ops import get_op

    rng = np.random.default_rng(len(op))
    x, y = (Var(n, TensorType((3, 17), "float16")) for n in "xy")
    if op == "chain":
        body, params = get_op("tanh")(get_op("add")(get_op("multiply")(x, y), x)), [x, y]
    elif op == "cast":
        body, params = get_op("cast")(get_op("add")(x, x), dtype="float32"), [x]
    elif op == "compare":
        body, params = get_op("where")(get_op("less")(x, y), x, y), [x, y]
    elif op in ("add", "subtract", "multiply", "divide", "maximum", "minimum"):
        body, params = get_op(op)(x, y), [x, y]
    else:
        body, params = get_op(op)(x), [x]
    mod = P.InferType()(IRModule({"main": F(params, body)}))
    positive = op in ("log", "sqrt", "rsqrt")
    feeds = [(rng.uniform(0.05, 3.0, (3, 17)) * (1 if positive else rng.choice([-1, 1], (3, 17))))
             .astype(np.float16) for _ in params]
    got, want = P.build(mod, "llvm").run(*feeds)[0], P.interpret(mod, feeds)[0]
    assert got.dtype == want.dtype
    if op in _HALF_MATH or op == "chain":
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3)
    else:
        assert np.array_equal(got, want)
