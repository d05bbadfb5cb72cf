"""EWISE's innermost axis in vectors of ``LANES`` float32 elements (generic vector IR: 8 lanes
of double, two ymm on avx2, SSE pairs on -isa=plain), for trees of float32 arithmetic and erf
(BERT's GELU as torch exports it). Each step is computed in double and rounded to float32 as
the scalar kernel does, so the bits are the scalar kernel's. erf: erf32's polynomial and its
straddle test per lane; a chunk with a flagged lane (about one in 10^5 chunks: NaN, tiny |x|,
e +- BOUND straddling a float32 rounding boundary) takes libm's erf on its lanes and keeps it
on the flagged ones (the fix-up). The remainder of the axis runs the scalar body."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import F32, F64, I64, c64, for_range

from . import erf32

LANES = 8
VF32, VF64, VI64 = (ir.VectorType(t, LANES) for t in (F32, F64, I64))
VI32 = ir.VectorType(ir.IntType(32), LANES)
OPS = {"add", "subtract", "multiply", "divide", "negative", "copy", "erf"}


def splat(v: float) -> ir.Constant:
    return ir.Constant(VF64, [float(v)] * LANES)


def eligible(p: dict, out_dtype: str, restrict) -> bool:
    """Float32 leaves and steps of OPS only, innermost axis of stride 0 or 1 for every operand,
    at least LANES long and not the thread split's axis."""
    shape = p["out_shape"]
    if not shape or shape[-1] < LANES or out_dtype != "float32":
        return False
    if restrict is not None and restrict[0] == len(shape) - 1:
        return False
    if any(d != "float32" for d in p["dtypes"]):
        return False
    if any(s[-1] not in (0, 1) for s in p["strides"]):
        return False

    def ok(node) -> bool:
        if node[0] == "leaf":
            return True
        _, op, kids, _extra, dtype = node
        return op in OPS and dtype == "float32" and all(ok(c) for c in kids)

    return ok(p["tree"])


