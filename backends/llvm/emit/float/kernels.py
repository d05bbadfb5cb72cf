"""The IR of float_ops.py's kernels: loops over (broadcast) buffers, arithmetic in double for
floats (the reference's float64 sums; one float32 op computed in double and rounded once is the
correctly rounded float32 result), i64 for integers, i1 for bools. libm's ``erf`` and ``tanh``
are called by name (the process's C library resolves them when the object code is loaded)."""

from __future__ import annotations

import math

from llvmlite import ir
from partita.backends.llvm.emit.base import (
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    Family,
    c64,
    claimed_chunks,
    for_range,
    via,
)
from partita.backends.llvm.kinds import Kind, emits

from . import ewise_vec, math32

# float16 is loaded to double and stored rounded to half (EWISE computes on it so); other ops
# on float16 run as float32 kernels between EWISE casts (half.py)
STORE = {"float32": F32, "float64": F64, "int8": I8, "uint8": I8, "int16": I16, "int32": I32,
         "int64": I64, "bool": I8, "float16": ir.HalfType()}  # fmt: skip
KIND = {"float32": "f", "float64": "f", "int8": "i", "uint8": "i", "int16": "i", "int32": "i",
        "int64": "i", "bool": "b", "float16": "f"}  # fmt: skip
_FCMP = {"equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=", "greater": ">",
         "greater_equal": ">="}  # fmt: skip


EWISE_CHUNK = 1 << 14  # elements per chunk of a split EWISE (GELU: about 0.1 ms on one core)


def split_axis(shape) -> int | None:
    """EWISE's thread split axis: the first longer than 1."""
    return next((i for i, d in enumerate(shape) if d > 1), None)


