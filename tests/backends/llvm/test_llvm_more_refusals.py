"""Cases the LLVM host refused until session 9, bit for bit against the interpreter under
hypothesis: nn.pad with a run-time pad value (GATHER), qnn.add / subtract / mul with per-channel
parameters or int16 data (QBIN, each semantics), qnn.mean over any axes (QMEANX: numpy's float32
order for "onnx", exact sums for "tflite"), and global average pools in MLAS's or PyTorch's order
over any number of pixels (FGAPL); and what stays refused, with its reason."""

from __future__ import annotations

import functools
import importlib

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from kernel_checks import llvm_target
from partita.backends.llvm.lower.context import LLVMError
from test_llvm_ops_more import assert_same_bits, run_llvm, sample

import partita as P
from partita.ir import Function, IRModule, TensorType, Var
from partita.ops import get_op

F32, I32 = np.float32, np.int32
ISAS = ("plain", "avx2", "vnni")


def check(params, out, kinds, seed=0, isa="plain", feeds=None):
    """Build for ``llvm -isa=...`` (one region with ``kinds``), run: the interpreter's bits."""
    assert_same_bits(*run_llvm(params, out, kinds, seed, feeds,
                               lambda rng, shape, dtype: np.asarray(sample(rng, shape, dtype)),
                               target=llvm_target(isa)))


# ---- nn.pad with a run-time pad value ----------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data(),
    dtype=st.sampled_from(["int8", "uint8", "int32", "float32"]),
    mode=st.sampled_from(["constant", "constant", "edge", "reflect"]), seed=st.integers(0, 99),
)  # fmt: skip
def test_pad_with_a_run_time_value(shape, data, dtype, mode, seed):
    top = 2 if mode != "reflect" else 0
    pads = [data.draw(st.tuples(st.integers(0, top or s - 1), st.integers(0, top or s - 1)))
            for s in shape]  # fmt: skip
    x, v = Var("x", TensorType(tuple(shape), dtype)), Var("v", TensorType((), dtype))
    out = get_op("nn.pad")(x, v, pad_width=tuple(map(tuple, pads)), pad_mode=mode)
    check([x, v], out, {"GATHER"}, seed)


# ---- qnn.add / subtract / mul: per-channel parameters, int16 -----------------------------------


@settings(max_examples=60, deadline=None)
@given(
    op=st.sampled_from(["qnn.add", "qnn.subtract", "qnn.mul"]),
    semantics=st.sampled_from(["tflite", "onnx"]),
    dtype=st.sampled_from(["int8", "uint8", "int16"]),
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), data=st.data(),
    isa=st.sampled_from(ISAS), seed=st.integers(0, 99),
)  # fmt: skip
def test_qnn_binary_per_channel(op, semantics, dtype, shape, data, isa, seed):
    """Each side per tensor, per channel along any of its axes, or of shape (1,); the rhs
    broadcast (a suffix of the lhs' shape with some axes 1, or the lhs broadcast instead)."""
    rank = len(shape)
    rshape = [data.draw(st.sampled_from([d, 1])) for d in shape[data.draw(st.integers(0, rank)):]]
    if data.draw(st.booleans()):
        shape, rshape = rshape, shape
    base = {"int8": 0, "uint8": 128, "int16": 0}[dtype]
    consts = []
    for side in (shape, rshape):
        kind = data.draw(st.sampled_from(["scalar", "one", "channel"] if side else ["scalar"]))
        axis = data.draw(st.integers(-len(side), len(side) - 1)) if side else -1
        n = side[axis] if kind == "channel" else 1
        scales = np.asarray(data.draw(st.lists(st.floats(0.01, 0.3), min_size=n, max_size=n)), F32)
        zps = np.asarray(data.draw(st.lists(st.integers(-9, 9), min_size=n, max_size=n)), I32)
        if kind == "scalar":
            scales, zps = scales.reshape(()), zps.reshape(())
        consts += [scales, zps + base, axis]
    out_dtype = data.draw(st.sampled_from(["", dtype]))
    a, b = Var("a", TensorType(tuple(shape), dtype)), Var("b", TensorType(tuple(rshape), dtype))
    out = get_op(op)(
        a, b, consts[0], consts[1], consts[3], consts[4], F32(data.draw(st.floats(0.02, 0.4))),
        I32(base + data.draw(st.integers(-5, 5))), lhs_axis=consts[2], rhs_axis=consts[5],
        semantics=semantics, out_dtype=out_dtype,
    )  # fmt: skip
    all_scalar = all(np.ndim(c) == 0 for c in consts[:2] + consts[3:5])
    kinds = {"LUT2"} if all_scalar and dtype != "int16" else {"QBIN"}
    check([a, b], out, kinds, seed, isa)


