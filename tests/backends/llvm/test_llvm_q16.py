"""qnn.conv2d / qnn.dense the 8-bit MAC kernels refused, as WMAC (q16_lower.py), bit for bit
against the interpreter: TFLite's 16x8 quantization (int16 data, int8 weights, int64
accumulators and bias, requantize to int16), int16 weights, int64 accumulators of 8-bit data,
outputs requantized to int16 / int32 and per-channel requantize zero points; every requantize
semantics, per tensor and per channel, with or without bias and clip, on every ISA (the vector
kernels never see them); and what stays refused, with its reason."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from kernel_checks import llvm_target
from partita.backends.llvm.lower.context import LLVMError
from test_llvm_more_refusals import ISAS, check

import partita as P
from partita.ir import Constant, Function, IRModule, TensorType, Var
from partita.ops import get_op

F32, F64, I32 = np.float32, np.float64, np.int32
SEMANTICS = ("tflite", "tflite_builtin", "tflite_double", "onnx", "fbgemm", "onednn")
VECTOR = {"CONV", "DWCONV", "FC", "VCONV", "VDW", "IM2COL"}


def _ints(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape, dtype=np.int64).astype(dtype)


def _stage(acc, acc_dtype, ndim, n_out, draw, rng, rq):
    """``acc`` (rank ``ndim``) with [nn.bias_add] -> [qnn.requantize (semantics, out dtype,
    per channel?)] -> [clip], as drawn."""
    bias, clip = draw(st.booleans()), draw(st.booleans())
    if bias:
        acc = get_op("nn.bias_add")(
            acc, Constant(_ints(rng, acc_dtype, (n_out,)) >> 8), axis=ndim - 1
        )
    if rq is None:
        return acc
    sem, out, per_channel = rq
    s_out = F32(draw(st.floats(2.0**-6, 4.0)))
    # s_in / s_out spans the multipliers a 16x8 model has (shift in [-31, 14] for int64 data)
    s_in = F64(s_out) * F64(draw(st.floats(2.0**-24, 2.0**-6)))
    s_in = s_in * rng.uniform(0.5, 2.0, n_out) if per_channel else s_in
    zp_in = draw(st.integers(-50, 50)) if draw(st.booleans()) else 0
    zp_in = (
        rng.uniform(-40, 40, n_out).astype(F32)
        if sem in ("fbgemm", "onednn") and per_channel
        else I32(zp_in)
    )
    zp_out = draw(st.integers(-100, 100)) if out != "int32" else draw(st.integers(-9, 9))
    zp_out = rng.integers(-9, 10, n_out).astype(I32) if per_channel and sem != "onednn" else zp_out
    acc = get_op("qnn.requantize")(
        acc,
        Constant(s_in),
        Constant(zp_in),
        Constant(s_out),
        Constant(I32(zp_out) if np.ndim(zp_out) == 0 else zp_out),
        axis=ndim - 1,
        out_dtype=out,
        semantics=sem,
    )
    if clip:
        info = np.iinfo(out)
        lo = draw(st.integers(max(int(info.min), -40000), 0))
        acc = get_op("clip")(acc, a_min=float(lo), a_max=float(lo + draw(st.integers(0, 60000))))
    return acc


def _dtypes(draw):
    """(data, weights, accumulator, requantize or None): mostly 16x8, also int16 weights and
    8-bit data with int64 accumulators, or int32 ones requantized to int16 / int32 (8-bit
    outputs of those are lower.mac's)."""
    x = draw(st.sampled_from(["int16", "int16", "int16", "int8", "uint8"]))
    w = draw(st.sampled_from(["int8", "int8", "int16", "uint8"]))
    acc = draw(st.sampled_from(["int64", "int64", "int32"]))
    wide = "int16" in (x, w) or acc == "int64"
    if not wide or draw(st.integers(0, 4)):
        outs = ["int16", "int8", "int32"] if wide else ["int16", "int32"]
        rq = (draw(st.sampled_from(SEMANTICS)), draw(st.sampled_from(outs)), draw(st.booleans()))
    else:
        rq = None
    return x, w, acc, rq


# each ISA its own examples (a third of the 150 / 100 drawn over all three before); a tier
# this CPU lacks runs through -emulate=yes
@pytest.mark.parametrize("isa", ISAS)
@settings(max_examples=50, deadline=None)
@given(
    data=st.data(), n=st.integers(1, 2), hw=st.tuples(st.integers(1, 7), st.integers(1, 7)),
    kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    strides=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    pads=st.tuples(*[st.integers(0, 2)] * 4), shape=st.sampled_from(["conv", "dw", "grouped"]),
    seed=st.integers(0, 999),
)  # fmt: skip
def test_wide_conv2d(isa, data, n, hw, kernel, strides, dilation, pads, shape, seed):
    """Convolutions (groups 1, depthwise with a channel multiplier, grouped) with their fused
    output stage: the interpreter's bits, one WMAC kernel, no 8-bit MAC kernel."""
    draw, rng = data.draw, np.random.default_rng(seed)
    xd, wd, acc, rq = _dtypes(draw)
    g = {"conv": 1, "dw": draw(st.integers(1, 4)), "grouped": draw(st.integers(2, 3))}[shape]
    cg = 1 if shape == "dw" else draw(st.integers(1, 4))
    og = draw(st.integers(1, 3))
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]  # pads: top, left, bottom, right
    assume(all(h + p0 + p1 >= e for h, p0, p1, e in zip(hw, pads[:2], pads[2:], extent)))
    layout = draw(st.sampled_from(["OHWI", "HWIO", "OIHW", "HWOI"]))
    w = _ints(rng, wd, (g * og, kernel[0], kernel[1], cg))
    w = np.transpose(w, ["OHWI".index(c) for c in layout])
    per_channel_zp = draw(st.booleans()) and wd != "int8"
    zw = rng.integers(-3, 4, g * og).astype(I32) if per_channel_zp else I32(0)
    x = Var("x", TensorType((n, *hw, g * cg), xd))
    conv = get_op("qnn.conv2d")(
        x, Constant(w), Constant(I32(draw(st.integers(-9, 9)))), Constant(zw), Constant(F32(0.5)),
        Constant(np.full(g * og, 0.25, F32)), strides=strides, dilation=dilation,
        padding=pads, groups=g, data_layout="NHWC",
        kernel_layout=layout, out_dtype=acc,
    )  # fmt: skip
    out = _stage(conv, acc, 4, g * og, draw, rng, rq)
    _check_wmac([x], out, seed, isa)


