"""Lowering of TFLite's int8 transformer ops for emit/int8/transformer.py's kernels: QBMM (an
8-bit batch matmul with its tflite requantize and clip) and QSOFTMAX (TFLite's reference
softmax; its per-difference tables computed here with the reference's own code; QSOFTMAXO,
QSOFTMAXF: ONNX Runtime's and TFLite's optimized ones)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.kinds import Kind

from partita.ir import Constant
from partita.ops.emulation import gemmlowp as gl
from partita.ops.emulation.tflite_fixedpoint import (
    multiply_by_quantized_multiplier_greater_than_one,
    quantize_multiplier,
)

from .registry import OP, lowers

if TYPE_CHECKING:
    from .context import LowerContext

RANGE = {"int8": (-128, 127), "uint8": (0, 255)}



def _scalar(e):  # 0-d: the kernels' parameters are read with int() / float()
    return isinstance(e, Constant) and np.asarray(e.data).ndim == 0


@lowers("qnn.batch_matmul", priority=OP)
def lower_qbmm(low: LowerContext, call) -> bool:
    """qnn.batch_matmul of two 8-bit tensors read by one tflite qnn.requantize (and a clip)."""
    x, y = call.args[:2]
    if not all(_scalar(a) for a in call.args[2:]) or {
        a.checked_type.dtype for a in (x, y)
    } - set(RANGE):
        return False
    rq = low.only_user(call, "qnn.requantize")
    if rq is None or rq.attrs.semantics != "tflite" or not all(_scalar(a) for a in rq.args[1:]):
        return False
    clip = low.only_user(rq, "clip")
    lo, hi = RANGE[rq.attrs.out_dtype] if rq.attrs.out_dtype in RANGE else (None, None)
    if lo is None:
        return False
    if clip is not None:
        lo, hi = max(lo, math.ceil(clip.attrs.a_min)), min(hi, math.floor(clip.attrs.a_max))
    real = float(np.float64(rq.args[1].data) / np.float64(rq.args[3].data))
    mult, shift = quantize_multiplier(real)
    a = call.attrs
    bx, by = int(x.checked_type.shape[0]), int(y.checked_type.shape[0])
    m = int(x.checked_type.shape[2 if a.transpose_a else 1])
    k = int(x.checked_type.shape[1 if a.transpose_a else 2])
    n = int(y.checked_type.shape[1 if a.transpose_b else 2])
    params = {
        "B": max(bx, by), "M": m, "K": k, "N": n, "bx": bx, "by": by,
        "ta": bool(a.transpose_a), "tb": bool(a.transpose_b),
        "zx": int(call.args[2].data), "zy": int(call.args[3].data),
        "mult": int(mult), "shift": int(shift), "rq_zp": int(rq.args[2].data),
        "out_zp": int(rq.args[4].data), "lo": lo, "hi": hi,
        "dtypes": [x.checked_type.dtype, y.checked_type.dtype],
    }  # fmt: skip
    last = clip if clip is not None else rq
    for node in (rq, *((clip,) if clip is not None else ())):
        low.absorb(node)
    low.emit(Kind.QBMM, last, [low.src(x), low.src(y)], params)
    return True


@lowers("qnn.softmax", priority=OP)
def lower_qsoftmax(low: LowerContext, call) -> bool:
    if call.attrs.semantics == "tflite_builtin":
        return _qsoftmax_builtin(low, call)
    if call.attrs.semantics == "onnx":
        return _qsoftmax_ort(low, call)
    data = call.args[0]
    dtype = data.checked_type.dtype
    shape = [int(d) for d in data.checked_type.shape]
    if call.attrs.semantics != "tflite" or dtype not in RANGE or not all(
        _scalar(a) for a in call.args[1:]
    ):
        return False
    axis = call.attrs.axis % len(shape)
    in_scale = np.float32(call.args[1].data)
    real = min(float(np.float32(call.attrs.beta)) * float(in_scale) * 2.0**26, 2.0**31 - 1.0)
    mult, left_shift = quantize_multiplier(real)
    if not real > 1.0 or left_shift < 0:
        return False  # the reference refuses it; so does the interpreter, with the reason
    diff_min = -math.floor(31.0 * 2.0**26 / 2.0**left_shift)
    diffs = -np.arange(256, dtype=np.int64)  # x - max(row), entry -d at index d
    keep = diffs >= diff_min
    scaled = multiply_by_quantized_multiplier_greater_than_one(diffs, mult, left_shift)
    exps = gl.exp_on_negative_values(scaled, 5)
    contrib = np.where(keep, gl.rescale(exps, 0, 12), 0)
    inner = int(np.prod(shape[axis + 1 :], dtype=np.int64))
    params = {
        "rows": math.prod(shape[:axis]) * math.prod(shape[axis + 1 :]), "n": shape[axis],
        "inner": inner, "dtype": dtype, "out_bits": 8,
    }  # fmt: skip
    arrays = {
        "exps": np.where(keep, exps, 0).astype(np.int32),
        "keep": keep.astype(np.int32),
        "contrib": contrib.astype(np.int32),
    }
    low.emit(Kind.QSOFTMAX, call, [low.src(data)], params, arrays)
    return True


__all__ = ["RANGE", "lower_qbmm", "lower_qsoftmax"]


def _qsoftmax_ort(low: LowerContext, call) -> bool:
    """ONNX Runtime's QLinearSoftmax (activation_kernels.ort_softmax) as QSOFTMAXO: the
    reference's own 256-entry float32 exp table indexed by q - max(row) + 255, the row's float32
    sum in order, then per element rint(float32(t * floor(1 / s_out)) / sum) saturated + zp.
    Any softmax axis (rows are (outer, inner) pairs, the axis' elements ``inner`` apart)."""
    from partita.ops.emulation.activation_kernels import ort_softmax_table

    data = call.args[0]
    dtype = data.checked_type.dtype
    shape = [int(d) for d in data.checked_type.shape]
    if dtype not in RANGE or not all(_scalar(a) for a in call.args[1:]):
        return False
    axis = call.attrs.axis % len(shape)
    s_in, _, s_out, zp_out = (np.asarray(a.data).reshape(-1)[0] for a in call.args[1:])
    lo, hi = RANGE[dtype]
    params = {
        "rows": math.prod(shape[:axis]) * math.prod(shape[axis + 1 :]), "n": shape[axis],
        "inner": int(np.prod(shape[axis + 1 :], dtype=np.int64)), "dtype": dtype,
        "zp": int(zp_out), "lo": lo, "hi": hi,
        "y_scale": float(np.float32(np.floor(np.float32(1) / np.float32(s_out)))),
    }  # fmt: skip
    table = ort_softmax_table(s_in, shape[axis]).astype(np.float32)
    low.emit(Kind.QSOFTMAXO, call, [low.src(data)], params, {"table": table})
    return True


def _qsoftmax_builtin(low: LowerContext, call) -> bool:
    """TFLite's optimized float softmax of 8-bit data as QSOFTMAXF: expf(-s_in * beta * d)
    depends only on d = max(q) - q in [0, 255], a table made with the reference's own float32
    libm arithmetic; the kernel sums it in float32 in order and scales as the reference."""
    from partita.ops.emulation.activation_kernels import _exp_or_inf, libm_f32

    data = call.args[0]
    dtype = data.checked_type.dtype
    if dtype not in RANGE or not all(_scalar(a) for a in call.args[1:]):
        return False
    f32 = np.float32
    s_in, _, s_out, zp_out = (np.asarray(a.data).reshape(-1)[0] for a in call.args[1:])
    scale = -f32(s_in) * f32(call.attrs.beta)
    table = libm_f32(_exp_or_inf, scale * np.arange(256).astype(f32))
    if not np.all(np.isfinite(table)) or table[0] <= 0:
        return False  # a negative beta: exps overflow (the reference's nan casts are not C's)
    shape = [int(d) for d in data.checked_type.shape]
    axis = call.attrs.axis % len(shape)
    params = {
        "outer": math.prod(shape[:axis]), "n": shape[axis], "inner": math.prod(shape[axis + 1 :]),
        "dtype": dtype, "out_scale": float(f32(s_out)), "out_zp": int(zp_out),
    }  # fmt: skip
    low.emit(Kind.QSOFTMAXF, call, [low.src(data)], params, {"exps": table.astype(np.float64)})
    return True
