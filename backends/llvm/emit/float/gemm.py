"""Vectorized float32 matrix products for FDENSE and FBMM: a register tile of 6 (AVX-512) or 4
rows x 4 vectors of 16 floats, ``llvm.fma`` per weight vector and row, the weights read as
[K][N] rows (FDENSE packs them so at compile time). Accumulated in float32 in k order (as
ONNX Runtime's MLAS does, in its own order), so results differ from the reference's float64 sums
by float32 rounding (tests allow 1e-5 relative). Shapes whose N is not a multiple of 16, and
products whose B is read across rows (transpose_b), use float_kernels' double-precision loops."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import F32, Family, c64, for_range, via

VEC = 16
V16F = ir.VectorType(F32, VEC)
I32T = ir.IntType(32)
# the register tile: rows of A x vectors of B (params "rows" and "cols", float_ops.gemm_tile:
# 6 x 4 with AVX-512, 6 x 1 with 16 registers; these defaults: a plan made without them)
ROWS, COLS = 4, 4
KBLOCK = 128  # k steps of a block: 128 x 64 floats of a weight panel is 32 KB, in L1
PF_LOCALITY = 2  # the next block's prefetches: prefetcht1, into L2 (L1 holds this block)


MASK16 = ir.VectorType(ir.IntType(1), VEC)


def c32(v: int) -> ir.Constant:
    return ir.Constant(I32T, v)


def lanes(count: int) -> ir.Constant:
    """The mask of a vector's first ``count`` lanes."""
    return ir.Constant(MASK16, [ir.Constant(ir.IntType(1), int(i < count)) for i in range(VEC)])


