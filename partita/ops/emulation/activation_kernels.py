"""The runtimes' integer activation kernels behind qnn.sigmoid/tanh/hardswish/leaky_relu/softmax.

Each function reproduces one runtime kernel bit for bit (see qnn_lut.py for which kernel each
``semantics`` selects). Float32 arithmetic is done in numpy float32, which rounds every operation
like the C++ code; fused multiply-adds are emulated exactly; libm's expf/tanhf are taken as the
correctly rounded float32 result (what glibc returns except in vanishingly rare cases).
"""

from __future__ import annotations

import math

import numpy as np

from partita.errors import InterpreterError

from . import gemmlowp as gl
from .tflite_fixedpoint import (
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_greater_than_one,
    quantize_multiplier,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
    wrap_int32,
)

F32 = np.float32


def dtype_range(dtype: str) -> tuple[int, int]:
    """(min, max) of an integer dtype."""
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def all_values(dtype: str) -> np.ndarray:
    """Every value of an 8-bit type in increasing order (int64): the domain of a lookup table."""
    lo, hi = dtype_range(dtype)
    return np.arange(lo, hi + 1, dtype=np.int64)


def lookup(table: np.ndarray, data: np.ndarray) -> np.ndarray:
    """data -> table[data - min(dtype)], the table holding one entry per value of data's type."""
    lo, _ = dtype_range(data.dtype.name)
    return table[data.astype(np.int64) - lo].astype(data.dtype)


def libm_f32(fn, x: np.ndarray) -> np.ndarray:
    """A float32 libm function (expf, tanhf) as the correctly rounded result of ``fn`` in double."""
    x = np.asarray(x, F32)
    flat = np.array([fn(float(v)) for v in x.ravel()], np.float64)
    with np.errstate(over="ignore"):
        return flat.astype(F32).reshape(x.shape)


def _exp_or_inf(v: float) -> float:
    # math.exp raises where expf returns inf.
    return math.inf if v > 709.0 else math.exp(v)


def fma_f32(a, b, c) -> np.ndarray:
    """fmaf(a, b, c) on float32 arrays, exactly: the product is exact in double, the sum is
    rounded to odd in double (TwoSum gives its error), then rounded once to float32."""
    a64 = np.asarray(a, F32).astype(np.float64)
    p = a64 * np.asarray(b, F32).astype(np.float64)
    c64 = np.asarray(c, F32).astype(np.float64)
    s = p + c64
    bb = s - p
    err = (p - (s - bb)) + (c64 - bb)
    even = (s.view(np.int64) & 1) == 0
    toward = np.where(err > 0, np.inf, -np.inf)
    s = np.where((err != 0) & even, np.nextafter(s, toward), s)
    return s.astype(F32)


# ---- lookup tables -------------------------------------------------------------------------


def tflite_lut(dtype, in_scale, in_zp, out_scale, out_zp, transform) -> np.ndarray:
    """TFLite LUTPopulate<int8/uint8>: q -> clamp(int(round(f(s_in * (q - zp_in)) * (1 / s_out))
    + zp_out)), all float32, round half away from zero."""
    lo, hi = dtype_range(dtype)
    deq = F32(in_scale) * (all_values(dtype) - in_zp).astype(F32)
    inverse_scale = F32(1) / F32(out_scale)
    scaled = transform(deq) * inverse_scale
    rescaled = np.sign(scaled) * np.floor(np.abs(scaled).astype(np.float64) + 0.5)
    quantized = np.clip(np.nan_to_num(rescaled.astype(np.float64) + out_zp), lo, hi)
    return quantized.astype(np.int64)


def mlas_quantize_linear(y: np.ndarray, scale, zp: int, dtype: str) -> np.ndarray:
    """MlasQuantizeLinear: clamp(y / scale, min - zp, max - zp) in float32, rounded half to
    even, plus zp (a NaN becomes min, as MAXPS does)."""
    lo, hi = dtype_range(dtype)
    q = np.asarray(y, F32) / F32(scale)
    q = np.where(np.isnan(q), F32(lo - zp), q)
    q = np.minimum(np.maximum(q, F32(lo - zp)), F32(hi - zp))
    return np.rint(q).astype(np.int64) + zp


