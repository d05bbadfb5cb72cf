"""Vectorized float32 matrix products for FDENSE and FBMM: a register tile of 6 (AVX-512) or 4
rows x 4 vectors of 16 floats, ``llvm.fma`` per weight vector and row, the weights read as
[K][N] rows (FDENSE packs them so at compile time). Accumulated in float32 in k order (as
ONNX Runtime's MLAS does, in its own order), so results differ from the reference's float64 sums
by float32 rounding (tests allow 1e-5 relative). Shapes whose N is not a multiple of 16, and
products whose B is read across rows (transpose_b), use float_kernels' double-precision loops."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import F32, I64, Family, c64, for_range, via

from .affine_read import affine_row
from .ewise_vec import epilogue_value

VEC = 16
V16F = ir.VectorType(F32, VEC)
I32T = ir.IntType(32)
# the register tile: rows of A x vectors of B (params "rows" and "cols", float_products.gemm_tile:
# 6 x 4 with AVX-512, 6 x 1 with 16 registers; these defaults: a plan made without them)
ROWS, COLS = 4, 4
# cache blocking (gemm): a weight panel's k block, at most PANEL_FLOATS (16 KB: in L1 with
# the row tile's x), and about ROW_BLOCK_FLOATS of x per row block (L2 holds it while each
# panel's block passes); k up to 1.5 blocks is not split
PANEL_FLOATS = 4096
ROW_BLOCK_FLOATS = 16384
BIG_WEIGHTS = 1 << 18  # floats (1 MB): more than L2 holds beside x
# a product that adds a residual (ResNet's expansions) with at most this many weights (floats:
# 256 KB, in L2) and one k block runs row tiles outer (rows_outer): y and the residual move row
# by row; the panels-outer order read them in 64-byte column strips 1-8 KB apart, which the
# residual (a cold input) paid for: 56 x 56 64 -> 256 + residual 2.2 -> 1.8 ms
ROWS_FIRST_WEIGHTS = 1 << 16
PF_LOCALITY = 2  # prefetches ahead in a panel: prefetcht1, into L2
# x read in place, k > LONG_K, LONG_K_ROWS rows or more (BERT's FFN output 128 x 3072 x 768):
# k blocks of LONG_K_STEPS (in L2), the sums through y 6 times, not 48: 4.87 -> 4.04 ms (session
# 19, f512b); ResNet's implicit 3 x 3 convolutions ran 10% slower so, and keep 64
LONG_K, LONG_K_ROWS, LONG_K_STEPS = 1024, 64, 512
# a product computing its x (``pack``: a batch norm + relu) packs a row block's rows with all of
# k at once up to this many floats (a stack block, 1 MB), else each k block of them
PACK_FLOATS = 1 << 18


def k_blocks(k_count: int, cols: int, long_k: bool = False) -> tuple[int, int, int]:
    """(blocks, steps per block, steps of the last) for a k loop of a ``cols``-vector panel;
    ``long_k``: blocks of LONG_K_STEPS."""
    most = LONG_K_STEPS if long_k else max(64, PANEL_FLOATS // (cols * VEC))
    if k_count <= most * 3 // 2:
        return 1, k_count, k_count
    count = -(-k_count // most)
    size = -(-k_count // count)
    return count, size, k_count - (count - 1) * size


def row_block(kc: int, rows: int) -> int:
    """Full row tiles per row block (x's rows of one k block: about ROW_BLOCK_FLOATS)."""
    return max(1, ROW_BLOCK_FLOATS // (kc * rows))


MASK16 = ir.VectorType(ir.IntType(1), VEC)


def c32(v: int) -> ir.Constant:
    return ir.Constant(I32T, v)


def lanes(count: int) -> ir.Constant:
    """The mask of a vector's first ``count`` lanes."""
    return ir.Constant(MASK16, [ir.Constant(ir.IntType(1), int(i < count)) for i in range(VEC)])


class FloatGemm(Family):
    # what it uses of the other kernel families (through the emit context)
    zero_border = via("fchunks")
    dense_split = via("fchunks")

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
             relu=False, rows_first=False, long_k=False, pack=None):
        """y[m, n] = sum_k x[a_at(m, k)] * w[w_at(k, n0, v, cols) ... + 15]: vector v of the
        ``cols``-vector column block at n0, for n in steps of 16 (the last n_count % 16
        columns: one vector, masked: its weight panel is zero-padded to 16).
        ``cells``: rows x cols allocas of <16 x float> from the entry block (SROA turns
        them into registers); the weights' full panels are cols vectors wide.

        Blocked for the caches (blocking): blocks of rows (row_block: about ROW_BLOCK_FLOATS
        of x per k block, in L2) x blocks of k (k_blocks: a weight panel's block in L1),
        each row block's panels in turn, every row tile of the block against one panel's
        block while it is in L1. Between k blocks the sums wait in y (float32, as in the
        registers), so each output is still one FMA chain in k order: the same bits as
        any other blocking or tile. ``long_k``: x's rows are read in place (not an implicit
        convolution's pixels): a long k takes longer blocks (LONG_K). ``pack(b, m, rows, k0,
        kn, into, stride)``: x's rows m .. m + rows, k0 .. k0 + kn as the tiles read them
        (lower/float_bn_reads.py: the batch norm + relu of x), written to ``into`` (row r at r *
        stride) once per row block, all of k (PACK_FLOATS), or once per row block and k
        block (the k blocks outer, also for a single row block); the tiles read ``into``."""
        nv, tail = divmod(n_count, VEC)
        wide = len(cells[0])
        tr = len(cells)  # the tile's rows; the rows past the last full tile are one more tile
        full, rem = divmod(m_count, tr)
        shorts = [(rem, full * tr)] if rem else []  # the short tiles after the full ones
        if 0 < rem < tr // 2 and full:  # a full tile and a tile of 1 or 2 rows: two halves
            full -= 1                   # (a tile of one row keeps 2 of the FMA units busy)
            half = (tr + rem + 1) // 2
            shorts = [(half, full * tr), (tr + rem - half, full * tr + half)]
        groups = [g for g in ((wide, 0, nv // wide, None),
                              (1, (nv // wide) * wide, nv % wide, None),
                              (1, nv, 1 if tail else 0, tail)) if g[2]]
        nkb, kc, klast = k_blocks(k_count, wide, long_k and k_count > LONG_K
                                  and m_count >= LONG_K_ROWS)
        per = row_block(kc, tr)  # full row tiles per row block
        if k_count * n_count > BIG_WEIGHTS:  # weights read from memory once per row block:
            per *= 4                          # fewer, larger blocks (x from L2)
        count = max(1, -(-full // per))  # row blocks of equal size, the short tiles in the last
        per = -(-full // count) if full else 0
        reader = [x, a_at]  # where the tiles read x: x itself, or a row block packed
        whole = False  # x's rows packed with all of k once per row block (else per k block)
        if pack is not None:
            whole = (per + 2) * tr * -(-k_count // VEC) * VEC <= PACK_FLOATS
            stride = -(-(k_count if whole or nkb == 1 else kc) // VEC) * VEC
            scratch = b.alloca(V16F, size=(per + 2) * tr * stride // VEC)
            scratch.align = 64

            def packed(t0, tiles, with_rem, k0, kn):
                m_lo = b.mul(t0, c64(tr))
                rows = tiles * tr + (sum(r for r, _ in shorts) if with_rem else 0)
                pack(b, m_lo, rows, k0, kn, scratch, stride)

                def a_packed(m, kk):
                    return b.add(b.mul(b.sub(m, m_lo), c64(stride)), b.sub(kk, k0))

                reader[:] = [scratch, a_packed]

        def tile(rows, m0, nt, span, last, group, fetch=None):
            cols, vstart, _, mask = group
            n0 = b.mul(b.add(c64(vstart), b.mul(nt, c64(cols))), c64(VEC))
            ahead = None
            if fetch == "panel":  # the next panel's block (same k): the next pass's
                nxt = b.add(n0, c64(cols * VEC))

                def ahead(kk, v):
                    return w_at(kk, nxt, v, cols)
            elif fetch == "k":  # this panel's next k block

                def ahead(kk, v):
                    return w_at(b.add(kk, c64(kc)), n0, v, cols)

            self.gemm_tile(b, cells[:rows], cols, span, m0, n0, reader[1], w_at, y_at,
                           reader[0], w, y, bias if last else None, relu if last else False,
                           ahead, mask)

        def tiles_pass(t0, tiles, with_rem, nt, span, last, group, fetch):
            """The row tiles t0 .. t0 + tiles (and the short last tile) against one panel's
            k block; the first of them prefetches (``fetch``) the block read next."""
            if with_rem:
                for i, (rows, start) in enumerate(shorts):
                    tile(rows, c64(start), nt, span, last, group, None if i else fetch)
            if tiles:
                first = 0
                if not with_rem:
                    tile(tr, b.mul(t0, c64(tr)), nt, span, last, group, fetch)
                    first = 1
                with for_range(b, tiles - first, "mt") as mt:
                    tile(tr, b.mul(b.add(b.add(t0, c64(first)), mt), c64(tr)), nt, span,
                         last, group)

        def k_loop(body):
            """body(first k, steps, more, last) for each k block in order."""
            if nkb > 1:
                with for_range(b, nkb - 1, "kb") as kb:
                    body(b.mul(kb, c64(kc)), kc, b.icmp_unsigned("!=", kb, c64(0)), False)
            body(c64((nkb - 1) * kc), klast, nkb > 1, True)

        def rows_outer(t0, tiles: int, with_rem: bool):
            """Row tiles outer, every panel inner (one k block): x's tile stays in L1 while
            the panels pass, y and a residual are read and written row by row."""
            def row_tile(rows, m0):
                for group in groups:
                    with for_range(b, group[2], "nt") as nt:
                        tile(rows, m0, nt, (c64(0), klast, False), True, group)
            if tiles:
                with for_range(b, tiles, "mt") as mt:
                    row_tile(tr, b.mul(b.add(t0, mt), c64(tr)))
            if with_rem:
                for rows, start in shorts:
                    row_tile(rows, c64(start))

        def panels_outer(t0, tiles: int, with_rem: bool):
            """Row tiles t0 .. t0 + tiles (and the short last tile) over every k block: k
            blocks outer (each panel's block read from memory once per row block); with
            a single row block, the panels outer, each read in k order once (one stream
            the prefetches stay ahead of)."""
            if count == 1 and (pack is None or whole):
                for group in groups:
                    with for_range(b, group[2], "nt") as nt:
                        k_loop(lambda k0, kn, more, last, nt=nt, group=group: tiles_pass(
                            t0, tiles, with_rem, nt, (k0, kn, more), last, group, "k"))
                return

            def step(k0, kn, more, last):
                if pack is not None and not whole:
                    packed(t0, tiles, with_rem, k0, kn)
                for group in groups:
                    with for_range(b, group[2], "nt") as nt:
                        tiles_pass(t0, tiles, with_rem, nt, (k0, kn, more), last, group,
                                   "panel")

            k_loop(step)

        def block(t0, tiles: int, with_rem: bool):
            if pack is not None and (whole or nkb == 1):
                packed(t0, tiles, with_rem, c64(0), k_count)
            (rows_outer if nkb == 1 and rows_first else panels_outer)(t0, tiles, with_rem)

        if count > 1:
            with for_range(b, count - 1, "mb") as mb:
                block(b.mul(mb, c64(per)), per, False)
        block(c64((count - 1) * per), full - (count - 1) * per, bool(shorts))

    def gemm_tile(self, b, cells, cols, span, m0, n0, a_at, w_at, y_at, x, w, y, bias, relu,
                  ahead=None, mask=None):
        """One register tile: len(cells) rows from m0 x ``cols`` vectors from n0, summed over
        ``span`` = (first k, steps, more: continue the sums stored in y) in k order, then the
        bias and a fused relu (``bias`` None and ``relu`` False: the sums so far), stored;
        ``mask``: only the first ``mask`` columns of the (single) vector are read and stored;
        ``ahead(k, v)``: a weight index prefetched into L2 at step k (the next panel's)."""
        rows = len(cells)
        k0, kc, more = span
        # k0 hidden from LLVM (an empty asm): with k0 a known even constant (the last k
        # block) it addressed the unrolled loop's odd steps as k | 1 from six more bases and
        # spilled accumulators: BERT's 128 x 768 x 3072 ran at 28 GMAC/s, with this 37
        k0 = b.call(ir.InlineAsm(ir.FunctionType(I64, [I64]), "", "=r,0"), [k0])
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
            if ahead is not None:  # the next panel's block, from memory while this one is summed
                for v in range(cols):
                    at = b.gep(w, [ahead(kk, v)], source_etype=F32)
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
                if callable(relu):  # an elementwise epilogue (dense_rows: params "act")
                    value = relu(value)
                elif relu:  # a fused nn.relu: as np.maximum(x, 0), -0 -> +0,
                    le = b.fcmp_ordered("<=", value, zero)  # NaN stays NaN
                    value = b.select(le, zero, value)
                self.vstore_f(b, value, y, at, mask)

    def gemm_cells(self, b, p):
        """The register tile's accumulators: params "rows" x "cols" allocas."""
        return [[b.alloca(V16F) for _ in range(p.get("cols", COLS))]
                for _ in range(p.get("rows", ROWS))]

    def dense_rows(self, k, m_count: int, suffix: str, n_count: int | None = None,
                   m_first: int = 0) -> ir.Function:
        """``void name(ptr x, ptr w, ptr y, ptr bias, ptr koff, ptr res, i64 first)``: rows
        [0, m_count)
        of the product, x, y, a residual added after the bias (``residual``: float_conv's
        epilogue) and a per-element bias already offset to the first row; with
        ``n_count`` the first n_count columns (w, y and the bias offset to the first column: a
        whole 64-column panel, so the panel layout holds from there). An ``implicit``
        convolution's x is the (padded) image itself, its rows from ``m_first`` + first: row m,
        column k reads the pixel (m // OW * sh, m % OW * sw) plus the tap offset koff[k]
        (float_conv.lower_fconv)."""
        p = k.params
        fty = ir.FunctionType(ir.VoidType(), [ir.PointerType()] * 6 + [I64])
        fn = ir.Function(self.module, fty, name=f"{k.name}_{suffix}")
        fn.linkage = "internal"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        x, w, y, src, koff, res, m_run = fn.args
        k_, n_ = p["K"], p["N"]
        cells = self.gemm_cells(b, p)
        wide = len(cells[0])

        def w_at(kk, n0, v, cols):  # float_products.panels: [N/wide*16][K][wide*16], [K][16]
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

        def y_at(m, n):  # row m's column n; ``out_pad``: pixel m inside a padded image
            if "out_heads" in p:  # lower/heads.py: head n // H's [M][H] block
                h = p["out_heads"]
                head = b.mul(b.udiv(n, c64(h)), c64(p["M"] * h))
                return b.add(head, b.add(b.mul(m, c64(h)), b.urem(n, c64(h))))
            if "out_pad" not in p:
                return b.add(b.mul(m, c64(n_)), n)
            wp, top, left, w = p["out_pad"]
            m = b.add(b.add(m, c64(m_first)), m_run)
            oy, ox = b.udiv(m, c64(w)), b.urem(m, c64(w))
            pixel = b.add(b.mul(b.add(oy, c64(top)), c64(wp)), b.add(ox, c64(left)))
            return b.add(b.mul(pixel, c64(n_)), n)

        def row_at(m):  # x's row m: an implicit convolution's pixel m (its first tap)
            if "implicit" not in p:
                return b.mul(m, c64(k_))
            wp, c, (sh, sw), ow = p["implicit"]
            m = b.add(b.add(m, c64(m_first)), m_run)
            oy, ox = b.udiv(m, c64(ow)), b.urem(m, c64(ow))
            return b.mul(b.add(b.mul(oy, c64(sh * wp)), b.mul(ox, c64(sw))), c64(c))

        def a_at(m, kk):
            if "implicit" not in p:
                return b.add(row_at(m), kk)
            return b.add(row_at(m), b.sext(self.load_at(b, koff, kk, I32T), c64(0).type))

        pack = None
        if p.get("x_affine"):  # koff's pointer holds xaff: x's k in order in a row, no koff

            def pack(b, m_lo, rows, k0, kn, into, stride):
                with for_range(b, rows, "pr") as r:
                    m = b.add(m_lo, r)  # and the next block's row m + rows on its way to L2
                    affine_row(self, b, x, row_at(m), koff, k_, k0, kn, into,
                               b.mul(r, c64(stride)), row_at(b.add(m, c64(rows))),
                               V16F, PF_LOCALITY)

        relu = bool(p.get("relu"))
        if p.get("act"):  # lower/float_ops.py's fused elementwise epilogue (BERT's GELU)
            def relu(value):
                return epilogue_value(b, p["act"], value)
        self.gemm(
            b, cells, m_count, n_ if n_count is None else n_count, k_, a_at,
            w_at, y_at, x, w, y, bias, relu,
            bool(p.get("residual")) and "implicit" not in p and k_ * n_ <= ROWS_FIRST_WEIGHTS,
            "implicit" not in p, pack,
        )  # fmt: skip
        b.ret_void()
        return fn

    def k_fdense_vec(self, k):
        """The rows in one call, or (``threads`` 2) in chunks (dense_split) that this thread
        and the driver's worker claim one at a time (runtime/threads.py): a worker the OS
        deschedules holds up at most the chunk it is in; each output is computed by one
        chunk, the same bits as one thread."""
        p = k.params
        fn, b, args = self.function(k, len(k.inputs))
        x, y, w = args[0], args[-1], self.cargs["wt"]
        null = ir.Constant(ir.PointerType(), None)
        bias, koff = self.cargs.get("bias", null), self.cargs.get("koff", null)
        if p.get("x_affine"):  # its batch norm's scale and shift ride in koff's place
            koff = self.cargs["xaff"]
        res = args[1] if p.get("residual") else null
        m_ = p["M"]
        if "out_pad" in p:
            self.zero_border(k, b, y)
        if p.get("threads", 1) < 2:
            b.call(self.dense_rows(k, m_, "rows"), [x, w, y, bias, koff, res, c64(0)])
            b.ret_void()
            return fn
        self.dense_split(k, b, [x, w, y, bias, koff, res])
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


__all__ = ["FloatGemm", "VEC"]
