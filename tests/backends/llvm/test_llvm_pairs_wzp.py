"""Pair-saturating qnn.conv2d / qnn.dense (accumulate="vpmaddubsw" / "vpmaddubsw_tap": x86's
int8 kernels without VNNI) with weight zero points, which the 8-bit vector kernels refuse, as
WMAC (q16_lower.py), bit for bit against the interpreter: int8 / uint8 data over their whole
range (pairs saturate), per-tensor and per-channel weight zero points, groups, strides,
paddings, dilations, int32 / int64 accumulators, with and without bias, requantize and clip, on
every ISA."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from kernel_checks import llvm_target
from partita.backends.llvm.lower.wide_mac import pair_slots
from test_llvm_more_refusals import ISAS
from test_llvm_q16 import SEMANTICS, VECTOR, _check_wmac, _ints, _stage

import partita as P
from partita.ir import Constant, Function, IRModule, TensorType, Var
from partita.ops import get_op

F32, I32 = np.float32, np.int32
MODES = ("vpmaddubsw", "vpmaddubsw_tap")
RANGE = {"int8": (-128, 127), "uint8": (0, 255)}  # data zero points (the padding's value)


def _setup(draw, rng, n_out):
    """(data dtype, accumulator, requantize or None, weight zero points: some non-zero, per
    tensor or per channel)."""
    xd, acc = draw(st.sampled_from(["int8", "uint8"])), draw(st.sampled_from(["int32", "int64"]))
    rq = None
    if draw(st.integers(0, 3)):
        outs = ["int8", "uint8", "int16", "int32"]
        rq = (draw(st.sampled_from(SEMANTICS)), draw(st.sampled_from(outs)), draw(st.booleans()))
    if draw(st.booleans()):
        zw = I32(draw(st.sampled_from([-128, -3, -1, 1, 5, 127])))
    else:
        zw = rng.integers(-128, 128, n_out).astype(I32)
        zw[0] = zw[0] or 1
    return xd, acc, rq, zw


@pytest.mark.parametrize("isa", ISAS)  # 50 examples per ISA (-emulate=yes where it lacks one)
@settings(max_examples=50, deadline=None)
@given(
    data=st.data(), n=st.integers(1, 2), hw=st.tuples(st.integers(1, 6), st.integers(1, 6)),
    kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    strides=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    pads=st.tuples(*[st.integers(0, 2)] * 4), shape=st.sampled_from(["conv", "dw", "grouped"]),
    mode=st.sampled_from(MODES), seed=st.integers(0, 999),
)  # fmt: skip
def test_pair_conv2d_with_weight_zero_points(
    isa, data, n, hw, kernel, strides, dilation, pads, shape, mode, seed
):
    """Convolutions (groups 1 with any channel count, depthwise with a channel multiplier,
    grouped; "vpmaddubsw_tap" pads odd channel counts only for groups 1) with their fused
    output stage: the interpreter's bits, one WMAC kernel, no 8-bit MAC kernel."""
    draw, rng = data.draw, np.random.default_rng(seed)
    g = {"conv": 1, "dw": draw(st.integers(1, 4)), "grouped": draw(st.integers(2, 3))}[shape]
    cg = 1 if shape == "dw" else draw(st.integers(1, 5))
    if mode == "vpmaddubsw_tap" and g > 1 and cg % 2:  # the type relation's rule
        cg, mode = (cg, "vpmaddubsw") if shape == "dw" else (cg + 1, mode)
    og = draw(st.integers(1, 3))
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]  # pads: top, left, bottom, right
    assume(all(h + p0 + p1 >= e for h, p0, p1, e in zip(hw, pads[:2], pads[2:], extent)))
    xd, acc, rq, zw = _setup(draw, rng, g * og)
    layout = draw(st.sampled_from(["OHWI", "HWIO", "OIHW", "HWOI"]))
    w = np.transpose(_ints(rng, "int8", (g * og, *kernel, cg)), ["OHWI".index(c) for c in layout])
    x = Var("x", TensorType((n, *hw, g * cg), xd))
    conv = get_op("qnn.conv2d")(
        x, Constant(w), Constant(I32(draw(st.integers(*RANGE[xd])))), Constant(zw),
        Constant(F32(0.5)), Constant(np.full(g * og, 0.25, F32)), strides=strides,
        dilation=dilation, padding=pads, groups=g, data_layout="NHWC", kernel_layout=layout,
        out_dtype=acc, accumulate=mode,
    )  # fmt: skip
    _check_wmac([x], _stage(conv, acc, 4, g * og, draw, rng, rq), seed, isa)


