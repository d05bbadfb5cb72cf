"""TFLite's integer arithmetic, vectorised with numpy (int64 intermediates, int32 results).

These reproduce tensorflow/lite/kernels/internal/common.h and gemmlowp's fixedpoint.h bit for
bit: QuantizeMultiplier, SaturatingRoundingDoublingHighMul, RoundingDivideByPOT and
MultiplyByQuantizedMultiplier (the "double rounding" build, TFLite's default).
"""

from __future__ import annotations

import math

import numpy as np

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def tflite_round(x: float) -> float:
    """TfLiteRound / std::round: half away from zero."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def quantize_multiplier(real_multiplier: float) -> tuple[int, int]:
    """QuantizeMultiplier: ``real == q * 2**(shift - 31)`` with q in [2**30, 2**31)."""
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


def quantize_multiplier_array(real_multipliers) -> tuple[np.ndarray, np.ndarray]:
    """quantize_multiplier for every element (per-channel scales)."""
    pairs = [quantize_multiplier(float(m)) for m in np.asarray(real_multipliers, np.float64).ravel()]
    qm = np.array([p[0] for p in pairs], np.int64).reshape(np.shape(real_multipliers))
    sh = np.array([p[1] for p in pairs], np.int64).reshape(np.shape(real_multipliers))
    return qm, sh


def wrap_int32(x) -> np.ndarray:
    """Two's-complement wrap of int64 values to the int32 range (kept as int64)."""
    x = np.asarray(x, np.int64)
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


def saturating_rounding_doubling_high_mul(a, b) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul on int32 values (int64 arrays in and out)."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    v = ab + nudge
    high = np.where(v >= 0, v >> 31, -((-v) >> 31))  # C++ division truncates toward zero
    overflow = (a == b) & (a == INT32_MIN)
    return np.where(overflow, np.int64(INT32_MAX), high)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """gemmlowp RoundingDivideByPOT: x / 2**exponent rounded half away from zero."""
    x = np.asarray(x, np.int64)
    exponent = np.asarray(exponent, np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def multiply_by_quantized_multiplier(x, quantized_multiplier, shift) -> np.ndarray:
    """TFLite MultiplyByQuantizedMultiplier: round(x * q * 2**(shift - 31)), int32 semantics."""
    shift = np.asarray(shift, np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    x = wrap_int32(np.asarray(x, np.int64) << left)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x, quantized_multiplier),
                                  right)


def multiply_by_quantized_multiplier_smaller_than_one_exp(x, quantized_multiplier, left_shift):
    """RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x, q), -left_shift)."""
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x, quantized_multiplier),
                                  -np.asarray(left_shift, np.int64))


def multiply_by_quantized_multiplier_greater_than_one(x, quantized_multiplier, left_shift):
    """SaturatingRoundingDoublingHighMul(x * 2**left_shift, q)."""
    x = wrap_int32(np.asarray(x, np.int64) << np.asarray(left_shift, np.int64))
    return saturating_rounding_doubling_high_mul(x, quantized_multiplier)
