"""TFLite's int8 transformer ops on the LLVM backend (backends/llvm/qlower.py, qtransformer.py):
the reference softmax in gemmlowp fixed point and the batch matmul with its requantize, bit for
bit against the interpreter (itself bit-exact with TFLite's reference kernels), and the int8
TFLite BERT encoder built for "llvm" and "npu, llvm"."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import partita as P
from partita import relay

MODELS = Path(__file__).resolve().parents[2] / "models" / "transformers"


def _same_bits(fn, feeds, target="llvm"):
    mod = relay.transform.InferType()(relay.IRModule.from_expr(fn))
    got = P.build(mod, target).run(*feeds)
    got = got if isinstance(got, (list, tuple)) else [got]
    for g, w in zip(got, P.interpret(mod, feeds)):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()


def _c(v, dtype):
    return relay.const(np.asarray(v, dtype))


@given(
    rows=st.integers(1, 4),
    n=st.integers(1, 70),
    scale=st.floats(0.01, 0.5),
    dtype=st.sampled_from(["int8", "uint8"]),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=20, deadline=None)
def test_tflite_softmax(rows, n, scale, dtype, seed):
    rng = np.random.default_rng(seed)
    lo, hi = (-128, 127) if dtype == "int8" else (0, 255)
    data = rng.integers(lo, hi + 1, (rows, n)).astype(dtype)
    data[0, : n // 2] = data[0].max()  # many maximal elements in one row
    x = relay.var("x", shape=(rows, n), dtype=dtype)
    zp_out = -128 if dtype == "int8" else 0
    out = relay.qnn.op.softmax(x, _c(scale, "float32"), _c(3, "int32"), _c(1 / 256, "float32"),
                               _c(zp_out, "int32"), semantics="tflite")
    _same_bits(relay.Function([x], out), [data])


@pytest.mark.parametrize("ta, tb", [(False, True), (False, False), (True, False)])
@pytest.mark.parametrize("dtypes", [("int8", "int8"), ("uint8", "int8")])
def test_batch_matmul_with_requantize(ta, tb, dtypes):
    rng = np.random.default_rng(1)
    m, k, n = 5, 7, 6
    xs = (2, k, m) if ta else (2, m, k)
    ys = (1, n, k) if tb else (1, k, n)
    x = relay.var("x", shape=xs, dtype=dtypes[0])
    y = relay.var("y", shape=ys, dtype=dtypes[1])
    acc = relay.qnn.op.batch_matmul(x, y, _c(2, "int32"), _c(-1, "int32"), _c(0.05, "float32"),
                                    _c(0.02, "float32"), transpose_a=ta, transpose_b=tb)
    out = relay.qnn.op.requantize(acc, _c(0.001, "float64"), _c(0, "int32"), _c(0.03, "float32"),
                                  _c(-5, "int32"), out_dtype="int8")
    out = relay.clip(out, a_min=-100.0, a_max=100.0)
    feeds = [rng.integers(0 if dtypes[0] == "uint8" else -128, 128, xs).astype(dtypes[0]),
             rng.integers(-128, 128, ys).astype(dtypes[1])]
    _same_bits(relay.Function([x, y], out), feeds)


@pytest.mark.parametrize("target", ["llvm", "npu, llvm"])
def test_int8_tflite_bert_encoder(target):
    from partita.frontends import from_tflite

    mod = from_tflite(str(MODELS / "bert_tiny_int8.tflite"))
    exe = P.build(mod, target)
    rng = np.random.default_rng(2)
    feeds = [
        rng.integers(0, 100, t.shape).astype(t.dtype) if t.dtype.startswith("int") and
        t.dtype not in ("int8", "uint8") else rng.integers(-128, 128, t.shape).astype(t.dtype)
        for t in exe.input_types
    ]
    got = exe.run(*feeds)
    got = got if isinstance(got, (list, tuple)) else [got]
    for g, w in zip(got, P.interpret(mod, feeds)):
        assert g.tobytes() == w.tobytes()


@pytest.mark.parametrize("name", ["bert_tiny.pt2", "bert_tiny.pt2e_xnnpack.pt2"])
def test_pytorch_bert_encoders(name):
    """torch.export float and PT2E (XNNPACKQuantizer) encoders on "llvm": the quantized one
    bit-exact with the interpreter, the float one within float32 rounding."""
    pytest.importorskip("torch")
    from partita.frontends import from_pytorch

    mod = from_pytorch(str(MODELS / name))
    exe = P.build(mod, "llvm")
    rng = np.random.default_rng(3)
    feeds = [rng.integers(0, 2 if i else 100, t.shape).astype(t.dtype)
             for i, t in enumerate(exe.input_types)]
    got = exe.run(*feeds)
    got = got if isinstance(got, (list, tuple)) else [got]
    for g, w in zip(got, P.interpret(mod, feeds)):
        if "pt2e" in name:
            assert g.tobytes() == w.tobytes()
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
