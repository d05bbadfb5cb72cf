"""emulation.tflite_fixedpoint against scalar transcriptions of the C++ formulas on Python ints.

The references below are written from tensorflow/lite/kernels/internal/common.h, common.cc,
quantization_util.cc and gemmlowp's fixedpoint.h, independently of the vectorised code: C's
truncating division and arithmetic shifts are spelled out on unbounded Python ints, and
QuantizeMultiplier is derived with exact rationals instead of frexp.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partita.errors import PartitaError
from partita.ops.emulation import tflite_fixedpoint as fp

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
int32s = st.integers(INT32_MIN, INT32_MAX)
multipliers = st.integers(0, INT32_MAX)


def wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def c_div(a: int, b: int) -> int:
    """C integer division: truncate toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def srdhm_ref(a: int, b: int) -> int:
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = 2**30 if ab >= 0 else 1 - 2**30
    return c_div(ab + nudge, 2**31)


def rdbpot_ref(x: int, exponent: int) -> int:
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def mbqm_ref(x: int, q: int, shift: int) -> int:
    """MultiplyByQuantizedMultiplier(int32_t x, ...), double-rounding build."""
    left, right = max(shift, 0), max(-shift, 0)
    return rdbpot_ref(srdhm_ref(wrap32(x * (1 << left)), q), right)


def mbqm64_ref(x: int, q: int, shift: int) -> int:
    """MultiplyByQuantizedMultiplier(int64_t x, ...)."""
    reduced = (q + (1 << 15)) >> 16 if q < 0x7FFF0000 else 0x7FFF
    total = 15 - shift
    return wrap32((x * reduced + (1 << (total - 1))) >> total)


def round_half_away(r: Fraction) -> int:
    n = abs(r)
    fl = n.numerator // n.denominator
    v = fl + 1 if n - fl >= Fraction(1, 2) else fl
    return v if r >= 0 else -v


def quantize_multiplier_ref(m: float) -> tuple[int, int]:
    """q * 2**(shift - 31) ~= m with q in [2**30, 2**31), from exact rationals."""
    if m == 0:
        return 0, 0
    r = Fraction(m)
    shift = 0
    while abs(r) >= 1:
        r /= 2
        shift += 1
    while abs(r) < Fraction(1, 2):
        r *= 2
        shift -= 1
    q = round_half_away(r * 2**31)
    if q == 2**31:
        q, shift = q // 2, shift + 1
    if shift < -31:
        return 0, 0
    return q, shift


# ---- SaturatingRoundingDoublingHighMul, RoundingDivideByPOT ------------------------------------


@settings(max_examples=150, deadline=None)
@given(int32s, int32s)
def test_srdhm_matches_reference_over_int32(a, b):
    assert int(fp.saturating_rounding_doubling_high_mul(a, b)) == srdhm_ref(a, b)


@pytest.mark.parametrize(
    "a, b, expected",
    [
        (INT32_MIN, INT32_MIN, INT32_MAX),  # the one overflow: saturates
        (INT32_MIN, INT32_MAX, -INT32_MAX),
        (INT32_MAX, INT32_MAX, INT32_MAX - 1),
        (2**30, 1, 1),  # 2**30 / 2**31 = 0.5 rounds away from zero when positive ...
        (-(2**30), 1, 0),  # ... but toward zero when negative (gemmlowp's nudge)
        (0, INT32_MIN, 0),
    ],
)
def test_srdhm_edge_cases(a, b, expected):
    assert srdhm_ref(a, b) == expected
    assert int(fp.saturating_rounding_doubling_high_mul(a, b)) == expected


def test_srdhm_vectorised_over_arrays():
    rng = np.random.default_rng(0)
    a = rng.integers(INT32_MIN, INT32_MAX, 2000, endpoint=True)
    b = rng.integers(INT32_MIN, INT32_MAX, 2000, endpoint=True)
    a[:3], b[:3] = INT32_MIN, INT32_MIN
    got = fp.saturating_rounding_doubling_high_mul(a, b)
    assert got.tolist() == [srdhm_ref(int(x), int(y)) for x, y in zip(a, b)]


@settings(max_examples=150, deadline=None)
@given(int32s, st.integers(0, 31))
def test_rounding_divide_by_pot_matches_reference(x, exponent):
    got = int(fp.rounding_divide_by_pot(x, exponent))
    assert got == rdbpot_ref(x, exponent)
    # It is x / 2**exponent rounded half away from zero.
    assert got == round_half_away(Fraction(x, 2**exponent))


# ---- MultiplyByQuantizedMultiplier -------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(int32s, multipliers, st.integers(-31, 30))
def test_mbqm_matches_reference(x, q, shift):
    assert int(fp.multiply_by_quantized_multiplier(x, q, shift)) == mbqm_ref(x, q, shift)


def test_mbqm_per_channel_arrays_and_extremes():
    rng = np.random.default_rng(1)
    x = rng.integers(INT32_MIN, INT32_MAX, (50, 4), endpoint=True)
    x[0] = [INT32_MIN, INT32_MAX, 0, -1]
    q = np.array([2**30, INT32_MAX, 1518500250, 0])
    shift = np.array([-31, 30, 0, 5])
    got = fp.multiply_by_quantized_multiplier(x, q, shift)
    want = [[mbqm_ref(int(v), int(q[c]), int(shift[c])) for c, v in enumerate(row)] for row in x]
    assert got.tolist() == want


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**47), 2**47 - 1), multipliers, st.integers(-31, 7))
def test_mbqm_int64_matches_reference(x, q, shift):
    assert int(fp.multiply_by_quantized_multiplier_int64(x, q, shift)) == mbqm64_ref(x, q, shift)


