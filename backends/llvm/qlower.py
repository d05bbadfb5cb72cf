"""Lowering of TFLite's int8 transformer ops for qtransformer.py's kernels: QBMM (an 8-bit
batch matmul with its tflite requantize and clip) and QSOFTMAX (TFLite's reference softmax;
its per-difference tables computed here with the reference's own code)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from partita.backends.registry import BackendError

from partita.ir import Constant
from partita.ops.emulation import gemmlowp as gl
from partita.ops.emulation.pytorch_x86 import onednn_inverse
from partita.ops.emulation.tflite_fixedpoint import (
    multiply_by_quantized_multiplier_greater_than_one,
    quantize_multiplier,
    quantize_multiplier_array,
)
from partita.ops.nn_pool import pool_counts
from partita.ops.qnn_pool import TFLITE_POOL_SCALE_TOLERANCE as SCALE_TOLERANCE

from .kinds import Kind
from .registry import OP, lowers

if TYPE_CHECKING:
    from .lower import LowerContext

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


def mean_params(shape, axis, semantics: str, exclude: bool, consts, out_dtype: str,
                keepdims: bool = False) -> dict | None:
    """The MEAN kernel's parameters for qnn.mean of an 8-bit tensor of ``shape`` over ``axis``
    (``consts``: input scale, zero point, output scale, zero point), or None when the kernel does
    not take it (excluded or non-contiguous axes; "onnx" means only over H and W, of NHWC or
    NCHW)."""
    shape = [int(d) for d in shape]
    axes = tuple(sorted(a % len(shape) for a in axis))
    spatial = len(shape) == 4 and axes in ((1, 2), (2, 3))  # H, W of NHWC or NCHW
    contiguous = axes and axes == tuple(range(axes[0], axes[-1] + 1))
    onnx = semantics == "onnx"
    if (exclude or not contiguous or (onnx and not spatial)
            or semantics not in ("tflite", "onnx", "tflite_legacy")):
        return None
    s_in, zp_in, s_out, zp_out = consts
    n = math.prod(shape[axes[0] : axes[-1] + 1])
    # the reduced run of axes between the outer and inner ones: [outer][n][inner]
    lay = {"outer": math.prod(shape[: axes[0]]), "inner": math.prod(shape[axes[-1] + 1 :])}
    common = {"n": n, "in_zp": int(zp_in), "out_zp": int(zp_out), "out_dtype": out_dtype, **lay}
    if semantics == "tflite_legacy":
        four_d = keepdims and len(shape) == 4 and tuple(a % 4 for a in axis) in ((1, 2), (2, 1))
        return {**common, **legacy_mean(four_d, n, consts, out_dtype)}
    if onnx:  # MLAS: float32(acc) * (s_in / (s_out * n)), even
        scale = np.float32(s_in) / (np.float32(s_out) * np.float32(n))
        return {**common, "scale": float(scale)}
    m, e = quantize_multiplier(float(np.float64(s_in) / np.float64(s_out)))
    k = min(int(math.floor(math.log2(n))), 32, 31 + e)
    return {**common, "multiplier": int((m << k) // n), "shift": e - k}


def legacy_mean(four_d: bool, n: int, consts, out_dtype: str) -> dict:
    """TFLite <= 2.12's reference MEAN (qnn_pool._mean_tflite_legacy), first match wins: the 4-D
    Mean ("q4_int8": MBQM then rounding division by n; "q4_uint8": MBQM of s_in / (n s_out)
    plus a float-derived bias), equal parameters ("copy": the sum truncated by n), else the
    float32 rescale ("float", scale and bias precomputed in float32 as the reference)."""
    f32 = np.float32
    s_in, zp_in, s_out, zp_out = consts
    if four_d and out_dtype == "int8":
        m, e = quantize_multiplier(float(np.float64(s_in) / np.float64(s_out)))
        return {"legacy": "q4_int8", "multiplier": int(m), "shift": int(e)}
    if four_d:
        bias = int(zp_out) - int(f32(f32(zp_in) * f32(s_in)) / f32(s_out))
        m, e = quantize_multiplier(float(f32(s_in) / (f32(n) * f32(s_out))))
        return {"legacy": "q4_uint8", "multiplier": int(m), "shift": int(e), "bias": bias}
    if int(zp_in) == int(zp_out) and f32(s_in) == f32(s_out):
        return {"legacy": "copy"}
    scale = f32(s_in) / f32(s_out)
    bias = f32(f32(-int(zp_in)) * scale + f32(0.5))
    return {"legacy": "float", "fscale": float(scale), "fbias": float(bias)}


def lower_qmean_builtin(low: LowerContext, call) -> bool:
    """qnn.mean "tflite_builtin" as MEAN: TFLite's optimized kernel for a 4-D mean over H, W
    kept as dims (the sum, without the zero point, times QuantizeMultiplier(float32(s_in /
    (n * s_out))), plus a float32 bias; whole 16-channel blocks round upward), else "tflite"."""
    from partita.ops.tensor_reduce import reduce_axes

    x, a = call.args[0], call.attrs
    if x.checked_type.dtype not in RANGE or not all(_scalar(c) for c in call.args[1:]):
        return False
    s_in, zp_in, s_out, zp_out = (np.asarray(c.data).reshape(-1)[0] for c in call.args[1:])
    shape = [int(d) for d in x.checked_type.shape]
    dtype = call.checked_type.dtype
    if a.keepdims and len(shape) == 4 and reduce_axes(4, a) == (1, 2):
        f32 = np.float32
        n = shape[1] * shape[2]
        t = f32(f32(zp_in) * f32(s_in)) / f32(s_out)
        t = t + f32(0.5) if t > 0 else t - f32(0.5)
        m, e = quantize_multiplier(float(f32(s_in) / (f32(n) * f32(s_out))))
        params = {
            "n": n, "in_zp": 0, "out_zp": int(zp_out) - int(t), "out_dtype": dtype,
            "outer": shape[0], "inner": shape[3], "multiplier": int(m), "shift": int(e),
            "upward": shape[3] // 16 * 16,
        }  # fmt: skip
    else:
        consts = [s_in, zp_in, s_out, zp_out]
        params = mean_params(shape, a.axis, "tflite", a.exclude, consts, dtype)
    if params is None:
        return False
    low.emit(Kind.MEAN, call, [low.src(x)], params)
    return True


@lowers("qnn.avg_pool2d", priority=OP)
def lower_qavgpool(low: LowerContext, call) -> bool:
    """qnn.avg_pool2d of 8-bit data with scalar parameters: AVGPOOL (the window's integer sum
    for "tflite", float32 taps in row-major order for "onnx"), or MEAN for ONNX's global
    average (MLAS's formula is the MEAN kernel's)."""
    x = call.args[0]
    a = call.attrs
    dtype = x.checked_type.dtype
    if dtype not in RANGE or not all(_scalar(c) for c in call.args[1:]):
        return False
    s_in, zp_in, s_out, zp_out = (np.asarray(c.data).reshape(-1)[0] for c in call.args[1:])
    shape = [int(d) for d in x.checked_type.shape]
    nhwc = a.layout == "NHWC"
    _, h, w, c = shape if nhwc else (shape[0], shape[2], shape[3], shape[1])
    onnx = a.semantics == "onnx"
    if onnx and tuple(a.pool_size) == (h, w) and not any(a.padding) and tuple(a.dilation) == (1, 1):
        consts = [s_in, zp_in, s_out, zp_out]  # NCHW: a mean over axes 2, 3 (inner = 1)
        params = mean_params(shape, (1, 2) if nhwc else (2, 3), "onnx", False, consts, dtype)
        low.emit(Kind.MEAN, call, [low.src(x)], params)
        return True
    counts = pool_counts(shape, a, a.count_include_pad).astype(np.int32).reshape(-1)
    if onnx and a.count_include_pad:
        counts = np.full_like(counts, math.prod(a.pool_size))
    f32 = np.float32
    same = int(zp_in) == int(zp_out) and abs(f32(s_in) - f32(s_out)) <= SCALE_TOLERANCE
    m, e = quantize_multiplier(float(np.float64(s_in) / np.float64(s_out)))
    params = {
        "nhwc": nhwc, "H": h, "W": w, "C": c,
        "pool": list(a.pool_size), "strides": list(a.strides), "dilation": list(a.dilation),
        "padding": list(a.padding), "semantics": a.semantics, "dtype": dtype,
        "zp_in": int(zp_in), "zp_out": int(zp_out), "s_in": float(f32(s_in)),
        "s_out": float(f32(s_out)), "same": bool(same), "multiplier": int(m), "shift": int(e),
    }  # fmt: skip
    low.emit(Kind.AVGPOOL, call, [low.src(x)], params, {"counts": counts})
    return True


def _c(e) -> np.ndarray:
    if not isinstance(e, Constant):
        raise BackendError(f"llvm: expected a constant operand, got {e.short()}")
    return np.asarray(e.data)


def _raw_stage(call, by: dict, where: str) -> tuple[dict, dict]:
    """The output stage of an accumulator read as such (no requantize: TVM's canonical QNN, a
    dynamic quantization's product): the int32 sum, plus a fused bias, wrapping as int32 does
    (``rounding`` "raw"; the scalar CONV/FC kernels store int32)."""
    x = call.args[0]
    if x.checked_type.dtype not in RANGE or _c(call.args[1]).dtype.name not in RANGE:
        raise BackendError(f"llvm: {where}: only int8/uint8 data and weights")
    n_out = call.checked_type.shape[-1]
    bias = by.get("nn.bias_add")
    zeros = np.zeros(n_out, np.int32)
    arrays = {
        "multiplier": zeros, "shift": zeros.copy(), "scale": np.zeros(n_out),
        "bias": (_c(bias.args[1]).astype(np.int32).reshape(-1) if bias is not None
                 else zeros.copy()),
        "w_zp": np.broadcast_to(np.atleast_1d(_c(call.args[3])), (n_out,)).astype(np.int32),
        "fscale": np.zeros(n_out, np.float32),
    }  # fmt: skip
    params = {
        "in_zp": int(_c(call.args[2])), "rq_zp": 0, "out_zp": 0, "lo": -(1 << 31),
        "hi": (1 << 31) - 1, "rounding": "raw", "in_dtype": x.checked_type.dtype,
        "w_dtype": _c(call.args[1]).dtype.name, "out_dtype": "int32",
    }  # fmt: skip
    return params, arrays


def output_stage(call, by: dict, where: str) -> tuple[dict, dict]:
    """A fused MAC kernel's output stage: parameters and per-channel arrays (bias, TFLite's
    multipliers and shifts, the real scale, weight zero points, and the float32 stages' scale,
    negated float bias ``fzp`` and oneDNN's ``finv``) for requantize ``by["qnn.requantize"]``
    and the clip after it."""
    if "qnn.requantize" not in by:
        return _raw_stage(call, by, where)
    rq = by["qnn.requantize"]
    sem = rq.attrs.semantics
    if sem not in ("tflite", "tflite_builtin", "tflite_double", "onnx", "fbgemm", "onednn"):
        raise BackendError(f"llvm: {where}: requantize semantics {sem!r}")
    x = call.args[0]
    if x.checked_type.dtype not in RANGE or _c(call.args[1]).dtype.name not in RANGE:
        raise BackendError(f"llvm: {where}: only int8/uint8 data and weights")
    torch = sem in ("fbgemm", "onednn")  # zp_in: a float bias, per channel
    if _c(rq.args[4]).size > 1 or (_c(rq.args[2]).size > 1 and not torch):
        raise BackendError(f"llvm: {where}: per-channel zero points in requantize")
    lo, hi = RANGE[rq.attrs.out_dtype]
    if "clip" in by:
        lo = max(lo, math.ceil(by["clip"].attrs.a_min))
        hi = min(hi, math.floor(by["clip"].attrs.a_max))
    n_out = call.checked_type.shape[-1]
    s_in, s_out = _c(rq.args[1]), _c(rq.args[3])
    real = np.broadcast_to(np.atleast_1d(s_in.astype(np.float64) / s_out.astype(np.float64)),
                           (n_out,)).copy()
    q, shift = quantize_multiplier_array(real)
    fscale = s_in.astype(np.float32) if sem == "onednn" else (
        s_in.astype(np.float32) / s_out.astype(np.float32))
    bias = by.get("nn.bias_add")

    def per_channel(v, dtype):
        return np.broadcast_to(np.atleast_1d(v), (n_out,)).astype(dtype).copy()

    arrays = {
        "multiplier": np.asarray(q, np.int32),
        "shift": np.asarray(shift, np.int32),
        "scale": real,
        "bias": (_c(bias.args[1]).astype(np.int32).reshape(-1) if bias is not None
                 else np.zeros(n_out, np.int32)),
        "w_zp": per_channel(_c(call.args[3]), np.int32),
        "fscale": per_channel(fscale.reshape(-1), np.float32),
    }
    if torch:
        arrays["fzp"] = per_channel(_c(rq.args[2]).astype(np.float32).reshape(-1), np.float32)
    if sem == "onednn":
        arrays["finv"] = per_channel(onednn_inverse(s_out.reshape(-1)[0]), np.float32)
    params = {
        "in_zp": int(_c(call.args[2])),
        "rq_zp": 0 if torch else int(_c(rq.args[2]).flat[0]),
        "out_zp": int(_c(rq.args[4]).flat[0]),
        "lo": lo,
        "hi": hi,
        "rounding": sem,
        "in_dtype": x.checked_type.dtype,
        "w_dtype": _c(call.args[1]).dtype.name,
        "out_dtype": rq.attrs.out_dtype,
    }
    return params, arrays
