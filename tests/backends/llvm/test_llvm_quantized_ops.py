"""Quantized ops beyond convolutions on the LLVM backend, each runtime's semantics against the
interpreter bit for bit: means (TFLite's reference, builtin and <= 2.12 paths), softmaxes
(TFLite's reference and builtin, ONNX Runtime's), quantize per tensor and per channel, 8-bit
tables the reference cannot fill, and accumulators read without requantize."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from partita.backends.llvm.lower.context import LLVMError
from test_llvm_ops_more import assert_exact

import partita as P
from partita.ir import Constant, Function, IRModule, TensorType, Var
from partita.ops import get_op

F32, I32 = np.float32, np.int32


@settings(max_examples=30, deadline=None)
@given(
    h=st.integers(1, 6), w=st.integers(1, 6), c=st.integers(1, 40),
    axes=st.sampled_from([(1, 2), (2, 1), (1,), (3,), (1, 2, 3)]), keep=st.booleans(),
    dtype=st.sampled_from(["int8", "uint8"]), s_out=st.floats(0.01, 0.3),
    zps=st.tuples(st.integers(-20, 20), st.integers(-20, 20)), seed=st.integers(0, 99),
    columns=st.booleans(),
)  # fmt: skip
def test_tflite_builtin_mean(h, w, c, axes, keep, dtype, s_out, zps, seed, columns):
    """``columns``: each channel summed down its column (the kernel's form for more than
    lower.MEAN_ROW channels) instead of a row of channels at a time."""
    x = Var("x", TensorType((2, h, w, c), dtype))
    base = 0 if dtype == "int8" else 128
    out = get_op("qnn.mean")(
        x, F32(0.05), I32(base + zps[0]), F32(s_out), I32(base + zps[1]), axis=axes,
        keepdims=keep, semantics="tflite_builtin",
    )  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        if columns:  # the module, not the function the package exports under its name
            context = importlib.import_module("partita.backends.llvm.lower.context")
            mp.setattr(context, "MEAN_ROW", 0)
        mp.setenv("PARTITA_REGION_CACHE", "0")  # a cached region would hide the patch
        assert_exact([x], out, {"MEAN"}, seed=seed)


@settings(max_examples=30, deadline=None)
@given(
    shape=st.lists(st.integers(1, 9), min_size=1, max_size=3), data=st.data(),
    dtype=st.sampled_from(["int8", "uint8"]), s_in=st.floats(0.001, 0.5),
    beta=st.floats(0.25, 2.0), seed=st.integers(0, 99),
)  # fmt: skip
def test_tflite_builtin_softmax(shape, data, dtype, s_in, beta, seed):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = Var("x", TensorType(tuple(shape), dtype))
    zp = I32(-128 if dtype == "int8" else 0)
    out = get_op("qnn.softmax")(
        x, F32(s_in), I32(3), F32(1 / 256), zp, axis=axis, beta=beta, semantics="tflite_builtin"
    )
    assert_exact([x], out, {"QSOFTMAXF"}, seed=seed)


@settings(max_examples=30, deadline=None)
@given(
    shape=st.lists(st.integers(1, 9), min_size=1, max_size=3),
    dtype=st.sampled_from(["int8", "uint8"]), s_in=st.floats(0.001, 0.5),
    s_out=st.sampled_from([1 / 256, 0.004, 0.01]),
    zp=st.integers(-20, 20), seed=st.integers(0, 99),
)  # fmt: skip
def test_onnx_and_tflite_softmax(shape, dtype, s_in, s_out, zp, seed):
    """ONNX Runtime's QLinearSoftmax (QSOFTMAXO: its float32 exp table and in-order row sum;
    one-element rows saturate) and TFLite's reference softmax (QSOFTMAX), over any axis, bit
    for bit; the first and the other axes were refused until session 8."""
    axis = seed % len(shape) - len(shape)
    x = Var("x", TensorType(tuple(shape), dtype))
    base = -128 if dtype == "int8" else 0
    out = get_op("qnn.softmax")(
        x, F32(s_in), I32(3), F32(s_out), I32(base + 20 + zp), axis=axis, semantics="onnx"
    )
    assert_exact([x], out, {"QSOFTMAXO"}, seed=seed)
    if s_in < 0.05:  # TFLite's reference needs beta * s_in * 2^26 > 1 (the interpreter too)
        return
    out = get_op("qnn.softmax")(x, F32(s_in), I32(3), F32(1 / 256), I32(base), axis=axis,
                                semantics="tflite")
    assert_exact([x], out, {"QSOFTMAX"}, seed=seed)


def test_a_table_the_reference_cannot_fill_is_refused_with_the_reason():
    """qnn.rsqrt of int8 with its zero point above -128: inputs below it have no result (the
    reference refuses them when they occur), so no 256-entry table exists; the build says so
    instead of failing with the interpreter's error (found by an op survey)."""
    x = Var("x", TensorType((2, 8), "int8"))
    out = get_op("qnn.rsqrt")(x, F32(0.05), I32(-100), F32(0.02), I32(-5))
    mod = IRModule({"main": Function([x], out)})
    with pytest.raises(LLVMError, match="qnn.rsqrt: no 256-entry table.*below the zero point"):
        P.build(mod, "llvm")
    ok = IRModule({"main": Function([x], get_op("qnn.rsqrt")(x, F32(0.05), I32(-128), F32(0.02),
                                                             I32(-5)))})
    data = np.arange(-128, -112, dtype=np.int8).reshape(2, 8)
    assert np.array_equal(P.build(ok, "llvm").run(data)[0], P.interpret(ok, [data])[0])


