"""The IR of float convolutions that sum in a given float32 order (float_conv.py, sum_order.py):

    FIM2COL  NHWC windows -> rows of K in im2col's (channel, kernel row, kernel column) order
    FCONV    per group, rows x output channels: 16 channels per vector, a register tile of
             rows x vectors, each output's blocks summed as sum_order says (llvm.fma.v16f32
             chains, or products rounded and added), bias and relu after

The vector helpers FCONV shares with the float depthwise kernels (depthwise.py) and FGAPL
(reductions.py) live here: ``vload_lanes`` / ``vstore_lanes`` (a buffer's last channels),
``blocks_sum`` (sum_order's blocks) and ``epilogue`` (bias, relu).

Vector lanes are independent outputs, so each output's chain keeps its order; no fast-math flag
is set, so LLVM neither reassociates nor contracts a product and a sum into an FMA.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from partita.backends.llvm.emit.base import F32, Family, c64, for_range, via
from partita.backends.llvm.kinds import Kind, emits

from .gemm import V16F, VEC

I8T = ir.IntType(8)
I32T = ir.IntType(32)
I64T = ir.IntType(64)
NEG0 = ir.Constant(V16F, [ir.Constant(F32, -0.0)] * VEC)
POS0 = ir.Constant(V16F, [ir.Constant(F32, 0.0)] * VEC)


class FloatConvKernels(Family):
    # what it uses of the other kernel families (through the emit context)
    part_function = via("gemm")
    splat_f = via("gemm")
    split_run = via("pool")
    vfma = via("gemm")
    vload_f = via("gemm")
    vstore_f = via("gemm")

    # -- helpers ---------------------------------------------------------------------------
    def vload_lanes(self, b, ptr, index, lanes: int):
        """A vector of ``lanes`` floats from ``ptr[index]`` (the rest +0): a buffer's last
        channels, without reading past it."""
        if lanes == VEC:
            return self.vload_f(b, ptr, index)
        vec = POS0
        for i in range(lanes):
            v = self.load_at(b, ptr, b.add(index, c64(i)), F32)
            vec = b.insert_element(vec, v, ir.Constant(I32T, i))
        return vec

    def vstore_lanes(self, b, value, ptr, index, lanes: int):
        if lanes == VEC:
            return self.vstore_f(b, value, ptr, index)
        for i in range(lanes):
            v = b.extract_element(value, ir.Constant(I32T, i))
            self.store_at(b, v, ptr, b.add(index, c64(i)), F32)
        return None

    def epilogue(self, b, value, p, bias, at):
        """The fused bias add (float32, after the sum) and relu (NaN stays NaN)."""
        if p.get("bias") == "n":
            value = b.fadd(value, self.vload_f(b, bias, at))
        if p.get("relu"):  # np.maximum(x, 0): +0 for x <= 0 (-0 too), NaN stays NaN
            value = b.select(b.fcmp_ordered("<=", value, POS0), POS0, value)
        return value

    def blocks_sum(self, b, blocks, outs: int, product, chain, lanes=None, start=None):
        """Each of ``outs`` outputs summed block by block: ``product(kk, j)`` gives output j's
        (a, w) vectors at k (kk an int in unrolled blocks), ``chain(k0, k1, init)`` runs an FMA
        chain over all outputs and returns their vectors, ``lanes(k0, k1)`` each output's 8
        lane sums (MLAS's M=1 transposed-B kernel). C starts at ``start`` (a bias) or +0."""
        c = list(start) if start is not None else [POS0] * outs
        for k0, k1, kind, add in blocks:
            if kind == "sum":  # rounded products, added left to right (unrolled: <= 4)
                acc = [None] * outs
                for kk in range(k0, k1):
                    for j in range(outs):
                        x, w = product(kk, j)
                        t = b.fmul(x, w)
                        acc[j] = t if acc[j] is None else b.fadd(acc[j], t)
            elif kind.startswith("lanes"):
                acc = [_reduce_lanes(b, x, kind) for x in lanes(k0, k1)]
            else:
                acc = chain(k0, k1, NEG0 if kind == "fma" else POS0)
            c = [b.fadd(a, old) if add else a for a, old in zip(acc, c)]
        return c

    # -- FIM2COL -----------------------------------------------------------------------------
    @emits(Kind.FIM2COL)
    def k_fim2col(self, k):
        """y[pixel, (c, ky, kx)] = x[oy*sh + ky*dh - top, ox*sw + kx*dw - left, c], 0 outside."""
        fn, b, (x, y) = self.function(k, 1)
        n, h, w, c = self.shape(k.inputs[0])
        p = k.params
        (sh, sw), (dh, dw), (kh, kw) = p["strides"], p["dilation"], p["kernel"]
        top, left = p["padding"][0], p["padding"][1]
        oh, ow = p["out"]
        kk = c * kh * kw
        with (
            for_range(b, n * oh, "ny") as ny,
            for_range(b, ow, "ox") as ox,
            for_range(b, kh, "ky") as ky,
            for_range(b, kw, "kx") as kx,
        ):
            img, oy = b.sdiv(ny, c64(oh)), b.srem(ny, c64(oh))
            iy, ix, inside = self.window_tap(b, (oy, ox), (ky, kx), (sh, sw), (dh, dw),
                                                 (top, left), (h, w))
            dst = b.add(b.mul(b.add(b.mul(ny, c64(ow)), ox), c64(kk)),
                        b.add(b.mul(ky, c64(kw)), kx))
            src = b.mul(b.add(b.mul(b.add(b.mul(img, c64(h)), iy), c64(w)), ix), c64(c))
            with b.if_else(inside) as (then, otherwise):
                with then, for_range(b, c, "ic") as ic:
                    v = self.load_at(b, x, b.add(src, ic), F32)
                    self.store_at(b, v, y, b.add(dst, b.mul(ic, c64(kh * kw))), F32)
                with otherwise, for_range(b, c, "iz") as ic:
                    zero = ir.Constant(F32, 0.0)
                    self.store_at(b, zero, y, b.add(dst, b.mul(ic, c64(kh * kw))), F32)
        b.ret_void()
        return fn

    # -- FCONV -------------------------------------------------------------------------------
    @emits(Kind.FCONV)
    def k_fconv(self, k):
        """Rows (img, pixel) x output channels of each group, tile by tile (sum_order.Tile);
        with ``threads`` 2, each tile's rows in two halves, the second for the driver's worker
        (pool.py): every output keeps its own chain, so the bits do not depend on the split."""
        p = k.params
        fn, b, args = self.function(k, len(k.inputs))
        (a_ptr, y), bias = (args[0], args[-1]), self.cargs.get("bias")
        wt = self.cargs["wt"] if "wt" in self.cargs else args[1]  # packed at run time: WPACK
        quant = (self.cargs["qscale"], self.cargs["qzp"]) if p.get("quant") else (None, None)
        if p.get("threads", 1) < 2:
            self._fconv_rows(b, p, (a_ptr, wt, bias, y, *quant))
            b.ret_void()
            return fn
        null = ir.Constant(ir.PointerType(), None)
        pointers = [a_ptr, wt, null if bias is None else bias, y,
                    *(null if q is None else q for q in quant)]

        def half(i):
            def emit(pb, ps):
                self._fconv_rows(pb, p, (ps[0], ps[1], None if bias is None else ps[2], ps[3],
                                         *(None if q is None else ps[4 + j]
                                           for j, q in enumerate(quant))), i)

            return self.part_function(k, f"h{i}", pointers, emit)

        self.split_run(k, b, pointers, [half(0), half(1)])
        b.ret_void()
        return fn

    def _fconv_rows(self, b, p, ptrs, half=None):
        """Every tile of every image and group; ``half`` 0 or 1: that half of each tile's rows
        (of its channels where a tile has one row)."""
        cells = [b.alloca(V16F) for _ in range(VEC)]
        if any(blk[2].startswith("lanes") for t in p["tiles"] for blk in t[4]):
            cells += [b.alloca(V16F) for _ in range(8 * 4)]  # 8 lanes x up to 4 vectors
        with for_range(b, p["images"], "img") as img, for_range(b, p["G"], "g") as g:
            for p0, p1, m0, m1, blocks in p["tiles"]:
                box = _half_box((p0, p1, m0, m1), half)
                if box is not None:
                    self._fconv_tile(b, p, ptrs, cells, img, g, box, [tuple(x) for x in blocks])

    def _fconv_tile(self, b, p, ptrs, cells, img, g, box, blocks):
        p0, p1, m0, m1 = box
        full, tail = divmod(m1 - m0, VEC)
        # the register tile (each lane an output with its own chain: any tile, the same bits):
        # AVX-512's 32 registers hold 4 rows x 4 vectors or 8 x 1; where a 16-float vector is
        # two of 16 registers (AVX2), 6 x 1 (12 accumulators, 2 weight registers and the
        # broadcast: MLAS's FMA3 tile). 3 x 2 needed 17 registers and spilled two
        # accumulators in every k step (14x14 384 -> 96: 14.3 GMAC/s)
        wide = 4 if p.get("regs", 32) >= 32 else 1
        steps = []  # (vectors per step, steps, first vector, lanes of the last vector)
        if full // wide:
            steps.append((wide, full // wide, 0, VEC))
        if full % wide:
            steps.append((1, full % wide, full // wide * wide, VEC))
        if tail:
            steps.append((1, 1, full, tail))
        lanes_kind = any(blk[2].startswith("lanes") for blk in blocks)
        for nvec, count, v0, lanes in steps:
            if lanes_kind:
                rows = 1
            elif wide == 4:
                rows = max(1, min(8, VEC // nvec))
            else:
                rows = 6 // nvec
            prow = p1 - p0
            # the rows left over form one shorter tile (not single rows: 2 chains in flight)
            parts = ((rows, prow // rows, 0), (prow % rows, 1, prow // rows * rows))
            cols_outer = fconv_order(p, m1 - m0) == "cols"
            for nrows, rcount, r0 in parts:
                if rcount == 0 or nrows == 0:
                    continue
                loops = (("vt", count), ("rt", rcount)) if cols_outer else \
                    (("rt", rcount), ("vt", count))
                with for_range(b, loops[0][1], loops[0][0]) as o, \
                        for_range(b, loops[1][1], loops[1][0]) as i:
                    rt, vt = (i, o) if cols_outer else (o, i)
                    row = b.add(b.add(b.mul(img, c64(p["size"])), c64(p0 + r0)),
                                b.mul(rt, c64(nrows)))
                    mm = b.add(c64(m0 + v0 * VEC), b.mul(vt, c64(nvec * VEC)))
                    self._fconv_step(b, p, ptrs, cells, g, row, mm, nrows, nvec, lanes, blocks)

    def _fconv_step(self, b, p, ptrs, cells, g, row, mm, nrows, nvec, lanes, blocks):
        """nrows x nvec outputs at (row, channel mm of group g): their blocks, epilogue, store
        (the last vector's first ``lanes`` lanes)."""
        _, _, bias, y = ptrs[:4]
        step = _Step(self, b, p, ptrs, cells, (g, row, mm), (nrows, nvec))
        chans = [b.add(b.add(b.mul(g, c64(p["M"])), mm), c64(v * VEC)) for v in range(nvec)]
        start = None
        if p.get("bias") == "init":  # nn.gemm under MLAS: C preloaded with the bias
            start = [self.vload_f(b, bias, chans[j % nvec]) for j in range(nrows * nvec)]
        sums = self.blocks_sum(b, blocks, nrows * nvec, step.product, step.chain,
                               step.lane_sums, start)
        for r in range(nrows):
            pix = b.add(row, c64(r))
            if p.get("out_pad"):  # a depthwise kernel's padded input (write_into_halos)
                ws, _, top, left, width = p["out_pad"]
                pix = b.add(b.mul(b.add(b.udiv(pix, c64(width)), c64(top)), c64(ws)),
                            b.add(b.urem(pix, c64(width)), c64(left)))
            for v in range(nvec):
                value = self.epilogue(b, sums[r * nvec + v], p, bias, chans[v])
                at = b.add(b.mul(pix, c64(p["O"])), chans[v])
                if p.get("quant"):
                    self.store_quantized(b, value, p, ptrs[4:], y, at,
                                         lanes if v == nvec - 1 else VEC)
                else:
                    self.vstore_lanes(b, value, y, at, lanes if v == nvec - 1 else VEC)

    def store_quantized(self, b, value, p, quant, y, at, lanes: int):
        """ONNX's QuantizeLinear of 16 float32 outputs to int8/uint8, per tensor, stored at
        y[at]: x / scale (float32), rint (half to even), NaN -> 0, clamped to [min - zp, max -
        zp] in float32 (integers: exact), + zp: the QUANT kernel's values
        (emit/int8/quant_vectors.py) for the same float32 inputs."""
        scale_ptr, zp_ptr = quant
        info = np.iinfo(p["quant"])
        zp = self.load_at(b, zp_ptr, c64(0), I32T)
        scale = self.splat_f(b, self.load_at(b, scale_ptr, c64(0), F32))
        low = self.splat_f(b, b.sitofp(b.sub(ir.Constant(I32T, int(info.min)), zp), F32))
        high = self.splat_f(b, b.sitofp(b.sub(ir.Constant(I32T, int(info.max)), zp), F32))
        rint = self.module.globals.get("llvm.rint.v16f32") or ir.Function(
            self.module, ir.FunctionType(V16F, [V16F]), name="llvm.rint.v16f32")
        r = b.call(rint, [b.fdiv(value, scale)])
        r = b.select(b.fcmp_unordered("uno", r, r), POS0, r)
        r = b.select(b.fcmp_ordered("<", r, low), low, r)
        r = b.select(b.fcmp_ordered(">", r, high), high, r)
        v16i = ir.VectorType(I32T, VEC)
        zv = b.insert_element(ir.Constant(v16i, ir.Undefined), zp, ir.Constant(I32T, 0))
        zv = b.shuffle_vector(zv, ir.Constant(v16i, ir.Undefined),
                              ir.Constant(v16i, [0] * VEC))
        q = b.trunc(b.add(b.fptosi(r, v16i), zv), ir.VectorType(I8T, VEC))
        if lanes == VEC:
            b.store(q, b.gep(y, [at], source_etype=I8T), align=1)
            return
        for i in range(lanes):
            self.store_at(b, b.extract_element(q, ir.Constant(I32T, i)), y,
                          b.add(at, c64(i)), I8T)


FCONV_ORDER = None  # tests force "rows" or "cols" (each build in its own cache folder)


def fconv_order(p: dict, channels: int) -> str:
    """FCONV's tile loops: "rows" (row tiles outer: the tile's rows of x stay in L1 while
    every weight column passes) or "cols" (16-channel weight strips outer: a strip stays in
    L1 while every row passes), whichever reads less from farther away: the weights'
    K x channels against the rows' size x K, so "cols" where channels exceed the rows
    (MobileNetV2's 7 x 7 and 14 x 14 expansions). Any order: the same chains, the same bits."""
    if FCONV_ORDER is not None:
        return FCONV_ORDER
    return "cols" if channels > p["size"] else "rows"


def _reduce_lanes(b, x, kind: str):
    """MLAS's M=1 transposed-B kernel's reduction of 8 lane sums for a 4-, 2- or 1-column block
    (onnxruntime_mlas._reduce_lanes)."""
    if kind == "lanes4":  # the 4-row transpose-and-add
        left = b.fadd(b.fadd(b.fadd(x[0], x[1]), x[2]), x[3])
        return b.fadd(left, b.fadd(b.fadd(b.fadd(x[4], x[5]), x[6]), x[7]))
    if kind == "lanes2":  # unpack, add halves, add 64-bit halves
        left = b.fadd(b.fadd(x[0], x[2]), b.fadd(x[4], x[6]))
        return b.fadd(left, b.fadd(b.fadd(x[1], x[3]), b.fadd(x[5], x[7])))
    left = b.fadd(b.fadd(x[0], x[1]), b.fadd(x[2], x[3]))  # vhaddps
    return b.fadd(left, b.fadd(b.fadd(x[4], x[5]), b.fadd(x[6], x[7])))


def _half_box(box, half):
    """Half ``half`` (0, 1; None: all) of a tile's rows, or of its channels (whole vectors)
    where it has one row; None where that half is empty."""
    p0, p1, m0, m1 = box
    if half is None:
        return box
    if p1 - p0 >= 2:
        mid = (p0 + p1) // 2
        return (p0, mid, m0, m1) if half == 0 else (mid, p1, m0, m1)
    mid = m0 + (m1 - m0) // VEC // 2 * VEC
    if mid == m0:  # one vector: all of it in the first half
        return box if half == 0 else None
    return (p0, p1, m0, mid) if half == 0 else (p0, p1, mid, m1)


class _Step:
    """One FCONV register tile: nrows rows (A read as splatted scalars) x nvec weight vectors,
    the accumulators in ``cells`` (allocas from the entry block; SROA makes them registers)."""

    def __init__(self, em, b, p, ptrs, cells, at, tile):
        self.em, self.b, self.cells = em, b, cells
        self.a_ptr, self.wt = ptrs[0], ptrs[1]
        (g, row, mm), (self.nrows, self.nvec) = at, tile
        self.mp = p["Mp"]
        self.a_base = [b.add(b.mul(b.add(row, c64(r)), c64(p["lda"])), b.mul(g, c64(p["Kg"])))
                       for r in range(self.nrows)]
        self.w_base = b.add(b.mul(b.mul(g, c64(p["Kg"])), c64(self.mp)), mm)

    def a_at(self, r, kk):
        b = self.b
        return self.em.splat_f(b, self.em.load_at(b, self.a_ptr, b.add(self.a_base[r], kk), F32))

    def w_at(self, kk, v):
        b = self.b
        at = b.add(self.w_base, b.add(b.mul(kk, c64(self.mp)), c64(v * VEC)))
        return self.em.vload_f(b, self.wt, at)

    def product(self, kk, j):
        return self.a_at(j // self.nvec, c64(kk)), self.w_at(c64(kk), j % self.nvec)

    def chain(self, k0, k1, init):
        """FMA chains from ``init`` over k0..k1-1 for every output of the tile."""
        b, cells, nvec = self.b, self.cells, self.nvec
        outs = self.nrows * nvec
        for j in range(outs):
            b.store(init, cells[j])
        # k0 hidden from LLVM (an empty asm), as in gemm.py: a known k0 of a later block
        # was folded into k | 1 addressing from more base registers
        start = b.call(ir.InlineAsm(ir.FunctionType(I64T, [I64T]), "", "=r,0"), [c64(k0)])
        with for_range(b, k1 - k0, "k") as i:
            kk = b.add(i, start)
            ws = [self.w_at(kk, v) for v in range(nvec)]
            for r in range(self.nrows):
                av = self.a_at(r, kk)
                for v in range(nvec):
                    cell = cells[r * nvec + v]
                    b.store(self.em.vfma(b, av, ws[v], b.load(cell, typ=V16F)), cell)
        return [b.load(cells[j], typ=V16F) for j in range(outs)]

    def lane_sums(self, k0, k1):
        """8 lane sums (k mod 8, rounded products) per output of a one-row tile."""
        b, lane, nvec = self.b, self.cells[VEC:], self.nvec
        for j in range(8 * nvec):
            b.store(POS0, lane[j])

        def add(kk, slot):
            ws = [self.w_at(kk, v) for v in range(nvec)]
            av = self.a_at(0, kk)
            for v in range(nvec):
                cell = lane[v * 8 + slot]
                b.store(b.fadd(b.load(cell, typ=V16F), b.fmul(av, ws[v])), cell)

        full, rest = divmod(k1 - k0, 8)
        if full:
            with for_range(b, full, "k8") as i:
                for slot in range(8):
                    add(b.add(b.mul(i, c64(8)), c64(k0 + slot)), slot)
        for slot in range(rest):
            add(c64(k0 + full * 8 + slot), slot)
        return [[b.load(lane[v * 8 + j], typ=V16F) for j in range(8)] for v in range(nvec)]