class FloatGemm(Family):
    # what it uses of the other kernel families (through the emit context)
    split_run = via("pool")

    def vfma(self, b, a, w, acc):
        name = "llvm.fma.v16f32"
        fn = self.module.globals.get(name) or ir.Function(
            self.module, ir.FunctionType(V16F, [V16F] * 3), name=name
        )
        return b.call(fn, [a, w, acc])

    def vload_f(self, b, ptr, index, mask=None):
        """16 floats at ptr[index]; ``mask``: only the first ``mask`` (the rest 0.0)."""
        at = b.gep(ptr, [index], source_etype=F32)
        if mask is None:
            return b.load(at, typ=V16F, align=4)
        fn = self._intrinsic("llvm.masked.load.v16f32.p0", V16F,
                             [ir.PointerType(), I32T, MASK16, V16F])
        zero = ir.Constant(V16F, [ir.Constant(F32, 0.0)] * VEC)
        return b.call(fn, [at, c32(4), lanes(mask), zero])

    def vstore_f(self, b, value, ptr, index, mask=None):
        at = b.gep(ptr, [index], source_etype=F32)
        if mask is None:
            b.store(value, at, align=4)
            return
        fn = self._intrinsic("llvm.masked.store.v16f32.p0", ir.VoidType(),
                             [V16F, ir.PointerType(), I32T, MASK16])
        b.call(fn, [value, at, c32(4), lanes(mask)])

    def splat_f(self, b, value):
        undef = ir.Constant(V16F, ir.Undefined)
        vec = b.insert_element(undef, value, ir.Constant(I32T, 0))
        return b.shuffle_vector(vec, undef, ir.Constant(ir.VectorType(I32T, VEC), [0] * VEC))

    def gemm(self, b, cells, m_count, n_count, k_count, a_at, w_at, y_at, x, w, y, bias=None,
             relu=False):
        """y[m, n] = sum_k x[a_at(m, k)] * w[w_at(k, n0, v, cols) ... + 15]: vector v of the
        ``cols``-vector column block at n0, for n in steps of 16 (the last n_count % 16
        columns: one vector, masked: its weight panel is zero-padded to 16).
        ``cells``: rows x cols allocas of <16 x float> from the entry block (SROA turns
        them into registers); the weights' full panels are cols vectors wide."""
        nv, tail = divmod(n_count, VEC)
        wide = len(cells[0])
        tr = len(cells)  # the tile's rows; the rows past the last full tile are one more tile
        full, rem = divmod(m_count, tr)
        row_tiles = [t for t in ((tr, 0, full), (rem, full * tr, 1 if rem else 0)) if t[2]]
        for cols, vstart, vcount, mask in ((wide, 0, nv // wide, None),
                                           (1, (nv // wide) * wide, nv % wide, None),
                                           (1, nv, 1 if tail else 0, tail)):
            if vcount == 0:
                continue
            # loop order by traffic: rows outer streams every weight panel once per row
            # tile, panels outer streams the rows once per panel (ResNet50's 7 x 7 layers:
            # 9.4 MB of weights for each 4-row tile against 0.9 MB of rows per panel); the
            # last, shorter row tile runs inside the panel loop, while its panel is in cache
            row_count = full + (1 if rem else 0)
            panels_outer = (row_count * k_count * n_count + m_count * k_count
                            > vcount * m_count * k_count + k_count * n_count)

            def tile(rows, start, mt, nt, k0=None, kc=k_count, more=False, last=True,
                     ahead=0, cols=cols, vstart=vstart, mask=mask):
                k0 = c64(0) if k0 is None else k0
                m0 = b.add(c64(start), b.mul(mt, c64(tr)))
                n0 = b.mul(b.add(c64(vstart), b.mul(nt, c64(cols))), c64(VEC))
                self.gemm_tile(b, cells[:rows], cols, (k0, kc, more), m0, n0, a_at, w_at, y_at,
                               x, w, y, bias if last else None, relu and last, ahead, mask)

            if not panels_outer:
                for rows, start, count in row_tiles:
                    with for_range(b, count, "mt") as mt, for_range(b, vcount, "nt") as nt:
                        tile(rows, start, mt, nt)
                continue
            with for_range(b, vcount, "nt") as nt:
                if k_count < 2 * KBLOCK:
                    for rows, start, count in row_tiles:
                        with for_range(b, count, "mt") as mt:
                            tile(rows, start, mt, nt)
                    continue
                # few rows, long sums: KBLOCK steps of k at a time over all the row tiles, so
                # the panel's block (32 KB) is read from L1 by every tile; the sums wait in y
                # (float32, as in the registers: the same bits) and the epilogue runs last
                # (one loop over the blocks: the first starts from zero, the others from y);
                # one tile a block prefetches the next block into L2: the shorter last row
                # tile, run first, or else the first full tile
                blocks, tail = divmod(k_count, KBLOCK)
                order = row_tiles[::-1]
                with for_range(b, blocks, "kb") as kb:
                    k0 = b.mul(kb, c64(KBLOCK))
                    more = b.icmp_unsigned("!=", kb, c64(0))
                    for j, (rows, start, count) in enumerate(order):
                        if j == 0 and count > 1:  # the first full tile prefetches
                            tile(rows, start, c64(0), nt, k0, KBLOCK, more, False, KBLOCK)
                            start, count = start + rows, count - 1
                        with for_range(b, count, "mt") as mt:
                            tile(rows, start, mt, nt, k0, KBLOCK, more, False,
                                 KBLOCK if j == 0 else 0)
                for rows, start, count in row_tiles:
                    with for_range(b, count, "mt") as mt:
                        tile(rows, start, mt, nt, c64(blocks * KBLOCK), tail, True, True)

    def gemm_tile(self, b, cells, cols, span, m0, n0, a_at, w_at, y_at, x, w, y, bias, relu,
                  ahead=0, mask=None):
        """One register tile: len(cells) rows from m0 x ``cols`` vectors from n0, summed over
        ``span`` = (first k, steps, more: continue the sums stored in y) in k order, then the
        bias and a fused relu (``bias`` None and ``relu`` False: the sums so far), stored;
        ``mask``: only the first ``mask`` columns of the (single) vector are read and stored."""
        rows = len(cells)
        k0, kc, more = span
        zero = ir.Constant(V16F, [ir.Constant(F32, 0.0)] * VEC)
        for r in range(rows):
            for v in range(cols):
                start = zero
                if more is True:
                    start = self.vload_f(b, y, y_at(b.add(m0, c64(r)), b.add(n0, c64(v * VEC))),
                                         mask)
                elif more:  # an i1: the sums so far from y, or zero (the first block)
                    done = self.vload_f(b, y, y_at(b.add(m0, c64(r)), b.add(n0, c64(v * VEC))),
                                        mask)
                    start = b.select(more, done, zero)
                b.store(start, cells[r][v])
        with for_range(b, kc, "k") as ki:
            kk = b.add(k0, ki)
            ws = [self.vload_f(b, w, w_at(kk, n0, v, cols)) for v in range(cols)]
            if ahead:  # the panel's next block, from memory while this one is summed
                for v in range(cols):
                    at = b.gep(w, [w_at(b.add(kk, c64(ahead)), n0, v, cols)], source_etype=F32)
                    prefetch = self._intrinsic("llvm.prefetch.p0", ir.VoidType(),
                                               [ir.PointerType(), I32T, I32T, I32T])
                    b.call(prefetch, [at, c32(0), c32(PF_LOCALITY), c32(1)])
            for r in range(rows):
                a = self.load_at(b, x, a_at(b.add(m0, c64(r)), kk), F32)
                av = self.splat_f(b, a)
                for v in range(cols):
                    acc = b.load(cells[r][v], typ=V16F)
                    b.store(self.vfma(b, av, ws[v], acc), cells[r][v])
        for r in range(rows):
            for v in range(cols):
                n = b.add(n0, c64(v * VEC))
                at = y_at(b.add(m0, c64(r)), n)
                value = b.load(cells[r][v], typ=V16F)
                for addend in bias(at, n, mask) if bias is not None else ():
                    value = b.fadd(value, addend)  # a bias, then a residual, in order
                if relu:  # a fused nn.relu: as np.maximum(x, 0), -0 -> +0,
                    le = b.fcmp_ordered("<=", value, zero)  # NaN stays NaN
                    value = b.select(le, zero, value)
                self.vstore_f(b, value, y, at, mask)

    def gemm_cells(self, b, p):
        """The register tile's accumulators: params "rows" x "cols" allocas."""
        return [[b.alloca(V16F) for _ in range(p.get("cols", COLS))]
                for _ in range(p.get("rows", ROWS))]

    def dense_rows(self, k, m_count: int, suffix: str, n_count: int | None = None,
                   m_first: int = 0) -> ir.Function:
        """``void name(ptr x, ptr w, ptr y, ptr bias, ptr koff, ptr res)``: rows [0, m_count)
        of the product, x, y, a residual added after the bias (``residual``: float_conv's
        epilogue) and a per-element bias already offset to the first row; with
        ``n_count`` the first n_count columns (w, y and the bias offset to the first column: a
        whole 64-column panel, so the panel layout holds from there). An ``implicit``
        convolution's x is the (padded) image itself, its rows from ``m_first``: row m,
        column k reads the pixel (m // OW * sh, m % OW * sw) plus the tap offset koff[k]
        (float_conv.lower_fconv)."""
        p = k.params
        fty = ir.FunctionType(ir.VoidType(), [ir.PointerType()] * 6)
        fn = ir.Function(self.module, fty, name=f"{k.name}_{suffix}")
        fn.linkage = "internal"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        x, w, y, src, koff, res = fn.args
        k_, n_ = p["K"], p["N"]
        cells = self.gemm_cells(b, p)
        wide = len(cells[0])

        def w_at(kk, n0, v, cols):  # float_ops.panels: [N/wide*16][K][wide*16], [K][16]
            if cols == wide:
                return b.add(b.add(b.mul(n0, c64(k_)), b.mul(kk, c64(wide * VEC))), c64(v * VEC))
            return b.add(b.mul(n0, c64(k_)), b.mul(kk, c64(VEC)))

        bias = None
        if p.get("bias", "none") != "none" or p.get("residual"):

            def bias(at, n, mask=None):
                out = []
                if p["bias"] == "scalar":
                    out.append(self.splat_f(b, self.load_at(b, src, c64(0), F32)))
                elif p["bias"] != "none":
                    out.append(self.vload_f(b, src, n if p["bias"] == "n" else at, mask))
                if p.get("residual"):
                    out.append(self.vload_f(b, res, at, mask))
                return out

        def a_at(m, kk):
            if "implicit" not in p:
                return b.add(b.mul(m, c64(k_)), kk)
            wp, c, (sh, sw), ow = p["implicit"]
            m = b.add(m, c64(m_first))
            oy, ox = b.udiv(m, c64(ow)), b.urem(m, c64(ow))
            base = b.mul(b.add(b.mul(oy, c64(sh * wp)), b.mul(ox, c64(sw))), c64(c))
            return b.add(base, b.sext(self.load_at(b, koff, kk, I32T), c64(0).type))

        self.gemm(
            b, cells, m_count, n_ if n_count is None else n_count, k_, a_at,
            w_at,
            lambda m, n: b.add(b.mul(m, c64(n_)), n),
            x, w, y, bias, bool(p.get("relu")),
        )  # fmt: skip
        b.ret_void()
        return fn

    def k_fdense_vec(self, k):
        """The rows in one call, or (``threads`` 2) in two halves, the second for the driver's
        worker thread (pool.py: claimed by whichever core gets to it first)."""
        p = k.params
        fn, b, args = self.function(k, len(k.inputs))
        x, y, w = args[0], args[-1], self.cargs["wt"]
        null = ir.Constant(ir.PointerType(), None)
        bias, koff = self.cargs.get("bias", null), self.cargs.get("koff", null)
        res = args[1] if p.get("residual") else null
        m_, k_, n_ = p["M"], p["K"], p["N"]
        if p.get("threads", 1) < 2:
            b.call(self.dense_rows(k, m_, "rows"), [x, w, y, bias, koff, res])
            b.ret_void()
            return fn
        nv = n_ // VEC
        wide = p.get("cols", COLS)
        panels = nv // wide
        tr = p.get("rows", ROWS)
        if panels >= 2 and (m_ < 2 * tr or (m_ // tr) * n_ + m_ > panels * m_ + n_):
            # the weights outweigh the rows (gemm's panels-outer case): each half takes half
            # the panels, so the two cores stream disjoint weights
            n_mid = panels // 2 * wide * VEC
            part_a = self.dense_rows(k, m_, "a", n_mid)
            part_b = self.dense_rows(k, m_, "b", n_ - n_mid)
            offsets = (0, n_mid * k_, n_mid, n_mid if p.get("bias") in ("n", "mn") else 0, 0,
                       n_mid if p.get("residual") else 0)
        else:  # halves of the rows
            first = (m_ // 2 // tr) * tr or m_ // 2
            part_a = self.dense_rows(k, first, "a")
            if "implicit" in p:  # the image is read whole, from row ``first``
                part_b = self.dense_rows(k, m_ - first, "b", m_first=first)
            else:
                part_b = self.dense_rows(k, m_ - first, "b") if m_ - first != first else part_a
            offsets = (0 if "implicit" in p else first * k_, 0, first * n_,
                       first * n_ if p.get("bias") == "mn" else 0, 0,
                       first * n_ if p.get("residual") else 0)
        # the second half's x, w, y, bias, koff and residual: the first's, advanced by
        # ``offsets`` floats
        first_half = (x, w, y, bias, koff, res)
        second = [b.gep(v, [c64(o)], source_etype=F32) if o else v
                  for v, o in zip(first_half, offsets)]
        pointers = [*first_half, *second]
        halves = [
            self.part_function(k, "ha", pointers, lambda pb, ps: pb.call(part_a, ps[:6])),
            self.part_function(k, "hb", pointers, lambda pb, ps: pb.call(part_b, ps[6:])),
        ]
        self.split_run(k, b, pointers, halves)
        b.ret_void()
        return fn

    def part_function(self, k, suffix: str, pointers, emit) -> ir.Function:
        """``void name(ptr* table)``: ``emit(builder, pointers)`` with the kernel's pointers
        read from ``table`` (the layout split_run stores)."""
        ptr = ir.PointerType()
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [ptr]), f"{k.name}_{suffix}")
        fn.linkage = "internal"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        ps = [self.load_at(b, fn.args[0], c64(i), ptr) for i in range(len(pointers))]
        emit(b, ps)
        b.ret_void()
        return fn

    def k_fbmm_vec(self, k):
        """Batched, B read as [K][N] (transpose_b false): one gemm per batch."""
        p = k.params
        fn, b, (x, w, y) = self.function(k, 2)
        m_, k_, n_ = p["M"], p["K"], p["N"]
        cells = self.gemm_cells(b, p)
        with for_range(b, p["B"], "bt") as bt:
            xb = b.mul(bt if p["bx"] > 1 else c64(0), c64(m_ * k_))
            wb = b.mul(bt if p["by"] > 1 else c64(0), c64(n_ * k_))
            yb = b.mul(bt, c64(m_ * n_))

            def a_at(m, kk):
                inner = b.add(b.mul(kk, c64(m_)), m) if p["ta"] else b.add(b.mul(m, c64(k_)), kk)
                return b.add(xb, inner)

            self.gemm(
                b, cells, m_, n_, k_, a_at,
                lambda kk, n0, v, cols: b.add(
                    wb, b.add(b.mul(kk, c64(n_)), b.add(n0, c64(v * VEC)))
                ),
                lambda m, n: b.add(yb, b.add(b.mul(m, c64(n_)), n)),
                x, w, y,
            )  # fmt: skip
        b.ret_void()
        return fn


    def k_fbmm_dot(self, k):
        """Batched with B read as [N][K] (transpose_b, K a multiple of 16): each output a dot
        product of 16-float chunks along k, reduced once."""
        p = k.params
        fn, b, (x, w, y) = self.function(k, 2)
        m_, k_, n_ = p["M"], p["K"], p["N"]
        cell = b.alloca(V16F)
        name = "llvm.vector.reduce.fadd.v16f32"
        reduce = self.module.globals.get(name) or ir.Function(
            self.module, ir.FunctionType(F32, [F32, V16F]), name=name
        )
        with for_range(b, p["B"], "bt") as bt, for_range(b, m_, "m") as m:
            xb = b.add(b.mul(bt if p["bx"] > 1 else c64(0), c64(m_ * k_)), b.mul(m, c64(k_)))
            wb = b.mul(bt if p["by"] > 1 else c64(0), c64(n_ * k_))
            yb = b.mul(b.add(b.mul(bt, c64(m_)), m), c64(n_))
            with for_range(b, n_, "n") as n:
                b.store(ir.Constant(V16F, [ir.Constant(F32, 0.0)] * VEC), cell)
                row = b.add(wb, b.mul(n, c64(k_)))
                with for_range(b, k_ // VEC, "kc") as kc:
                    off = b.mul(kc, c64(VEC))
                    xv = self.vload_f(b, x, b.add(xb, off))
                    wv = self.vload_f(b, w, b.add(row, off))
                    b.store(self.vfma(b, xv, wv, b.load(cell, typ=V16F)), cell)
                total = b.call(reduce, [ir.Constant(F32, 0.0), b.load(cell, typ=V16F)])
                self.store_at(b, total, y, b.add(yb, n), F32)
        b.ret_void()
        return fn


__all__ = ["FloatGemm", "VEC"]
