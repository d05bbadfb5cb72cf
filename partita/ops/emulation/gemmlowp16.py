"""gemmlowp's fixed-point logistic and tanh on int16 (FixedPoint<std::int16_t, N>), vectorised.

TFLite's integer LSTM (lstm_eval's 8x8->16 path) applies these to its int16 gates: the sigmoid
of a Q3.12 gate (tensor_utils ApplySigmoid) and the tanh of a Q3.12 gate or of the cell state
(ApplyTanh with 15 + cell_scale integer bits), both giving Q0.15. The int16 specialisation
differs from the int32 one in gemmlowp.py: raw values wrap to int16 on plain adds, multiplies are
the 16-bit SaturatingRoundingDoublingHighMul, the 32-bit constants are rounding-shifted right by
16 (RescaleConstantInitializer), and the last add of the exp polynomial saturates
(AddSaturatingIf16Bit). Every function takes and returns int64 arrays of raw int16 values;
``table(...)`` gives all 65536 results as an int16 lookup table indexed by ``raw + 32768``.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .gemmlowp import (
    INT16_MAX,
    INT16_MIN,
    rounding_divide_by_pot16,
    saturating_rounding_doubling_high_mul16,
    wrap_int16,
)
from .tflite_fixedpoint import rounding_divide_by_pot

_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))  # fmt: skip


def _const(raw32: int) -> int:
    """RescaleConstantInitializer<int16>: a Q-format int32 constant rounded to 16 bits."""
    return int(wrap_int16(rounding_divide_by_pot(np.int64(raw32), 16)))


def _add(a, b):
    return wrap_int16(np.asarray(a, np.int64) + b)


def _sub(a, b):
    return wrap_int16(np.asarray(a, np.int64) - b)


def _neg(a):
    return wrap_int16(-np.asarray(a, np.int64))


_mul = saturating_rounding_doubling_high_mul16


def _srmpot(x, exponent: int):
    """SaturatingRoundingMultiplyByPOT<exponent> on int16."""
    x = np.asarray(x, np.int64)
    if exponent == 0:
        return x
    if exponent < 0:
        return rounding_divide_by_pot16(x, -exponent)
    threshold = (1 << (15 - exponent)) - 1
    return np.where(x > threshold, INT16_MAX, np.where(x < -threshold, INT16_MIN, x << exponent))


def _one(ibits: int) -> int:
    return INT16_MAX if ibits == 0 else 1 << (15 - ibits)


def _rounding_half_sum(a, b):
    s = np.asarray(a, np.int64) + b
    t = s + np.where(s >= 0, 1, -1)
    return wrap_int16(np.where(t >= 0, t // 2, -((-t) // 2)))


def _exp_quarter(a):
    """exp(a) for a Q0.15 value in [-1/4, 0)."""
    constant_term, one_third = _const(1895147668), _const(715827883)
    x = _add(a, 1 << 12)  # a + 1/8
    x2 = _mul(x, x)
    x3 = _mul(x2, x)
    x4 = _mul(x2, x2)
    poly = _srmpot(_add(_mul(_add(_srmpot(x4, -2), x3), one_third), x2), -1)
    t = _mul(constant_term, _add(x, poly))
    return np.clip(np.int64(constant_term) + t, INT16_MIN, INT16_MAX)  # AddSaturatingIf16Bit


def exp_on_negative_values(a, ibits: int):
    """exp(a) in Q0.15 for a Q``ibits`` int16 value a <= 0."""
    a = np.asarray(a, np.int64)
    fbits = 15 - ibits
    quarter = 1 << (fbits - 2)
    a_mod = _sub(a & (quarter - 1), quarter)
    result = _exp_quarter(_srmpot(a_mod, ibits))
    remainder = _sub(a_mod, a)
    for exponent, multiplier in _EXP_BARREL:
        if ibits > exponent:
            bit = (remainder >> (fbits + exponent)) & 1
            result = np.where(bit != 0, _mul(result, _const(multiplier)), result)
    if ibits > 5:
        clamp = _const(-(1 << (36 - ibits)))
        result = np.where(a < clamp, 0, result)
    return np.where(a == 0, _one(0), result)


def _newton(half_denominator):
    """The three Newton-Raphson steps of 1 / (1 + x), in Q2.13."""
    c48, cm32, one2 = _const(1515870810), _const(-1010580540), _one(2)
    x = _add(c48, _mul(half_denominator, cm32))
    for _ in range(3):
        one_minus = _sub(one2, _mul(half_denominator, x))
        x = _add(x, _srmpot(_mul(x, one_minus), 2))
    return x


def logistic(a, ibits: int):
    """gemmlowp::logistic of a Q``ibits`` int16 value, in Q0.15."""
    a = np.asarray(a, np.int64)
    positive = a > 0
    abs_input = np.where(positive, a, _neg(a))
    e = exp_on_negative_values(_neg(abs_input), ibits)
    if_positive = _srmpot(_newton(_rounding_half_sum(e, _one(0))), 1)  # Rescale<0>(x / 2)
    if_negative = _sub(_one(0), if_positive)
    return np.where(a == 0, _const(1 << 30), np.where(positive, if_positive, if_negative))


def tanh(a, ibits: int):
    """gemmlowp::tanh of a Q``ibits`` int16 value, in Q0.15."""
    a = np.asarray(a, np.int64)
    negative = a < 0
    n = np.where(negative, a, _neg(a))
    e = exp_on_negative_values(n, ibits + 1)  # ExactMulByPot<1>
    t = _srmpot(_sub(_newton(_rounding_half_sum(e, _one(0))), _one(2)), 2)
    return np.where(a == 0, 0, np.where(negative, _neg(t), t))


@cache
def table(fn: str, ibits: int) -> np.ndarray:
    """All 65536 results of ``fn`` ("logistic" or "tanh") on Q``ibits``, int16, indexed by
    raw + 32768."""
    x = np.arange(INT16_MIN, INT16_MAX + 1, dtype=np.int64)
    out = {"logistic": logistic, "tanh": tanh}[fn](x, ibits)
    out = np.asarray(out, np.int64).astype(np.int16)
    out.setflags(write=False)
    return out


__all__ = ["exp_on_negative_values", "logistic", "table", "tanh"]
