"""Kernels that move or quantize data rather than compute in float: integer sums,
DynamicQuantizeLinear's fields (DYNQ; the int32 product after it, DYNQ_DENSE, is
int8/dynq_dense.py's), a constant read as data (CONST), take (TAKE), gather and average pooling.
A kernel family (it uses kernels.FloatKernels' load_value / store_value)."""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from partita.backends.llvm.kinds import Kind, emits

from .base import F32, I8, I16, I32, I64, Family, c64, for_range, via

DYNQ_CHUNK = 1 << 14  # elements per chunk of a split DYNQ (-threads=2)
DYNQ_SCAN_VECTORS = 4  # the range scan's independent vectors of lanes


class DataKernels(Family):
    # what it uses of the other kernel families (through the emit context)
    intrinsic = via("floats")
    load_value = via("floats")
    nest = via("floats")
    operand = via("floats")
    store_value = via("floats")
    split_chunks = via("pool")

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

    @emits(Kind.DYNQ)
    def k_dynq(self, k):
        """DynamicQuantizeLinear in float32 as the reference. Field "range" (one kernel per
        quantized tensor, lower/float_ops.py): the range [min(x, 0), max(x, 0)], scale = (hi -
        lo) / 255 (1 for an empty range), zero point = rint(clamp(0 - lo / scale, 0, 255))
        (ONNX Runtime's clamp order: NaN, from a range reaching -inf, gives 255), stored as
        two floats, so the tensor is scanned once for its three fields. Field 0 reads x and
        them: data = clamp(rint(x / scale) + zero point, 0, 255) (nan: 0); fields 1 and 2 read
        them only: the scale, the zero point as uint8.
        ``threads`` 2: the range scan in chunks of DYNQ_CHUNK elements, each chunk's range
        kept, then taken in chunk order by the scan's rule; the data field's elements in chunks
        too (runtime/threads.py split_chunks). The scan's rule (a strictly smaller / larger
        value, NaN never, +0.0 to start) makes the range the same values whatever the order, so
        the bits are one thread's."""
        field = k.params["field"]
        fn, b, args = self.function(k, len(k.inputs))
        n = 1
        for d in self.shape(k.inputs[0]):
            n *= d
        f32 = lambda v: ir.Constant(F32, v)  # noqa: E731
        rint = self.intrinsic("llvm.roundeven", F32)
        split = k.params.get("threads", 1) > 1
        if field == "range":
            x, y = args
            scale, zp = self.dynq_range(b, k, x, n, split)
            self.store_at(b, scale, y, c64(0), F32)
            self.store_at(b, zp, y, c64(1), F32)
            b.ret_void()
            return fn
        if field == 1:  # reads the range only
            kept, y = args
            self.store_at(b, self.load_at(b, kept, c64(0), F32), y, c64(0), F32)
        elif field == 2:
            kept, y = args
            self.store_at(b, b.fptoui(self.load_at(b, kept, c64(1), F32), I8), y, c64(0), I8)
        else:
            x, kept, y = args

            def clamp(b, v):
                v = b.select(b.fcmp_ordered("<", v, f32(0.0)), f32(0.0), v)
                return b.select(b.fcmp_ordered(">", v, f32(255.0)), f32(255.0), v)

            def data(b, x, y, kept, lo, hi):
                scale, zp = self.load_at(b, kept, c64(0), F32), self.load_at(b, kept, c64(1), F32)
                with for_range(b, b.sub(hi, lo), "e") as i:
                    e = b.add(lo, i)
                    q = b.fadd(b.call(rint, [b.fdiv(self.load_at(b, x, e, F32), scale)]), zp)
                    q = b.select(b.fcmp_unordered("uno", q, q), f32(0.0), clamp(b, q))
                    self.store_at(b, b.fptoui(q, I8), y, e, I8)

            if not split:
                data(b, x, y, kept, c64(0), c64(n))
            else:
                self.split_chunks(k, b, [x, y, kept], n, DYNQ_CHUNK,
                                  lambda eb, ps, lo, hi: data(eb, *ps, lo, hi), tag="_data")
        b.ret_void()
        return fn

    def dynq_range(self, b, k, x, n: int, split: bool):
        """(scale, zero point) of x's n floats, as float32 values (k_dynq's "range" field)."""
        f32 = lambda v: ir.Constant(F32, v)  # noqa: E731
        rint = self.intrinsic("llvm.roundeven", F32)
        lo_cell, hi_cell = b.alloca(F32), b.alloca(F32)
        width = k.params.get("lanes", 8)  # the scan's lanes: 16 on the AVX-512 tiers
        if not split:
            self.dynq_scan(b, x, c64(0), c64(n), lo_cell, hi_cell, width=width)
        else:
            count = -(-n // DYNQ_CHUNK)
            ranges = b.alloca(F32, c64(2 * count))  # each chunk's (lo, hi)

            def scan(eb, ps, c0, c1):
                xs, rs = ps
                lc, hc = eb.alloca(F32), eb.alloca(F32)
                lanes = self.dynq_scan_cells(eb, width)
                with for_range(eb, eb.sub(c1, c0), "chunk") as i:
                    c = eb.add(c0, i)
                    first = eb.mul(c, c64(DYNQ_CHUNK))
                    last = eb.add(first, c64(DYNQ_CHUNK))
                    last = eb.select(eb.icmp_signed("<", last, c64(n)), last, c64(n))
                    self.dynq_scan(eb, xs, first, eb.sub(last, first), lc, hc, lanes, width)
                    two = eb.mul(c, c64(2))
                    self.store_at(eb, eb.load(lc, typ=F32), rs, two, F32)
                    self.store_at(eb, eb.load(hc, typ=F32), rs, eb.add(two, c64(1)), F32)

            self.split_chunks(k, b, [x, ranges], count, 1, scan, tag="_scan")
            b.store(f32(0.0), lo_cell)
            b.store(f32(0.0), hi_cell)
            with for_range(b, 2 * count, "kept") as e:
                self.dynq_take(b, self.load_at(b, ranges, e, F32), lo_cell, hi_cell)
        lo, hi = b.load(lo_cell, typ=F32), b.load(hi_cell, typ=F32)
        scale = b.select(b.fcmp_ordered("==", hi, lo), f32(1.0), b.fdiv(b.fsub(hi, lo), f32(255.0)))

        def ort_clamp(b, v):  # std::max(0, std::min(255, v)): NaN (the range has -inf) -> 255
            t = b.select(b.fcmp_ordered("<", v, f32(255.0)), v, f32(255.0))
            return b.select(b.fcmp_ordered("<", f32(0.0), t), t, f32(0.0))

        return scale, b.call(rint, [ort_clamp(b, b.fsub(f32(0.0), b.fdiv(lo, scale)))])

    def dynq_take(self, b, v, lo_cell, hi_cell) -> None:
        """The range scan's rule: a strictly smaller / larger value replaces (NaN never)."""
        lo, hi = b.load(lo_cell, typ=F32), b.load(hi_cell, typ=F32)
        b.store(b.select(b.fcmp_ordered("<", v, lo), v, lo), lo_cell)
        b.store(b.select(b.fcmp_ordered(">", v, hi), v, hi), hi_cell)

    def dynq_scan(self, b, x, first, count, lo_cell, hi_cell, cells=None, width=8) -> None:
        """The range of x[first, first + count) into the two cells: in DYNQ_SCAN_VECTORS
        vectors of ``width`` lanes (each lane by the scan's rule; +0.0 starts every lane;
        independent vectors, so no one compare-select chain bounds the loop), then the lanes
        and the last count % (DYNQ_SCAN_VECTORS * width) elements by the same rule: the same min
        and max as one scan (ties are equal values). ``cells``: the lane cells (made by
        ``dynq_scan_cells``), allocated outside a loop that calls this."""
        vf = ir.VectorType(F32, width)
        zeros = ir.Constant(vf, [0.0] * width)
        cells = cells or self.dynq_scan_cells(b, width)
        for cell in cells:
            b.store(zeros, cell)
        step = DYNQ_SCAN_VECTORS * width
        vectors = b.udiv(count, c64(step))
        with for_range(b, vectors, "ev") as e:
            for j in range(DYNQ_SCAN_VECTORS):
                at = b.add(first, b.add(b.mul(e, c64(step)), c64(j * width)))
                v = b.load(b.gep(x, [at], source_etype=F32), typ=vf, align=4)
                lo_v, hi_v = cells[2 * j], cells[2 * j + 1]
                lo, hi = b.load(lo_v, typ=vf), b.load(hi_v, typ=vf)
                b.store(b.select(b.fcmp_ordered("<", v, lo), v, lo), lo_v)
                b.store(b.select(b.fcmp_ordered(">", v, hi), v, hi), hi_v)
        b.store(ir.Constant(F32, 0.0), lo_cell)
        b.store(ir.Constant(F32, 0.0), hi_cell)
        for cell in cells:
            vec = b.load(cell, typ=vf)
            for lane in range(width):
                self.dynq_take(b, b.extract_element(vec, ir.Constant(I32, lane)), lo_cell,
                               hi_cell)
        tail = b.add(first, b.mul(vectors, c64(step)))
        with for_range(b, b.urem(count, c64(step)), "e") as e:
            self.dynq_take(b, self.load_at(b, x, b.add(tail, e), F32), lo_cell, hi_cell)

    @staticmethod
    def dynq_scan_cells(b, width: int) -> list:
        """The scan's lane cells: (lo, hi) per vector, DYNQ_SCAN_VECTORS of them."""
        vf = ir.VectorType(F32, width)
        return [b.alloca(vf) for _ in range(2 * DYNQ_SCAN_VECTORS)]

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
