"""Row kernels of float_ops.py: softmax and layer norm along one axis. Softmax: the reference's
float32 algorithm (float32_math.softmax32: math32.exp32, a float64 sum in 8 lanes then the
tail, one float32 reciprocal), the interpreter's bits; layer norm: float64 sums. Contiguous rows
(the axis is the last) go 8 at a time for the max, the sums and the scaling, with a scalar
tail; other layouts walk each line element by element. ``threads``
2 (lower/float_ops.py: large enough): the outer lines in chunks of about ROW_CHUNK elements
that the driver's thread and its worker claim one at a time (row_split, as EWISE's chunks),
each chunk a function of its own with noalias pointers; every line is computed whole by one
thread with the one-thread code, so the bits are one thread's. A kernel family (emit/base.py's
Family)."""

from __future__ import annotations

import math

from llvmlite import ir
from partita.backends.llvm.emit.base import F32, F64, I32, I64, Family, c64, for_range, via
from partita.backends.llvm.kinds import Kind, emits

from partita.ops.float32_math import LANES

from . import math32

ROW_CHUNK = 1 << 14  # elements per claimed chunk of a split row kernel (whole lines)
WIDE = 2 * LANES  # floats per step of softmax's contiguous rows (two groups of LANES)
SUM_CHAINS = 4  # layer norm's float64 sums: independent accumulators of 8 lanes (a power of 2)


