"""Helpers shared by the qnn.sigmoid / tanh / hardswish / leaky_relu / softmax tests: running an
op on a tensor, and scalar transcriptions written independently of partita's kernels.

The fixed-point arithmetic is gemmlowp's at any width (TFLite's hardswish works on int16), on
plain Python ints; the float32 helpers compute in numpy float32 scalars.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from test_fixedpoint import c_div, quantize_multiplier_ref, round_half_away

import partita as P
from partita.ir import var
from partita.ops import get_op

F32 = np.float32
ALL_INT8 = np.arange(-128, 128, dtype=np.int8)
ALL_UINT8 = np.arange(256, dtype=np.uint8)


def run(name, data, s_in, zp_in, s_out, zp_out, **attrs):
    """Interpret ``name`` on ``data`` with scalar quantization parameters."""
    x = var("x", data.shape, data.dtype.name)
    call = get_op(name)(x, float(s_in), int(zp_in), float(s_out), int(zp_out), **attrs)
    return P.interpret(call, [data])[0]


def drange(dtype):
    """(min, max) of an integer dtype."""
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def all_inputs(dtype):
    """Every value of int8 or uint8."""
    return ALL_INT8 if dtype == "int8" else ALL_UINT8


# ---- scalar integer arithmetic (TFLite common.h, gemmlowp fixedpoint.h) ---------------------


def wrap(x, bits=32):
    """Two's complement wrap-around to a ``bits``-wide integer."""
    return ((x + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))


def srdhm(a, b, bits=32):
    """SaturatingRoundingDoublingHighMul at width ``bits``."""
    if a == b == -(1 << (bits - 1)):
        return (1 << (bits - 1)) - 1
    ab = a * b
    nudge = (1 << (bits - 2)) if ab >= 0 else 1 - (1 << (bits - 2))
    return c_div(ab + nudge, 1 << (bits - 1))


def rdbpot(x, e, bits=32):
    """RoundingDivideByPOT at width ``bits``."""
    mask = wrap((1 << e) - 1, bits)
    remainder = wrap(x & mask, bits)
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return wrap((x >> e) + (1 if remainder > threshold else 0), bits)


def round_away(x):
    """std::round of a float: half away from zero, exactly."""
    return round_half_away(Fraction(float(x)))


def qmult(d):
    """QuantizeMultiplier of a float32 or float64 scale: (q, shift)."""
    return quantize_multiplier_ref(float(d))


def expf(v) -> F32:
    """std::exp in float32 (overflow gives inf)."""
    with np.errstate(over="ignore"):
        return F32(math.exp(float(v)))
