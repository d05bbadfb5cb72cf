"""The IR of integer.py's work: the integer dense product (EXACT_INT_DENSE) and the per-element
arithmetic of qnn.requantize inside EWISE kernels, each semantics as the reference computes it
(qnn.requantize's docstring; partita/ops/emulation), plus the integer clip and C division
EWISE steps. A kernel family (emit/base.py's Family); it uses kernels.FloatKernels'
load_value / store_value."""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from partita.backends.llvm.kinds import Kind, emits

from .base import F32, F64, I32, I64, Family, c64, for_range, via


def _f32(v) -> ir.Constant:
    return ir.Constant(F32, float(v))


class IntKernels(Family):
    # what it uses of the other kernel families (through the emit context)
    load_value = via("floats")
    nest = via("floats")
    store_value = via("floats")

    @emits(Kind.EXACT_INT_DENSE)
    def k_exact_int_dense(self, k):
        """out[m, n] = sum_k x[m, k] * w[n, k] in i64 (wrapping as numpy's int64 sum),
        stored in the output dtype (wrapping); constant weights as compressed rows."""
        p = k.params
        sparse = p.get("sparse", False)
        fn, b, args = self.function(k, 1 if sparse else 2)
        x, y = args[0], args[-1]
        m_, k_, n_ = p["M"], p["K"], p["N"]
        out_dtype = self.dtype(k.output)
        cell = b.alloca(I64)
        with for_range(b, m_, "m") as m, for_range(b, n_, "n") as n:
            b.store(c64(0), cell)
            row = b.mul(m, c64(k_))
            if sparse:
                g = self.cargs
                start = b.sext(self.load_at(b, g["starts"], n, I32), I64)
                stop = b.sext(self.load_at(b, g["starts"], b.add(n, c64(1)), I32), I64)
                with for_range(b, b.sub(stop, start), "j") as j:
                    at = b.add(start, j)
                    col = b.sext(self.load_at(b, g["cols"], at, I32), I64)
                    xv = self.load_value(b, x, b.add(row, col), p["x_dtype"])[1]
                    wv = self.load_at(b, g["weights"], at, I64)
                    b.store(b.add(b.load(cell, typ=I64), b.mul(xv, wv)), cell)
            else:
                w = args[1]
                with for_range(b, k_, "k") as kk:
                    xv = self.load_value(b, x, b.add(row, kk), p["x_dtype"])[1]
                    wv = self.load_value(b, w, b.add(b.mul(n, c64(k_)), kk), p["w_dtype"])[1]
                    b.store(b.add(b.load(cell, typ=I64), b.mul(xv, wv)), cell)
            at = b.add(b.mul(m, c64(n_)), n)
            self.store_value(b, ("i", b.load(cell, typ=I64)), y, at, out_dtype)
        b.ret_void()
        return fn

    @emits(Kind.ARGMAX)
    def k_argmax(self, k):
        """int32 row-major index (over the reduced axes together) of the largest element: the
        first (or with ``last`` the last) of equal ones; nan counts as the largest (numpy)."""
        p = k.params
        fn, b, (x, y) = self.function(k, 1)
        dtype, last = p["dtype"], p["last"]
        ty = F64 if dtype == "float32" else I64
        best, where = b.alloca(ty), b.alloca(I64)

        def out(index, offsets):
            first = self.load_value(b, x, offsets[0], dtype)[1]
            b.store(first, best)
            b.store(c64(0), where)

            def step(j, offs):
                v, old = self.load_value(b, x, offs[0], dtype)[1], b.load(best, typ=ty)
                if ty is F64:
                    nan_v, ok_old = b.fcmp_unordered("uno", v, v), b.fcmp_ordered("ord", old, old)
                    more = b.fcmp_ordered(">=" if last else ">", v, old)
                    take = (
                        b.or_(nan_v, b.and_(ok_old, more))
                        if last
                        else b.and_(ok_old, b.or_(nan_v, more))
                    )
                else:
                    take = b.icmp_signed(">=" if last else ">", v, old)
                b.store(b.select(take, v, old), best)
                b.store(b.select(take, j, b.load(where, typ=I64)), where)

            self.nest(b, p["red"], [p["red_strides"]], step, index=c64(0), offsets=offsets)
            self.store_at(b, b.trunc(b.load(where, typ=I64), I32), y, index, I32)

        self.nest(b, p["kept"], [p["kept_strides"]], out)
        b.ret_void()
        return fn

    # -- EWISE steps -----------------------------------------------------------------------
    def int_clip(self, b, x, p):
        """The reference's integer clip: bounds ceil(a_min), floor(a_max) saturated to the
        dtype (``ibounds``, computed by the op itself), max then min."""
        lo, hi = (c64(v) for v in p["ibounds"])
        x = b.select(b.icmp_signed("<", x, lo), lo, x)
        return b.select(b.icmp_signed(">", x, hi), hi, x)

    def int_divide(self, b, x, d):
        """C division truncating toward zero; x / 0 is 0 and MIN / -1 wraps (the reference)."""
        zero, minus_one = b.icmp_signed("==", d, c64(0)), b.icmp_signed("==", d, c64(-1))
        safe = b.select(b.or_(zero, minus_one), c64(1), d)  # sdiv never traps
        q = b.sdiv(x, safe)
        q = b.select(minus_one, b.neg(x), q)
        return b.select(zero, c64(0), q)

    def requantize_value(self, b, vals, p):
        """qnn.requantize of one element: vals are (data, q, shift, scale, zp_in, zp_out)
        loaded at its channel; the result saturated to ``out_dtype``."""
        data, q, shift, scale, zp_in, zp_out = (v for _, v in vals)
        sem, out = p["semantics"], p["out_dtype"]
        info = np.iinfo(out)
        lo, hi = int(info.min), int(info.max)
        acc = b.sitofp(data, F32)  # PyTorch's stages start from float32(data)
        if sem == "fbgemm":  # rint(float32(acc - zp_in) * (s_in / s_out)) + zp_out
            v = b.fsub(acc, b.fptrunc(zp_in, F32))
            y = self.rint_i64(b, b.fmul(v, b.fptrunc(scale, F32)))
            return "i", self.clamp(b, b.add(y, zp_out), lo, hi)
        if sem == "onednn":  # rint((acc * s - zp_in) * inv + zp_out), each step float32
            v = b.fsub(b.fmul(acc, b.fptrunc(scale, F32)), b.fptrunc(zp_in, F32))
            v = b.fadd(b.fmul(v, _f32(p["inverse"])), b.sitofp(zp_out, F32))
            return "i", self.clamp(b, self.rint_i64(b, v), lo, hi)
        x = b.sub(data, zp_in)
        if sem == "onnx":
            y = self.rint_i64(b, b.fmul(b.sitofp(x, F32), b.fptrunc(scale, F32)))
        elif sem == "tflite_double":
            y = self.round_away_i64(b, b.fmul(b.sitofp(x, F64), scale))
        elif p["in_dtype"] == "int64":
            y = self.mbqm_int64(b, x, q, shift)
        elif sem == "tflite_builtin":
            y = self.mbqm_upward(b, x, q, shift)
        else:  # TFLite shifts left by a 32-bit count: taken modulo 32 on x86
            left = b.and_(shift, c64(31))
            y = self.mbqm(b, x, q, b.select(b.icmp_signed(">", shift, c64(0)), left, shift))
        return "i", self.clamp(b, b.add(y, zp_out), lo, hi)

    def rint_i64(self, b, v):
        """A float32 rounded half to even to i64: nan gives 0, beyond +-2**40 clamps there."""
        d = b.fpext(v, F64)
        d = b.select(b.fcmp_unordered("uno", d, d), ir.Constant(F64, 0.0), d)
        lim = 2.0**40
        d = b.select(b.fcmp_ordered("<", d, ir.Constant(F64, -lim)), ir.Constant(F64, -lim), d)
        d = b.select(b.fcmp_ordered(">", d, ir.Constant(F64, lim)), ir.Constant(F64, lim), d)
        rint = self.module.declare_intrinsic("llvm.roundeven", [F64])
        return b.fptosi(b.call(rint, [d]), I64)

    def round_away_i64(self, b, v):
        """round half away from zero of a double, magnitude clamped at 2**40 (TFLite's
        reference FULLY_CONNECTED: scale_round_half_away_double)."""
        fabs = self.module.declare_intrinsic("llvm.fabs", [F64])
        floor = self.module.declare_intrinsic("llvm.floor", [F64])
        a = b.call(fabs, [v])
        a = b.select(
            b.fcmp_ordered(">", a, ir.Constant(F64, 2.0**40)), ir.Constant(F64, 2.0**40), a
        )
        fl = b.call(floor, [a])
        r = b.fadd(fl, b.uitofp(b.fcmp_ordered(">=", b.fsub(a, fl), ir.Constant(F64, 0.5)), F64))
        r = b.fptosi(r, I64)
        return b.select(b.fcmp_ordered("<", v, ir.Constant(F64, 0.0)), b.neg(r), r)

    def wrap32(self, b, v):
        return b.sext(b.trunc(v, I32), I64)

    def mbqm_upward(self, b, x, q, shift):
        """TFLite's optimized kernels' rounding (ties upward twice), r = max(-shift, 1)."""
        neg = b.neg(shift)
        right = b.select(b.icmp_signed(">", neg, c64(1)), neg, c64(1))
        x = self.wrap32(b, b.shl(x, b.add(shift, right)))
        acc = b.add(b.mul(x, q), b.add(c64(1 << 30), b.shl(c64(1), b.add(right, c64(30)))))
        return self.wrap32(b, b.ashr(acc, b.add(right, c64(31))))

    def mbqm_int64(self, b, x, q, shift):
        """TFLite's int64 MultiplyByQuantizedMultiplier: a 16-bit multiplier (q + 2**15) >> 16
        (0x7FFF from 0x7FFF0000 on), (x * r + 2**(14 - shift)) >> (15 - shift), wrapped."""
        small = b.icmp_signed("<", q, c64(0x7FFF0000))
        reduced = b.select(small, b.ashr(b.add(q, c64(1 << 15)), c64(16)), c64(0x7FFF))
        total = b.sub(c64(15), shift)
        acc = b.add(b.mul(x, reduced), b.shl(c64(1), b.sub(total, c64(1))))
        return self.wrap32(b, b.ashr(acc, total))


__all__ = ["IntKernels"]