@pytest.mark.parametrize("op", ["qnn.add", "qnn.subtract", "qnn.mul"])
@pytest.mark.parametrize("scalar_side", ["lhs", "rhs"])
def test_qnn_binary_onnx_every_pair(op, scalar_side):
    """"onnx" on every (lhs, rhs) pair of int8 values x 3 channels of parameters: float32
    arithmetic whose order (MLAS's two FMAs, B the side ORT hands over as a scalar) shows only
    at rounding ties, which a quarter million outputs hit."""
    values = np.arange(-128, 128, dtype=np.int8)
    chan = (np.asarray([0.0123457, 0.0371, 0.00913], F32), np.asarray([3, -7, 0], I32))
    one = (F32(0.0217), I32(-2))
    if scalar_side == "lhs":  # lhs broadcast along the innermost axis: ORT's scalar side
        shapes, params, axes = ((256, 1, 1), (1, 256, 3)), (*one, *chan), (-1, 2)
    else:
        shapes, params, axes = ((256, 1, 3), (1, 256, 1)), (*chan, *one), (2, -1)
    a, b = (Var(n, TensorType(sh, "int8")) for n, sh in zip("ab", shapes))
    out = get_op(op)(a, b, *params, F32(0.0613), I32(1), lhs_axis=axes[0], rhs_axis=axes[1],
                     semantics="onnx")
    feeds = [np.broadcast_to(values.reshape(-1, 1, 1), shapes[0]).copy(),
             np.broadcast_to(values.reshape(1, -1, 1), shapes[1]).copy()]
    check([a, b], out, {"QBIN"}, feeds=feeds)


# ---- qnn.mean over any axes --------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=5), data=st.data(),
    semantics=st.sampled_from(["onnx", "onnx", "tflite", "tflite_builtin"]),
    dtype=st.sampled_from(["int8", "uint8"]), keep=st.booleans(), exclude=st.booleans(),
    long=st.sampled_from([0, 0, 9, 130, 700, 2100]), seed=st.integers(0, 99),
)  # fmt: skip
def test_qnn_mean_over_any_axes(shape, data, semantics, dtype, keep, exclude, long, seed):
    """``long``: a last axis that long (numpy's pairwise sums: blocks of 8 up to 128, halves
    above)."""
    if long:
        shape = [*shape[:2], long]
    rank = len(shape)
    axes = data.draw(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank,
                              unique_by=lambda a: a % rank))  # fmt: skip
    assume(not exclude or len(axes) < rank)
    x = Var("x", TensorType(tuple(shape), dtype))
    base = 0 if dtype == "int8" else 128
    out = get_op("qnn.mean")(
        x, F32(data.draw(st.floats(0.001, 0.2))), I32(base + 3),
        F32(data.draw(st.floats(0.001, 0.2))), I32(base - 4), axis=tuple(axes), keepdims=keep,
        exclude=exclude, semantics=semantics,
    )  # fmt: skip
    check([x], out, set(), seed)


def _pairwise(v, block=128):
    """numpy's pairwise_sum of float32 ``v`` (``block``: its largest 8-accumulator block)."""
    if len(v) < 8:
        return functools.reduce(lambda a, b: F32(a + b), v, F32(0))
    if len(v) <= block:
        r = list(v[:8])
        for i in range(8, len(v) - len(v) % 8):
            r[i % 8] = F32(r[i % 8] + v[i])
        pairs = [F32(r[i] + r[i + 1]) for i in (0, 2, 4, 6)]
        res = F32(F32(pairs[0] + pairs[1]) + F32(pairs[2] + pairs[3]))
        return functools.reduce(lambda a, b: F32(a + b), v[len(v) - len(v) % 8 :], res)
    half = len(v) // 2 - len(v) // 2 % 8
    return F32(_pairwise(v[:half], block) + _pairwise(v[half:], block))


@pytest.mark.parametrize("shape, axes", [((3, 1000), (1,)), ((300, 7), (0,)),
                                         ((4, 130, 5, 40), (1, 3))])  # fmt: skip