@settings(max_examples=30, deadline=None)
@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=3), data=st.data(),
    out_dtype=st.sampled_from(["int8", "uint8", "int16", "int32"]),
    semantics=st.sampled_from(["tflite", "onnx", "fbgemm"]),
    per_channel=st.booleans(), seed=st.integers(0, 99),
)  # fmt: skip
def test_quantize_per_tensor_and_per_channel(shape, data, out_dtype, semantics, per_channel,
                                             seed):
    """float32 -> any integer type, per tensor or per channel along any axis (QUANT), each
    runtime's rounding; per-channel and 16/32-bit outputs were refused until session 8."""
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[axis] if per_channel else 1
    rng = np.random.default_rng(seed)
    scale = rng.uniform(0.001, 0.2, n).astype(np.float32)
    info = np.iinfo(out_dtype)
    zp = rng.integers(max(info.min, -50), min(info.max, 50), n).astype(np.int32)
    if out_dtype == "uint8":
        zp = np.abs(zp)
    args = (Constant(scale), Constant(zp)) if per_channel else (F32(scale[0]), I32(zp[0]))
    x = Var("x", TensorType(tuple(shape), "float32"))
    out = get_op("qnn.quantize")(x, *args, axis=axis, out_dtype=out_dtype, semantics=semantics)
    assert_exact([x], out, {"QUANT"}, seed=seed)


@settings(max_examples=40, deadline=None)
@given(
    h=st.integers(1, 6), w=st.integers(1, 6), c=st.integers(1, 20),
    axes=st.sampled_from([(1, 2), (2, 1), (1,), (3,), (1, 2, 3)]), keep=st.booleans(),
    dtype=st.sampled_from(["int8", "uint8"]), rescale=st.sampled_from(["same", "other"]),
    zps=st.tuples(st.integers(-20, 20), st.integers(-20, 20)), seed=st.integers(0, 99),
)  # fmt: skip
def test_tflite_legacy_mean(h, w, c, axes, keep, dtype, rescale, zps, seed):
    """TFLite <= 2.12's reference MEAN and its three paths (the 4-D Mean per dtype, equal
    parameters, the float32 rescale): MEAN's legacy modes, bit for bit; refused until session
    8."""
    x = Var("x", TensorType((2, h, w, c), dtype))
    base = 0 if dtype == "int8" else 128
    s_out, zp_out = (F32(0.05), I32(base + zps[0])) if rescale == "same" else (
        F32(0.031), I32(base + zps[1]))
    out = get_op("qnn.mean")(
        x, F32(0.05), I32(base + zps[0]), s_out, zp_out, axis=axes, keepdims=keep,
        semantics="tflite_legacy",
    )  # fmt: skip
    assert_exact([x], out, {"MEAN"}, seed=seed)


@pytest.mark.parametrize("kind", ["conv", "depthwise", "grouped", "dense"])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_accumulators_read_as_such(kind, bias, dtype):
    """qnn.conv2d / qnn.dense whose int32 accumulator is the result (TVM's canonical QNN, no
    requantize), with or without a fused bias: the scalar kernels store the int32 sums, bit for
    bit with the interpreter (refused until session 8)."""
    rng = np.random.default_rng(len(kind) + bias)
    zx = I32(3 if dtype == "int8" else 131)
    if kind == "dense":
        x = Var("x", TensorType((5, 12), dtype))
        w = rng.integers(-127, 128, (7, 12)).astype(np.int8)
        acc = get_op("qnn.dense")(x, Constant(w), zx, I32(0), F32(0.1), F32(0.02))
        n = 7
    else:
        groups, cin, cout = {"conv": (1, 6, 5), "depthwise": (6, 6, 6), "grouped": (2, 6, 4)}[kind]
        x = Var("x", TensorType((2, 7, 6, cin), dtype))
        w = rng.integers(-127, 128, (cout, 3, 3, cin // groups)).astype(np.int8)
        acc = get_op("qnn.conv2d")(x, Constant(w), zx, I32(0), F32(0.1), F32(0.02),
                                   padding=(1, 1, 1, 1), groups=groups, data_layout="NHWC",
                                   kernel_layout="OHWI")
        n = cout
    if bias:
        acc = get_op("nn.bias_add")(acc, Constant(rng.integers(-999, 999, n).astype(np.int32)),
                                    axis=-1)
    kernel = {"dense": "FC", "depthwise": "DWCONV"}.get(kind, "CONV")
    assert_exact([x], acc, {kernel}, seed=1)
