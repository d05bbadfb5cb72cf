"""Helpers shared by the qnn op tests: integer ranges, saturation, random data, interpreting an
op on constants, and exact float32 rounding for scalar oracles.

The scalar TFLite fixed-point references (SRDHM, RoundingDivideByPOT, MultiplyByQuantizedMultiplier,
QuantizeMultiplier) live in test_fixedpoint.py, where they are checked themselves.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

import partita as P
from partita.ir import Tuple, const
from partita.ops import get_op

F32 = np.float32
RANGE = {
    "int8": (-128, 127),
    "uint8": (0, 255),
    "int16": (-32768, 32767),
    "int32": (-(2**31), 2**31 - 1),
}


def clamp(v: int, dtype: str) -> int:
    """Saturate ``v`` to the range of ``dtype``."""
    lo, hi = RANGE[dtype]
    return min(max(v, lo), hi)


def rand(rng, dtype, shape):
    """Uniform values over the whole range of ``dtype``."""
    lo, hi = RANGE[dtype]
    return rng.integers(lo, hi, shape, endpoint=True).astype(dtype)


def call(name, *args, **attrs):
    """Interpret ``name`` applied to constants (a tuple argument becomes a Tuple node)."""
    args = [
        Tuple([const(np.asarray(a)) for a in x]) if isinstance(x, tuple) else const(np.asarray(x))
        for x in args
    ]
    return P.interpret(get_op(name)(*args, **attrs))[0]


def f32_round(r: Fraction) -> F32:
    """The float32 nearest to the exact rational r, ties to even."""
    c = F32(float(r))
    near = [np.nextafter(c, F32(-np.inf)), c, np.nextafter(c, F32(np.inf))]
    return min(near, key=lambda n: (abs(Fraction(float(n)) - r), int(n.view(np.int32)) & 1))


def fma_ref(x, y, z) -> F32:
    """float32 fused multiply-add: x * y + z rounded once."""
    return f32_round(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)))
