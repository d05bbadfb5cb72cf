"""Reductions the MEAN and FGAP kernels do not take, as loops (reductions.py):

    qnn.mean "onnx" off the spatial axes     QMEANX "chain": DequantizeLinear -> ReduceMean ->
                                             QuantizeLinear, the float32 sum in numpy's order
    qnn.mean "onnx" spatial, rank != 4       QMEANX "global": MLAS's global average formula
    qnn.mean "tflite" (and "tflite_builtin"  QMEANX "tflite": the int32 sum, QuantizedMeanOrSum's
      off its 4-D path) over axes MEAN        multiplier
      does not take (excluded, not adjacent)
    qnn.mean "tflite_legacy" over axes MEAN   QMEANX "legacy": the int32 sum, then MEAN's legacy
      does not take, none, or negative axes   stage (ScalarKernels.mean_legacy), its path chosen
      (the reference's 4-D test reads them    as the reference chooses it
      as written)
    qnn.mean "tflite" over no axis           COPY (the reference's ReduceIsCopy)
    qnn.mean of empty data                   CONST: the reference's output (it reads nothing)
    (FGAPL, the kernel of float_conv.lower_fgap's long global averages, is reduce_kernels')

numpy's float32 ``np.sum(x, axis)`` of a C-contiguous array (numpy_sum_loops): size-1 axes
drop out; when the innermost remaining axis is reduced, the trailing run of reduced axes is one
contiguous run of L elements summed by numpy's pairwise_sum (8 accumulators up to 128
elements, halves split at multiples of 8 above), and each output adds its runs' sums to +0 in
C order of the other reduced axes; when it is kept, each output adds its elements one by one
in C order. The integer modes sum exactly (in any order).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.kinds import Kind

from partita.ir import Constant
from partita.ops.emulation.tflite_fixedpoint import quantize_multiplier
from partita.ops.tensor_reduce import reduce_axes

from .qmean import legacy_mean, mean_params
from .registry import EDGE, lowers

if TYPE_CHECKING:
    from .context import LowerContext

RANGE = {"int8": (-128, 127), "uint8": (0, 255)}


def numpy_sum_loops(shape, axes) -> tuple[list, list, int]:
    """numpy's float32 sum of a C-contiguous array of ``shape`` over ``axes`` as loops:
    (kept [(size, stride)], outer reduced [(size, stride)], run length L or 0), strides in
    elements, both lists in C order."""
    strides = [math.prod(shape[i + 1 :]) for i in range(len(shape))]
    dims = [(int(shape[i]), strides[i], i in axes) for i in range(len(shape)) if shape[i] != 1]
    run = 0
    while dims and dims[-1][2]:
        run = max(run, 1) * dims.pop()[0]
    kept = [[s, st] for s, st, red in dims if not red]
    outer = [[s, st] for s, st, red in dims if red]
    return kept, outer, run


@lowers("qnn.mean", priority=EDGE)
def lower_qmean_more(low: LowerContext, call) -> bool:
    """qnn.mean as QMEANX (the table above), or False: MEAN takes it, or nothing does."""
    x, a = call.args[0], call.attrs
    shape = [int(d) for d in x.checked_type.shape]
    dtype = x.checked_type.dtype
    if dtype not in RANGE or not all(isinstance(c, Constant) for c in call.args[1:]):
        return False
    axes = reduce_axes(len(shape), a)
    if 0 in shape:
        return _lower_empty(low, call, shape, dtype)
    consts = [np.asarray(c.data).reshape(-1)[0] for c in call.args[1:]]
    sem = a.semantics
    if sem in ("tflite", "tflite_builtin") and not axes:
        low.emit(Kind.COPY, call, [low.src(x)])  # ReduceIsCopy
        return True
    if sem == "tflite_builtin" and not (a.keepdims and len(shape) == 4 and axes == (1, 2)):
        sem = "tflite"  # the reference's fallback
    if sem == "tflite_legacy":
        return _lower_legacy(low, call, shape, axes, consts)
    if sem not in ("tflite", "onnx"):
        return False
    if a.axis and mean_params(shape, a.axis, sem, a.exclude, consts, dtype) is not None:
        return False  # MEAN's (lower/context.py)
    s_in, zp_in, s_out, zp_out = (float(np.float32(consts[0])), int(consts[1]),
                                  float(np.float32(consts[2])), int(consts[3]))
    n = math.prod(shape[i] for i in axes)
    kept, outer, run = numpy_sum_loops(shape, axes)
    params = {"kept": kept, "outer": outer, "run": run, "n": n, "zp_in": zp_in,
              "zp_out": zp_out}
    f32 = np.float32
    spatial = len(shape) >= 4 and axes in (tuple(range(2, len(shape))),
                                           tuple(range(1, len(shape) - 1)))
    if sem == "onnx" and spatial:  # onnx_global_average
        params.update(mode="global", scale=float(f32(s_in) / (f32(s_out) * f32(n))))
    elif sem == "onnx":
        params.update(mode="chain", s_in=s_in, s_out=s_out, fn=float(f32(n)))
    else:  # _mean_tflite
        m, e = quantize_multiplier(s_in / s_out)
        k = min(n.bit_length() - 1, 32, 31 + e)
        params.update(mode="tflite", multiplier=int((m << k) // n), shift=int(e - k))
    low.emit(Kind.QMEANX, call, [low.src(x)], params)
    return True


def _lower_empty(low: LowerContext, call, shape, dtype) -> bool:
    """qnn.mean of empty data as CONST: the reference's output reads no element (zeros, or
    "onnx"'s zero point from 0 / 0), so the op on empty data is the output."""
    params = [np.asarray(c.data) for c in call.args[1:]]
    with np.errstate(all="ignore"):
        value = call.op.impl(np.zeros(shape, dtype), *params, call.attrs)
    low.emit(Kind.CONST, call, [], {}, {"value": np.ascontiguousarray(value)})
    return True


def _lower_legacy(low: LowerContext, call, shape, axes, consts) -> bool:
    """qnn.mean "tflite_legacy" as QMEANX "legacy" (qnn_pool._mean_tflite_legacy), or False
    when MEAN (lower/context.py) computes the same path."""
    a, dtype = call.attrs, call.args[0].checked_type.dtype
    four_d = bool(a.keepdims and len(shape) == 4 and not a.exclude
                  and a.axis in ((1, 2), (2, 1)))  # as written: (-3, -2) is not the 4-D path
    n = math.prod(shape[i] for i in axes)
    legacy = legacy_mean(four_d, n, consts, dtype)
    if a.axis:
        theirs = mean_params(shape, a.axis, a.semantics, a.exclude, consts, dtype,
                             keepdims=bool(a.keepdims))
        if theirs is not None and theirs["legacy"] == legacy["legacy"]:
            return False  # MEAN's (lower/context.py)
    kept, outer, run = numpy_sum_loops(shape, axes)
    params = {"kept": kept, "outer": outer, "run": run, "n": n, "in_zp": int(consts[1]),
              "out_zp": int(consts[3]), "mode": "legacy", **legacy}
    low.emit(Kind.QMEANX, call, [low.src(call.args[0])], params)
    return True


__all__ = ["lower_qmean_more", "numpy_sum_loops"]