def ort_lut(dtype, in_scale, in_zp, out_scale, out_zp, transform) -> np.ndarray:
    """ORT QlinearBuildLookupTable: q -> MlasQuantizeLinear(f(s_in * (q - zp_in)))."""
    deq = F32(in_scale) * (all_values(dtype) - in_zp).astype(F32)
    return mlas_quantize_linear(transform(deq), out_scale, out_zp, dtype)


# ---- float32 transforms --------------------------------------------------------------------


def tflite_sigmoid_f32(x: np.ndarray) -> np.ndarray:
    """1.0f / (1.0f + expf(-x))."""
    return F32(1) / (F32(1) + libm_f32(_exp_or_inf, -np.asarray(x, F32)))


def tflite_tanh_f32(x: np.ndarray) -> np.ndarray:
    """tanhf(x)."""
    return libm_f32(math.tanh, x)


_MLAS_LOGISTIC_P = tuple(
    F32(c)
    for c in (
        4.37031012579801e-11,
        1.15627324459942e-07,
        6.08574864600143e-05,
        8.51377133304701e-03,
        2.48287947061529e-01,
    )
)
_MLAS_LOGISTIC_Q = tuple(
    F32(c)
    for c in (
        6.10247389755681e-13,
        5.76102136993427e-09,
        6.29106785017040e-06,
        1.70198817374094e-03,
        1.16817656904453e-01,
        9.93151921023180e-01,
    )
)
_MLAS_TANH_P = tuple(
    F32(c)
    for c in (
        -2.76076847742355e-16,
        2.00018790482477e-13,
        -8.60467152213735e-11,
        5.12229709037114e-08,
        1.48572235717979e-05,
        6.37261928875436e-04,
        4.89352455891786e-03,
    )
)
_MLAS_TANH_Q = tuple(
    F32(c)
    for c in (
        1.19825839466702e-06,
        1.18534705686654e-04,
        2.26843463243900e-03,
        4.89352518554385e-03,
    )
)


def _horner_fma(x2: np.ndarray, coefficients) -> np.ndarray:
    acc = fma_f32(x2, coefficients[0], coefficients[1])
    for c in coefficients[2:]:
        acc = fma_f32(acc, x2, c)
    return acc


def mlas_logistic_f32(x: np.ndarray) -> np.ndarray:
    """MlasComputeLogistic (FMA kernels): v = clamp(x, -18, 18), p/q + 0.5 with Eigen's odd
    degree-9 / even degree-10 polynomials in v evaluated by fused multiply-adds, clamped to
    [0, 1]."""
    v = np.minimum(np.maximum(np.asarray(x, F32), F32(-18)), F32(18))
    v2 = v * v
    p = v * _horner_fma(v2, _MLAS_LOGISTIC_P)
    q = _horner_fma(v2, _MLAS_LOGISTIC_Q)
    return np.minimum(np.maximum(p / q + F32(0.5), F32(0)), F32(1))


def mlas_tanh_f32(x: np.ndarray) -> np.ndarray:
    """MlasComputeTanh (Eigen's rational form, FMA kernels): v = clamp(x, -9, 9), p/q with an
    odd degree-13 and an even degree-6 polynomial evaluated by fused multiply-adds."""
    v = np.minimum(np.maximum(np.asarray(x, F32), F32(-9)), F32(9))
    v2 = v * v
    return (v * _horner_fma(v2, _MLAS_TANH_P)) / _horner_fma(v2, _MLAS_TANH_Q)


def onnx_hardswish_f32(x: np.ndarray) -> np.ndarray:
    """ONNX HardSwish in float32: x * max(0, min(1, x * (1/6) + 0.5)), each op rounded."""
    x = np.asarray(x, F32)
    t = x * F32(1.0 / 6.0) + F32(0.5)
    return x * np.maximum(F32(0), np.minimum(F32(1), t))