def ewise_chunk_plan(shape) -> tuple[int, int]:
    """(size, count): chunks of ``size`` indices of the split axis, about EWISE_CHUNK elements
    each, at least two."""
    axis = split_axis(shape)
    inner = math.prod(int(d) for d in shape[axis + 1 :])
    n = int(shape[axis])
    size = min(max(1, EWISE_CHUNK // max(1, inner)), -(-n // 2))
    return size, -(-n // size)


def fconst(v) -> ir.Constant:
    return ir.Constant(F64, float(v))


class FloatKernels(Family):
    # what it uses of the other kernel families (through the emit context)
    int_clip = via("ints")
    int_divide = via("ints")
    k_fbmm_dot = via("bmm")
    k_fbmm_vec = via("bmm")
    k_fdense_vec = via("gemm")
    chunk_counter = via("fchunks")
    k_isum = via("data")
    part_function = via("gemm")
    requantize_value = via("ints")
    split_run = via("pool")

    # -- typed loads and stores ------------------------------------------------------------
    def load_value(self, b, ptr, index, dtype: str):
        """(kind, value): float32 -> double, int32/int64 -> i64, bool -> i1."""
        v = self.load_at(b, ptr, index, STORE[dtype])
        if dtype in ("float16", "float32", "float64"):
            return "f", b.fpext(v, F64) if dtype != "float64" else v
        if dtype == "bool":
            return "b", b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
        if dtype == "uint8":
            return "i", b.zext(v, I64)
        return "i", v if dtype == "int64" else b.sext(v, I64)

    def store_value(self, b, value, ptr, index, dtype: str):
        kind, v = value
        v = self.convert(b, (kind, v), KIND[dtype])
        if dtype in ("float16", "float32"):
            v = b.fptrunc(v, STORE[dtype])
        elif dtype in ("int32", "int16", "int8", "uint8"):
            v = b.trunc(v, STORE[dtype])
        elif dtype == "bool":
            v = b.zext(v, I8)
        self.store_at(b, v, ptr, index, STORE[dtype])

    def convert(self, b, value, to: str):
        kind, v = value
        if kind == to:
            return v
        if to == "f":
            return b.uitofp(v, F64) if kind == "b" else b.sitofp(v, F64)
        if to == "b":
            zero = fconst(0) if kind == "f" else c64(0)
            return b.fcmp_unordered("!=", v, zero) if kind == "f" else b.icmp_signed("!=", v, zero)
        if kind == "b":
            return b.zext(v, I64)
        return self.float_to_int(b, v)

    def float_to_int(self, b, v):
        """Truncate toward zero, wrapping modulo 2**64 (the low bits wrap any integer dtype);
        nan and infinities give 0 (the reference's cast)."""
        t = b.call(self.intrinsic("llvm.trunc", F64), [v])
        two64 = fconst(2.0**64)
        r = b.frem(t, two64)
        r = b.select(b.fcmp_ordered(">=", r, fconst(2.0**63)), b.fsub(r, two64), r)
        r = b.select(b.fcmp_ordered("<", r, fconst(-(2.0**63))), b.fadd(r, two64), r)
        magnitude = b.call(self.intrinsic("llvm.fabs", F64), [v])
        finite = b.fcmp_ordered("<", magnitude, fconst(math.inf))
        return b.select(finite, b.fptosi(r, I64), c64(0))

    def intrinsic(self, name: str, ty):
        return self.module.declare_intrinsic(name, [ty])

    def libm(self, name: str):
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(F64, [F64]), name=name)
        return fn

    # -- one scalar op -----------------------------------------------------------------------
    def scalar(self, b, op: str, vals: list, p: dict):
        """The op on loaded (kind, value) operands, as (kind, value)."""
        kinds = {k for k, _ in vals}
        if op == "where":
            cond = self.convert(b, vals[0], "b")
            kind = "f" if "f" in (vals[1][0], vals[2][0]) else vals[1][0]
            x, y = (self.convert(b, v, kind) for v in vals[1:])
            return kind, b.select(cond, x, y)
        if op == "dequantize":  # (x - zero_point) * scale
            diff = b.sitofp(b.sub(vals[0][1], vals[2][1]), F64)
            return "f", b.fmul(diff, vals[1][1])
        if op == "copy":
            return vals[0]
        if op == "requantize":
            return self.requantize_value(b, vals, p)
        if op == "fill":
            kind = KIND[p["out_dtype"]]
            value = {"f": fconst(p["value"]), "i": c64(p["value"])}
            return kind, value.get(kind, ir.Constant(ir.IntType(1), p["value"]))
        if op == "nn.leaky_relu":  # x > 0 ? x : x * alpha (nan: the product, nan)
            x = self.convert(b, vals[0], "f")
            keep = b.fcmp_ordered(">", x, fconst(0))
            return "f", b.select(keep, x, b.fmul(x, fconst(p["alpha"])))
        if op == "nn.hardswish":
            return "f", self.hardswish(b, self.convert(b, vals[0], "f"),
                                       STORE.get(p.get("out_dtype"), F32))
        if kinds == {"i"} and op == "clip" and "ibounds" in p:
            return "i", self.int_clip(b, vals[0][1], p)
        if kinds <= {"i", "b"} and op == "divide":
            x, d = (self.convert(b, v, "i") for v in vals)
            return "i", self.int_divide(b, x, d)
        if op == "cast":
            return KIND[p["out_dtype"]], self.convert(b, vals[0], KIND[p["out_dtype"]])
        if op in _FCMP:
            kind = "f" if "f" in kinds else "i"
            x, y = (self.convert(b, v, kind) for v in vals)
            cmp = b.fcmp_ordered if kind == "f" else b.icmp_signed
            if op == "not_equal" and kind == "f":
                return "b", b.fcmp_unordered("!=", x, y)
            return "b", cmp(_FCMP[op], x, y)
        if op.startswith("logical_"):
            bs = [self.convert(b, v, "b") for v in vals]
            if op == "logical_not":
                return "b", b.not_(bs[0])
            return "b", (b.and_ if op == "logical_and" else b.or_)(bs[0], bs[1])
        if op == "nn.relu":
            kind, v = vals[0]
            if kind == "b":  # max(x, False) is x
                return vals[0]
            zero = fconst(0) if kind == "f" else c64(0)
            if kind == "f":  # numpy's maximum(x, 0): nan stays
                keep = b.or_(b.fcmp_ordered(">", v, zero), b.fcmp_unordered("uno", v, v))
                return "f", b.select(keep, v, zero)
            return kind, b.select(b.icmp_signed(">", v, zero), v, zero)
        floats = ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "nn.gelu")
        if kinds == {"f"} or op in floats:
            return "f", self.float_op(b, op, [self.convert(b, v, "f") for v in vals], p)
        return "i", self.int_op(b, op, [self.convert(b, v, "i") for v in vals])

    def float_op(self, b, op: str, xs: list, p: dict):
        x = xs[0]
        binary = {"add": b.fadd, "subtract": b.fsub, "multiply": b.fmul, "divide": b.fdiv}
        if op in binary:
            return binary[op](x, xs[1])
        if op in ("maximum", "minimum"):  # numpy propagates nan
            pick = b.fcmp_ordered(">" if op == "maximum" else "<", x, xs[1])
            nan = b.fcmp_unordered("uno", x, x)
            return b.select(b.or_(pick, nan), x, xs[1])
        if op == "power":
            return b.call(self.intrinsic("llvm.pow", F64), [x, xs[1]])
        if op == "negative":
            return b.fneg(x)
        if op in ("abs", "exp", "log", "sqrt", "floor"):
            name = {"abs": "llvm.fabs"}.get(op, f"llvm.{op}")
            return b.call(self.intrinsic(name, F64), [x])
        if op == "round":  # half away from zero, as the reference
            return b.call(self.intrinsic("llvm.round", F64), [x])
        if op == "rsqrt":  # float32: sqrt rounded, then 1 / it rounded (the reference's steps)
            s = b.fptrunc(b.call(self.intrinsic("llvm.sqrt", F64), [x]), F32)
            return b.fpext(b.fdiv(ir.Constant(F32, 1.0), s), F64)
        if op in ("erf", "nn.gelu") and p.get("out_dtype") == "float32" and (
            p.get("approximate", "none") == "none"
        ):  # the reference's float32 algorithms (float32_math.py), step for step
            f = math32.erf32 if op == "erf" else math32.gelu32
            return b.fpext(f(b, b.fptrunc(x, F32)), F64)
        if op in ("tanh", "erf"):
            return b.call(self.libm(op), [x])
        if op == "nn.gelu":  # the reference's float64 formula, in its order
            half_x = b.fmul(fconst(0.5), x)
            if p.get("approximate") == "tanh":
                cube = b.call(self.intrinsic("llvm.pow", F64), [x, fconst(3.0)])
                inner = b.fmul(fconst(math.sqrt(2.0 / math.pi)),
                               b.fadd(x, b.fmul(fconst(0.044715), cube)))
                return b.fmul(half_x, b.fadd(fconst(1.0), b.call(self.libm("tanh"), [inner])))
            e = b.call(self.libm("erf"), [b.fdiv(x, fconst(math.sqrt(2.0)))])
            return b.fmul(half_x, b.fadd(fconst(1.0), e))
        if op == "sigmoid":
            e = b.call(self.intrinsic("llvm.exp", F64), [b.fneg(x)])
            return b.fdiv(fconst(1), b.fadd(fconst(1), e))
        if op == "clip":
            lo, hi = (fconst(v) for v in p["bounds"])
            x = b.select(b.fcmp_ordered("<", x, lo), lo, x)
            return b.select(b.fcmp_ordered(">", x, hi), hi, x)
        raise AssertionError(op)

    def hardswish(self, b, x, ty=F32):
        """x * min(max(x + 3, 0), 6) / 6, each step rounded to the data's float type ``ty``
        (the reference's)."""

        def f32(v):
            return b.fpext(b.fptrunc(v, ty), F64)

        a = f32(b.fadd(x, fconst(3)))
        a = self.float_op(b, "maximum", [a, fconst(0)], {})
        a = self.float_op(b, "minimum", [a, fconst(6)], {})
        return b.fdiv(f32(b.fmul(x, a)), fconst(6))

    def int_op(self, b, op: str, xs: list):
        x = xs[0]
        binary = {"add": b.add, "subtract": b.sub, "multiply": b.mul}
        if op in binary:
            return binary[op](x, xs[1])
        if op in ("maximum", "minimum"):
            pick = b.icmp_signed(">" if op == "maximum" else "<", x, xs[1])
            return b.select(pick, x, xs[1])
        if op == "negative":
            return b.neg(x)
        if op == "abs":
            return b.select(b.icmp_signed("<", x, c64(0)), b.neg(x), x)
        raise AssertionError(op)

    # -- kernels ---------------------------------------------------------------------------
    def operand(self, k, j, ins):
        kind, where = k.params["sources"][j]
        return self.cargs[where] if kind == "const" else ins[where]

    @emits(Kind.EWISE)
    def k_ewise(self, k):
        """The expression tree (float_ops.Tree) per output element; each step rounded to
        its dtype as a separate kernel would store it. ``threads`` 2: the range of the first
        axis longer than 1 in chunks (ewise_chunk_plan) that this thread and the driver's
        worker claim one at a time (ewise_chunks, as FDENSE's dense_chunks): a worker the OS
        deschedules holds up at most its chunk, not half the kernel. Each element is
        computed by one chunk with the one-thread code, so the bits are one thread's."""
        p = k.params
        n_in = sum(1 for s in p["sources"] if s[0] == "buf")
        fn, b, args = self.function(k, n_in)
        names = [name for name, _ in sorted(k.arrays.items())]
        pointers = [*args, *(self.cargs[n] for n in names)]
        split = split_axis(p["out_shape"])
        if p.get("threads", 1) < 2 or split is None:
            self.ewise_part(k, b, pointers, n_in, names, None)
        else:
            counter = self.chunk_counter(k)
            b.store_atomic(c64(0), counter, "release", 8)
            part = self.part_function(k, "chunks", pointers, lambda pb, ps: self.ewise_chunks(
                k, pb, ps, n_in, names, counter))
            self.split_run(k, b, pointers, [part, part])
        b.ret_void()
        return fn

    def ewise_chunks(self, k, b, pointers, n_in, names, counter) -> None:
        """Claim chunks of the split axis (atomic add on ``counter``) and run each until none
        is left; the last chunk may be shorter."""
        shape = k.params["out_shape"]
        axis = split_axis(shape)
        size, count = ewise_chunk_plan(shape)
        with claimed_chunks(b, counter, count) as c:
            lo = b.mul(c, c64(size))
            end = b.add(lo, c64(size))
            hi = b.select(b.icmp_signed("<", end, c64(shape[axis])), end, c64(shape[axis]))
            b.call(self.ewise_range(k, len(pointers), n_in, names, axis), [*pointers, lo, hi])

    def ewise_range(self, k, n_ptrs, n_in, names, axis) -> ir.Function:
        """``void {name}_range(ptr..., i64 lo, i64 hi)``: the EWISE loops with ``axis`` over
        [lo, hi). Its own function so its pointers are noalias as the kernel's are (read from
        the split's table they would not be, and the vector rows run about 20% slower)."""
        ptr = ir.PointerType()
        ty = ir.FunctionType(ir.VoidType(), [ptr] * n_ptrs + [I64, I64])
        fn = ir.Function(self.module, ty, f"{k.name}_range")
        fn.linkage = "internal"
        for arg in fn.args[:n_ptrs]:  # the kernel's own buffers and constants (module.function)
            arg.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        lo, hi = fn.args[n_ptrs:]
        self.ewise_part(k, b, list(fn.args[:n_ptrs]), n_in, names, (axis, lo, hi))
        b.ret_void()
        return fn

    def ewise_part(self, k, b, pointers, n_in, names, restrict):
        """The EWISE loops over ``pointers`` (inputs, output, constants); ``restrict``:
        (axis, lo, hi) to compute only that range of one axis."""
        p = k.params
        ins, y = pointers[:n_in], pointers[n_in]
        consts = dict(zip(names, pointers[n_in + 1 :]))
        ptrs = [consts[w] if kind == "const" else ins[w] for kind, w in p["sources"]]

        def body(index, offsets):
            loaded: dict = {}

            def value(node):
                if node[0] == "leaf":
                    j = node[1]
                    if j not in loaded:
                        loaded[j] = self.load_value(b, ptrs[j], offsets[j], p["dtypes"][j])
                    return loaded[j]
                _, op, kids, extra, dtype = node
                vals = [value(c) for c in kids]
                out = self.scalar(b, op, vals, dict(extra, out_dtype=dtype))
                return self.rounded(b, out, dtype)

            self.store_value(b, value(p["tree"]), y, index, self.dtype(k.output))

        if ewise_vec.eligible(p, self.dtype(k.output), restrict):
            return ewise_vec.ewise_rows(self, k, b, ptrs, y, body, restrict)
        bases = [c64(v) for v in p.get("bases", [0] * len(p["strides"]))]
        self.nest(b, p["out_shape"], p["strides"], body, offsets=bases, restrict=restrict)
        return None

    def rounded(self, b, value, dtype: str):
        """``value`` as a tensor of ``dtype`` would hold it, back in the compute domain."""
        kind = KIND[dtype]
        v = self.convert(b, value, kind)
        if dtype in ("float16", "float32"):  # float16: each op rounded to half, as numpy's
            v = b.fpext(b.fptrunc(v, STORE[dtype]), F64)
        elif dtype in ("int32", "int16", "int8"):
            v = b.sext(b.trunc(v, STORE[dtype]), I64)
        elif dtype == "uint8":
            v = b.zext(b.trunc(v, I8), I64)
        return kind, v

    def nest(self, b, shape, strides, body, axis=0, index=None, offsets=None, restrict=None):
        """Loops over ``shape``; ``body(flat index, [offset per operand])``. ``restrict``:
        (axis, lo, hi), that axis only over [lo, hi) (ints, or i64 values known at run time)."""
        index = c64(0) if index is None else index
        offsets = [c64(0)] * len(strides) if offsets is None else offsets
        if axis == len(shape):
            return body(index, offsets)
        lo, hi = (0, shape[axis])
        if restrict and restrict[0] == axis:
            lo, hi = restrict[1], restrict[2]
        if isinstance(lo, int) and isinstance(hi, int):
            count, start = hi - lo, (c64(lo) if lo else None)
        else:  # run-time bounds (a claimed chunk)
            lo, hi = (v if isinstance(v, ir.Value) else c64(v) for v in (lo, hi))
            count, start = b.sub(hi, lo), lo
        with for_range(b, count, f"d{axis}") as j:
            i = b.add(j, start) if start is not None else j
            inner = b.add(b.mul(index, c64(shape[axis])), i)
            offs = [b.add(o, b.mul(i, c64(s[axis]))) for o, s in zip(offsets, strides)]
            self.nest(b, shape, strides, body, axis + 1, inner, offs, restrict)
        return None

    @emits(Kind.FDENSE)
    def k_fdense(self, k):
        p = k.params
        if p.get("vec"):
            return self.k_fdense_vec(k)
        packed = "wt" in k.arrays
        fn, b, args = self.function(k, 1 if packed else 2)
        x, y = args[0], args[-1]
        w = self.cargs["wt"] if packed else args[1]
        m_, k_, n_ = p["M"], p["K"], p["N"]
        acc = b.alloca(F64, c64(n_))
        rows_kn = packed or not p.get("tb", True)  # weight read as [K][N]
        with for_range(b, m_, "m") as m:
            with for_range(b, n_, "n0") as n:
                self.store_at(b, fconst(0), acc, n, F64)
            with for_range(b, k_, "k") as kk:
                a = b.fpext(self.load_at(b, x, b.add(b.mul(m, c64(k_)), kk), F32), F64)
                with for_range(b, n_, "n") as n:
                    at = b.add(b.mul(kk, c64(n_)), n) if rows_kn else b.add(b.mul(n, c64(k_)), kk)
                    wv = b.fpext(self.load_at(b, w, at, F32), F64)
                    old = self.load_at(b, acc, n, F64)
                    self.store_at(b, b.fadd(old, b.fmul(a, wv)), acc, n, F64)
            with for_range(b, n_, "n1") as n:
                total = self.load_at(b, acc, n, F64)
                at = b.add(b.mul(m, c64(n_)), n)
                bias = self.bias_at(b, p, at, n)
                total = b.fadd(total, b.fpext(bias, F64)) if bias is not None else total
                self.store_at(b, b.fptrunc(total, F32), y, at, F32)
        b.ret_void()
        return fn

    def bias_at(self, b, p, mn, n):
        """nn.gemm's bias element for flat output index ``mn`` (column n), or None."""
        kind = p.get("bias", "none")
        if kind == "none":
            return None
        index = {"scalar": c64(0), "n": n, "mn": mn}[kind]
        return self.load_at(b, self.cargs["bias"], index, F32)

    @emits(Kind.FBMM)
    def k_fbmm(self, k):
        p = k.params
        if p.get("vec"):
            return self.k_fbmm_vec(k)
        if p.get("dot"):
            return self.k_fbmm_dot(k)
        fn, b, (x, w, y) = self.function(k, 2)
        m_, k_, n_ = p["M"], p["K"], p["N"]
        acc = b.alloca(F64, c64(n_))
        with for_range(b, p["B"], "bt") as bt, for_range(b, m_, "m") as m:
            bx = bt if p["bx"] > 1 else c64(0)
            by = bt if p["by"] > 1 else c64(0)
            xb, yb = b.mul(bx, c64(m_ * k_)), b.mul(by, c64(n_ * k_))
            with for_range(b, n_, "n0") as n:
                self.store_at(b, fconst(0), acc, n, F64)
            with for_range(b, k_, "k") as kk:
                xi = b.add(b.mul(kk, c64(m_)), m) if p["ta"] else b.add(b.mul(m, c64(k_)), kk)
                a = b.fpext(self.load_at(b, x, b.add(xb, xi), F32), F64)
                with for_range(b, n_, "n") as n:
                    yi = b.add(b.mul(n, c64(k_)), kk) if p["tb"] else b.add(b.mul(kk, c64(n_)), n)
                    wv = b.fpext(self.load_at(b, w, b.add(yb, yi), F32), F64)
                    old = self.load_at(b, acc, n, F64)
                    self.store_at(b, b.fadd(old, b.fmul(a, wv)), acc, n, F64)
            base = b.mul(b.add(b.mul(bt, c64(m_)), m), c64(n_))
            with for_range(b, n_, "n1") as n:
                out = b.fptrunc(self.load_at(b, acc, n, F64), F32)
                self.store_at(b, out, y, b.add(base, n), F32)
        b.ret_void()
        return fn

    @emits(Kind.FREDUCE)
    def k_freduce(self, k):
        p = k.params
        if KIND[p.get("dtype", self.dtype(k.output))] == "i":
            return self.k_isum(k)
        fn, b, (x, y) = self.function(k, 1)
        cell = b.alloca(F64)
        start = {"max": -math.inf, "min": math.inf}.get(p["op"], 0.0)
        count = 1
        for d in p["red"]:
            count *= d

        def out(index, offsets):
            b.store(fconst(start), cell)

            def step(_i, offs):
                v = b.fpext(self.load_at(b, x, offs[0], F32), F64)
                old = b.load(cell, typ=F64)
                if p["op"] in ("sum", "mean"):
                    new = b.fadd(old, v)
                else:  # nan wins, as in numpy
                    cmp = ">" if p["op"] == "max" else "<"
                    better = b.or_(b.fcmp_unordered(cmp, v, old), b.fcmp_unordered("uno", v, v))
                    new = b.select(b.fcmp_unordered("uno", old, old), old,
                                   b.select(better, v, old))
                b.store(new, cell)

            self.nest(b, p["red"], [p["red_strides"]], step, index=c64(0), offsets=offsets)
            total = b.load(cell, typ=F64)
            if p["op"] == "mean":
                total = b.fdiv(total, fconst(count))
            self.store_at(b, b.fptrunc(total, F32), y, index, F32)

        self.nest(b, p["kept"], [p["kept_strides"]], out)
        b.ret_void()
        return fn

__all__ = ["FloatKernels"]