def row_chunk_plan(p) -> tuple[int, int]:
    """(size, count): chunks of ``size`` outer indices (each ``n * inner`` elements), about
    ROW_CHUNK elements each, at least two; the last may be shorter."""
    outer, line = int(p["outer"]), int(p["n"]) * int(p["inner"])
    size = min(max(1, ROW_CHUNK // max(1, line)), -(-outer // 2))
    return size, -(-outer // size)


def span(b, lo, hi, name):
    """``for (o = lo; o < hi; o++)``: yields o (i64)."""
    return _Span(b, lo, hi, name)


class _Span:
    def __init__(self, b, lo, hi, name):
        self.b, self.lo, self.inner = b, lo, for_range(b, b.sub(hi, lo), name)

    def __enter__(self):
        return self.b.add(self.lo, self.inner.__enter__())

    def __exit__(self, *exc):
        return self.inner.__exit__(*exc)


def fconst(v) -> ir.Constant:
    return ir.Constant(F64, float(v))


class RowKernels(Family):
    # what it uses of the other kernel families (through the emit context)
    intrinsic = via("floats")
    operand = via("floats")
    split_chunks = via("pool")

    def row_split(self, k, b, pointers, emit) -> None:
        """``emit(builder, pointers, lo, hi)`` writes the lines of outer indices [lo, hi) from
        ``pointers`` (the kernel's arguments, then its constants). One thread: all of them
        here. ``threads`` 2: chunks (row_chunk_plan) claimed by this thread and the worker,
        each running ``{name}_range`` (runtime/threads.py split_chunks)."""
        p = k.params
        if p.get("threads", 1) < 2 or p["outer"] < 2:
            emit(b, pointers, c64(0), c64(p["outer"]))
            return
        size, _ = row_chunk_plan(p)
        self.split_chunks(k, b, pointers, p["outer"], size, emit)

    def rows(self, b, p, body, lo=None, hi=None):
        """For each (outer, inner) line along the normalized axis (outer in [lo, hi), all by
        default): ``body(at)``, where ``at(j)`` is the flat index of element j of the line."""
        n, inner = p["n"], p["inner"]
        lo, hi = lo if lo is not None else c64(0), hi if hi is not None else c64(p["outer"])
        with span(b, lo, hi, "o") as o, for_range(b, inner, "in") as i:
            base = b.add(b.mul(o, c64(n * inner)), i)
            body(lambda j: b.add(base, b.mul(j, c64(inner))))

    def reduce(self, b, cell, n, term, start=0.0, op="add"):
        """A double accumulated in ``cell`` (an alloca of the entry block) over j < n
        (``term(j)``): the sum, or the maximum."""
        b.store(fconst(start), cell)
        with for_range(b, n, "j") as j:
            v, old = term(j), b.load(cell, typ=F64)
            if op == "add":
                new = b.fadd(old, v)
            else:
                new = b.select(b.fcmp_unordered(">", v, old), v, old)
            b.store(new, cell)
        return b.load(cell, typ=F64)

    # -- row kernels: contiguous rows (inner == 1) in chunks of 8 doubles, then a scalar tail --
    def chunks(self, b, n, body, width=8):
        """``body(j, w)`` for j = 0, w, 2w... (w = width) then for the tail one at a time."""
        if n // width:
            with for_range(b, n // width, "c") as c:
                body(b.mul(c, c64(width)), width)
        if n % width:
            with for_range(b, n % width, "t") as t:
                body(b.add(t, c64(n // width * width)), 1)

    def load_f64(self, b, ptr, index, w):
        if w == 1:
            return b.fpext(self.load_at(b, ptr, index, F32), F64)
        vec = b.load(b.gep(ptr, [index], source_etype=F32), typ=ir.VectorType(F32, w), align=4)
        return b.fpext(vec, ir.VectorType(F64, w))

    def store_f32(self, b, value, ptr, index, w):
        ty = F32 if w == 1 else ir.VectorType(F32, w)
        b.store(b.fptrunc(value, ty), b.gep(ptr, [index], source_etype=F32), align=4)

    def row_sum(self, b, cells, n, term):
        """The float64 sum of term(j, w) over a row: SUM_CHAINS accumulators of 8 lanes taking
        groups of 8 in turn (independent chains: an add's latency is not paid per group), the
        groups left over into the first, the accumulators added in pairs, their lanes in lane
        order, then the tail (the reference's numpy sum adds in its own order: a last-ulp
        difference at most)."""
        vcells, scell = cells
        v8 = ir.VectorType(F64, 8)
        step = 8 * len(vcells)
        for vcell in vcells:
            b.store(ir.Constant(v8, [0.0] * 8), vcell)
        b.store(fconst(0), scell)

        def add(j, w):
            if w == 1:
                b.store(b.fadd(b.load(scell, typ=F64), term(j, 1)), scell)
                return
            for c in range(w // 8):
                vcell = vcells[c]
                b.store(b.fadd(b.load(vcell, typ=v8), term(b.add(j, c64(8 * c)), 8)), vcell)

        self.chunks(b, n // step * step, add, step)
        at = n // step * step
        self.chunks(b, n - at, lambda j, w: add(b.add(j, c64(at)), w))
        chains = [b.load(vcell, typ=v8) for vcell in vcells]
        while len(chains) > 1:
            chains = [b.fadd(chains[c], chains[c + 1]) for c in range(0, len(chains), 2)]
        vec = chains[0]
        total = b.load(scell, typ=F64)
        for lane in range(8):
            total = b.fadd(total, b.extract_element(vec, ir.Constant(I32, lane)))
        return total

    @emits(Kind.FSOFTMAX)
    def k_fsoftmax(self, k):
        fn, b, (x, y) = self.function(k, 1)
        self.row_split(k, b, [x, y], lambda eb, ps, lo, hi: self.softmax_lines(k, eb, *ps, lo, hi))
        b.ret_void()
        return fn

    def softmax_lines(self, k, b, x, y, lo, hi) -> None:
        """The softmax of the lines of outer indices [lo, hi): float32_math.softmax32's steps
        (math32.exp32 per element, its float64 sum in LANES lanes then the tail, y = e *
        float32(1 / sum)), so the bits are the interpreter's."""
        p = k.params
        cell = b.alloca(F64)
        vcell = b.alloca(ir.VectorType(F64, LANES))
        if p["inner"] == 1:
            self.softmax_rows(k, b, x, y, cell, vcell, lo, hi)
            return
        n = p["n"]
        full = n // LANES * LANES

        def line(at):
            def get(j):
                return b.fpext(self.load_at(b, x, at(j), F32), F64)

            top = b.fptrunc(self.reduce(b, cell, n, get, -math.inf, "max"), F32)

            def exp_kept(j):  # float32 e, kept in the output
                e = math32.exp32(b, b.fsub(self.load_at(b, x, at(j), F32), top))
                self.store_at(b, e, y, at(j), F32)
                return b.fpext(e, F64)

            b.store(ir.Constant(ir.VectorType(F64, LANES), [0.0] * LANES), vcell)
            if full:
                with for_range(b, full // LANES, "c") as c:
                    vec = ir.Constant(ir.VectorType(F64, LANES), ir.Undefined)
                    for lane in range(LANES):
                        j = b.add(b.mul(c, c64(LANES)), c64(lane))
                        vec = b.insert_element(vec, exp_kept(j), ir.Constant(I32, lane))
                    b.store(b.fadd(b.load(vcell, typ=vec.type), vec), vcell)
            b.store(fconst(0), cell)
            if n > full:
                with for_range(b, n - full, "t") as t:
                    e = exp_kept(b.add(t, c64(full)))
                    b.store(b.fadd(b.load(cell, typ=F64), e), cell)
            inv = self.reciprocal(b, cell, vcell)
            with for_range(b, n, "j") as j:
                e = self.load_at(b, y, at(j), F32)
                self.store_at(b, b.fmul(e, inv), y, at(j), F32)

        self.rows(b, p, line, lo, hi)

    def reciprocal(self, b, cell, vcell):
        """float32(1 / (tail + lane 0 + ... + lane 7)): the tail sum in ``cell``, the lanes'
        in ``vcell``."""
        total, vec = b.load(cell, typ=F64), b.load(vcell, typ=ir.VectorType(F64, LANES))
        for lane in range(LANES):
            total = b.fadd(total, b.extract_element(vec, ir.Constant(I32, lane)))
        return b.fptrunc(b.fdiv(fconst(1.0), total), F32)

    def softmax_rows(self, k, b, x, y, cell, vcell, lo, hi) -> None:
        """Contiguous rows [lo, hi): the max (float32, WIDE lanes: any order gives the same
        maximum, and a row with a NaN is all NaN whatever the maximum), exp32 WIDE floats at a
        time with each half of LANES added to the float64 lane sums in element order (the
        reference's groups of LANES, in order), and the scaling, each with a shorter tail."""
        n = k.params["n"]
        v64 = ir.VectorType(F64, LANES)
        vtop = b.alloca(ir.VectorType(F32, WIDE))
        ttop = b.alloca(F32)
        with span(b, lo, hi, "o") as o:
            base = b.mul(o, c64(n))
            top = self.row_max(b, x, base, n, vtop, ttop)
            b.store(fconst(0), cell)
            b.store(ir.Constant(v64, [0.0] * LANES), vcell)

            def exp_of(j, w):
                at = b.add(base, j)
                x32 = self.load_f32(b, x, at, w)
                e = math32.exp32(b, b.fsub(x32, top if w == 1 else self.splat(b, top, w)))
                self.put_f32(b, e, y, at)
                if w == 1:
                    b.store(b.fadd(b.load(cell, typ=F64), b.fpext(e, F64)), cell)
                    return
                acc = b.load(vcell, typ=v64)
                for half in range(w // LANES):  # groups of LANES in element order
                    acc = b.fadd(acc, b.fpext(self.lanes(b, e, half * LANES, LANES), v64))
                b.store(acc, vcell)

            self.wide_chunks(b, n, exp_of)
            inv = self.reciprocal(b, cell, vcell)

            def scale(j, w):
                at = b.add(base, j)
                den = inv if w == 1 else self.splat(b, inv, w)
                self.put_f32(b, b.fmul(self.load_f32(b, y, at, w), den), y, at)

            self.wide_chunks(b, n, scale)

    def wide_chunks(self, b, n, body):
        """``body(j, w)``: WIDE floats at a time, then one group of LANES if it fits, then the
        tail one at a time (element order)."""
        self.chunks(b, n // WIDE * WIDE, body, WIDE)
        at = n // WIDE * WIDE
        if n - at >= LANES:
            body(c64(at), LANES)
            at += LANES
        if n > at:
            with for_range(b, n - at, "t") as t:
                body(b.add(t, c64(at)), 1)

    def lanes(self, b, vec, start, count):
        """Lanes [start, start + count) of ``vec``."""
        return b.shuffle_vector(vec, ir.Constant(vec.type, ir.Undefined), ir.Constant(
            ir.VectorType(I32, count), list(range(start, start + count))))

    def row_max(self, b, x, base, n, vtop, ttop):
        """The float32 maximum of the row at ``base`` (n elements): WIDE lanes, folded in halves,
        then the tail."""
        def bigger(v, old):
            return b.select(b.fcmp_ordered(">", v, old), v, old)

        vec = None
        if n >= WIDE:
            b.store(ir.Constant(vtop.type.pointee, [-math.inf] * WIDE), vtop)
            self.chunks(b, n // WIDE * WIDE, lambda j, w: b.store(bigger(
                self.load_f32(b, x, b.add(base, j), w), b.load(vtop, typ=vtop.type.pointee)),
                vtop), WIDE)
            vec = b.load(vtop, typ=vtop.type.pointee)
        at = n // WIDE * WIDE
        if n - at >= LANES:
            part = self.load_f32(b, x, b.add(base, c64(at)), LANES)
            vec = part if vec is None else bigger(part, bigger(self.lanes(b, vec, 0, LANES),
                                                               self.lanes(b, vec, LANES, LANES)))
            at += LANES
        top = ir.Constant(F32, -math.inf)
        if vec is not None:
            while vec.type.count > 1:
                half = vec.type.count // 2
                vec = bigger(self.lanes(b, vec, 0, half), self.lanes(b, vec, half, half))
            top = b.extract_element(vec, ir.Constant(I32, 0))
        if n > at:
            b.store(top, ttop)
            with for_range(b, n - at, "t") as t:
                v = self.load_at(b, x, b.add(base, b.add(t, c64(at))), F32)
                b.store(bigger(v, b.load(ttop, typ=F32)), ttop)
            top = b.load(ttop, typ=F32)
        return top

    def load_f32(self, b, ptr, index, w):
        if w == 1:
            return self.load_at(b, ptr, index, F32)
        return b.load(b.gep(ptr, [index], source_etype=F32), typ=ir.VectorType(F32, w), align=4)

    def put_f32(self, b, value, ptr, index):
        """A float or a vector of floats stored at ``index``."""
        b.store(value, b.gep(ptr, [index], source_etype=F32), align=4)

    def splat(self, b, value, w):
        ty = ir.VectorType(value.type, w)
        vec = b.insert_element(ir.Constant(ty, ir.Undefined), value, ir.Constant(I32, 0))
        return b.shuffle_vector(vec, ir.Constant(ty, ir.Undefined),
                                ir.Constant(ir.VectorType(I32, w), [0] * w))

    def splat_d(self, b, value, w):
        ty = ir.VectorType(F64, w)
        vec = b.insert_element(ir.Constant(ty, ir.Undefined), value, ir.Constant(I32, 0))
        return b.shuffle_vector(vec, ir.Constant(ty, ir.Undefined),
                                ir.Constant(ir.VectorType(I32, w), [0] * w))

    @emits(Kind.QSOFTMAXF)
    def k_qsoftmaxf(self, k):
        """TFLite's optimized 8-bit softmax (qtransformer._qsoftmax_builtin) along each line: t =
        exps[max - q], S = the float32 sum in order, p = t * (1 / (S * s_out)) in float32;
        int8 rounds p half away from zero and adds the zero point, uint8 truncates p + 0.5.
        A line is a noinline function: LLVM 22.1's loop vectorizer, folding the tail of a short
        loop over lines into masked byte stores, wrote the masked-off lanes too."""
        p = k.params
        fn, b, (x, y) = self.function(k, 1)
        one = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [x.type] * 3 + [I64]),
                          name=f"{k.name}_line")
        one.linkage = "internal"
        one.attributes.add("noinline")
        self.softmax_line(k, one)
        exps = self.cargs["exps"]
        self.rows(b, p, lambda at: b.call(one, [x, y, exps, at(c64(0))]))
        b.ret_void()
        return fn

    def softmax_line(self, k, fn):
        p = k.params
        x, y, exps, base = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        n, inner, dtype = p["n"], p["inner"], p["dtype"]
        lo, hi = (-128, 127) if dtype == "int8" else (0, 255)
        top, total = b.alloca(I64), b.alloca(F32)
        i8 = ir.IntType(8)

        def at(j):
            return b.add(base, b.mul(j, c64(inner)))

        def q(j):
            return self.signed(b, self.load_at(b, x, at(j), i8), dtype)

        def exp_of(j):
            d = b.sub(b.load(top, typ=I64), q(j))
            return b.fptrunc(self.load_at(b, exps, d, F64), F32)

        b.store(c64(-1 << 20), top)
        with for_range(b, n, "j") as j:
            v, old = q(j), b.load(top, typ=I64)
            b.store(b.select(b.icmp_signed(">", v, old), v, old), top)
        b.store(ir.Constant(F32, 0.0), total)
        with for_range(b, n, "j") as j:
            b.store(b.fadd(b.load(total, typ=F32), exp_of(j)), total)
        den = b.fmul(b.load(total, typ=F32), ir.Constant(F32, p["out_scale"]))
        inv = b.fdiv(ir.Constant(F32, 1.0), den)
        floor, fabs = self.intrinsic("llvm.floor", F64), self.intrinsic("llvm.fabs", F64)
        with for_range(b, n, "j") as j:
            prob = b.fmul(exp_of(j), inv)
            if dtype == "uint8":  # int(p + 0.5f)
                v = b.call(floor, [b.fpext(b.fadd(prob, ir.Constant(F32, 0.5)), F64)])
            else:  # sign(p) * floor(|p| + 0.5) + zp
                mag = b.call(floor, [b.fadd(b.call(fabs, [b.fpext(prob, F64)]), fconst(0.5))])
                neg = b.fcmp_ordered("<", prob, ir.Constant(F32, 0.0))
                v = b.fadd(b.select(neg, b.fneg(mag), mag), fconst(p["out_zp"]))
            v = b.select(b.fcmp_ordered("<", v, fconst(lo)), fconst(lo), v)
            v = b.select(b.fcmp_ordered(">", v, fconst(hi)), fconst(hi), v)
            self.store_at(b, b.trunc(b.fptosi(v, I64), i8), y, at(j), i8)
        b.ret_void()

    @emits(Kind.FLAYERNORM)
    def k_flayernorm(self, k):
        p = k.params
        n_in = sum(1 for s in p["sources"] if s[0] == "buf")
        fn, b, args = self.function(k, n_in)
        names = list(self.cargs)
        pointers = [*args, *(self.cargs[name] for name in names)]

        def emit(eb, ps, lo, hi):
            ins, y, consts = ps[:n_in], ps[n_in], dict(zip(names, ps[n_in + 1 :]))
            x, gamma, beta = (consts[w] if kind == "const" else ins[w]
                              for kind, w in p["sources"][:3])
            self.layernorm_lines(k, eb, x, gamma, beta, y, lo, hi)

        self.row_split(k, b, pointers, emit)
        b.ret_void()
        return fn

    def layernorm_lines(self, k, b, x, gamma, beta, y, lo, hi) -> None:
        """The layer norm of the lines of outer indices [lo, hi)."""
        p = k.params
        n = p["n"]
        sqrt = self.intrinsic("llvm.sqrt", F64)
        cell = b.alloca(F64)
        cells = ([b.alloca(ir.VectorType(F64, 8)) for _ in range(SUM_CHAINS)], b.alloca(F64))
        rows = p["inner"] == 1

        def line(at, base=None):
            def get(j, w=1):
                return self.load_f64(b, x, b.add(base, j) if rows else at(j), w)

            if rows:
                mean = b.fdiv(self.row_sum(b, cells, n, get), fconst(n))
            else:
                mean = b.fdiv(self.reduce(b, cell, n, get), fconst(n))

            def sq(j, w=1):
                d = b.fsub(get(j, w), mean if w == 1 else self.splat_d(b, mean, w))
                return b.fmul(d, d)

            total = self.row_sum(b, cells, n, sq) if rows else self.reduce(b, cell, n, sq)
            den = b.call(sqrt, [b.fadd(b.fdiv(total, fconst(n)), fconst(p["eps"]))])
            # one division a line: (x - mean) * (1 / den) in float64 is within an ulp of float64
            # of the quotient, so the float32 result is the quotient's but for rare ties
            inv = b.fdiv(fconst(1.0), den)

            def out(j, w=1):
                splat = (lambda v: v) if w == 1 else (lambda v: self.splat_d(b, v, w))
                v = b.fmul(b.fsub(get(j, w), splat(mean)), splat(inv))
                if p["scale"]:
                    v = b.fmul(v, self.load_f64(b, gamma, j, w))
                if p["center"]:
                    v = b.fadd(v, self.load_f64(b, beta, j, w))
                self.store_f32(b, v, y, b.add(base, j) if rows else at(j), w)

            if rows:
                self.chunks(b, n, out)
            else:
                with for_range(b, n, "j") as j:
                    out(j)

        if rows:
            with span(b, lo, hi, "o") as o:
                line(None, b.mul(o, c64(n)))
        else:
            self.rows(b, p, line, lo, hi)


__all__ = ["RowKernels"]
