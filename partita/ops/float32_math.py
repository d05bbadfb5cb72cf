"""exp and erf of float32 as explicit float32 algorithms: the reference semantics of
``nn.softmax``'s exp, ``erf`` and ``nn.gelu`` (approximate "none") on float32 data.

Every step below is one IEEE float32 operation (numpy float32 arrays: +, -, *, comparisons,
selects, integer shifts of int32), in a fixed order with fixed float32 constants, and no fused
multiply-add. So a compiled kernel that performs the same operations in the same order
(backends/llvm/emit/float/math32.py) gives the same bits on every CPU, in vector or scalar code,
and the interpreter's float32 results no longer depend on the C library.

exp32(x): Cody-Waite range reduction, x = n ln2 + r with |r| <= ln2 / 2, n = rint(x / ln2)
(rint by adding and subtracting 1.5 * 2^23), ln2 split in two constants (LN2_HI has 9
significant bits, so n * LN2_HI is exact); exp(r) = 1 + r + r^2 P(r), P of degree 4 (a
least-squares fit on Chebyshev nodes, coefficients rounded to float32); the result scaled by
2^n as two exact powers of two 2^(n >> 1) * 2^(n - (n >> 1)), so that overflow gives inf and
results below 2^-126 underflow gradually (to subnormals, then 0), by the multiplies'
rounding. x is clamped to [-110, 89] first (exp(-110) rounds to 0, exp(89) to inf). NaN gives
x itself. Max error (tests/ops/test_float32_math.py against float64 math.exp over the whole
float32 range): EXP_ULPS ulp for normal results.

erf32(x): |x| < 1: x + x P(x^2) (P of degree 5, fit to erf(x)/x - 1); 1 <= |x| < ERF_TOP: +-(1 -
Q(|x| - ERF_CENTRE)) (Q of degree 14, fit to erfc: only its absolute error counts there, as
1 - erfc rounds to a float32 of spacing 2^-24 or 2^-25, so no exp is needed); |x| >= ERF_TOP
(erf rounds to +-1 there): +-1. NaN gives the input NaN itself, -0.0 gives -0.0. Max error
against float64 math.erf: ERF_ULPS ulp. All fits: least squares on Chebyshev nodes,
coefficients rounded to float32.

gelu32(x) = (x * 0.5) * (1 + erf32(x * (1 / sqrt 2))), in that order (ONNX Runtime's Gelu
formula).
"""

from __future__ import annotations

import numpy as np

F32 = np.float32

EXP_LO, EXP_HI = -110.0, 89.0  # the clamp: exp rounds to 0 below, to inf above
LOG2E = 1.4426950408889634  # rounded to float32 where used
ROUNDER = 12582912.0  # 1.5 * 2^23: t + ROUNDER - ROUNDER is t rounded to an integer (|t| < 2^22)
LN2_HI = 0.693359375  # 355 / 512: n * LN2_HI is exact for |n| < 2^15
LN2_LO = -2.12194440e-4  # ln 2 - LN2_HI, rounded to float32
EXP_POLY = (0.5, 0.16666576266288757, 0.04166646674275398, 0.008363175205886364,
            0.0013933646259829402)  # P(r), lowest power first
EXP_ULPS = 1.5

ERF_SPLIT = 1.0
ERF_TOP = 3.92  # erfc(3.92) < 2^-26: erf rounds to 1 from here
ERF_SMALL = (0.12837915122509003, -0.37612414360046387, 0.11280789226293564,
             -0.026726989075541496, 0.004934518598020077, -0.0005696712760254741)
ERF_CENTRE = 2.46
ERF_LARGE = (0.0005033535999245942, -0.0026562369894236326, 0.006534520536661148,
             -0.009832456707954407, 0.009914183989167213, -0.006799545604735613,
             0.002937170909717679, -0.00045933123328723013, -0.0003558973257895559,
             0.00029961674590595067, -7.582805119454861e-05, -2.4706278054509312e-05,
             1.7332071365672164e-05, -9.4817231399702e-08, -1.0944362429654575e-06)
ERF_ULPS = 2.5
SQRT1_2 = 0.7071067811865476  # rounded to float32 where used


