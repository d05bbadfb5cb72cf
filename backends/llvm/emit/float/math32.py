"""exp and erf of float32 in IR: partita/ops/float32_math.py's algorithms, operation for
operation (same constants, same order, plain fmul / fadd without fast-math or contract flags, so
LLVM fuses nothing), on a float or on a vector of floats. The reference interpreter computes
the same float32 steps in numpy, so the bits agree on every CPU and ISA.

These replace float64 libm calls (softmax's exp per element, GELU's erf): on AVX2 one ymm of 8
floats per step instead of two of doubles, and no table gathers or C calls."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import I32

from partita.ops import float32_math as m


def _int_type(ty):
    return ir.VectorType(I32, ty.count) if isinstance(ty, ir.VectorType) else I32


def const(ty, v: float) -> ir.Constant:
    """The float32 ``v`` (rounded to float32 first) as a scalar or a splat of ``ty``."""
    c = float(m.F32(v))
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [c] * ty.count)
    return ir.Constant(ty, c)


def iconst(ty, v: int) -> ir.Constant:
    it = _int_type(ty)
    return ir.Constant(it, [v] * it.count) if isinstance(it, ir.VectorType) else ir.Constant(it, v)


def estrin(b: ir.IRBuilder, cs, v: ir.Value) -> ir.Value:
    """float32_math.estrin: pairs c + v c', then with v^2, v^4, ..."""
    terms = [const(v.type, c) for c in cs]
    power = v
    while len(terms) > 1:
        terms = [b.fadd(terms[j], b.fmul(power, terms[j + 1])) if j + 1 < len(terms)
                 else terms[j] for j in range(0, len(terms), 2)]
        if len(terms) > 1:
            power = b.fmul(power, power)
    return terms[0]


def exp32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """float32_math.exp32 of ``x`` (float or vector of float)."""
    ty, it = x.type, _int_type(x.type)
    c = b.select(b.fcmp_ordered(">", x, const(ty, m.EXP_HI)), const(ty, m.EXP_HI), x)
    c = b.select(b.fcmp_ordered(">=", c, const(ty, m.EXP_LO)), c, const(ty, m.EXP_LO))
    t = b.fmul(c, const(ty, m.LOG2E))
    n = b.fsub(b.fadd(t, const(ty, m.ROUNDER)), const(ty, m.ROUNDER))
    r = b.fsub(c, b.fmul(n, const(ty, m.LN2_HI)))
    r = b.fsub(r, b.fmul(n, const(ty, m.LN2_LO)))
    p = estrin(b, m.EXP_POLY, r)
    p = b.fmul(p, b.fmul(r, r))
    p = b.fadd(p, r)
    p = b.fadd(p, const(ty, 1.0))
    k = b.fptosi(n, it)
    k1 = b.ashr(k, iconst(ty, 1))
    k2 = b.sub(k, k1)
    s1 = b.bitcast(b.shl(b.add(k1, iconst(ty, 127)), iconst(ty, 23)), ty)
    s2 = b.bitcast(b.shl(b.add(k2, iconst(ty, 127)), iconst(ty, 23)), ty)
    y = b.fmul(b.fmul(p, s1), s2)
    return b.select(b.fcmp_unordered("uno", x, x), x, y)


def erf32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """float32_math.erf32 of ``x`` (float or vector of float)."""
    ty, it = x.type, _int_type(x.type)
    a = b.bitcast(b.and_(b.bitcast(x, it), iconst(ty, 0x7FFFFFFF)), ty)  # numpy's abs
    z = b.fmul(a, a)
    small = b.fadd(x, b.fmul(x, estrin(b, m.ERF_SMALL, z)))
    big = b.fsub(const(ty, 1.0), estrin(b, m.ERF_LARGE, b.fsub(a, const(ty, m.ERF_CENTRE))))
    big = b.select(b.fcmp_ordered(">=", a, const(ty, m.ERF_TOP)), const(ty, 1.0), big)
    big = b.select(b.fcmp_ordered("<", x, const(ty, 0.0)), b.fneg(big), big)
    y = b.select(b.fcmp_ordered(">=", a, const(ty, m.ERF_SPLIT)), big, small)
    # NaN: the input itself, as the reference gives (arithmetic on NaNs would leave the sign to
    # LLVM's operand order, which it may commute)
    return b.select(b.fcmp_unordered("uno", x, x), x, y)


def gelu32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """float32_math.gelu32: (x * 0.5) * (1 + erf32(x * (1 / sqrt 2)))."""
    ty = x.type
    e = erf32(b, b.fmul(x, const(ty, m.SQRT1_2)))
    return b.fmul(b.fmul(x, const(ty, 0.5)), b.fadd(const(ty, 1.0), e))


__all__ = ["const", "erf32", "estrin", "exp32", "gelu32"]
