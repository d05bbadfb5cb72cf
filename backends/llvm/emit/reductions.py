"""Reductions as loops (qmean_axes.py): QMEANX (qnn.mean over any axes: numpy's float32
order, or exact integer sums) and FGAPL (a global average pool in MLAS's or ATen's float32
order, 16 channels per vector). A kernel family (its ``via`` lines name
what it uses of the others: nest, load_value, vload_lanes, ...)."""

from __future__ import annotations

import math

from llvmlite import ir
from partita.backends.llvm.emit.float.conv import I32T, POS0
from partita.backends.llvm.emit.float.gemm import V16F, VEC
from partita.backends.llvm.kinds import Kind, emits

from .base import F32, I32, I64, PTR, Family, c64, for_range, via

ZERO32 = ir.Constant(F32, 0.0)


def _f32(v) -> ir.Constant:
    return ir.Constant(F32, float(v))


class ReduceKernels(Family):
    # what it uses of the other kernel families (through the emit context)
    load_value = via("floats")
    mean_legacy = via("int8")
    nest = via("floats")
    rint_i64 = via("ints")
    store_value = via("floats")
    vload_lanes = via("fconv")
    vstore_lanes = via("fconv")

    # -- QMEANX ------------------------------------------------------------------------------
    @emits(Kind.QMEANX)
    def k_qmeanx(self, k):
        """Each output (the kept axes in C order) sums its elements (qmean_axes's loops),
        then the mode's output stage ("legacy": ScalarKernels.mean_legacy), saturated."""
        p = k.params
        fn, b, (x, y) = self.function(k, 1)
        dtype = self.dtype(k.inputs[0])
        chain = p["mode"] == "chain"
        acc = b.alloca(F32 if chain else I64)
        run = p["run"]
        pairwise = self._pairwise(k, dtype, run) if chain and run else None
        kept, outer = p["kept"], p["outer"]

        def value(bb, ptr, at):  # DequantizeLinear: float32(s_in) * float32(q - zp_in)
            q = self.load_value(bb, ptr, at, dtype)[1]
            return bb.fmul(_f32(p["s_in"]), bb.sitofp(bb.sub(q, c64(p["zp_in"])), F32))

        def step(_i, offs):
            at = offs[0]
            if chain:
                v = b.call(pairwise, [x, at]) if run else value(b, x, at)
                b.store(b.fadd(b.load(acc, typ=F32), v), acc)
            elif run:
                with for_range(b, run, "r") as r:
                    v = self.load_value(b, x, b.add(at, r), dtype)[1]
                    b.store(b.add(b.load(acc, typ=I64), v), acc)
            else:
                v = self.load_value(b, x, at, dtype)[1]
                b.store(b.add(b.load(acc, typ=I64), v), acc)

        def out(index, offs):
            b.store(ZERO32 if chain else c64(0), acc)
            self.nest(b, [s for s, _ in outer], [[st for _, st in outer]], step, offsets=offs)
            lo, hi = (-128, 127) if dtype == "int8" else (0, 255)
            total = b.load(acc, typ=F32 if chain else I64)
            if p["mode"] == "legacy":  # MEAN's stage of the int32 sum
                v = self.mean_legacy(b, p, b.sext(b.trunc(total, I32), I64), lo, hi)
            else:
                v = getattr(self, f"_qmean_{p['mode']}")(b, p, total)
            self.store_value(b, ("i", self.clamp(b, v, lo, hi)), y, index, dtype)

        self.nest(b, [s for s, _ in kept], [[st for _, st in kept]], out)
        b.ret_void()
        return fn

    def _qmean_chain(self, b, p, total):
        """QuantizeLinear(total / float32(n)): rint(y / s_out) + zp_out in float32, nan -> zp_out,
        clipped to [lo - 1, hi + 1] before the integer saturation (qnn_pool.onnx_quantize)."""
        y = b.fdiv(b.fdiv(total, _f32(p["fn"])), _f32(p["s_out"]))
        rint = self.module.declare_intrinsic("llvm.roundeven", [F32])
        q = b.fadd(b.call(rint, [y]), _f32(p["zp_out"]))
        q = b.select(b.fcmp_unordered("uno", q, q), _f32(p["zp_out"]), q)
        q = b.select(b.fcmp_ordered("<", q, _f32(-1000.0)), _f32(-1000.0), q)
        q = b.select(b.fcmp_ordered(">", q, _f32(1000.0)), _f32(1000.0), q)
        return b.fptosi(q, I64)

    def _qmean_global(self, b, p, total):
        """MLAS's QLinearGlobalAveragePool: rint(float32(int32(S - zp_in n)) * scale) + zp_out."""
        s = b.trunc(b.sub(total, c64(p["zp_in"] * p["n"])), I32)
        rint = self.module.declare_intrinsic("llvm.roundeven", [F32])
        v = b.call(rint, [b.fmul(b.sitofp(s, F32), _f32(p["scale"]))])
        return b.add(self.rint_i64(b, v), c64(p["zp_out"]))

    def _qmean_tflite(self, b, p, total):
        """QuantizedMeanOrSum: MBQM(int32(S - zp_in n), M', e') + zp_out."""
        s = b.sext(b.trunc(b.sub(total, c64(p["zp_in"] * p["n"])), I32), I64)
        v = self.mbqm(b, s, c64(p["multiplier"]), c64(p["shift"]))
        return b.add(v, c64(p["zp_out"]))

    def _pairwise(self, k, dtype: str, n: int):
        """numpy's pairwise_sum of the n dequantized elements from ``base`` as internal
        functions ``float f(ptr x, i64 base)``, one per distinct length."""
        made: dict[int, ir.Function] = {}
        p = k.params

        def make(n: int) -> ir.Function:
            if n in made:
                return made[n]
            f = ir.Function(self.module, ir.FunctionType(F32, [PTR, I64]), f"{k.name}_pw{n}")
            f.linkage = "internal"
            made[n] = f
            bb = ir.IRBuilder(f.append_basic_block("entry"))
            x, base = f.args

            def val(i):
                q = self.load_value(bb, x, bb.add(base, i), dtype)[1]
                return bb.fmul(_f32(p["s_in"]), bb.sitofp(bb.sub(q, c64(p["zp_in"])), F32))

            if n < 8:
                res = ZERO32
                for i in range(n):
                    res = bb.fadd(res, val(c64(i)))
            elif n <= 128:
                cells = [bb.alloca(F32) for _ in range(8)]
                for j, cell in enumerate(cells):
                    bb.store(val(c64(j)), cell)
                full = n - n % 8
                with for_range(bb, full // 8 - 1, "blk") as it:
                    at = bb.add(bb.mul(it, c64(8)), c64(8))
                    for j, cell in enumerate(cells):
                        v = val(bb.add(at, c64(j)))
                        bb.store(bb.fadd(bb.load(cell, typ=F32), v), cell)
                r = [bb.load(c, typ=F32) for c in cells]
                res = bb.fadd(bb.fadd(bb.fadd(r[0], r[1]), bb.fadd(r[2], r[3])),
                              bb.fadd(bb.fadd(r[4], r[5]), bb.fadd(r[6], r[7])))
                for i in range(full, n):
                    res = bb.fadd(res, val(c64(i)))
            else:
                n2 = n // 2 - (n // 2) % 8
                left = bb.call(make(n2), [x, base])
                res = bb.fadd(left, bb.call(make(n - n2), [x, bb.add(base, c64(n2))]))
            bb.ret(res)
            return f

        return make(n)

    # -- FGAPL -------------------------------------------------------------------------------
    @emits(Kind.FGAPL)
    def k_fgapl(self, k):
        """FGAP's adds (sum_order.pool_program) in loops: any number of pixels."""
        fn, b, (x, y) = self.function(k, 1)
        shape = self.shape(k.inputs[0])
        layout = k.params["layout"]
        n, c = shape[0], shape[layout.index("C")]
        pixels = shape[layout.index("H")] * shape[layout.index("W")]
        steps = (c, 1) if layout == "NHWC" else (1, pixels)  # (pixel, channel) strides
        cells = [b.alloca(V16F) for _ in range(4 * 4 * 8 + 8)]
        full, tail = divmod(c, VEC)
        sum_fn = self._gap_mlas if k.params["accumulate"] == "mlas" else self._gap_torch
        with for_range(b, n, "img") as img:
            src, dst = b.mul(img, c64(pixels * c)), b.mul(img, c64(c))
            for count, lanes, first in ((full, VEC, c64(0)), (int(tail > 0), tail, None)):
                if not count:
                    continue
                with for_range(b, count, "cv") as cv:
                    c0 = b.mul(cv, c64(VEC)) if first is not None else c64(full * VEC)

                    def value(i, c0=c0, lanes=lanes):
                        at = b.add(b.add(src, b.mul(c0, c64(steps[1]))), b.mul(i, c64(steps[0])))
                        return self._gap_load(b, x, at, lanes, steps[1])

                    total = sum_fn(b, value, pixels, cells)
                    count_v = ir.Constant(V16F, [_f32(pixels)] * VEC)
                    self.vstore_lanes(b, b.fdiv(total, count_v), y, b.add(dst, c0), lanes)
        b.ret_void()
        return fn

    def _gap_load(self, b, x, at, lanes, lane_step):
        if lane_step == 1:
            return self.vload_lanes(b, x, at, lanes)
        vec = POS0  # NCHW: the channels' pixels lie H * W apart
        for j in range(lanes):
            v = self.load_at(b, x, b.add(at, c64(j * lane_step)), F32)
            vec = b.insert_element(vec, v, ir.Constant(I32T, j))
        return vec

    def _gap_mlas(self, b, value, n, cells):
        """MlasPoolGlobalKernel: 4 lanes over the pixels, (l0 + l2) + (l1 + l3), the rest."""
        lanes = cells[:4]
        for cell in lanes:
            b.store(POS0, cell)
        with for_range(b, n // 4, "px") as i:
            for j, cell in enumerate(lanes):
                v = value(b.add(b.mul(i, c64(4)), c64(j)))
                b.store(b.fadd(b.load(cell, typ=V16F), v), cell)
        ln = [b.load(cell, typ=V16F) for cell in lanes]
        total = b.fadd(b.fadd(ln[0], ln[2]), b.fadd(ln[1], ln[3]))
        for i in range(n // 4 * 4, n):
            total = b.fadd(total, value(c64(i)))
        return total

    def _gap_torch(self, b, value, n, cells):
        """torch_cpu.inner_sum: 8-pixel vectors in rows of 4, _multi_row_sum's cascade levels
        (acc[level][ilp][lane] in ``cells``), leftover vectors into acc[0], then the pixels
        after the last vector and the 8 lanes added to +0 in order."""
        acc = [[cells[(lv * 4 + i) * 8 : (lv * 4 + i + 1) * 8] for i in range(4)]
               for lv in range(4)]
        vectors, groups = n // 8, n // 32
        for cell in cells:
            b.store(POS0, cell)

        def add_into(dst, src):
            for d, s in zip(dst, src):
                b.store(b.fadd(b.load(d, typ=V16F), b.load(s, typ=V16F)), d)

        def add_row(row):  # acc[0][ilp][lane] += pixel (row * 4 + ilp) * 8 + lane
            for ilp in range(4):
                for lane in range(8):
                    at = b.add(b.mul(row, c64(32)), c64(ilp * 8 + lane))
                    d = acc[0][ilp][lane]
                    b.store(b.fadd(b.load(d, typ=V16F), value(at)), d)

        if groups:
            self._torch_cascade(b, acc, groups, add_row, add_into)
        for extra in range(groups * 4, vectors):  # into acc[0][0]
            for lane in range(8):
                d = acc[0][0][lane]
                b.store(b.fadd(b.load(d, typ=V16F), value(c64(extra * 8 + lane))), d)
        for ilp in range(1, 4):
            add_into(acc[0][0], acc[0][ilp])
        total = POS0
        for i in range(vectors * 8, n):
            total = b.fadd(total, value(c64(i)))
        for lane in range(8):
            total = b.fadd(total, b.load(acc[0][0][lane], typ=V16F))
        return total

    def _torch_cascade(self, b, acc, size, add_row, add_into):
        """_multi_row_sum over ``size`` rows: chunks of 2**power rows into level 0, each chunk
        carried up the levels until the row count's bit at that level is set."""
        power = max(4, math.ceil(math.log2(size)) // 4 if size > 1 else 0)
        step, mask = 1 << power, (1 << power) - 1
        chunks = size // step

        def clear(level):
            for row in level:
                for cell in row:
                    b.store(POS0, cell)

        if chunks:
            with for_range(b, chunks, "chunk") as ch:
                with for_range(b, step, "row") as r:
                    add_row(b.add(b.mul(ch, c64(step)), r))
                i = b.mul(b.add(ch, c64(1)), c64(step))
                done = b.append_basic_block("cascade.done")
                for j in range(1, 4):
                    for dst, src in zip(acc[j], acc[j - 1]):
                        add_into(dst, src)
                    clear(acc[j - 1])
                    if j == 3:
                        b.branch(done)
                        break
                    nxt = b.append_basic_block(f"cascade.{j + 1}")
                    bit = b.and_(i, c64(mask << (j * power)))
                    b.cbranch(b.icmp_unsigned("!=", bit, c64(0)), done, nxt)
                    b.position_at_end(nxt)
                b.position_at_end(done)
        if size > chunks * step:
            with for_range(b, size - chunks * step, "rest") as r:
                add_row(b.add(r, c64(chunks * step)))
        for j in range(1, 4):
            for dst, src in zip(acc[0], acc[j]):
                add_into(dst, src)


__all__ = ["ReduceKernels"]
