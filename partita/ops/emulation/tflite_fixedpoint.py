"""TFLite's integer arithmetic, vectorised with numpy (int64 intermediates, int32 results).

These reproduce tensorflow/lite/kernels/internal/common.h, common.cc, quantization_util.cc and
gemmlowp's fixedpoint.h bit for bit: QuantizeMultiplier (and its SmallerThanOneExp form),
SaturatingRoundingDoublingHighMul, RoundingDivideByPOT and MultiplyByQuantizedMultiplier in the
"double rounding" build, which is TFLite's default (TFLITE_SINGLE_ROUNDING=0), including its
int64 overload used by the 16x8 kernels. int32 overflow wraps (two's complement), as the
kernels, which are compiled without overflow sanitising, do in practice.
"""

from __future__ import annotations

import math

import numpy as np

from partita.errors import PartitaError

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def tflite_round(x: float) -> float:
    """TfLiteRound / std::round on a double: half away from zero (exact, no x + 0.5 rounding)."""
    a = abs(x)
    fl = math.floor(a)
    r = fl + 1 if a - fl >= 0.5 else fl  # a - floor(a) is exact for doubles
    return float(math.copysign(r, x))


def quantize_multiplier(real_multiplier: float) -> tuple[int, int]:
    """QuantizeMultiplier: ``real ~= q * 2**(shift - 31)`` with |q| in [2**30, 2**31).

    0 gives (0, 0); multipliers below about 2**-31 flush to (0, 0) as in TFLite.
    """
    real_multiplier = float(real_multiplier)
    if not math.isfinite(real_multiplier):
        raise PartitaError(
            f"cannot quantize the multiplier {real_multiplier} (a zero or non-finite scale?)"
        )
    if real_multiplier == 0.0:
        return 0, 0
    q, shift = math.frexp(real_multiplier)
    q_fixed = int(tflite_round(q * (1 << 31)))
    if q_fixed == 1 << 31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q_fixed, shift


def quantize_multiplier_smaller_than_one_exp(real_multiplier: float) -> tuple[int, int]:
    """QuantizeMultiplierSmallerThanOneExp: (q, left_shift <= 0) for a multiplier in (0, 1)."""
    if not 0.0 < float(real_multiplier) < 1.0:
        raise PartitaError(f"TFLite needs a multiplier in (0, 1) here, got {real_multiplier}")
    q, shift = quantize_multiplier(real_multiplier)
    if shift > 0:
        raise PartitaError(f"multiplier {real_multiplier} rounds up to 1")
    return q, shift


