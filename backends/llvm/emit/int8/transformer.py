"""The int8 transformer kernels of TFLite's reference (lowered in lower/qtransformer.py): QBMM
(``qnn.batch_matmul`` and its requantize: the exact int32 sum, wrapped, then TFLite's
MultiplyByQuantizedMultiplier) and QSOFTMAX (``qnn.softmax`` "tflite", reference_ops::Softmax
in gemmlowp's fixed point).

The softmax's per-element values depend only on x - max(row) (at most 256 of them for 8-bit
data), so exp_on_negative_values and its Q12.19 rescale come from tables computed at compile time
with the reference's own numpy code; per row the kernel sums the table entries, takes
GetReciprocal (CountLeadingZeros and gemmlowp's three Newton-Raphson steps, here in IR, in i64
holding int32 values as the reference's numpy does) and scales each element. Equal bit for bit
(tests/backends/llvm/test_llvm_qtransformer.py)."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import I32, I64, Family, c64, for_range
from partita.backends.llvm.emit.int_products import exact_bmm
from partita.backends.llvm.kinds import Kind, emits
from partita.backends.llvm.lower.qtransformer import RANGE

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


# ---- kernels ---------------------------------------------------------------------------------


class QTransformerKernels(Family):
    def wrap32(self, b, v):
        return b.sext(b.trunc(v, I32), I64)

    def srdhm(self, b, x, y):
        """SaturatingRoundingDoublingHighMul of int32 values held in i64."""
        ab = b.mul(x, y)
        nudge = b.select(b.icmp_signed(">=", ab, c64(0)), c64(1 << 30), c64(1 - (1 << 30)))
        high = b.sdiv(b.add(ab, nudge), c64(1 << 31))
        both_min = b.and_(b.icmp_signed("==", x, c64(INT32_MIN)),
                          b.icmp_signed("==", y, c64(INT32_MIN)))
        return b.select(both_min, c64(INT32_MAX), high)

    def rdbpot(self, b, x, e):
        """RoundingDivideByPOT(x, e) (e an i64 value in [0, 31])."""
        mask = b.sub(b.shl(c64(1), e), c64(1))
        threshold = b.add(b.ashr(mask, c64(1)), b.zext(b.icmp_signed("<", x, c64(0)), I64))
        return b.add(b.ashr(x, e), b.zext(b.icmp_signed(">", b.and_(x, mask), threshold), I64))

    def smul_pot(self, b, x, exponent: int):
        """SaturatingRoundingMultiplyByPOT<exponent> on int32 values."""
        if exponent < 0:
            return self.rdbpot(b, x, c64(-exponent))
        threshold = (1 << (31 - exponent)) - 1
        x2 = b.shl(x, c64(exponent))
        x2 = b.select(b.icmp_signed(">", x, c64(threshold)), c64(INT32_MAX), x2)
        return b.select(b.icmp_signed("<", x, c64(-threshold)), c64(INT32_MIN), x2)

    def one_over_one_plus_x(self, b, a):
        """gemmlowp one_over_one_plus_x_for_x_in_0_1 (Q0.31 in, Q0.31 out)."""
        s = b.add(a, c64(INT32_MAX))
        t = b.add(s, b.select(b.icmp_signed(">=", s, c64(0)), c64(1), c64(-1)))
        half = b.sdiv(t, c64(2))  # RoundingHalfSum: the division truncates toward zero
        x = self.wrap32(b, b.add(c64(1515870810), self.srdhm(b, half, c64(-1010580540))))
        for _ in range(3):
            one_minus = self.wrap32(b, b.sub(c64(1 << 29), self.srdhm(b, half, x)))
            x = self.wrap32(b, b.add(x, self.smul_pot(b, self.srdhm(b, x, one_minus), 2)))
        return self.smul_pot(b, x, 1)

    @emits(Kind.QSOFTMAXO)
    def k_qsoftmaxo(self, k):
        """qtransformer._qsoftmax_ort: per row, the max, the float32 sum of the table's entries in
        order, then each output rint(float32(t * y_scale) / sum), saturated, + zp."""
        p = k.params
        fn, b, (x, y) = self.function(k, 1)
        table = self.cargs["table"]
        n, signed = p["n"], p["dtype"] == "int8"
        f32 = ir.FloatType()
        rint = self.module.declare_intrinsic("llvm.roundeven", [f32])
        best, total = b.alloca(I64), b.alloca(f32)

        inner = p.get("inner", 1)  # the softmax axis' stride: rows are (outer, inner) pairs

        def at(row, j):
            base = b.add(b.mul(b.udiv(row, c64(inner)), c64(n * inner)), b.urem(row, c64(inner)))
            return b.add(base, b.mul(j, c64(inner)))

        def get(row, j):
            v = self.load_at(b, x, at(row, j), ir.IntType(8))
            return b.sext(v, I64) if signed else b.zext(v, I64)

        def entry(row, j):
            at = b.add(b.sub(get(row, j), b.load(best, typ=I64)), c64(255))
            return self.load_at(b, table, at, f32)

        lo, hi = p["lo"] - 1 - p["zp"], p["hi"] + 1 - p["zp"]
        with for_range(b, p["rows"], "row") as row:
            b.store(c64(-(1 << 20)), best)
            with for_range(b, n, "m") as j:
                v, cur = get(row, j), b.load(best, typ=I64)
                b.store(b.select(b.icmp_signed(">", v, cur), v, cur), best)
            b.store(ir.Constant(f32, 0.0), total)
            with for_range(b, n, "s") as j:
                b.store(b.fadd(b.load(total, typ=f32), entry(row, j)), total)
            with for_range(b, n, "o") as j:
                t = b.fmul(entry(row, j), ir.Constant(f32, p["y_scale"]))
                q = b.call(rint, [b.fdiv(t, b.load(total, typ=f32))])
                # saturate in float first: an inf (a one-element row) has no integer value
                q = b.select(b.fcmp_ordered("<", q, ir.Constant(f32, lo)), ir.Constant(f32, lo), q)
                q = b.select(b.fcmp_ordered(">", q, ir.Constant(f32, hi)), ir.Constant(f32, hi), q)
                v = b.add(b.fptosi(q, I64), c64(p["zp"]))
                v = b.select(b.icmp_signed("<", v, c64(p["lo"])), c64(p["lo"]), v)
                v = b.select(b.icmp_signed(">", v, c64(p["hi"])), c64(p["hi"]), v)
                self.store_at(b, b.trunc(v, ir.IntType(8)), y, at(row, j), ir.IntType(8))
        b.ret_void()
        return fn

    @emits(Kind.QSOFTMAX)
    def k_qsoftmax(self, k):
        p = k.params
        fn, b, (x, y) = self.function(k, 1)
        exps, keep, contrib = (self.cargs[n] for n in ("exps", "keep", "contrib"))
        n = p["n"]
        signed = p["dtype"] == "int8"
        lo, hi = RANGE[p["dtype"]]
        cell = b.alloca(I64)
        ctlz = self.module.globals.get("llvm.ctlz.i32") or ir.Function(
            self.module, ir.FunctionType(I32, [I32, ir.IntType(1)]), "llvm.ctlz.i32"
        )

        inner = p.get("inner", 1)  # the softmax axis' stride: rows are (outer, inner) pairs

        def at(row, j):
            return b.add(row, b.mul(j, c64(inner)))

        def get(row, j):
            v = self.load_at(b, x, at(row, j), ir.IntType(8))
            return b.sext(v, I64) if signed else b.zext(v, I64)

        with for_range(b, p["rows"], "r") as r:
            row = b.add(b.mul(b.udiv(r, c64(inner)), c64(n * inner)), b.urem(r, c64(inner)))
            b.store(c64(-(1 << 20)), cell)
            with for_range(b, n, "j") as j:
                v, top = get(row, j), b.load(cell, typ=I64)
                b.store(b.select(b.icmp_signed(">", v, top), v, top), cell)
            top = b.load(cell, typ=I64)
            b.store(c64(0), cell)
            with for_range(b, n, "j") as j:
                d = b.sub(top, get(row, j))  # table index: max - x in [0, 255]
                c = b.sext(self.load_at(b, contrib, d, I32), I64)
                b.store(b.add(b.load(cell, typ=I64), c), cell)
            total = b.trunc(b.load(cell, typ=I64), I32)  # wraps to int32, as the reference
            clz = b.call(ctlz, [total, ir.Constant(ir.IntType(1), 0)])
            bits_over_unit = b.sub(c64(12), b.zext(clz, I64))
            shifted = b.sext(b.sub(b.shl(total, clz), ir.Constant(I32, -(1 << 31))), I64)
            scale = self.one_over_one_plus_x(b, shifted)
            exponent = b.add(bits_over_unit, c64(31 - p["out_bits"]))
            exponent = b.select(b.icmp_signed(">", exponent, c64(31)), c64(31), exponent)
            with for_range(b, n, "j") as j:
                d = b.sub(top, get(row, j))
                e = b.sext(self.load_at(b, exps, d, I32), I64)
                v = b.add(self.rdbpot(b, self.srdhm(b, scale, e), exponent), c64(lo))
                v = self.clamp(b, v, lo, hi)
                kept = b.icmp_signed("!=", self.load_at(b, keep, d, I32), ir.Constant(I32, 0))
                v = b.select(kept, v, c64(lo))
                self.store_at(b, b.trunc(v, ir.IntType(8)), y, at(row, j), ir.IntType(8))
        b.ret_void()
        return fn

    @emits(Kind.QBMM)
    def k_qbmm(self, k):
        p = k.params
        fn, b, (x, w, y) = self.function(k, 2)
        m_, n_ = p["M"], p["N"]
        i8 = ir.IntType(8)

        def load(ptr, index, dtype):
            v = self.load_at(b, ptr, index, i8)
            return b.sext(v, I64) if dtype == "int8" else b.zext(v, I64)

        def store(index, total):
            acc = self.wrap32(b, total)
            v = self.mbqm(b, b.sub(acc, c64(p["rq_zp"])), c64(p["mult"]), c64(p["shift"]))
            v = self.clamp(b, b.add(v, c64(p["out_zp"])), p["lo"], p["hi"])
            bt, m, n = index
            at = b.add(b.mul(b.add(b.mul(bt, c64(m_)), m), c64(n_)), n)
            self.store_at(b, b.trunc(v, i8), y, at, i8)

        exact_bmm(b, p, (x, w), (c64(p["zx"]), c64(p["zy"])), load, store)
        b.ret_void()
        return fn


__all__ = ["QTransformerKernels"]