def onnx_leaky_relu_f32(alpha: float):
    """ORT QLinearLeakyRelu's transform: v >= 0 ? v : alpha * v (float32)."""
    a = F32(alpha)
    return lambda x: np.where(x >= 0, x, a * np.asarray(x, F32)).astype(F32)


# ---- TFLite fixed-point kernels ------------------------------------------------------------


def _downscale_multiplier_to_int16(m: int) -> int:
    """DownScaleInt32ToInt16Multiplier: round a Q0.31 multiplier to Q0.15."""
    return 32767 if m >= 2**31 - 1 - 2**15 else (m + 2**15) >> 16


def tflite_hardswish_params(in_scale, out_scale) -> tuple[int, int, int, int]:
    """HardSwishPrepare: (output multiplier int16, its exponent, reluish multiplier int16,
    its exponent), from float32 scale arithmetic."""
    hires_input_scale = F32(1.0 / 128.0) * F32(in_scale)
    output_multiplier = hires_input_scale / F32(out_scale)
    reluish_multiplier = hires_input_scale / F32(3.0 / 32768.0)
    out_m, out_e = quantize_multiplier(float(output_multiplier))
    rel_m, rel_e = quantize_multiplier(float(reluish_multiplier))
    if out_e > 0:
        raise InterpreterError(
            f"TFLite's HARD_SWISH needs input_scale / 128 < output_scale, got input_scale "
            f"{float(in_scale)} and output_scale {float(out_scale)}"
        )
    return (
        _downscale_multiplier_to_int16(out_m),
        out_e,
        _downscale_multiplier_to_int16(rel_m),
        rel_e,
    )


def tflite_hardswish(q: np.ndarray, in_zp: int, out_zp: int, params) -> np.ndarray:
    """reference_ops::HardSwish on int8/uint8 values (int64 result before the final clamp)."""
    out_m, out_e, rel_m, rel_e = params
    hires = gl.wrap_int16(gl.wrap_int16(np.asarray(q, np.int64) - in_zp) * 128)
    preshift_output = gl.saturating_rounding_doubling_high_mul16(hires, out_m)
    reluish = hires
    if rel_e > 0:
        reluish = gl.saturating_left_shift16(reluish, rel_e - 1)
    reluish = gl.saturating_rounding_doubling_high_mul16(reluish, rel_m)
    if rel_e > 0:
        reluish = gl.saturating_left_shift16(reluish, 1)
    if rel_e < 0:
        reluish = gl.rounding_divide_by_pot16(reluish, -rel_e)
    reluish = (reluish + (1 << 15)) >> 1
    preshift = gl.saturating_doubling_high_mul16(reluish, preshift_output)
    return gl.wrap_int16(gl.rounding_divide_by_pot16(preshift, -out_e) + out_zp)


def tflite_leaky_relu(q, in_scale, in_zp, out_scale, out_zp, alpha) -> np.ndarray:
    """reference_ops::QuantizeLeakyRelu: v = q - zp_in; zp_out + MultiplyByQuantizedMultiplier(v,
    M) with M = s_in/s_out for v >= 0 and (s_in*alpha)/s_out otherwise (float32 ratios)."""
    identity = quantize_multiplier(float(F32(in_scale) / F32(out_scale)))
    slope = quantize_multiplier(float(F32(in_scale) * F32(alpha) / F32(out_scale)))
    v = np.asarray(q, np.int64) - in_zp
    m = np.where(v >= 0, identity[0], slope[0])
    s = np.where(v >= 0, identity[1], slope[1])
    return out_zp + multiply_by_quantized_multiplier(v, m, s)


# ---- softmax -------------------------------------------------------------------------------


