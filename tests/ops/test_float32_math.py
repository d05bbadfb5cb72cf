"""partita/ops/float32_math.py, the float32 exp / erf / GELU / softmax of the interpreter:
accuracy against float64 math over the whole float32 range (hypothesis on raw bit patterns and a
dense sweep), stated error bounds, special values, and the softmax's fixed summation order."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from partita.ops import float32_math as m

F32 = np.float32


def _ulps(got, ref):
    """|got - ref| in units of the float32 spacing at ref (ref float64)."""
    spacing = np.spacing(np.abs(ref).astype(F32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - ref) / spacing


def _exp_ulps(x):
    x = x[(x > -87.3) & (x < 88.7)]  # normal, finite results
    return _ulps(m.exp32(x), np.exp(x.astype(np.float64)))


def _erf_ulps(x):
    return _ulps(m.erf32(x), np.array([math.erf(float(v)) for v in x]))


FLOATS = st.integers(0, 2**32 - 1).map(lambda b: np.array([b], np.uint32).view(F32)[0])


@settings(max_examples=300, deadline=None)
@given(st.lists(FLOATS, min_size=1, max_size=64))
def test_exp_and_erf_within_their_bounds_on_any_float32(values):
    x = np.array(values, F32)
    finite = x[np.isfinite(x)]
    assert (_exp_ulps(finite) <= m.EXP_ULPS).all()
    assert (_erf_ulps(finite) <= m.ERF_ULPS).all()
    small = finite[np.abs(finite) < 8]  # where erf is not +-1
    assert (_erf_ulps(small) <= m.ERF_ULPS).all()


def test_dense_sweeps_stay_within_the_bounds():
    """Every 4099th float32 bit pattern (over a million values), and a fine grid where the
    polynomials change."""
    bits = np.arange(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32).view(F32)
    x = bits[np.isfinite(bits)]
    assert _exp_ulps(x).max() <= m.EXP_ULPS
    grid = np.concatenate([np.linspace(-4.5, 4.5, 300_001), x[np.abs(x) < 5]]).astype(F32)
    worst = _erf_ulps(grid).max()
    assert 1.0 < worst <= m.ERF_ULPS  # the bound is tight: not a test that cannot fail


def test_special_values():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1000, 1000, 89.0, -104.0], F32)
    e = m.exp32(x)
    assert np.isnan(e[0]) and e[1] == np.inf and e[2] == 0 and e[3] == 1 and e[4] == 1
    assert e[5] == 0 and e[6] == np.inf and e[7] == np.inf and e[8] == 0
    # gradual underflow: exp(-100) is subnormal, within one subnormal step
    assert abs(float(m.exp32(np.array([-100.0], F32))[0]) - math.exp(-100)) <= 2**-149
    r = m.erf32(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, 3.92, -10.0], F32))
    assert np.isnan(r[0]) and r[1] == 1 and r[2] == -1 and r[3] == 0
    assert np.signbit(r[4]) and r[4] == 0 and r[5] > 0 and r[6] == 1 and r[7] == -1
    g = m.gelu32(np.array([np.nan, np.inf, 0.0, -0.0, 1.0, -12.0], F32))
    assert np.isnan(g[0]) and g[1] == np.inf and g[2] == 0 and np.signbit(g[3])
    assert abs(float(g[4]) - 0.5 * (1 + math.erf(1 / math.sqrt(2)))) < 1e-7 and g[5] == 0


def test_gelu_and_softmax_close_to_float64():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((64, 300)) * 3).astype(F32)
    x64 = x.astype(np.float64)
    ref = 0.5 * x64 * (1 + np.vectorize(math.erf)(x64 / math.sqrt(2)))
    np.testing.assert_allclose(m.gelu32(x), ref, rtol=1e-6, atol=1e-7)
    for axis in (0, 1):  # x - max rounded to float32 (|x - max| < 32 here: 1e-6 relative)
        e = np.exp(x64 - x64.max(axis=axis, keepdims=True))
        np.testing.assert_allclose(m.softmax32(x, axis), e / e.sum(axis=axis, keepdims=True),
                                   rtol=2e-6, atol=1e-30)


def test_softmax_sums_in_lanes_then_the_tail():
    """The order is part of the definition: 8 lanes over whole groups, then the tail; a
    sequential sum of the same float32 exps differs in some rows (so the order is observable)."""
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((400, 21)) * 6).astype(F32)
    e = m.exp32(x - x.max(axis=1, keepdims=True)).astype(np.float64)
    lanes = e[:, :8] + e[:, 8:16]
    total = e[:, 16] + e[:, 17] + e[:, 18] + e[:, 19] + e[:, 20]
    for j in range(8):
        total = total + lanes[:, j]
    want = e.astype(F32) * (1.0 / total).astype(F32)[:, None]
    got = m.softmax32(x, 1)
    assert got.tobytes() == want.tobytes()
    seq = np.zeros(400)
    for j in range(21):
        seq = seq + e[:, j]
    assert (seq != total).any()
