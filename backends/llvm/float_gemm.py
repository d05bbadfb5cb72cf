"""Vectorized float32 matrix products for FDENSE and FBMM: a register tile of 6 (AVX-512) or 4
rows x 4 vectors of 16 floats, ``llvm.fma`` per weight vector and row, the weights read as
[K][N] rows (FDENSE packs them so at compile time). Accumulated in float32 in k order (as
ONNX Runtime's MLAS does, in its own order), so results differ from the reference's float64 sums
by float32 rounding (tests allow 1e-5 relative). Shapes whose N is not a multiple of 16, and
products whose B is read across rows (transpose_b), use float_kernels' double-precision loops."""

from __future__ import annotations

from llvmlite import ir

from .codegen import F32, c64, for_range

VEC = 16
V16F = ir.VectorType(F32, VEC)
I32T = ir.IntType(32)
# the register tile: rows of A x vectors of B (params["rows"], float_lower.gemm_rows: 6 rows with
# AVX-512, else ROWS)
ROWS, COLS = 4, 4


class FloatGemm:
    def vfma(self, b, a, w, acc):
        name = "llvm.fma.v16f32"
        fn = self.module.globals.get(name) or ir.Function(
            self.module, ir.FunctionType(V16F, [V16F] * 3), name=name
        )
        return b.call(fn, [a, w, acc])

    def vload_f(self, b, ptr, index):
        return b.load(b.gep(ptr, [index], source_etype=F32), typ=V16F, align=4)

    def vstore_f(self, b, value, ptr, index):
        b.store(value, b.gep(ptr, [index], source_etype=F32), align=4)

    def splat_f(self, b, value):
        undef = ir.Constant(V16F, ir.Undefined)
        vec = b.insert_element(undef, value, ir.Constant(I32T, 0))
        return b.shuffle_vector(vec, undef, ir.Constant(ir.VectorType(I32T, VEC), [0] * VEC))

    def gemm(self, b, cells, m_count, n_count, k_count, a_at, w_at, y_at, x, w, y, bias=None,
             relu=False):
        """y[m, n] = sum_k x[a_at(m, k)] * w[w_at(k, n0, v, cols) ... + 15]: vector v of the
        ``cols``-vector column block at n0, for n in steps of 16.
        ``cells``: rows x COLS allocas of <16 x float> from the entry block (SROA turns
        them into registers)."""
        nv = n_count // VEC
        tr = len(cells)  # the tile's rows
        for rows, start, count in ((tr, 0, m_count // tr), (1, (m_count // tr) * tr,
                                                              m_count % tr)):
            if count == 0:
                continue
            for cols, vstart, vcount in ((COLS, 0, nv // COLS), (1, (nv // COLS) * COLS,
                                                                 nv % COLS)):
                if vcount == 0:
                    continue
                # loop order by traffic: rows outer streams every weight panel once per row
                # tile, panels outer streams the rows once per panel (ResNet50's 7 x 7 layers:
                # 9.4 MB of weights for each 4-row tile against 0.9 MB of rows per panel)
                panels_outer = (count * k_count * n_count + m_count * k_count
                                > vcount * m_count * k_count + k_count * n_count)
                loops = (("nt", vcount), ("mt", count)) if panels_outer else (
                    ("mt", count), ("nt", vcount))
                with for_range(b, loops[0][1], loops[0][0]) as i0, \
                        for_range(b, loops[1][1], loops[1][0]) as i1:
                    mt, nt = (i1, i0) if panels_outer else (i0, i1)
                    m0 = b.add(c64(start), b.mul(mt, c64(rows)))
                    n0 = b.mul(b.add(c64(vstart), b.mul(nt, c64(cols))), c64(VEC))
                    zero = ir.Constant(V16F, [ir.Constant(F32, 0.0)] * VEC)
                    for r in range(rows):
                        for v in range(cols):
                            b.store(zero, cells[r][v])
                    with for_range(b, k_count, "k") as kk:
                        ws = [self.vload_f(b, w, w_at(kk, n0, v, cols)) for v in range(cols)]
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
                            if bias is not None:  # nn.gemm: the bias added to the sum
                                value = b.fadd(value, bias(at, n))
                            if relu:  # a fused nn.relu: as np.maximum(x, 0), -0 -> +0,
                                zero = ir.Constant(V16F, [ir.Constant(F32, 0.0)] * VEC)
                                le = b.fcmp_ordered("<=", value, zero)  # NaN stays NaN
                                value = b.select(le, zero, value)
                            self.vstore_f(b, value, y, at)

    def gemm_cells(self, b, rows: int = ROWS):
        return [[b.alloca(V16F) for _ in range(COLS)] for _ in range(rows)]

    def dense_rows(self, k, m_count: int, suffix: str, n_count: int | None = None) -> ir.Function:
        """``void name(ptr x, ptr w, ptr y, ptr bias)``: rows [0, m_count) of the product, x, y
        (and a per-element bias) already offset to the first row; with ``n_count`` the first
        n_count columns (w, y and the bias offset to the first column: a whole 64-column
        panel, so the panel layout holds from there)."""
        p = k.params
        fty = ir.FunctionType(ir.VoidType(), [ir.PointerType()] * 4)
        fn = ir.Function(self.module, fty, name=f"{k.name}_{suffix}")
        fn.linkage = "internal"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        x, w, y, src = fn.args
        k_, n_ = p["K"], p["N"]
        cells = self.gemm_cells(b, p.get("rows", ROWS))

        def w_at(kk, n0, v, cols):  # float_lower.panels: [N/64][K][64], then [K][16] panels
            if cols == COLS:
                return b.add(b.add(b.mul(n0, c64(k_)), b.mul(kk, c64(COLS * VEC))), c64(v * VEC))
            return b.add(b.mul(n0, c64(k_)), b.mul(kk, c64(VEC)))

        bias = None
        if p.get("bias", "none") != "none":

            def bias(at, n):
                if p["bias"] == "scalar":
                    return self.splat_f(b, self.load_at(b, src, c64(0), F32))
                return self.vload_f(b, src, n if p["bias"] == "n" else at)

        self.gemm(
            b, cells, m_count, n_ if n_count is None else n_count, k_,
            lambda m, kk: b.add(b.mul(m, c64(k_)), kk),
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
        fn, b, (x, y) = self.function(k, 1)
        w = self.cargs["wt"]
        bias = self.cargs.get("bias", ir.Constant(ir.PointerType(), None))
        m_, k_, n_ = p["M"], p["K"], p["N"]
        if p.get("threads", 1) < 2:
            b.call(self.dense_rows(k, m_, "rows"), [x, w, y, bias])
            b.ret_void()
            return fn
        nv = n_ // VEC
        panels = nv // COLS
        tr = p.get("rows", ROWS)
        if panels >= 2 and (m_ // tr) * n_ + m_ > panels * m_ + n_:
            # the weights outweigh the rows (gemm's panels-outer case): each half takes half
            # the panels, so the two cores stream disjoint weights
            n_mid = panels // 2 * COLS * VEC
            part_a = self.dense_rows(k, m_, "a", n_mid)
            part_b = self.dense_rows(k, m_, "b", n_ - n_mid)
            offsets = (0, n_mid * k_, n_mid, n_mid if p.get("bias") in ("n", "mn") else 0)
        else:  # halves of the rows
            first = (m_ // 2 // tr) * tr or m_ // 2
            part_a = self.dense_rows(k, first, "a")
            part_b = self.dense_rows(k, m_ - first, "b") if m_ - first != first else part_a
            offsets = (first * k_, 0, first * n_, first * n_ if p.get("bias") == "mn" else 0)
        # the second half's x, w, y and bias: the first's, advanced by ``offsets`` floats
        second = [b.gep(v, [c64(o)], source_etype=F32) if o else v
                  for v, o in zip((x, w, y, bias), offsets)]
        pointers = [x, w, y, bias, *second]
        halves = [
            self.part_function(k, "ha", pointers, lambda pb, ps: pb.call(part_a, ps[:4])),
            self.part_function(k, "hb", pointers, lambda pb, ps: pb.call(part_b, ps[4:])),
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
        cells = self.gemm_cells(b, p.get("rows", ROWS))
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
