"""qnn.softmax in its three semantics against scalar transcriptions: TFLite's fixed-point
reference kernel (gemmlowp exp and 1 / (1 + x) on Python ints), TFLite's builtin float32 table
kernel and ONNX Runtime's float32 kernel, on every int8 and uint8 value.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qnn_helpers import clamp
from qnn_lut_helpers import (
    F32,
    all_inputs,
    drange,
    expf,
    qmult,
    rdbpot,
    round_away,
    run,
    srdhm,
    wrap,
)
from test_fixedpoint import c_div

# ---- gemmlowp exp and reciprocal (fixedpoint.h) ---------------------------------------------


def sat_pot(x, e, bits=32):
    if e <= 0:
        return rdbpot(x, -e, bits) if e else x
    lim = (1 << (bits - 1 - e)) - 1
    if x > lim:
        return (1 << (bits - 1)) - 1
    return -(1 << (bits - 1)) if x < -lim else x << e


def exp_quarter(a):
    x = wrap(a + (1 << 28))
    x2 = srdhm(x, x)
    x3, x4 = srdhm(x2, x), srdhm(x2, x2)
    t = sat_pot(wrap(srdhm(wrap(sat_pot(x4, -2) + x3), 715827883) + x2), -1)
    return wrap(1895147668 + srdhm(1895147668, wrap(x + t)))


def exp_neg(a, ibits):
    fbits = 31 - ibits
    quarter = 1 << (fbits - 2)
    amq = wrap((a & (quarter - 1)) - quarter)
    result = exp_quarter(sat_pot(amq, ibits))
    rem = wrap(amq - a)
    for e, m in (
        (-2, 1672461947),
        (-1, 1302514674),
        (0, 790015084),
        (1, 290630308),
        (2, 39332535),
        (3, 720401),
        (4, 242),
    ):
        if ibits > e and rem & (1 << (fbits + e)):
            result = srdhm(result, m)
    if ibits > 5 and a < -(1 << (36 - ibits)):
        result = 0  # exp(x < -32) is flushed to zero
    return 2**31 - 1 if a == 0 else result


def one_over_one_plus_x(a):
    s = a + 2**31 - 1
    half = c_div(s + (1 if s >= 0 else -1), 2)
    x = wrap(1515870810 + srdhm(half, -1010580540))
    for _ in range(3):
        x = wrap(x + sat_pot(srdhm(x, wrap((1 << 29) - srdhm(half, x))), 2))
    return sat_pot(x, 1)


# ---- softmax ------------------------------------------------------------------------------


def tfl_softmax_row(row, s_in, beta=1.0, dtype="int8"):
    real = min(float(F32(beta)) * float(F32(s_in)) * 2.0**26, 2.0**31 - 1)
    m, shift = qmult(real)
    diff_min = -math.floor(31 * 2**26 / 2**shift)
    top = max(row)
    exps = [
        exp_neg(srdhm(wrap((q - top) << shift), m), 5) if q - top >= diff_min else None for q in row
    ]
    total = wrap(sum(rdbpot(e, 12) for e in exps if e is not None))
    clz = 32 - total.bit_length()
    recip = one_over_one_plus_x(wrap(((total << clz) & 0xFFFFFFFF) - 2**31))
    exponent = 12 - clz + 31 - 8 * np.dtype(dtype).itemsize
    lo = drange(dtype)[0]
    return [lo if e is None else clamp(rdbpot(srdhm(recip, e), exponent) + lo, dtype) for e in exps]


def tfl_builtin_softmax_row(row, s_in, s_out, zp_out, beta=1.0, dtype="int8"):
    scale = -F32(s_in) * F32(beta)
    exps = [expf(scale * F32(max(row) - q)) for q in row]
    total = F32(0)
    for e in exps:
        total = total + e
    inv = F32(1) / (total * F32(s_out))
    if dtype == "uint8":
        return [clamp(math.floor(e * inv + F32(0.5)), dtype) for e in exps]
    return [clamp(round_away(e * inv) + zp_out, dtype) for e in exps]


def ort_softmax_row(row, s_in, s_out, zp_out, dtype="int8"):
    s = float(F32(s_in))
    shift = max(0.0, math.log(float(np.finfo(F32).max / F32(len(row)))) - 5.0) / s
    vals = [F32(math.exp((q - max(row) + shift) * s)) for q in row]
    total = F32(0)
    for v in vals:
        total = total + v
    y_scale = F32(math.floor(F32(1) / F32(s_out)))
    with np.errstate(over="ignore"):
        ratios = [(v * y_scale) / total for v in vals]
    return [
        drange(dtype)[1] if math.isinf(r) else clamp(int(np.rint(r)) + zp_out, dtype)
        for r in ratios
    ]


def softmax_rows(dtype, seed=0, width=16):
    """Every value of dtype, shuffled into rows of ``width``, plus a few random rows."""
    rng = np.random.default_rng(seed)
    values = all_inputs(dtype).copy()
    rng.shuffle(values)
    lo, hi = drange(dtype)
    extra = rng.integers(lo, hi + 1, (4, width)).astype(dtype)
    extra[0, :] = hi  # all maximal
    extra[1, :5] = lo  # far below the maximum
    extra[2, : width // 2] = rng.integers(hi - 6, hi + 1, width // 2)  # many near the top
    return np.concatenate([values.reshape(-1, width), extra])


SOFTMAX_SCALES = [0.05, 0.25, 1.0, 2.5, 0.0117]


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("s_in", SOFTMAX_SCALES)
def test_softmax_tflite_reference(dtype, s_in):
    data = softmax_rows(dtype)
    zp_out = drange(dtype)[0]
    got = run("qnn.softmax", data, s_in, 7, 1 / 256, zp_out)
    assert got.tolist() == [tfl_softmax_row(r.tolist(), s_in, dtype=dtype) for r in data]


@pytest.mark.parametrize("dtype, width", [("int8", 16), ("uint8", 16), ("int8", 256)])
@pytest.mark.parametrize("s_in", SOFTMAX_SCALES)
def test_softmax_tflite_builtin(dtype, width, s_in):
    data = softmax_rows(dtype, seed=1, width=width)
    zp_out = drange(dtype)[0]
    got = run("qnn.softmax", data, s_in, 0, 1 / 256, zp_out, semantics="tflite_builtin")
    want = [tfl_builtin_softmax_row(r.tolist(), s_in, 1 / 256, zp_out, dtype=dtype) for r in data]
    assert got.tolist() == want


@pytest.mark.parametrize(
    "dtype, s_out, zp_out, width",
    [
        ("int8", 1 / 256, -128, 16),
        ("int8", 1 / 255, -128, 256),
        ("uint8", 1 / 256, 0, 16),
        ("uint8", 1 / 200, 10, 256),
    ],
)
@pytest.mark.parametrize("s_in", SOFTMAX_SCALES)
def test_softmax_onnx(dtype, s_out, zp_out, width, s_in):
    data = softmax_rows(dtype, seed=2, width=width)
    got = run("qnn.softmax", data, s_in, 0, s_out, zp_out, semantics="onnx")
    assert got.tolist() == [ort_softmax_row(r.tolist(), s_in, s_out, zp_out, dtype) for r in data]


def test_softmax_beta_and_axis():
    data = softmax_rows("int8", seed=3)[:8]
    got = run("qnn.softmax", data.T.copy(), 0.05, 0, 1 / 256, -128, axis=0, beta=2.5)
    assert got.T.tolist() == [tfl_softmax_row(r.tolist(), 0.05, beta=2.5) for r in data]
    got = run("qnn.softmax", data, 0.05, 0, 1 / 256, -128, beta=0.3, semantics="tflite_builtin")
    assert got.tolist() == [
        tfl_builtin_softmax_row(r.tolist(), 0.05, 1 / 256, -128, 0.3) for r in data
    ]


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.integers(-128, 127), min_size=1, max_size=40),
    st.sampled_from(SOFTMAX_SCALES),
    st.sampled_from(["tflite", "tflite_builtin", "onnx"]),
)
def test_softmax_random_rows(row, s_in, semantics):
    data = np.array([row], np.int8)
    got = run("qnn.softmax", data, s_in, 0, 1 / 256, -128, semantics=semantics)[0].tolist()
    if semantics == "tflite":
        assert got == tfl_softmax_row(row, s_in)
    elif semantics == "tflite_builtin":
        assert got == tfl_builtin_softmax_row(row, s_in, 1 / 256, -128)
    else:
        assert got == ort_softmax_row(row, s_in, 1 / 256, -128)


def test_gemmlowp_functions_match_scalar_transcription():
    from partita.ops.emulation import gemmlowp as gl

    rng = np.random.default_rng(4)
    a = np.concatenate([-rng.integers(0, 2**31, 3000), [0, -1, -(2**31), -(2**24), -(2**26)]])
    for ibits in (5, 0, 7):
        assert gl.exp_on_negative_values(a, ibits).tolist() == [exp_neg(int(v), ibits) for v in a]
    x = np.concatenate([rng.integers(0, 2**31, 3000), [0, 1, 2**31 - 1, 2**30]])
    assert gl.one_over_one_plus_x_for_x_in_0_1(x).tolist() == [
        one_over_one_plus_x(int(v)) for v in x
    ]


@pytest.mark.parametrize("semantics", ["tflite", "tflite_builtin", "onnx"])
def test_softmax_close_to_float(semantics):
    data = softmax_rows("int8")
    got = run("qnn.softmax", data, 0.1, 0, 1 / 256, -128, semantics=semantics).astype(int)
    x = 0.1 * data.astype(float)
    p = np.exp(x - x.max(axis=1, keepdims=True))
    ideal = np.clip(np.round(p / p.sum(axis=1, keepdims=True) * 256) - 128, -128, 127)
    assert np.abs(got - ideal).max() <= 2