def test_qnn_mean_onnx_takes_numpys_order(shape, axes):
    """An output scale picked so that output 0 rounds one way from numpy's float32 sum and the
    other way from another order's (left to right, pairwise over everything, or in blocks of
    64): the kernel equals the reference there, so its order is numpy's, not merely close."""
    a = axes[0]  # the first reduced axis: +100 over its first 55%, -100 after (cancelling)
    sign = np.where(np.arange(shape[a]) < shape[a] * 0.55, 100, -100)
    sign = sign.reshape([-1 if i == a else 1 for i in range(len(shape))])
    q = (np.random.default_rng(1).integers(-27, 28, shape) + sign).astype(np.int8)
    s_in, n = F32(0.0123457), int(np.prod([shape[a] for a in axes]))
    values = F32(s_in) * q.astype(F32)
    row = np.moveaxis(values, axes, [-i - 1 for i in range(len(axes))][::-1])
    row = row.reshape(-1, n)[0]  # output 0's elements (any order: only the alternatives use it)
    want = F32(np.sum(values, axis=axes, dtype=F32).reshape(-1)[0]) / F32(n)
    alternatives = {F32(a) / F32(n) for a in (functools.reduce(lambda a, b: F32(a + b), row,
                    F32(0)), _pairwise(row), _pairwise(row, 64))} - {want}  # fmt: skip
    assert len(alternatives) >= 2
    x = Var("x", TensorType(shape, "int8"))
    for other in alternatives:
        for k in range(60, 127):
            s_out = F32((float(want) + float(other)) / 2 / (k + 0.5))
            if np.rint(want / s_out) != np.rint(other / s_out):
                break
        else:
            raise AssertionError(f"no output scale tells {want} from {other}")
        out = get_op("qnn.mean")(x, s_in, I32(0), s_out, I32(0), axis=axes, semantics="onnx")
        check([x], out, {"QMEANX"}, feeds=[q])


# ---- global average pools in another runtime's order, as loops ---------------------------------


@settings(max_examples=30, deadline=None)
@given(
    h=st.integers(1, 40), w=st.integers(1, 40), c=st.integers(1, 35),
    accumulate=st.sampled_from(["mlas", "torch_cpu"]), layout=st.sampled_from(["NHWC", "NCHW"]),
    n=st.integers(1, 2), seed=st.integers(0, 99),
)  # fmt: skip
def test_global_average_pool_loops(h, w, c, accumulate, layout, n, seed):
    """FGAPL on small images too (conv_lower's limit lowered to 0): every branch of ATen's
    cascade below 2**12 rows, vector and tail channels, both layouts."""
    shape = (n, h, w, c) if layout == "NHWC" else (n, c, h, w)
    x = Var("x", TensorType(shape, "float32"))
    out = get_op("nn.global_avg_pool2d")(x, layout=layout, accumulate=accumulate)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(importlib.import_module("partita.backends.llvm.lower.float_conv"),
                   "MAX_POOL_PIXELS", 0)
        mp.setenv("PARTITA_REGION_CACHE", "0")  # a cached region would hide the patch
        check([x], out, {"FGAPL"}, seed)


@pytest.mark.parametrize("accumulate", ["mlas", "torch_cpu"])
@pytest.mark.parametrize("hw", [(65, 70), (400, 360)])
def test_global_average_pool_of_many_pixels(accumulate, hw):
    """More pixels than FGAP's straight-line code takes (4096); 144000 pixels carry ATen's
    cascade up to its last level (more than 2**12 rows of 32 pixels)."""
    x = Var("x", TensorType((1, *hw, 17), "float32"))
    out = get_op("nn.global_avg_pool2d")(x, layout="NHWC", accumulate=accumulate)
    check([x], out, {"FGAPL"})


# ---- still refused, with the reason --------------------------------------------------------------


def _refusal(params, out) -> str:
    with pytest.raises(LLVMError) as info:
        P.build(IRModule({"main": Function(params, out)}), "llvm")
    return str(info.value)


def test_what_stays_refused_names_the_op_and_why():
    x, v = Var("x", TensorType((2, 3), "int8")), Var("v", TensorType((), "float32"))
    msg = _refusal([x, v], get_op("nn.pad")(x, v, pad_width=((1, 0), (0, 1))))
    assert "nn.pad" in msg and "run-time float32 pad value for int8 data" in msg
    a, b = Var("a", TensorType((4,), "int8")), Var("b", TensorType((4,), "int8"))
    tiny = F32(1e-9)  # TFLite's output multiplier must lie in (0, 1): the reference fails too
    msg = _refusal([a, b], get_op("qnn.add")(a, b, np.full(4, 0.5, F32), I32(0), F32(0.5),
                                             I32(0), tiny, I32(0), lhs_axis=0))
    assert msg.startswith("llvm cannot compile qnn.add") and "multiplier in (0, 1)" in msg