def estrin(cs, v: np.ndarray) -> np.ndarray:
    """sum cs[j] v^j (lowest power first) in Estrin's order: pairs c + v c', then pairs of
    those with v^2, then v^4...: a dependency chain of about 2 log2(len(cs)) operations instead
    of Horner's 2 len(cs), so a core overlaps more of its vector lanes' work (each product and
    sum rounded, no fused multiply-add)."""
    terms = [np.full_like(v, F32(c)) for c in cs]
    power = v
    while len(terms) > 1:
        terms = [terms[j] + power * terms[j + 1] if j + 1 < len(terms) else terms[j]
                 for j in range(0, len(terms), 2)]
        if len(terms) > 1:
            power = power * power
    return terms[0]


def exp32(x: np.ndarray) -> np.ndarray:
    """e^x of float32 ``x`` (any shape) by the algorithm in the module docstring."""
    x = np.asarray(x, F32)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        c = np.where(x > F32(EXP_HI), F32(EXP_HI), x)
        c = np.where(c >= F32(EXP_LO), c, F32(EXP_LO))  # NaN too (restored at the end)
        t = c * F32(LOG2E)
        n = (t + F32(ROUNDER)) - F32(ROUNDER)
        r = c - n * F32(LN2_HI)
        r = r - n * F32(LN2_LO)
        p = estrin(EXP_POLY, r)
        p = p * (r * r)
        p = p + r
        p = p + F32(1.0)
        k = n.astype(np.int32)
        k1 = k >> 1
        k2 = k - k1
        s1 = ((k1 + 127) << 23).astype(np.int32).view(F32)
        s2 = ((k2 + 127) << 23).astype(np.int32).view(F32)
        y = (p * s1) * s2
        return np.where(np.isnan(x), x, y)


def erf32(x: np.ndarray) -> np.ndarray:
    """erf(x) of float32 ``x`` by the algorithm in the module docstring."""
    x = np.asarray(x, F32)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        a = np.abs(x)
        z = a * a
        small = x + x * estrin(ERF_SMALL, z)
        big = F32(1.0) - estrin(ERF_LARGE, a - F32(ERF_CENTRE))
        big = np.where(a >= F32(ERF_TOP), F32(1.0), big)
        big = np.where(x < F32(0.0), -big, big)
        y = np.where(a >= F32(ERF_SPLIT), big, small)
        return np.where(np.isnan(x), x, y)  # NaN: the input itself (its sign and payload)


def gelu32(x: np.ndarray) -> np.ndarray:
    """(x * 0.5) * (1 + erf32(x * (1 / sqrt 2))) of float32 ``x``."""
    x = np.asarray(x, F32)
    with np.errstate(over="ignore", invalid="ignore"):
        return (x * F32(0.5)) * (F32(1.0) + erf32(x * F32(SQRT1_2)))


LANES = 8  # the sum's lanes (the compiled kernel's vector width)


def softmax32(x: np.ndarray, axis: int) -> np.ndarray:
    """Softmax of float32 ``x`` along ``axis``: m = max, e = exp32(x - m) (float32 subtract),
    s = the float64 sum of e in a fixed order (element j of each full group of LANES added to
    lane j % LANES, groups in order; the remaining elements added in order to a tail sum that
    starts at 0; then s = tail + lane 0 + ... + lane 7), inv = float32(1 / s), y = e * inv
    (float32)."""
    x = np.moveaxis(np.asarray(x, F32), axis, -1)
    with np.errstate(invalid="ignore"):
        e = exp32(x - x.max(axis=-1, keepdims=True))
    n = e.shape[-1]
    full = n // LANES * LANES
    e64 = e.astype(np.float64)
    lanes = np.zeros(e.shape[:-1] + (LANES,), np.float64)
    if full:  # cumsum adds in order: lane j's running sum over the groups
        groups = e64[..., :full].reshape(e.shape[:-1] + (full // LANES, LANES))
        lanes = np.cumsum(groups, axis=-2)[..., -1, :]
    total = np.zeros(e.shape[:-1], np.float64)
    for j in range(full, n):
        total = total + e64[..., j]
    for j in range(LANES):
        total = total + lanes[..., j]
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = (1.0 / total).astype(F32)
    y = e * inv[..., None]
    return np.moveaxis(y, -1, axis)


__all__ = ["erf32", "estrin", "exp32", "gelu32", "softmax32"]