# each ISA its own examples (a third of the 150 / 100 drawn over all three before); a tier
# this CPU lacks runs through -emulate=yes
@pytest.mark.parametrize("isa", ISAS)
@settings(max_examples=34, deadline=None)
@given(
    data=st.data(), lead=st.lists(st.integers(1, 4), min_size=0, max_size=2),
    depth=st.integers(1, 40), units=st.integers(1, 9), seed=st.integers(0, 999),
)  # fmt: skip
def test_wide_dense(isa, data, lead, depth, units, seed):
    """qnn.dense of rank 1-3 data with its fused output stage."""
    draw, rng = data.draw, np.random.default_rng(seed)
    xd, wd, acc, rq = _dtypes(draw)
    zw = rng.integers(-3, 4, units).astype(I32) if wd != "int8" else I32(0)
    x = Var("x", TensorType((*lead, depth), xd))
    dense = get_op("qnn.dense")(
        x,
        Constant(_ints(rng, wd, (units, depth))),
        Constant(I32(draw(st.integers(-9, 9)))),
        Constant(zw),
        Constant(F32(0.5)),
        Constant(F32(0.25)),
        out_dtype=acc,
    )
    out = _stage(dense, acc, len(lead) + 1, units, draw, rng, rq)
    _check_wmac([x], out, seed, isa)


def _check_wmac(params, out, seed, isa):
    """Build for ``llvm -isa=...``: one WMAC kernel and none of the 8-bit MAC ones (they
    declined), and the interpreter's bits on random data over the dtypes' whole ranges."""
    mod = IRModule({"main": Function(params, out)})
    exe = P.build(mod, llvm_target(isa))
    assert [s.target for s in exe.steps] == ["llvm"]
    kinds = {k.split()[0] for k in exe.steps[0].region.kernels}
    assert "WMAC" in kinds and not kinds & VECTOR, kinds
    rng = np.random.default_rng(seed)
    feeds = [_ints(rng, p.type_annotation.dtype, p.type_annotation.shape) for p in params]
    got, want = exe.run(*feeds)[0], P.interpret(mod, feeds)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)