@pytest.mark.parametrize("isa", ISAS)
@settings(max_examples=34, deadline=None)
@given(
    data=st.data(), lead=st.lists(st.integers(1, 4), min_size=1, max_size=2),
    depth=st.integers(1, 40), units=st.integers(1, 9), mode=st.sampled_from(MODES),
    seed=st.integers(0, 999),
)  # fmt: skip
def test_pair_dense_with_weight_zero_points(isa, data, lead, depth, units, mode, seed):
    """qnn.dense of rank 2-3 data (pairs along K, an odd K padded) with its output stage (the
    reference's pair saturation takes no rank-1 data)."""
    draw, rng = data.draw, np.random.default_rng(seed)
    xd, acc, rq, zw = _setup(draw, rng, units)
    x = Var("x", TensorType((*lead, depth), xd))
    dense = get_op("qnn.dense")(
        x, Constant(_ints(rng, "int8", (units, depth))),
        Constant(I32(draw(st.integers(*RANGE[xd])))), Constant(zw), Constant(F32(0.5)),
        Constant(F32(0.25)), out_dtype=acc, accumulate=mode,
    )  # fmt: skip
    _check_wmac([x], _stage(dense, acc, len(lead) + 1, units, draw, rng, rq), seed, isa)


def _extreme(op: str, mode: str, xd: str, isa: str):
    """Data at its maximum (255, or 127 + 128) against weights 127 / -128: every pair saturates
    (+-64,770 and 65,024 leave int16), as does the padding's (zero point 255 / 127)."""
    hi = 255 if xd == "uint8" else 127
    x = Var("x", TensorType((1, 3, 3, 5) if op == "conv" else (2, 7), xd))
    if op == "conv":
        w = np.where(np.arange(2 * 9 * 5).reshape(2, 3, 3, 5) % 3, 127, -128).astype(np.int8)
        out = get_op("qnn.conv2d")(
            x, Constant(w), I32(hi), Constant(np.asarray([3, -7], I32)), F32(1), F32(1),
            padding=(1, 1, 1, 1), data_layout="NHWC", kernel_layout="OHWI", accumulate=mode,
        )  # fmt: skip
    else:
        w = np.where(np.arange(3 * 7).reshape(3, 7) % 4, 127, -128).astype(np.int8)
        out = get_op("qnn.dense")(x, Constant(w), I32(hi), I32(-2), F32(1), F32(1),
                                  accumulate=mode)  # fmt: skip
    mod = IRModule({"main": Function([x], out)})
    feed = np.full(x.type_annotation.shape, hi, xd)
    return mod, feed


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("xd", ["int8", "uint8"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["conv", "dense"])
def test_saturating_pairs_exact(op, mode, xd, isa):
    """Where pairs really saturate, the interpreter's sum differs from the exact one and WMAC
    gives the interpreter's."""
    mod, feed = _extreme(op, mode, xd, isa)
    want = P.interpret(mod, [feed])[0]
    exact = P.interpret(_exact(mod), [feed])[0]
    assert not np.array_equal(want, exact)  # the case does saturate
    exe = P.build(mod, llvm_target(isa))
    assert "WMAC" in {k.split()[0] for k in exe.steps[0].region.kernels}
    assert np.array_equal(exe.run(feed)[0], want)


def _exact(mod):
    call = mod["main"].body
    attrs = {**dataclasses.asdict(call.attrs), "accumulate": "exact"}
    x = mod["main"].params[0]
    return IRModule({"main": Function([x], get_op(call.op.name)(x, *call.args[1:], **attrs))})


def _isa(isa):
    from partita.backends.llvm.runtime.jit import runs_isa

    return isa if runs_isa(isa) else "plain"


def test_pair_slots_order():
    """pair_slots: im2col order (ky, kx, c) padded once at the end; "vpmaddubsw_tap" pads each
    tap's odd channel count; a dense pads an odd K."""
    flat = pair_slots("qnn.conv2d", "vpmaddubsw", (4, 1, 2, 3)).tolist()
    assert flat == [[0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 1, 0], [0, 1, 1], [0, 1, 2]]
    tap = pair_slots("qnn.conv2d", "vpmaddubsw_tap", (4, 1, 2, 3)).tolist()
    assert tap == [[0, 0, 0], [0, 0, 1], [0, 0, 2], [-1, 0, 0],
                   [0, 1, 0], [0, 1, 1], [0, 1, 2], [-1, 0, 0]]  # fmt: skip
    assert pair_slots("qnn.dense", "vpmaddubsw_tap", (2, 3)).tolist() == [
        [0, 0, 0], [0, 0, 1], [0, 0, 2], [-1, 0, 0]]  # fmt: skip


def test_symmetric_weights_stay_on_the_vector_kernels():
    """Without weight zero points the 8-bit vector kernels keep pair-saturating calls."""
    if _isa("avx2") != "avx2":
        pytest.skip("this CPU does not run avx2 code")
    x = Var("x", TensorType((3, 16), "uint8"))
    w = _ints(np.random.default_rng(0), "int8", (8, 16))
    dense = get_op("qnn.dense")(x, Constant(w), I32(3), I32(0), F32(0.5), F32(0.25),
                                accumulate="vpmaddubsw")  # fmt: skip
    out = get_op("qnn.requantize")(dense, F32(0.125), I32(0), F32(1), I32(0), out_dtype="int8")
    exe = P.build(IRModule({"main": Function([x], out)}), f"llvm -isa={_isa('avx2')}")
    kinds = {k.split()[0] for k in exe.steps[0].region.kernels}
    assert "WMAC" not in kinds and kinds & VECTOR, kinds