def test_mbqm_int64_rejects_shifts_tflite_does_not_support():
    with pytest.raises(PartitaError, match="shift"):
        fp.multiply_by_quantized_multiplier_int64(1, 2**30, 15)


@settings(max_examples=200, deadline=None)
@given(int32s, st.integers(2**30, INT32_MAX), st.integers(-31, 0))
def test_smaller_than_one_exp_is_srdhm_then_rounding_shift(x, q, left_shift):
    got = int(fp.multiply_by_quantized_multiplier_smaller_than_one_exp(x, q, left_shift))
    assert got == rdbpot_ref(srdhm_ref(x, q), -left_shift)
    # With shift <= 0 it agrees with the general form.
    assert got == mbqm_ref(x, q, left_shift)


@settings(max_examples=100, deadline=None)
@given(int32s, st.integers(2**30, INT32_MAX), st.integers(0, 30))
def test_greater_than_one_wraps_the_shifted_input(x, q, left_shift):
    got = int(fp.multiply_by_quantized_multiplier_greater_than_one(x, q, left_shift))
    assert got == srdhm_ref(wrap32(x << left_shift), q)


# ---- QuantizeMultiplier ------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(st.floats(min_value=2.0**-40, max_value=2.0**20, allow_nan=False))
def test_quantize_multiplier_matches_exact_reference_and_round_trips(m):
    q, shift = fp.quantize_multiplier(m)
    assert (q, shift) == quantize_multiplier_ref(m)
    if q:
        assert 2**30 <= q < 2**31
        # One rounding of a 31-bit mantissa: within half a unit of q.
        err = abs(Fraction(q) * Fraction(2) ** (shift - 31) - Fraction(m))
        assert err <= Fraction(2) ** (shift - 32)


@pytest.mark.parametrize(
    "m, expected",
    [
        (0.0, (0, 0)),
        (0.5, (2**30, 0)),
        (1.0, (2**30, 1)),
        (0.75, (3 * 2**29, 0)),
        (2.0**-31, (2**30, -30)),
        (2.0**-33, (0, 0)),  # shift would be -32: flushed to zero, as TFLite does
        (1e-300, (0, 0)),
        (1 - 2.0**-40, (2**30, 1)),  # rounds up to 2**31: halved, shift + 1
        (0.5 - 2.0**-45, (2**30, 0)),  # rounds up to 2**31 from below 0.5: shift -1 + 1
        (0.5 + 2.0**-32, (2**30 + 1, 0)),  # exactly half a unit above: rounds half away
        (0.5 + 2.0**-33, (2**30, 0)),  # a quarter unit: rounds down
        (3.0, (3 * 2**29, 2)),
    ],
)
def test_quantize_multiplier_edge_cases(m, expected):
    assert fp.quantize_multiplier(m) == expected
    assert quantize_multiplier_ref(m) == expected


def test_quantize_multiplier_refuses_non_finite():
    for bad in (float("inf"), float("nan")):
        with pytest.raises(PartitaError, match="cannot quantize"):
            fp.quantize_multiplier(bad)


def test_smaller_than_one_exp():
    assert fp.quantize_multiplier_smaller_than_one_exp(0.25) == (2**30, -1)
    for bad in (0.0, 1.0, 1.5, -0.25, 1 - 2.0**-40):
        with pytest.raises(PartitaError, match=r"\(0, 1\)|rounds up"):
            fp.quantize_multiplier_smaller_than_one_exp(bad)


def test_quantize_multiplier_array_per_channel():
    reals = np.array([[0.5, 2.0**-33], [1.0, 0.0]])
    q, shift = fp.quantize_multiplier_array(reals)
    assert q.shape == shift.shape == (2, 2)
    assert q.tolist() == [[2**30, 0], [2**30, 0]]
    assert shift.tolist() == [[0, 0], [1, 0]]


def test_tflite_round_is_exact_half_away_from_zero():
    # 0.49999999999999994 + 0.5 rounds to 1.0 in double: a naive floor(x + 0.5) gets 1.
    assert fp.tflite_round(0.49999999999999994) == 0.0
    assert [fp.tflite_round(v) for v in (2.5, -2.5, 1.4999, -0.5, 0.0)] == [3, -3, 1, -1, 0]


def test_wrap_and_saturate():
    assert fp.wrap_int32([2**31, -(2**31) - 1, 5]).tolist() == [INT32_MIN, INT32_MAX, 5]
    out = fp.saturate([-300, 300, 7], "int8")
    assert out.dtype == np.int8 and out.tolist() == [-128, 127, 7]
    assert fp.saturate([-1, 256], "uint8").tolist() == [0, 255]


def test_quantize_multiplier_array_equals_the_scalar_one():
    """The vectorized per-channel QuantizeMultiplier gives the scalar function's pairs, flushes
    and rounding carries included."""
    from partita.ops.emulation.tflite_fixedpoint import (
        quantize_multiplier,
        quantize_multiplier_array,
    )

    rng = np.random.default_rng(0)
    edge = [0.0, 1.0, 0.5, 2.0**-31, 2.0**-32, 1 - 2.0**-40, -0.3, 3.9999999999, 1e-300]
    values = np.concatenate([rng.random(20000) * 10.0 ** rng.integers(-12, 3, 20000), edge])
    qm, sh = quantize_multiplier_array(values.reshape(-1, 1))
    assert qm.shape == sh.shape == (values.size, 1)
    assert [(int(a), int(b)) for a, b in zip(qm.ravel(), sh.ravel())] == [
        quantize_multiplier(float(v)) for v in values
    ]