def _tflite_16x8(op: str, x, n_out, relu: bool, rng):
    """What TFLite's 16x8 converter makes: int16 data (zero point 0), int8 weights per
    channel (zero point 0), int64 accumulator and bias, tflite requantize to int16 (zero point
    0), the fused activation a clip."""
    if op == "dense":
        acc = get_op("qnn.dense")(
            x,
            Constant(_ints(rng, "int8", (n_out, 24))),
            I32(0),
            I32(0),
            F32(0.01),
            Constant(np.full(n_out, 0.02, F32)),
            out_dtype="int64",
        )
    else:
        dw = op == "depthwise"
        w = _ints(rng, "int8", (3, 3, n_out, 1) if dw else (n_out, 3, 3, 8))
        acc = get_op("qnn.conv2d")(
            x, Constant(w), I32(0), Constant(np.zeros(n_out, I32)), F32(0.01),
            Constant(rng.uniform(0.001, 0.02, n_out).astype(F32)), padding=(1, 1, 1, 1),
            groups=8 if dw else 1, data_layout="NHWC", kernel_layout="HWOI" if dw else "OHWI",
            out_dtype="int64")  # fmt: skip
    acc = get_op("nn.bias_add")(acc, Constant(rng.integers(-(1 << 20), 1 << 20, n_out)), axis=-1)
    s_in = F64(F32(0.01)) * rng.uniform(0.001, 0.02, n_out)
    out = get_op("qnn.requantize")(
        acc,
        Constant(s_in),
        I32(0),
        F32(0.05),
        I32(0),
        axis=-1,
        out_dtype="int16",
        semantics="tflite",
    )
    return get_op("clip")(out, a_min=0.0, a_max=32767.0) if relu else out


@pytest.mark.parametrize("isa", [*ISAS, "amx"])
@pytest.mark.parametrize("op, relu", [("conv", True), ("depthwise", False), ("dense", True)])
def test_tflite_16x8_layers(op, relu, isa):
    """TFLite's 16x8 conv, depthwise conv and fully connected layer: one WMAC kernel each."""
    rng = np.random.default_rng(7)
    x = Var("x", TensorType((24,) if op == "dense" else (1, 6, 6, 8), "int16"))
    _check_wmac([x], _tflite_16x8(op, x, 8, relu, rng), 3, isa)


@pytest.mark.parametrize("acc", ["int32", "int64"])
def test_accumulators_wrap(acc):
    """int16 x int16 sums past 2**31 (with a per-unit weight zero point and an int bias) wrap
    as the reference's out_dtype cast does: int32 accumulators wrap, int64 ones do not."""
    x = Var("x", TensorType((3, 64), "int16"))
    w = np.full((4, 64), -32768, np.int16)
    dense = get_op("qnn.dense")(
        x, Constant(w), I32(7), Constant(np.arange(4, dtype=I32)), F32(1), F32(1), out_dtype=acc
    )
    out = get_op("nn.bias_add")(dense, Constant(np.arange(4).astype(acc) * 12345), axis=1)
    feeds = [np.stack([np.full(64, -32768), np.full(64, 32767), np.arange(64) * 1000])]
    mod = IRModule({"main": Function([x], out)})
    exe = P.build(mod, "llvm")
    want = P.interpret(mod, [feeds[0].astype(np.int16)])[0]
    assert np.array_equal(exe.run(feeds[0].astype(np.int16))[0], want)
    if acc == "int64":  # the sums do pass int32's range
        assert (np.abs(want) >= 2**31).any()


def test_eight_bit_mac_keeps_its_kernels():
    """int8 data, int8 weights, int32 accumulators, int8 outputs: still lower.mac's kernel
    (the 8-bit vector convolution, -isa=plain's generic form included)."""
    x = Var("x", TensorType((1, 4, 4, 3), "int8"))
    conv = get_op("qnn.conv2d")(
        x,
        Constant(np.ones((2, 1, 1, 3), np.int8)),
        I32(0),
        I32(0),
        F32(1),
        F32(1),
        data_layout="NHWC",
        kernel_layout="OHWI",
    )
    out = get_op("qnn.requantize")(conv, F32(0.1), I32(0), F32(1), I32(0), out_dtype="int8")
    check([x], out, {"VCONV"})


def test_refused_with_reasons():
    """An int64 requantize whose multiplier TFLite's int64 MultiplyByQuantizedMultiplier cannot
    take (the reference fails too): an LLVMError naming the op and why."""
    x16 = Var("x", TensorType((2, 4), "int16"))
    dense = get_op("qnn.dense")(
        x16, Constant(np.ones((3, 4), np.int8)), I32(0), I32(0), F32(1), F32(1), out_dtype="int64"
    )
    big = get_op("qnn.requantize")(dense, F64(1e6), I32(0), F32(1), I32(0), out_dtype="int16")
    with pytest.raises(LLVMError, match=r"cannot compile qnn.requantize.*int64 data.*shift"):
        P.build(IRModule({"main": Function([x16], big)}), "llvm")