def quantize_multiplier_array(real_multipliers) -> tuple[np.ndarray, np.ndarray]:
    """quantize_multiplier for every element (per-channel scales); int64 arrays of the same
    shape."""
    reals = np.asarray(real_multipliers, np.float64)
    if not np.isfinite(reals).all():
        bad = reals[~np.isfinite(reals)].ravel()[0]
        quantize_multiplier(float(bad))  # raises, naming the value
    # vectorized, step for step as above: frexp is exact, q * 2**31 is exact (a power of two),
    # and round half away from zero of it is floor(|v| + 0.5) with the sign (|v| < 2**31)
    q, shift = np.frexp(reals)
    v = q * float(1 << 31)
    q_fixed = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int64)
    carry = q_fixed == 1 << 31
    q_fixed = np.where(carry, q_fixed // 2, q_fixed)
    shift = shift.astype(np.int64) + carry
    flush = (shift < -31) | (reals == 0.0)
    return np.where(flush, 0, q_fixed), np.where(flush, 0, shift)


def wrap_int32(x) -> np.ndarray:
    """Two's-complement wrap of int64 values to the int32 range (kept as int64)."""
    x = np.asarray(x, np.int64)
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


def saturating_rounding_doubling_high_mul(a, b) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul on int32 values (int64 arrays in and out):
    (a*b + nudge) / 2**31 truncated toward zero, nudge = 2**30 or 1 - 2**30 by the sign of a*b;
    MIN*MIN saturates to MAX."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    v = ab + nudge
    high = np.where(v >= 0, v >> 31, -((-v) >> 31))  # C++ division truncates toward zero
    overflow = (a == b) & (a == INT32_MIN)
    return np.where(overflow, np.int64(INT32_MAX), high)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """gemmlowp RoundingDivideByPOT: x / 2**exponent (exponent in [0, 31]) rounded half away
    from zero."""
    x = np.asarray(x, np.int64)
    exponent = np.asarray(exponent, np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def multiply_by_quantized_multiplier(x, quantized_multiplier, shift) -> np.ndarray:
    """TFLite MultiplyByQuantizedMultiplier(int32 x, q, shift):
    RoundingDivideByPOT(SRDHM(x * 2**max(shift, 0), q), max(-shift, 0)), int32 wrap-around.

    The C++ computes ``x * (1 << left_shift)`` with a 32-bit ``1``: on x86 the shift count is
    taken modulo 32, which matters only for multipliers of 2**31 and more (an absurdly small
    output scale, such as 1e-45); partita reproduces that too."""
    shift = np.asarray(shift, np.int64)
    left = np.maximum(shift, 0) & 31
    right = np.maximum(-shift, 0)
    x = wrap_int32(np.asarray(x, np.int64) << left)
    return rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(x, quantized_multiplier), right
    )


def multiply_by_quantized_multiplier_upward(x, quantized_multiplier, shift) -> np.ndarray:
    """MultiplyByQuantizedMultiplier as TFLite's optimized kernels compute it on x86 (their NEON
    code through NEON_2_SSE, e.g. MultiplyByQuantizedMultiplier4Rows): r = max(-shift, 1),
    vqrdmulh(x * 2**(shift + r), q) then a rounding shift right by r, both roundings breaking
    ties upward: (wrap32(x * 2**(shift + r)) * q + 2**30 + 2**(30 + r)) >> (31 + r)."""
    shift = np.asarray(shift, np.int64)
    right = np.maximum(-shift, 1)
    x = wrap_int32(np.asarray(x, np.int64) << (shift + right))
    one = np.int64(1)
    acc = x * np.asarray(quantized_multiplier, np.int64) + (one << 30) + (one << (30 + right))
    return wrap_int32(acc >> (31 + right))


def scale_round_half_away_double(x, multiplier) -> np.ndarray:
    """static_cast<int32_t>(round(double(x) * multiplier)): one double product, rounded half
    away from zero (TFLite's reference int8 FULLY_CONNECTED output stage)."""
    v = np.asarray(x, np.float64) * np.asarray(multiplier, np.float64)
    a = np.minimum(np.abs(v), 2.0**40)
    fl = np.floor(a)
    r = fl + (a - fl >= 0.5)  # a - floor(a) is exact, unlike a + 0.5
    return (np.sign(v) * r).astype(np.int64)


def multiply_by_quantized_multiplier_int64(x, quantized_multiplier, shift) -> np.ndarray:
    """TFLite MultiplyByQuantizedMultiplier(int64 x, q, shift), the 16x8 kernels' form: a 16-bit
    multiplier r = (q + 2**15) >> 16 (0x7FFF if q >= 0x7FFF0000), then
    (x * r + 2**(14 - shift)) >> (15 - shift), truncated to int32. Needs shift in [-31, 7]."""
    q = np.asarray(quantized_multiplier, np.int64)
    shift = np.asarray(shift, np.int64)
    if np.any(shift > 14) or np.any(shift < -31):
        raise PartitaError(
            f"int64 MultiplyByQuantizedMultiplier needs shift in [-31, 7], got "
            f"{shift.max() if np.any(shift > 14) else shift.min()}"
        )
    reduced = np.where(q < 0x7FFF0000, (q + (1 << 15)) >> 16, np.int64(0x7FFF))
    total = 15 - shift
    # x is at most 2**47 in magnitude (TFLite asserts it), so x * reduced fits int64.
    acc = np.asarray(x, np.int64) * reduced + (np.int64(1) << (total - 1))
    return wrap_int32(acc >> total)


def multiply_by_quantized_multiplier_smaller_than_one_exp(x, quantized_multiplier, left_shift):
    """RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x, q), -left_shift)."""
    return rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(wrap_int32(x), quantized_multiplier),
        -np.asarray(left_shift, np.int64),
    )


def multiply_by_quantized_multiplier_greater_than_one(x, quantized_multiplier, left_shift):
    """SaturatingRoundingDoublingHighMul(x * 2**left_shift, q)."""
    x = wrap_int32(np.asarray(x, np.int64) << np.asarray(left_shift, np.int64))
    return saturating_rounding_doubling_high_mul(x, quantized_multiplier)


def saturate(x, dtype: str) -> np.ndarray:
    """Clamp integer values to the range of ``dtype`` and cast (the kernels' final clamp)."""
    info = np.iinfo(dtype)
    return np.clip(np.asarray(x, np.int64), info.min, info.max).astype(dtype)