def tflite_softmax_reference(x: np.ndarray, in_scale, beta, out_dtype: str) -> np.ndarray:
    """reference_ops::Softmax over the last axis of int values x (int64 result)."""
    real = min(float(F32(beta)) * float(F32(in_scale)) * 2.0**26, 2.0**31 - 1.0)
    mult, left_shift = quantize_multiplier(real)
    if not real > 1.0 or left_shift < 0:
        raise InterpreterError(
            f"TFLite's int softmax needs beta * input_scale > 2**-26, got {real / 2.0**26}"
        )
    diff_min = -math.floor(31.0 * 2.0**26 / 2.0**left_shift)
    x = np.asarray(x, np.int64)
    diff = x - x.max(axis=-1, keepdims=True)
    keep = diff >= diff_min
    scaled = multiply_by_quantized_multiplier_greater_than_one(diff, mult, left_shift)
    exps = gl.exp_on_negative_values(scaled, 5)
    total = wrap_int32(np.where(keep, gl.rescale(exps, 0, 12), 0).sum(axis=-1, keepdims=True))
    shifted_scale, bits_over_unit = gl.get_reciprocal(total, 12)
    exponent = bits_over_unit + 31 - 8 * np.dtype(out_dtype).itemsize
    if np.any(exponent > 31):
        raise InterpreterError(
            "TFLite's int softmax overflows: too many maximal elements in "
            "one row (exponent above 31)"
        )
    lo, hi = dtype_range(out_dtype)
    unsat = rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(shifted_scale, exps), exponent
    )
    return np.where(keep, np.clip(unsat + lo, lo, hi), lo)


def tflite_softmax_builtin(
    x: np.ndarray, in_scale, beta, out_scale, out_zp, out_dtype: str
) -> np.ndarray:
    """optimized_ops::Softmax (the float-table kernel of x86 and non-clang builds) over the last
    axis of int values x (int64 result)."""
    x = np.asarray(x, np.int64)
    scale = -F32(in_scale) * F32(beta)
    exps = libm_f32(_exp_or_inf, scale * (x.max(axis=-1, keepdims=True) - x).astype(F32))
    total = np.zeros(x.shape[:-1] + (1,), F32)
    for j in range(x.shape[-1]):  # float adds in the kernel's order
        total = total + exps[..., j : j + 1]
    prob = exps * (F32(1) / (total * F32(out_scale)))
    lo, hi = dtype_range(out_dtype)
    if out_dtype == "uint8":  # int(prob + 0.5f): the zero point is ignored
        q = np.floor((prob + F32(0.5)).astype(np.float64))
    else:
        q = np.sign(prob) * np.floor(np.abs(prob).astype(np.float64) + 0.5) + out_zp
    return np.clip(q, lo, hi).astype(np.int64)


def ort_softmax_table(in_scale, reduce_len: int) -> np.ndarray:
    """ORT QlinearBuildLookupTableUint32 (float): entry k = exp((k - 255 + b) * s), with
    b = max(0, log(FLT_MAX / n) - 5) / s so that a row of n entries cannot overflow."""
    s = float(F32(in_scale))
    bit_shift = math.log(float(np.finfo(F32).max / F32(reduce_len)))
    bit_shift = max(0.0, bit_shift - 5.0) / s
    entries = [_exp_or_inf((k - 255.0 + bit_shift) * s) for k in range(256)]
    with np.errstate(over="ignore"):
        return np.asarray(entries, np.float64).astype(F32)


def ort_softmax(x: np.ndarray, in_scale, out_scale, out_zp, out_dtype: str) -> np.ndarray:
    """ORT QLinearSoftmax over the last axis of int values x (int64 result)."""
    x = np.asarray(x, np.int64)
    table = ort_softmax_table(in_scale, x.shape[-1])
    vals = table[x - x.max(axis=-1, keepdims=True) + 255]
    total = np.zeros(x.shape[:-1] + (1,), F32)
    for j in range(x.shape[-1]):
        total = total + vals[..., j : j + 1]
    y_scale = F32(np.floor(F32(1) / F32(out_scale)))
    lo, hi = dtype_range(out_dtype)
    # t * y_scale overflows float32 for one-element rows (an undefined cast in ORT): saturate.
    ratio = np.clip(
        np.rint((vals * y_scale) / total).astype(np.float64), lo - 1 - out_zp, hi + 1 - out_zp
    )
    return np.clip(ratio.astype(np.int64) + out_zp, lo, hi)
