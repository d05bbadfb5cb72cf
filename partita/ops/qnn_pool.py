"""Quantized average pooling and mean: ``qnn.avg_pool2d`` and ``qnn.mean``.

"tflite" follows TFLite's reference kernels (the BUILTIN_REF resolver), "onnx" ONNX Runtime's CPU
kernels; both were read from the runtimes' sources, and every float step below is a float32 step
there (x86-64 builds: no FMA contraction). Which TFLite MEAN path runs when:

- TFLite >= 2.13 (tensorflow PR #52014): every int8/uint8 MEAN runs ``QuantizedMeanOrSum`` with
  an integer rescale (``semantics="tflite"``); axis shape, keepdims and quantization params do not
  matter. (The 4-D H,W fast path survives only in the optimized kernels, not BUILTIN_REF.)
- before that (``semantics="tflite_legacy"``), ``EvalMeanReferenceOps`` chose one of three paths:
  keepdims and 4-D and axis exactly (1, 2) or (2, 1) -> the 4-D Mean (int8: multiplier/shift then
  rounding division; uint8: float-derived bias); else equal scale and zero point -> the plain
  integer mean (truncating division); else ``QuantizedMeanOrSum`` with a float rescale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from partita.ir.types import TensorType
from partita.ops.emulation.tflite_fixedpoint import (
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_upward,
    quantize_multiplier,
    wrap_int32,
)

from .nn_common import from_nhwc, layout_dims, to_nhwc
from .nn_pool import AvgPool2DAttrs, pool_counts, pool_out_shape, pool_windows
from .registry import choice, register_op
from .relations import fail, scalar_or_channel, tensor
from .tensor_reduce import ReduceAttrs, reduce_axes, reduced_shape

QUANT_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}
F32 = np.float32
# TFLite's pooling Prepare accepts input and output scales this close as equal (TFLITE_DCHECK).
TFLITE_POOL_SCALE_TOLERANCE = 1.0e-6
PARAM_NAMES = ("input_scale", "input_zero_point", "output_scale", "output_zero_point")


# ---- shared checks and arithmetic ----------------------------------------------------------------


def quantized_data(t, what: str = "data") -> TensorType:
    """``t`` as an int8, uint8 or int16 (TFLite's 16x8) tensor, or fail."""
    t = tensor(t, what)
    if t.dtype not in QUANT_RANGE:
        fail(f"{what} must be int8, uint8 or int16, got {t.dtype}")
    return t


def check_scalar_params(types) -> None:
    """input_scale, input_zero_point, output_scale, output_zero_point: float32 / int32 scalars."""
    for t, name in zip(types, PARAM_NAMES):
        scalar_or_channel(t, name, "float32" if name.endswith("scale") else "int32", channels=1)


def scalar_params(*params) -> tuple[float, int, float, int]:
    """The four quantization parameters as Python numbers (scales exactly as float32)."""
    s_in, zp_in, s_out, zp_out = (np.asarray(p).reshape(()) for p in params)
    return float(F32(s_in)), int(zp_in), float(F32(s_out)), int(zp_out)


def clip_to(values, dtype: str) -> np.ndarray:
    """Saturate integer ``values`` to ``dtype``'s range and cast."""
    lo, hi = QUANT_RANGE[dtype]
    return np.clip(values, lo, hi).astype(dtype)


def rounding_divide(acc, n) -> np.ndarray:
    """TFLite's ``acc > 0 ? (acc + n/2) / n : (acc - n/2) / n`` in C integer arithmetic (division
    truncates): the quotient rounded half away from zero. ``n`` must be positive."""
    acc, n = np.asarray(acc, np.int64), np.asarray(n, np.int64)
    return np.sign(acc) * ((np.abs(acc) + n // 2) // n)


def truncating_divide(acc, n) -> np.ndarray:
    """C's integer division: the quotient rounded toward zero."""
    acc = np.asarray(acc, np.int64)
    return np.sign(acc) * (np.abs(acc) // n)


def round_half_away(x) -> np.ndarray:
    """std::round / TfLiteRound of float32 values (exact in float64)."""
    x = np.asarray(x, np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def tflite_requantize(q, s_in, zp_in, s_out, zp_out, dtype) -> np.ndarray:
    """TFLite's QUANTIZE int8->int8 / uint8->uint8 (reference Requantize): the multiplier and
    shift of s_in / s_out (double), then MultiplyByQuantizedMultiplier(q - zp_in) + zp_out."""
    multiplier, shift = quantize_multiplier(s_in / s_out)
    out = multiply_by_quantized_multiplier(np.asarray(q, np.int64) - zp_in, multiplier, shift)
    return clip_to(out + zp_out, dtype)


def dequantize_f32(q, s_in, zp_in) -> np.ndarray:
    """ORT's ``x_scale * (int(x) - x_zero_point)``: one float32 product."""
    return F32(s_in) * (np.asarray(q, np.int64) - zp_in).astype(F32)


def onnx_global_average(sums, n, s_in, zp_in, s_out, zp_out, dtype) -> np.ndarray:
    """MLAS's QLinearGlobalAveragePool: integer sum minus zp_in * n (int32), times the float32
    scale s_in / (s_out * float(n)), rounded half to even, plus zp_out, saturated."""
    acc = wrap_int32(np.asarray(sums, np.int64) - zp_in * n)
    scale = F32(s_in) / (F32(s_out) * F32(n))
    return clip_to(np.rint(acc.astype(F32) * scale).astype(np.int64) + zp_out, dtype)


def onnx_quantize(y, s_out, zp_out, dtype, zp_before_rounding: bool) -> np.ndarray:
    """float32 -> dtype with round half to even: rint(y / s + zp) (QLinearAveragePool) or
    rint(y / s) + zp (QuantizeLinear). NaN (an empty average) gives zp_out."""
    lo, hi = QUANT_RANGE[dtype]
    y = np.asarray(y, F32) / F32(s_out)
    if zp_before_rounding:
        q = np.rint(y + F32(zp_out))
    else:
        q = np.rint(y) + zp_out
    q = np.where(np.isnan(q), zp_out, q)
    return np.clip(q, lo - 1, hi + 1).astype(np.int64).clip(lo, hi).astype(dtype)


# ---- qnn.avg_pool2d ------------------------------------------------------------------------------


@dataclass(frozen=True)
class QnnAvgPool2DAttrs(AvgPool2DAttrs):
    """nn.avg_pool2d's attributes plus the runtime whose integer result to reproduce."""

    semantics: str = choice("tflite", "tflite", "onnx")


def _avg_pool_rel(types, attrs) -> TensorType:
    data = quantized_data(types[0])
    check_scalar_params(types[1:])
    return TensorType(pool_out_shape(data.shape, attrs), data.dtype)


@register_op(
    "qnn.avg_pool2d",
    inputs=("data", *PARAM_NAMES),
    attrs=QnnAvgPool2DAttrs,
    type_rel=_avg_pool_rel,
    kind="opaque",
)
def avg_pool2d(data, input_scale, input_zero_point, output_scale, output_zero_point, attrs):
    """int8/uint8/int16 2-D average pooling; windows, padding and output shape as nn.avg_pool2d.
    int16 (TFLite's 16x8 kernel) takes the int8 formulas below.

    "tflite" (reference AVERAGE_POOL_2D): S = sum of the raw values of the window's counted taps
    (with count_include_pad a padding tap counts as input_zero_point), n = their number,
    avg = S > 0 ? (S + n/2) / n : (S - n/2) / n in C integer arithmetic, saturated. TFLite needs
    equal input and output quantization (scales within 1e-6, same zero point); otherwise the
    result is avg followed by TFLite's QUANTIZE requantize (what a converter inserts), i.e.
    MultiplyByQuantizedMultiplier(avg - input_zp, QuantizeMultiplier(s_in / s_out)) + output_zp.
    "onnx" (ORT QLinearAveragePool): if the window is the whole H x W and there is no padding (and
    no dilation), MLAS's global average: rint(float(S - zp_in * n) * (s_in / (s_out * n))) + zp_out;
    else x = s_in * (q - zp_in) in float32, summed in float32 row by row over the taps inside the
    input, divided by n (count_include_pad: pool_size[0] * pool_size[1], as ORT, even past the
    padding in ceil mode), then rint(y / s_out + zp_out) in float32, saturated.
    Both: an empty window (dilation can make one) averages to zero (the zero point); TFLite fails
    and ORT divides by zero there. Dilation is an extension: neither runtime has it.
    """
    params = scalar_params(input_scale, input_zero_point, output_scale, output_zero_point)
    if attrs.semantics == "tflite":
        out = _avg_pool_tflite(data, params, attrs)
    else:
        out = _avg_pool_onnx(data, params, attrs)
    return from_nhwc(out, attrs.layout)


def _avg_pool_tflite(data, params, attrs) -> np.ndarray:
    s_in, zp_in, s_out, zp_out = params
    dtype = data.dtype.name
    # Summing q - zp_in with 0 as padding lets padded taps count as zp_in when they are counted,
    # while ceil mode's overhang (0 here, never counted) adds nothing.
    shifted = np.asarray(data, np.int64) - zp_in
    sums = pool_windows(shifted, attrs, 0).sum(axis=(-2, -1))
    counts = pool_counts(data.shape, attrs, attrs.count_include_pad)[None, :, :, None]
    raw_sums = wrap_int32(sums + zp_in * counts)
    avg = np.where(counts > 0, rounding_divide(raw_sums, np.maximum(counts, 1)), zp_in)
    avg = clip_to(avg, dtype)
    same = zp_in == zp_out and abs(F32(s_in) - F32(s_out)) <= TFLITE_POOL_SCALE_TOLERANCE
    return avg if same else tflite_requantize(avg, s_in, zp_in, s_out, zp_out, dtype)


def _avg_pool_onnx(data, params, attrs) -> np.ndarray:
    s_in, zp_in, s_out, zp_out = params
    dtype = data.dtype.name
    _, h, w, _ = layout_dims(data.shape, attrs.layout)
    if attrs.pool_size == (h, w) and not any(attrs.padding) and attrs.dilation == (1, 1):
        x = to_nhwc(np.asarray(data, np.int64), attrs.layout)
        return onnx_global_average(x.sum(axis=(1, 2), keepdims=True), h * w, *params, dtype)
    windows = pool_windows(dequantize_f32(data, s_in, zp_in), attrs, 0.0)
    acc = np.zeros(windows.shape[:4], F32)
    # ORT adds a window's taps one by one in row-major order; padding adds 0.0, which is exact.
    for a in range(windows.shape[4]):
        for b in range(windows.shape[5]):
            acc = acc + windows[..., a, b]
    if attrs.count_include_pad:
        counts = np.asarray(math.prod(attrs.pool_size))
    else:
        counts = pool_counts(data.shape, attrs, False)[None, :, :, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        y = acc / counts.astype(F32)
    return onnx_quantize(y, s_out, zp_out, dtype, zp_before_rounding=True)


# ---- qnn.mean ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QnnMeanAttrs(ReduceAttrs):
    """mean's attributes (axis None or () reduces every axis; exclude; keepdims) plus the runtime
    whose integer result to reproduce."""

    semantics: str = choice("tflite", "tflite", "tflite_builtin", "tflite_legacy", "onnx")


def _mean_rel(types, attrs) -> TensorType:
    data = quantized_data(types[0])
    check_scalar_params(types[1:])
    axes = reduce_axes(data.ndim, attrs)
    return TensorType(reduced_shape(data.shape, axes, attrs.keepdims), data.dtype)


@register_op(
    "qnn.mean", inputs=("data", *PARAM_NAMES), attrs=QnnMeanAttrs, type_rel=_mean_rel, kind="reduce"
)
def mean(data, input_scale, input_zero_point, output_scale, output_zero_point, attrs):
    """int8/uint8/int16 mean over the reduced axes (as ``mean``). S: the int32 sum of raw values, n:
    the number of reduced elements. int16 (TFLite's 16x8 MEAN, both kernel sets) is "tflite".

    "tflite" (TFLite >= 2.13 reference MEAN, QuantizedMeanOrSum): (M, e) = QuantizeMultiplier(
    s_in / s_out) in double; k = min(floor(log2 n), 32, 31 + e); M' = (M << k) / n (int64,
    truncating), e' = e - k; out = MultiplyByQuantizedMultiplier(int32(S - zp_in * n), M', e')
    + zp_out, saturated. No reduced axis: a plain copy (ReduceIsCopy); empty data: zeros.
    "tflite_legacy" (TFLite <= 2.12 reference MEAN), first match wins: keepdims, rank 4 and axis
    exactly (1, 2) or (2, 1): int8 rounding_divide(MBQM(S - zp_in * n, M, e), n) + zp_out (C's
    (x +- n/2) / n), uint8 MBQM(S, QuantizeMultiplier(f32(s_in / (n * s_out)))) + zp_out -
    trunc(f32(zp_in * s_in / s_out)); equal scales and zero points: S / n truncated; else, in
    float32, round_half_away((S / n) * r - zp_in * r + 0.5) + zp_out with r = s_in / s_out
    (TFLite's stray +0.5 included). All saturated.
    "tflite_builtin" (TFLite's optimized MEAN): keepdims, rank 4 and axes exactly {1, 2} take
    optimized_integer_ops::Mean: in float32, t = zp_in * s_in / s_out, bias = zp_out -
    trunc(t +- 0.5) (the sign of t), r = s_in / (float(n) * s_out); out = MBQM(S, M, e) + bias
    with (M, e) = QuantizeMultiplier(r), saturated; whole blocks of 16 channels (its NEON path,
    built through NEON_2_SSE on x86) round both MBQM steps half up. Other MEANs: "tflite".
    "onnx": over the spatial axes of a rank >= 4 tensor (2..rank-1 or 1..rank-2: NC... or N...C),
    MLAS's QLinearGlobalAveragePool: rint(float(S - zp_in * n) * (s_in / (s_out * n))) + zp_out;
    else ORT's DequantizeLinear -> ReduceMean -> QuantizeLinear chain (ONNX ReduceMean takes no
    int8 and ORT's CPU provider has no QLinearReduceMean kernel): s_in * (q - zp_in) summed and
    divided in float32 (numpy's summation order; ORT's may differ in the last ulp), then
    rint(mean / s_out) + zp_out. The two formulas differ only within float32 error of a rounding
    tie (a QDQ ReduceMean over spatial axes runs the chain in ORT). All saturate to the dtype.
    """
    params = scalar_params(input_scale, input_zero_point, output_scale, output_zero_point)
    axes = reduce_axes(data.ndim, attrs)
    out_shape = reduced_shape(data.shape, axes, attrs.keepdims)
    if data.size == 0 and attrs.semantics != "onnx":
        return np.zeros(out_shape, data.dtype)  # TFLite fills integer outputs with T() here
    n = math.prod(data.shape[a] for a in axes)
    sums = np.asarray(np.sum(data, axis=axes, dtype=np.int64, keepdims=attrs.keepdims))
    fast = attrs.keepdims and axes == (1, 2) and data.ndim == 4 and data.dtype != np.int16
    if attrs.semantics == "tflite_builtin" and fast:
        out = _mean_tflite_builtin_4d(data, sums, n, params)
    elif attrs.semantics in ("tflite", "tflite_builtin"):
        out = _mean_tflite(data, sums, n, axes, params)
    elif attrs.semantics == "tflite_legacy":
        out = _mean_tflite_legacy(data, sums, n, params, attrs)
    else:
        out = _mean_onnx(data, sums, n, axes, params, attrs.keepdims)
    return np.asarray(out).reshape(out_shape).astype(data.dtype)


def _mean_tflite(data, sums, n, axes, params) -> np.ndarray:
    s_in, zp_in, s_out, zp_out = params
    if not axes:
        return data.copy()
    multiplier, shift = quantize_multiplier(s_in / s_out)
    k = min(n.bit_length() - 1, 32, 31 + shift)
    multiplier, shift = (multiplier << k) // n, shift - k
    shifted = wrap_int32(wrap_int32(sums) - zp_in * n)
    out = multiply_by_quantized_multiplier(shifted, multiplier, shift) + zp_out
    return clip_to(out, data.dtype.name)


def _mean_tflite_builtin_4d(data, sums, n, params) -> np.ndarray:
    s_in, zp_in, s_out, zp_out = params
    t = F32(F32(zp_in) * F32(s_in)) / F32(s_out)
    t = t + F32(0.5) if t > 0 else t - F32(0.5)
    bias = zp_out - int(t)
    real = F32(s_in) / (F32(n) * F32(s_out))
    multiplier, shift = quantize_multiplier(float(real))
    sums = wrap_int32(sums)
    # Whole blocks of 16 channels take the NEON path (built for x86 through NEON_2_SSE), whose
    # roundings both break ties upward; the remaining channels take the scalar path.
    channels = sums.shape[-1]
    vector = np.arange(channels) < channels // 16 * 16
    out = (
        np.where(
            vector,
            multiply_by_quantized_multiplier_upward(sums, multiplier, shift),
            multiply_by_quantized_multiplier(sums, multiplier, shift),
        )
        + bias
    )
    return clip_to(out, data.dtype.name)


def _mean_tflite_legacy(data, sums, n, params, attrs) -> np.ndarray:
    s_in, zp_in, s_out, zp_out = params
    dtype = data.dtype.name
    sums = wrap_int32(sums)
    if attrs.keepdims and data.ndim == 4 and not attrs.exclude and attrs.axis in ((1, 2), (2, 1)):
        if dtype == "int8":
            multiplier, shift = quantize_multiplier(s_in / s_out)
            acc = multiply_by_quantized_multiplier(wrap_int32(sums - zp_in * n), multiplier, shift)
            return clip_to(rounding_divide(acc, n) + zp_out, dtype)
        bias = zp_out - int(F32(F32(zp_in) * F32(s_in)) / F32(s_out))
        multiplier, shift = quantize_multiplier(float(F32(s_in) / (F32(n) * F32(s_out))))
        return clip_to(multiply_by_quantized_multiplier(sums, multiplier, shift) + bias, dtype)
    if zp_in == zp_out and F32(s_in) == F32(s_out):
        return truncating_divide(sums, n)
    scale = F32(s_in) / F32(s_out)
    bias = F32(-zp_in) * scale + F32(0.5)
    float_mean = sums.astype(F32) / F32(n)
    rounded = round_half_away(float_mean * scale + bias).astype(F32) + F32(zp_out)
    lo, hi = QUANT_RANGE[dtype]
    return np.clip(rounded, lo, hi).astype(np.int64)


def _is_spatial(axes, ndim: int) -> bool:
    """Whether ``axes`` are the spatial axes of an NC... or N...C image (rank >= 4: over rank 3,
    axis 1 or 2 is far more often a sequence or feature mean, i.e. ReduceMean, than a pooling)."""
    return ndim >= 4 and axes in (tuple(range(2, ndim)), tuple(range(1, ndim - 1)))


def _mean_onnx(data, sums, n, axes, params, keepdims) -> np.ndarray:
    s_in, zp_in, s_out, zp_out = params
    dtype = data.dtype.name
    if _is_spatial(axes, data.ndim) and n > 0:
        return onnx_global_average(sums, n, *params, dtype)
    total = np.sum(dequantize_f32(data, s_in, zp_in), axis=axes, dtype=F32, keepdims=keepdims)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = np.asarray(total, F32) / F32(n)
    return onnx_quantize(y, s_out, zp_out, dtype, zp_before_rounding=False)
