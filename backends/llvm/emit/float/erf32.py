"""The error function of an EWISE whose result is rounded to float32, without libm's ``erf``
on almost every element, and with libm's bits on every element.

The reference computes C's ``erf`` in float64 and rounds it to float32. Here a piecewise
polynomial (intervals of ``WIDTH`` over [0, 6), Chebyshev fits to the C library's own erf at
build time, degree ``DEGREE``) gives e within ``BOUND`` of libm's value; when e - BOUND and e
+ BOUND round to the same float32, libm's value (between them) rounds to it too (rounding is
monotone), so e is returned. Otherwise (about one element in 10^6: near a float32 rounding
midpoint, |erf| below ~1e-6, NaN) libm's ``erf`` is called. |x| >= 6: +-1, as libm returns.
BERT's GELU spends most of its time in ``erf`` (one call per FFN activation)."""

from __future__ import annotations

import functools
import math

import numpy as np
from llvmlite import ir
from partita.backends.llvm.emit.base import F32, F64, I64, c64

WIDTH = 0.25
DEGREE = 10
TOP = 6.0  # erf(6) = 1 - 2e-17: libm returns +-1.0 from here
BOUND = 1e-14  # the fits' largest difference from libm on a dense grid: 1.6e-15


@functools.cache
def coefficients() -> np.ndarray:
    """[interval][DEGREE + 1] monomial coefficients in u = |x| - the interval's centre, lowest
    power first."""
    erf = np.vectorize(math.erf)
    rows = []
    for i in range(int(round(TOP / WIDTH))):
        centre, half = (i + 0.5) * WIDTH, WIDTH / 2
        nodes = centre + half * np.cos(np.pi * (np.arange(200) + 0.5) / 200)
        cheb = np.polynomial.chebyshev.chebfit((nodes - centre) / half, erf(nodes), DEGREE)
        mono = np.polynomial.chebyshev.cheb2poly(cheb) / half ** np.arange(DEGREE + 1)
        rows.append(mono)
    return np.array(rows, np.float64)


def evaluate(a: np.ndarray) -> np.ndarray:
    """The polynomial for |x| = a < TOP in numpy, in the IR's order (tests check BOUND)."""
    table = coefficients()
    i = np.minimum((a * (1 / WIDTH)).astype(np.int64), len(table) - 1)
    u = a - (i + 0.5) * WIDTH
    return estrin([table[i, j] for j in range(DEGREE + 1)], u, np.multiply, np.add)


def estrin(cs: list, u, mul, add):
    """sum cs[j] u^j in Estrin's order (pairs c + c' u, then pairs of those with u^2, ...):
    a dependency chain of about log2(len(cs)) steps instead of Horner's len(cs)."""
    power = u
    while len(cs) > 1:
        cs = [add(cs[j], mul(power, cs[j + 1])) if j + 1 < len(cs) else cs[j]
              for j in range(0, len(cs), 2)]
        power = mul(power, power)
    return cs[0]


def coefficient_table(module: ir.Module) -> ir.GlobalVariable:
    """The intervals' coefficients as one internal constant array of the module (made once)."""
    name = "erf32_table"
    g = module.globals.get(name)
    if g is None:
        table = coefficients()
        ty = ir.ArrayType(F64, table.size)
        g = ir.GlobalVariable(module, ty, name)
        g.linkage = "internal"
        g.global_constant = True
        g.initializer = ir.Constant(ty, [ir.Constant(F64, float(v)) for v in table.ravel()])
    return g


ROW = -(-(DEGREE + 1) // 4) * 4  # coefficient_rows' stride: whole groups of 4 doubles


def coefficient_rows(module: ir.Module) -> ir.GlobalVariable:
    """The same coefficients, each interval's row padded with zeros to ROW doubles (vector
    loads of 4 stay inside the table; ewise_vec.coefficient_vectors)."""
    name = "erf32_rows"
    g = module.globals.get(name)
    if g is None:
        table = coefficients()
        padded = np.zeros((table.shape[0], ROW), np.float64)
        padded[:, : table.shape[1]] = table
        ty = ir.ArrayType(F64, padded.size)
        g = ir.GlobalVariable(module, ty, name)
        g.linkage = "internal"
        g.global_constant = True
        g.align = 32
        g.initializer = ir.Constant(ty, [ir.Constant(F64, float(v)) for v in padded.ravel()])
    return g


def emit_erf32(fam, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """erf(x) (double) whose float32 rounding is that of libm's erf(x)."""
    g = coefficient_table(fam.module)
    fabs = fam.module.declare_intrinsic("llvm.fabs", [F64])
    a = b.call(fabs, [x])
    top = ir.Constant(F64, TOP)
    inside = b.fcmp_ordered("<", a, top)
    safe = b.select(inside, a, ir.Constant(F64, 0.0))  # NaN and |x| >= 6: interval 0
    i = b.fptosi(b.fmul(safe, ir.Constant(F64, 1 / WIDTH)), I64)
    u = b.fsub(safe, b.fmul(b.fadd(b.sitofp(i, F64), ir.Constant(F64, 0.5)),
                            ir.Constant(F64, WIDTH)))
    base = b.mul(i, c64(DEGREE + 1))
    cs = [fam.load_at(b, g, b.add(base, c64(j)), F64) for j in range(DEGREE + 1)]
    acc = estrin(cs, u, b.fmul, b.fadd)
    one = ir.Constant(F64, 1.0)
    mag = b.select(inside, acc, one)
    e = b.select(b.fcmp_ordered("<", x, ir.Constant(F64, 0.0)), b.fneg(mag), mag)
    bound = ir.Constant(F64, BOUND)
    lo, hi = b.fptrunc(b.fsub(e, bound), F32), b.fptrunc(b.fadd(e, bound), F32)
    sure = b.or_(b.and_(inside, b.fcmp_ordered("==", lo, hi)),
                 b.fcmp_ordered(">=", a, top))  # +-1 exactly (libm's value there)
    start = b.block
    with b.if_then(b.not_(sure)):
        exact = b.call(fam.libm("erf"), [x])
        slow = b.block
    out = b.phi(F64)
    out.add_incoming(e, start)
    out.add_incoming(exact, slow)
    return out


__all__ = ["BOUND", "ROW", "coefficient_rows", "coefficients", "emit_erf32", "estrin", "evaluate"]
