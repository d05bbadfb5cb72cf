"""gemmlowp's fixed-point transcendental functions, vectorised with numpy.

These reproduce gemmlowp/fixedpoint/fixedpoint.h (the scalar int32 and int16 specialisations)
and the helpers TFLite builds on them in kernels/internal/common.h (GetReciprocal,
CountLeadingZeros), bit for bit. Values are int64 arrays holding raw int32 (or int16) fixed-point
numbers; ``ibits`` is a format's number of integer bits (Q``ibits``.``31 - ibits``). Plain adds
wrap like the C++ code; the basic multiply and shift come from ``fixedpoint``.
"""

from __future__ import annotations

import numpy as np

from .tflite_fixedpoint import (
    INT32_MAX,
    INT32_MIN,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
    wrap_int32,
)

INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1

# exp(-2**k) in Q0.31 for k = -2..4: the barrel shifter of exp_on_negative_values.
_EXP_BARREL = (
    (-2, 1672461947),
    (-1, 1302514674),
    (0, 790015084),
    (1, 290630308),
    (2, 39332535),
    (3, 720401),
    (4, 242),
)


def _i64(x) -> np.ndarray:
    return np.asarray(x, np.int64)


def fx_mul(a, b) -> np.ndarray:
    """FixedPoint * FixedPoint: SaturatingRoundingDoublingHighMul of the raw values."""
    return saturating_rounding_doubling_high_mul(a, b)


def fx_add(a, b) -> np.ndarray:
    """FixedPoint + FixedPoint on int32: a plain, wrapping add."""
    return wrap_int32(_i64(a) + _i64(b))


