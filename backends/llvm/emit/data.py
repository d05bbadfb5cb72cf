"""Kernels that move or quantize data rather than compute in float: integer sums, the exact
int32 product of dynamic quantization (DYNQ_DENSE), DynamicQuantizeLinear's fields (DYNQ), a
constant read as data (CONST) and take (TAKE). A kernel family (it uses
kernels.FloatKernels' load_value / store_value)."""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from partita.backends.llvm.kinds import Kind, emits

from .base import F32, I8, I16, I32, I64, Family, c64, for_range, via


class DataKernels(Family):
    # what it uses of the other kernel families (through the emit context)
    intrinsic = via("floats")
    load_value = via("floats")
    nest = via("floats")
    operand = via("floats")
    store_value = via("floats")

    def k_isum(self, k):
        """An integer sum (i64 accumulation, stored in the dtype: int32 wraps), max or min."""
        p = k.params
        fn, b, (x, y) = self.function(k, 1)
        dtype = p.get("dtype", self.dtype(k.output))  # bool: "uint8"
        cell = b.alloca(I64)
        op = p["op"]
        info = np.iinfo(dtype)
        start = {"max": int(info.min), "min": int(info.max)}.get(op, 0)

        def out(index, offsets):
            b.store(c64(start), cell)

            def step(_i, offs):
                v = self.load_value(b, x, offs[0], dtype)[1]
                old = b.load(cell, typ=I64)
                if op == "sum":
                    new = b.add(old, v)
                else:
                    new = b.select(b.icmp_signed(">" if op == "max" else "<", v, old), v, old)
                b.store(new, cell)

            self.nest(b, p["red"], [p["red_strides"]], step, index=c64(0), offsets=offsets)
            self.store_value(b, ("i", b.load(cell, typ=I64)), y, index, dtype)

        self.nest(b, p["kept"], [p["kept_strides"]], out)
        b.ret_void()
        return fn

    @emits(Kind.DYNQ_DENSE)
    def k_dynq_dense(self, k):
        """int32 out[m, n] = sum_k (x - zx) * (w - zw[n]), x int8/uint8, zx a run-time scalar."""
        p = k.params
        fn, b, (x, zx_ptr, y) = self.function(k, 2)
        w, zw = self.cargs["w"], self.cargs["zw"]
        m_, k_, n_ = p["M"], p["K"], p["N"]
        zx = self.load_value(b, zx_ptr, c64(0), p["zx_dtype"])[1]
        cell = b.alloca(I64)
        with for_range(b, m_, "m") as m, for_range(b, n_, "n") as n:
            b.store(c64(0), cell)
            zwn = b.sext(self.load_at(b, zw, n, I32), I64)
            with for_range(b, k_, "k") as kk:
                xv = self.load_value(b, x, b.add(b.mul(m, c64(k_)), kk), p["x_dtype"])[1]
                wv = b.sext(self.load_at(b, w, b.add(b.mul(n, c64(k_)), kk), I32), I64)
                term = b.mul(b.sub(xv, zx), b.sub(wv, zwn))
                b.store(b.add(b.load(cell, typ=I64), term), cell)
            if p.get("pairs"):
                self._dynq_dense_pair_saturation(b, k, x, w, m, n, cell)
            at = b.add(b.mul(m, c64(n_)), n)
            self.store_at(b, b.trunc(b.load(cell, typ=I64), I32), y, at, I32)
        b.ret_void()
        return fn

    def _dynq_dense_pair_saturation(self, b, k, x, w, m, n, cell):
        """Add to ``cell`` what VPMADDUBSW's int16 saturation takes off each pair of raw products
        (x as uint8: int8 data + 128; an odd K's last product pairs with zero)."""
        p = k.params
        k_ = p["K"]
        offset = c64(128 if p["x_dtype"] == "int8" else 0)
        lo, hi = c64(-(1 << 15)), c64((1 << 15) - 1)

        def product(kk):
            xv = self.load_value(b, x, b.add(b.mul(m, c64(k_)), kk), p["x_dtype"])[1]
            wv = b.sext(self.load_at(b, w, b.add(b.mul(n, c64(k_)), kk), I32), I64)
            return b.mul(b.add(xv, offset), wv)

        with for_range(b, k_ // 2, "j") as j:
            pair = b.add(product(b.mul(j, c64(2))), product(b.add(b.mul(j, c64(2)), c64(1))))
            sat = b.select(b.icmp_signed("<", pair, lo), lo, pair)
            sat = b.select(b.icmp_signed(">", sat, hi), hi, sat)
            b.store(b.add(b.load(cell, typ=I64), b.sub(sat, pair)), cell)
        # an odd K's last product pairs with zero; one int8 x uint8 product is within int16

    @emits(Kind.DYNQ)
    def k_dynq(self, k):
        """One field of DynamicQuantizeLinear, in float32 as the reference: the range [min(x, 0),
        max(x, 0)], scale = (hi - lo) / 255 (1 for an empty range), zero point = rint(clamp(0 -
        lo / scale, 0, 255)), data = clamp(rint(x / scale) + zero point, 0, 255) (nan: 0)."""
        fn, b, (x, y) = self.function(k, 1)
        n = 1
        for d in self.shape(k.inputs[0]):
            n *= d
        f32 = lambda v: ir.Constant(F32, v)  # noqa: E731
        rint = self.intrinsic("llvm.roundeven", F32)
        lo_cell, hi_cell = b.alloca(F32), b.alloca(F32)
        b.store(f32(0.0), lo_cell)
        b.store(f32(0.0), hi_cell)
        with for_range(b, n, "e") as e:
            v = self.load_at(b, x, e, F32)
            lo, hi = b.load(lo_cell, typ=F32), b.load(hi_cell, typ=F32)
            b.store(b.select(b.fcmp_ordered("<", v, lo), v, lo), lo_cell)
            b.store(b.select(b.fcmp_ordered(">", v, hi), v, hi), hi_cell)
        lo, hi = b.load(lo_cell, typ=F32), b.load(hi_cell, typ=F32)
        scale = b.select(b.fcmp_ordered("==", hi, lo), f32(1.0), b.fdiv(b.fsub(hi, lo), f32(255.0)))

        def clamp(v):
            v = b.select(b.fcmp_ordered("<", v, f32(0.0)), f32(0.0), v)
            return b.select(b.fcmp_ordered(">", v, f32(255.0)), f32(255.0), v)

        zp = b.call(rint, [clamp(b.fsub(f32(0.0), b.fdiv(lo, scale)))])
        field = k.params["field"]
        if field == 1:
            self.store_at(b, scale, y, c64(0), F32)
        elif field == 2:
            self.store_at(b, b.fptoui(zp, I8), y, c64(0), I8)
        else:
            with for_range(b, n, "e") as e:
                q = b.fadd(b.call(rint, [b.fdiv(self.load_at(b, x, e, F32), scale)]), zp)
                q = b.select(b.fcmp_unordered("uno", q, q), f32(0.0), clamp(q))
                self.store_at(b, b.fptoui(q, I8), y, e, I8)
        b.ret_void()
        return fn

    @emits(Kind.CONST)
    def k_const(self, k):
        """The constant ``value`` copied into its buffer (a constant read as data)."""
        fn, b, (y,) = self.function(k, 0)
        value = self.cargs["value"]
        with for_range(b, k.arrays["value"].nbytes, "byte") as e:
            self.store_at(b, self.load_at(b, value, e, I8), y, e, I8)
        b.ret_void()
        return fn

    @emits(Kind.TAKE)
    def k_take(self, k):
        p = k.params
        n_in = sum(1 for s in p["sources"] if s[0] == "buf")
        fn, b, args = self.function(k, n_in)
        ins, y = args[:-1], args[-1]
        data, idx = (self.operand(k, j, ins) for j in range(2))
        size, inner, count = p["size"], p["inner"], p["count"]
        row = inner * p["itemsize"]
        with for_range(b, p["outer"], "o") as o, for_range(b, count, "c") as c:
            i = self.load_at(b, idx, c, I64 if p["idx64"] else I32)
            i = i if p["idx64"] else b.sext(i, I64)
            if p["mode"] == "wrap":
                i = b.srem(b.add(b.srem(i, c64(size)), c64(size)), c64(size))
            else:  # clip; "fast": [-size, 0) counts from the end, then kept in bounds
                if p["mode"] == "fast":
                    i = b.select(b.icmp_signed("<", i, c64(0)), b.add(i, c64(size)), i)
                i = b.select(b.icmp_signed("<", i, c64(0)), c64(0), i)
                i = b.select(b.icmp_signed(">", i, c64(size - 1)), c64(size - 1), i)
            src = b.mul(b.add(b.mul(o, c64(size)), i), c64(row))
            dst = b.mul(b.add(b.mul(o, c64(count)), c), c64(row))
            with for_range(b, row, "byte") as e:
                self.store_at(b, self.load_at(b, data, b.add(src, e), I8), y, b.add(dst, e), I8)
        b.ret_void()
        return fn

    @emits(Kind.GATHER)
    def k_gather(self, k):
        """y[e] = source element map[e] (numbered across the sources, whose first elements
        are at ``offsets``), or the fill value where map[e] is -1; elements of any size."""
        p = k.params
        fn, b, args = self.function(k, len(k.inputs))
        ins, y = args[:-1], args[-1]
        table, fill = self.cargs["map"], self.cargs["fill"]
        ety = ir.IntType(8 * p["itemsize"])
        with for_range(b, p["count"], "e") as e:
            m = b.sext(self.load_at(b, table, e, I32), I64)
            with b.if_else(b.icmp_signed("<", m, c64(0))) as (then, otherwise):
                with then:
                    self.store_at(b, self.load_at(b, fill, c64(0), ety), y, e, ety)
                with otherwise:
                    src, base = ins[0], c64(0)
                    for j, start in enumerate(p["offsets"][1:], 1):
                        later = b.icmp_signed(">=", m, c64(start))
                        src = b.select(later, ins[j], src)
                        base = b.select(later, c64(start), base)
                    value = self.load_at(b, src, b.sub(m, base), ety)
                    self.store_at(b, value, y, e, ety)
        b.ret_void()
        return fn

    @emits(Kind.AVGPOOL)
    def k_avgpool(self, k):
        """qnn.avg_pool2d per output element (qpool.lower_qavgpool): "tflite" sums q - zp_in
        over the taps inside the input, rounds the division by the window's count half away
        from zero, saturates, and requantizes when the output's parameters differ; "onnx" adds
        float32(s_in) * float32(q - zp_in) over the taps in row-major order, divides by the
        count, then rint(y / s_out + zp_out). An empty window gives the zero point."""
        p = k.params
        fn, b, (x, y) = self.function(k, 1)
        counts = self.cargs["counts"]
        h, w, c = p["H"], p["W"], p["C"]
        (ph, pw), (sh, sw), (dh, dw) = p["pool"], p["strides"], p["dilation"]
        top, left = p["padding"][0], p["padding"][1]
        _, oh, ow = self.pool_dims(k)
        lo, hi = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}[p["dtype"]]
        ety = I16 if p["dtype"] == "int16" else I8  # TFLite's 16x8 AVERAGE_POOL_2D
        onnx = p["semantics"] == "onnx"
        acc = b.alloca(F32 if onnx else I64)
        batch = self.shape(k.inputs[0])[0]
        with (for_range(b, batch, "n") as nb, for_range(b, oh, "oy") as oy,
              for_range(b, ow, "ox") as ox, for_range(b, c, "ch") as ch):
            xb = b.mul(nb, c64(h * w * c))  # image nb's first element, in and out
            yb = b.mul(nb, c64(oh * ow * c))
            b.store(ir.Constant(F32, 0.0) if onnx else c64(0), acc)
            with for_range(b, ph, "ky") as ky, for_range(b, pw, "kx") as kx:
                iy, ix, inside = self.window_tap(b, (oy, ox), (ky, kx), (sh, sw), (dh, dw),
                                                     (top, left), (h, w))
                with b.if_then(inside):
                    at = (b.add(b.mul(b.add(b.mul(iy, c64(w)), ix), c64(c)), ch) if p["nhwc"]
                          else b.add(b.mul(b.add(b.mul(ch, c64(h)), iy), c64(w)), ix))
                    q = b.sub(self.signed(b, self.load_at(b, x, b.add(xb, at), ety), p["dtype"]),
                              c64(p["zp_in"]))
                    if onnx:
                        v = b.fmul(ir.Constant(F32, p["s_in"]), b.sitofp(q, F32))
                        b.store(b.fadd(b.load(acc, typ=F32), v), acc)
                    else:
                        b.store(b.add(b.load(acc, typ=I64), q), acc)
            n = b.sext(self.load_at(b, counts, b.add(b.mul(oy, c64(ow)), ox), I32), I64)
            total = b.load(acc, typ=F32 if onnx else I64)
            value = (self.avg_onnx if onnx else self.avg_tflite)(b, total, n, p, lo, hi)
            out = (b.add(b.mul(b.add(b.mul(oy, c64(ow)), ox), c64(c)), ch) if p["nhwc"]
                   else b.add(b.mul(b.add(b.mul(ch, c64(oh)), oy), c64(ow)), ox))
            self.store_at(b, b.trunc(value, ety), y, b.add(yb, out), ety)
        b.ret_void()
        return fn

    def pool_dims(self, k):
        shape = self.shape(k.output)
        return (shape[3], shape[1], shape[2]) if k.params["nhwc"] else tuple(shape[1:])

    def avg_tflite(self, b, total, n, p, lo, hi):
        zero = c64(0)
        raw = b.sext(b.trunc(b.add(total, b.mul(c64(p["zp_in"]), n)), I32), I64)  # int32 wrap
        mag = b.select(b.icmp_signed("<", raw, zero), b.neg(raw), raw)
        safe = b.select(b.icmp_signed(">", n, zero), n, c64(1))
        quot = b.sdiv(b.add(mag, b.sdiv(safe, c64(2))), safe)
        avg = b.select(b.icmp_signed("<", raw, zero), b.neg(quot), quot)
        avg = b.select(b.icmp_signed(">", n, zero), avg, c64(p["zp_in"]))
        avg = self.clamp(b, avg, lo, hi)
        if p["same"]:
            return avg
        v = self.mbqm(b, b.sub(avg, c64(p["zp_in"])), c64(p["multiplier"]), c64(p["shift"]))
        return self.clamp(b, b.add(v, c64(p["zp_out"])), lo, hi)

    def avg_onnx(self, b, total, n, p, lo, hi):
        rint = self.module.declare_intrinsic("llvm.roundeven", [F32])
        y = b.fdiv(b.fdiv(total, b.sitofp(n, F32)), ir.Constant(F32, p["s_out"]))
        q = b.call(rint, [b.fadd(y, ir.Constant(F32, float(p["zp_out"])))])
        q = b.select(b.fcmp_ordered("<", q, ir.Constant(F32, float(lo))),
                     ir.Constant(F32, float(lo)), q)
        q = b.select(b.fcmp_ordered(">", q, ir.Constant(F32, float(hi))),
                     ir.Constant(F32, float(hi)), q)
        empty = b.icmp_signed("==", n, c64(0))
        return b.select(empty, c64(p["zp_out"]), b.fptosi(q, I64))


__all__ = ["DataKernels"]
