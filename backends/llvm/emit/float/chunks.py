"""FDENSE over two threads: the chunks this thread and the driver's worker claim one at a time
(an atomic counter, runtime/threads.py's driver), each a block of rows or of whole column
panels (``chunk_plan``); and the border of the padded image a product writes the interior of
(``zero_border``, lower/float_halos.py). A kernel family (emit/base.py's Family) of
gemm.py's products."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import F32, I64, Family, c64, for_range, via

from .gemm import BIG_WEIGHTS, COLS, ROWS, V16F, VEC

CHUNK_MACS = 1 << 21  # a chunk's multiply-adds, at least (tens of microseconds: the claim's
MAX_CHUNKS = 24       # atomic add is lost in it), and at most this many chunks a product
# weights past L2 (more than WIDE_WEIGHTS floats), N >= M, of an implicit convolution or of
# at most WIDE_ROWS rows split by panels: each thread streams its half of the weights once,
# where row chunks read them all per chunk. ResNet-50's 7 x 7 stage (49 x 4608 x 512: 8
# panels against 9 row tiles) 0.80-0.90 -> 0.47-0.56 of one thread's time, its 14 x 14 3 x 3
# convolutions 0.60-0.71 -> 0.52-0.65 (session 20, f512c); 196 x 1024 x 256 (1 MB, in L2)
# ran worse by panels (4 chunks) and keeps rows. BERT's products at seq 128 (128 rows: 22 row
# chunks of 6 each reread 2.4-9.4 MB of weights; 6-24 panel chunks each reread x, 0.4-1.5
# MB) by panels: its FDENSEs 0.66-0.79 -> 0.50-0.54 of one thread's time (session 20, thr10).
# More rows than 128 (x's rereads growing with them) keep rows, unless the weights are twice
# L2's share or more: ResNet-50's 196 x 1024 x 512 (2 MB; each of 17 row chunks read it all
# from L3) 0.74 -> 0.5x of one thread's time by panels (session 23, per-kernel medians).
WIDE_WEIGHTS, WIDE_ROWS = BIG_WEIGHTS, 128
# such a split's chunks each reread all of x: at most n / m * X_REREADS chunks (x's rereads
# about the weights' size), WIDE_MIN_CHUNKS at least. BERT's 768 x 768 and 3072 x 768 (12
# panels) in 6 chunks, not 12: see the session 20 (thr10) section of docs/performance-history.md
X_REREADS, WIDE_MIN_CHUNKS = 1, 4
# a panel split of fewer chunks cuts each panel's rows into parts too (chunk_grid)
PANEL_CHUNKS = 16


def chunk_plan(p: dict) -> tuple[str, int, int]:
    """("rows" or "panels", rows or columns per chunk, chunks) of a split FDENSE: columns in
    whole panels where the weights outweigh the rows (few rows: each thread then streams its
    own panels), else rows in whole tiles."""
    m_, k_, n_ = p["M"], p["K"], p["N"]
    tr, width = p.get("rows", ROWS), p.get("cols", COLS) * VEC
    want = max(2, min(MAX_CHUNKS, m_ * k_ * n_ // CHUNK_MACS))
    panels = n_ // width
    tiles = -(-m_ // tr)
    wide = n_ >= m_ and k_ * n_ > WIDE_WEIGHTS and (
        "implicit" in p or m_ <= WIDE_ROWS or k_ * n_ >= 2 * WIDE_WEIGHTS)
    if panels >= 2 and ((tiles < 2 * want or m_ < 4 * tr) and panels >= tiles or wide):
        # each chunk rereads x (m * k): about as much x as weights in all, 4 at least; not an
        # implicit convolution (ResNet's 196 x 512 x 1024 would go 16 -> 4 chunks: unmeasured)
        if wide and "implicit" not in p:
            want = min(want, max(WIDE_MIN_CHUNKS, n_ * X_REREADS // m_))
        size = -(-panels // min(want, panels)) * width
        return "panels", size, -(-n_ // size)
    size = -(-tiles // min(want, tiles)) * tr
    return "rows", size, -(-m_ // size)


class DenseChunks(Family):
    # what it uses of the other kernel families (through the emit context)
    dense_rows = via("gemm")
    split_chunks = via("pool")
    vstore_f = via("gemm")

    def zero_border(self, k, b, y) -> None:
        """Zero the border of the padded image an ``out_pad`` product writes the interior of
        (float_halos.py): the rows above and below whole, the columns left and right of each
        image row; N floats a pixel, N a multiple of 16."""
        n_ = k.params["N"]
        wp, top, left, w = k.params["out_pad"]
        hp = self.shape(k.output)[1]
        h = k.params["M"] // w
        zero = ir.Constant(V16F, [ir.Constant(F32, 0.0)] * VEC)

        def zeros(start, pixels):  # ``pixels`` pixels from pixel index ``start``
            with for_range(b, pixels * n_ // VEC, "zb") as z:
                self.vstore_f(b, zero, y, b.add(b.mul(start, c64(n_)), b.mul(z, c64(VEC))))

        zeros(c64(0), top * wp)
        zeros(c64((top + h) * wp), (hp - top - h) * wp)
        right = wp - left - w
        with for_range(b, h, "zr") as r:
            row = b.mul(b.add(r, c64(top)), c64(wp))
            if left:
                zeros(row, left)
            if right:
                zeros(b.add(row, c64(left + w)), right)

    def chunk_counter(self, k) -> ir.GlobalVariable:
        """The kernel's next unclaimed chunk (an i64 global, 0 before each run)."""
        g = ir.GlobalVariable(self.module, I64, f"{k.name}_next_chunk")
        g.linkage = "internal"
        g.initializer = c64(0)
        return g

    def dense_split(self, k, b, pointers) -> None:
        """The product's chunks (chunk_grid: blocks of rows, of whole column panels, or of
        panels x row parts), claimed one at a time by this thread from the front and by the
        driver's worker from the back (runtime/threads.py split_chunks): each thread keeps to
        its end's panels (their weights stream into its own L2 once) and rows, and a thread
        slowed for a while (a busy host core) leaves chunks to the other."""
        p = k.params
        m_, n_ = p["M"], p["N"]
        mode, (rsize, rcount), (csize, ccount) = chunk_grid(p)
        variants: dict = {}

        def variant(rows: int, cols: int | None):
            if (rows, cols) not in variants:
                tag = f"chunk_{len(variants)}"
                variants[rows, cols] = (self.dense_rows(k, rows, tag) if cols is None else
                                        self.dense_rows(k, rows, tag, cols))
            return variants[rows, cols]

        rlast, clast = m_ - (rcount - 1) * rsize, n_ - (ccount - 1) * csize
        cols = (None, None) if mode == "rows" else (csize, clast)

        def emit(rb, ps, lo, hi):
            with for_range(rb, rb.sub(hi, lo), "c") as i:
                c = rb.add(lo, i)
                col, row = rb.udiv(c, c64(rcount)), rb.urem(c, c64(rcount))
                args = self.chunk_args(rb, p, ps, mode, rb.mul(row, c64(rsize)),
                                       rb.mul(col, c64(csize)))
                # the chunk's function: a shorter last row part and last panel chunk have
                # their own (only the kinds of chunk this grid has)
                last_r = rb.icmp_signed("==", row, c64(rcount - 1))
                last_c = rb.icmp_signed("==", col, c64(ccount - 1))
                for lr in (0, 1) if rcount > 1 else (1,):
                    for lc in (0, 1) if ccount > 1 else (1,):
                        here = rb.and_(last_r if lr else rb.not_(last_r),
                                       last_c if lc else rb.not_(last_c))
                        with rb.if_then(here):
                            rb.call(variant((rsize, rlast)[lr], cols[lc]), args)

        self.split_chunks(k, b, pointers, rcount * ccount, 1, emit, tag="_dense")

    def chunk_args(self, b, p, ptrs, mode, m0, n0) -> list:
        """The dense_rows arguments of the chunk at row m0, column n0 (0 in "rows" mode): x, y,
        a per-element bias and the residual move with the rows and columns, w (whole panels)
        and a per-column bias with the columns; an implicit convolution and a padded output
        take the first row as the last argument instead (y_at adds it)."""
        x, w, y, bias, koff, res = ptrs
        m_, k_, n_ = p["M"], p["K"], p["N"]
        implicit, padded = "implicit" in p, "out_pad" in p
        xo = x if implicit else b.gep(x, [b.mul(m0, c64(k_))], source_etype=F32)
        mn = b.add(b.mul(m0, c64(n_)), n0)  # element (m0, n0) of y, bias "mn", the residual
        if "out_heads" in p:  # heads.py: rows, or panels starting at a head's first column
            heads = p["out_heads"]
            yo = (b.mul(m0, c64(heads)) if mode == "rows" else
                  b.mul(b.udiv(n0, c64(heads)), c64(m_ * heads)))
        else:
            yo = n0 if padded else mn
        by = {"mn": mn, "n": n0}.get(p.get("bias"))
        return [xo, b.gep(w, [b.mul(n0, c64(k_))], source_etype=F32),
                b.gep(y, [yo], source_etype=F32),
                bias if by is None else b.gep(bias, [by], source_etype=F32),
                koff, b.gep(res, [mn], source_etype=F32) if p.get("residual") else res,
                m0 if implicit or padded else c64(0)]


def chunk_grid(p: dict) -> tuple[str, tuple[int, int], tuple[int, int]]:
    """(mode, (rows per part, row parts), (columns per chunk, column chunks)) of a split
    FDENSE: chunk_plan's rows or panels; a panel split of fewer than PANEL_CHUNKS chunks
    also cuts its rows into parts (whole row tiles, at least 2 each), so that a thread slowed
    for a while hands the other a fraction of a panel, not a whole one (ResNet-50's 14 x 14
    3 x 3 convolutions: 4 panels of 64 columns)."""
    mode, size, count = chunk_plan(p)
    m_, n_ = p["M"], p["N"]
    if mode == "rows":
        return mode, (size, count), (n_, 1)
    tr = p.get("rows", ROWS)
    tiles = -(-m_ // tr)
    parts = 1
    if count < PANEL_CHUNKS and "out_heads" not in p:
        parts = max(1, min(-(-PANEL_CHUNKS // count), tiles // 2))
    rsize = -(-tiles // parts) * tr
    return mode, (rsize, -(-m_ // rsize)), (size, count)


__all__ = ["DenseChunks", "chunk_grid", "chunk_plan"]