def rounding_half_sum(a, b) -> np.ndarray:
    """RoundingHalfSum (int32): (a + b + sign(a + b)) / 2, the division truncating toward zero."""
    s = _i64(a) + _i64(b)
    t = s + np.where(s >= 0, 1, -1)
    return np.where(t >= 0, t // 2, -((-t) // 2))


def saturating_rounding_multiply_by_pot(x, exponent: int, bits: int = 32) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOT<exponent>: a saturating left shift for exponent > 0, a
    rounding right shift for exponent < 0, on ``bits``-bit values."""
    x = _i64(x)
    if exponent == 0:
        return x
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    threshold = (1 << (bits - 1 - exponent)) - 1
    return np.where(x > threshold, hi, np.where(x < -threshold, lo, x << exponent))


def rescale(x, src_ibits: int, dst_ibits: int) -> np.ndarray:
    """Rescale<dst>(FixedPoint<int32, src>): multiply the raw value by 2**(src - dst)."""
    return saturating_rounding_multiply_by_pot(x, src_ibits - dst_ibits)


def exp_on_interval_between_negative_one_quarter_and_0_excl(a) -> np.ndarray:
    """exp(a) for a Q0.31 value in [-1/4, 0): a Taylor expansion around -1/8."""
    constant_term = 1895147668  # exp(-1/8)
    constant_1_over_3 = 715827883
    x = fx_add(a, 1 << 28)  # a + 1/8
    x2 = fx_mul(x, x)
    x3 = fx_mul(x2, x)
    x4 = fx_mul(x2, x2)
    x4_over_4 = saturating_rounding_multiply_by_pot(x4, -2)
    poly = fx_add(fx_mul(fx_add(x4_over_4, x3), constant_1_over_3), x2)
    poly = saturating_rounding_multiply_by_pot(poly, -1)
    return fx_add(constant_term, fx_mul(constant_term, fx_add(x, poly)))


def exp_on_negative_values(a, ibits: int) -> np.ndarray:
    """exp(a) in Q0.31 for a Q``ibits`` value a <= 0 (exp(0) gives the Q0.31 maximum)."""
    a = _i64(a)
    fbits = 31 - ibits
    one_quarter = 1 << (fbits - 2)
    a_mod_quarter_minus_one_quarter = fx_add(a & (one_quarter - 1), -one_quarter)
    result = exp_on_interval_between_negative_one_quarter_and_0_excl(
        rescale(a_mod_quarter_minus_one_quarter, ibits, 0)
    )
    remainder = wrap_int32(a_mod_quarter_minus_one_quarter - a)
    for exponent, multiplier in _EXP_BARREL:
        if ibits > exponent:
            bit = (remainder >> (fbits + exponent)) & 1
            result = np.where(bit != 0, fx_mul(result, multiplier), result)
    if ibits > 5:
        result = np.where(a < -(1 << (36 - ibits)), 0, result)  # exp(x < -32) is 0
    return np.where(a == 0, INT32_MAX, result)


def one_over_one_plus_x_for_x_in_0_1(a) -> np.ndarray:
    """1 / (1 + a) in Q0.31 for a Q0.31 value a in [0, 1): three Newton-Raphson steps."""
    half_denominator = rounding_half_sum(a, INT32_MAX)
    constant_48_over_17 = 1515870810  # Q2.29
    constant_neg_32_over_17 = -1010580540  # Q2.29
    one_q2 = 1 << 29
    x = fx_add(constant_48_over_17, fx_mul(half_denominator, constant_neg_32_over_17))
    for _ in range(3):
        half_denominator_times_x = fx_mul(half_denominator, x)
        one_minus = fx_add(one_q2, -half_denominator_times_x)
        x = fx_add(x, rescale(fx_mul(x, one_minus), 4, 2))
    return rescale(x, 1, 0)  # ExactMulByPot<-1> turns Q2.29 into Q1.30


def count_leading_zeros32(x) -> np.ndarray:
    """CountLeadingZeros of the values as uint32 (32 for zero)."""
    u = _i64(x) & 0xFFFFFFFF
    bit_length = np.frexp(u.astype(np.float64))[1]  # exact: u < 2**53
    return (32 - bit_length).astype(np.int64)


def get_reciprocal(x, x_integer_digits: int) -> tuple[np.ndarray, np.ndarray]:
    """TFLite GetReciprocal: (1/x as Q0.31 of x normalised into [1, 2), num_bits_over_unit) for a
    positive Q``x_integer_digits`` value x."""
    x = _i64(x)
    headroom_plus_one = count_leading_zeros32(x)
    num_bits_over_unit = x_integer_digits - headroom_plus_one
    shifted = ((x & 0xFFFFFFFF) << headroom_plus_one) & 0xFFFFFFFF
    shifted_sum_minus_one = wrap_int32(shifted - (1 << 31))
    return one_over_one_plus_x_for_x_in_0_1(shifted_sum_minus_one), num_bits_over_unit


def wrap_int16(x) -> np.ndarray:
    """Two's-complement wrap to the int16 range (kept as int64), as a cast to int16_t does."""
    return ((_i64(x) + 2**15) & 0xFFFF) - 2**15


def _trunc_div(x, d: int) -> np.ndarray:
    """C integer division (truncates toward zero) by a positive constant."""
    x = _i64(x)
    return np.where(x >= 0, x // d, -((-x) // d))


def saturating_rounding_doubling_high_mul16(a, b) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul on int16 (ARM VQRDMULH.S16)."""
    a, b = _i64(a), _i64(b)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    out = wrap_int16(_trunc_div(ab + nudge, 1 << 15))
    return np.where((a == b) & (a == INT16_MIN), INT16_MAX, out)


def saturating_doubling_high_mul16(a, b) -> np.ndarray:
    """TFLite's SaturatingDoublingHighMul on int16: (a*b) / 2**15 truncated toward zero
    (ARM VQDMULH.S16), MIN*MIN saturating to MAX."""
    a, b = _i64(a), _i64(b)
    out = wrap_int16(_trunc_div(a * b, 1 << 15))
    return np.where((a == b) & (a == INT16_MIN), INT16_MAX, out)


def rounding_divide_by_pot16(x, exponent: int) -> np.ndarray:
    """RoundingDivideByPOT<int16_t>: as the int32 form, with the mask (2**exponent - 1)
    truncated to int16 first, which matters for exponents above 15."""
    x = _i64(x)
    mask = int(wrap_int16((1 << exponent) - 1))
    remainder = wrap_int16(x & mask)
    threshold = (mask >> 1) + (x < 0)
    return wrap_int16((x >> exponent) + (remainder > threshold))


def saturating_left_shift16(x, amount: int) -> np.ndarray:
    """TFLite's SaturatingLeftShift on int16: x * 2**amount clamped to the int16 range."""
    return np.clip(_i64(x) << amount, INT16_MIN, INT16_MAX)


__all__ = [
    "INT16_MAX",
    "INT16_MIN",
    "INT32_MAX",
    "INT32_MIN",
    "count_leading_zeros32",
    "exp_on_interval_between_negative_one_quarter_and_0_excl",
    "exp_on_negative_values",
    "fx_add",
    "fx_mul",
    "get_reciprocal",
    "one_over_one_plus_x_for_x_in_0_1",
    "rescale",
    "rounding_divide_by_pot16",
    "rounding_half_sum",
    "saturating_doubling_high_mul16",
    "saturating_left_shift16",
    "saturating_rounding_doubling_high_mul16",
    "saturating_rounding_multiply_by_pot",
    "wrap_int16",
]