def vector_erf(fam, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """erf32.emit_erf32 on LANES lanes of double."""
    fabs = fam.module.declare_intrinsic("llvm.fabs.v8f64", (), ir.FunctionType(VF64, [VF64]))
    a = b.call(fabs, [x])
    top = splat(erf32.TOP)
    inside = b.fcmp_ordered("<", a, top)
    safe = b.select(inside, a, splat(0.0))  # NaN and |x| >= 6: interval 0
    # the interval in i32 lanes (0 .. 23): AVX2 converts doubles to i32 in vectors
    # (vcvttpd2dq) but to i64 one lane at a time
    i = b.fptosi(b.fmul(safe, splat(1 / erf32.WIDTH)), VI32)
    u = b.fsub(safe, b.fmul(b.fadd(b.sitofp(i, VF64), splat(0.5)), splat(erf32.WIDTH)))
    cs = coefficient_vectors(fam, b, i)
    acc = erf32.estrin(cs, u, b.fmul, b.fadd)
    mag = b.select(inside, acc, splat(1.0))
    e = b.select(b.fcmp_ordered("<", x, splat(0.0)), b.fneg(mag), mag)
    bound = splat(erf32.BOUND)
    lo, hi = b.fptrunc(b.fsub(e, bound), VF32), b.fptrunc(b.fadd(e, bound), VF32)
    sure = b.or_(b.and_(inside, b.fcmp_ordered("==", lo, hi)), b.fcmp_ordered(">=", a, top))
    bits = b.bitcast(sure, ir.IntType(LANES))
    start = b.block
    with b.if_then(b.icmp_unsigned("!=", bits, ir.Constant(ir.IntType(LANES), -1)),
                   likely=False):
        exact = ir.Constant(VF64, ir.Undefined)
        for lane in range(LANES):
            idx = ir.Constant(ir.IntType(32), lane)
            v = b.call(fam.libm("erf"), [b.extract_element(x, idx)])
            exact = b.insert_element(exact, v, idx)
        fixed = b.select(sure, e, exact)
        slow = b.block
    out = b.phi(VF64)
    out.add_incoming(e, start)
    out.add_incoming(fixed, slow)
    return out


def coefficient_vectors(fam, b: ir.IRBuilder, i: ir.Value) -> list:
    """The DEGREE + 1 coefficient vectors of the lanes' intervals ``i``: each lane's row of
    the padded table (erf32.coefficient_rows: 4-double groups) read as vectors of 4 and
    transposed 4 lanes at a time (unpack, then 128-bit halves), instead of 88 scalar loads and
    element inserts per 8 lanes (GELU of 128 x 3072: 3.0 -> 2.3-2.6 ms CPU, with VI32 below)."""
    g = erf32.coefficient_rows(fam.module)
    v4 = ir.VectorType(F64, 4)
    stride = erf32.ROW
    rows = []  # rows[lane][q]: coefficients 4q .. 4q + 3 of the lane's interval
    for lane in range(LANES):
        lane_i = b.sext(b.extract_element(i, ir.Constant(ir.IntType(32), lane)), I64)
        at = b.mul(lane_i, c64(stride))
        rows.append([b.load(b.gep(g, [b.add(at, c64(4 * q))], source_etype=F64), typ=v4,
                            align=8) for q in range(stride // 4)])

    def mask(*ix):
        return ir.Constant(ir.VectorType(ir.IntType(32), len(ix)), list(ix))

    halves = []  # per group of 4 lanes: coefficient j's 4 lanes
    for g0 in (0, 4):
        cols = []
        for q in range(stride // 4):
            r = [rows[g0 + n][q] for n in range(4)]
            t0 = b.shuffle_vector(r[0], r[1], mask(0, 4, 2, 6))
            t1 = b.shuffle_vector(r[0], r[1], mask(1, 5, 3, 7))
            t2 = b.shuffle_vector(r[2], r[3], mask(0, 4, 2, 6))
            t3 = b.shuffle_vector(r[2], r[3], mask(1, 5, 3, 7))
            cols += [b.shuffle_vector(t0, t2, mask(0, 1, 4, 5)),
                     b.shuffle_vector(t1, t3, mask(0, 1, 4, 5)),
                     b.shuffle_vector(t0, t2, mask(2, 3, 6, 7)),
                     b.shuffle_vector(t1, t3, mask(2, 3, 6, 7))]
        halves.append(cols)
    return [b.shuffle_vector(halves[0][j], halves[1][j], mask(*range(LANES)))
            for j in range(erf32.DEGREE + 1)]


def ewise_rows(fam, k, b, ptrs, y, scalar_body, restrict) -> None:
    """The EWISE loops: outer axes as ``fam.nest`` runs them, the innermost in vectors of
    LANES then ``scalar_body(index, offsets)`` on the remainder."""
    p = k.params
    shape, strides = p["out_shape"], p["strides"]
    n = shape[-1]
    full = n // LANES * LANES

    def row(index, offsets):
        row0 = b.mul(index, c64(n))
        with for_range(b, full // LANES, "v") as t:
            j0 = b.mul(t, c64(LANES))
            loaded: dict = {}

            def value(node):
                if node[0] == "leaf":
                    j = node[1]
                    if j not in loaded:
                        if strides[j][-1] == 1:
                            at = b.gep(ptrs[j], [b.add(offsets[j], j0)], source_etype=F32)
                            v = b.fpext(b.load(b.bitcast(at, VF32.as_pointer()), typ=VF32,
                                               align=4), VF64)
                        else:
                            s = b.fpext(fam.load_at(b, ptrs[j], offsets[j], F32), F64)
                            v = b.shuffle_vector(
                                b.insert_element(ir.Constant(VF64, ir.Undefined), s,
                                                 ir.Constant(ir.IntType(32), 0)),
                                ir.Constant(VF64, ir.Undefined),
                                ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0] * LANES))
                        loaded[j] = v
                    return loaded[j]
                _, op, kids, _extra, _dtype = node
                xs = [value(c) for c in kids]
                if op == "erf":
                    r = vector_erf(fam, b, xs[0])
                elif op == "negative":
                    r = b.fneg(xs[0])
                elif op == "copy":
                    r = xs[0]
                else:
                    r = {"add": b.fadd, "subtract": b.fsub, "multiply": b.fmul,
                         "divide": b.fdiv}[op](xs[0], xs[1])
                return b.fpext(b.fptrunc(r, VF32), VF64)

            out = b.fptrunc(value(p["tree"]), VF32)
            at = b.gep(y, [b.add(row0, j0)], source_etype=F32)
            b.store(out, b.bitcast(at, VF32.as_pointer()), align=4)
        if full < n:
            with for_range(b, n - full, "t") as r:
                j = b.add(r, c64(full))
                scalar_body(b.add(row0, j), [b.add(o, b.mul(j, c64(s[-1])))
                                             for o, s in zip(offsets, strides)])

    bases = [c64(v) for v in p.get("bases", [0] * len(strides))]
    outer = [s[:-1] for s in strides]
    fam.nest(b, shape[:-1], outer, row, offsets=bases, restrict=restrict)


__all__ = ["LANES", "eligible", "ewise_rows", "vector_erf"]
