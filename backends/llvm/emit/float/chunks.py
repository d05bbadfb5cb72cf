"""FDENSE over two threads: the chunks this thread and the driver's worker claim one at a time
(an atomic counter, runtime/threads.py's driver), each a block of rows or of whole column
panels (``chunk_plan``); and the border of the padded image a product writes the interior of
(``zero_border``, lower/float_halos.py). A kernel family (emit/base.py's Family) of
gemm.py's products."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import F32, I64, Family, c64, claimed_chunks, for_range, via

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
# More rows than 128 (x's rereads growing with them) were not measured and keep rows.
WIDE_WEIGHTS, WIDE_ROWS = BIG_WEIGHTS, 128
# such a split's chunks each reread all of x: at most n / m * X_REREADS chunks (x's rereads
# about the weights' size), WIDE_MIN_CHUNKS at least. BERT's 768 x 768 and 3072 x 768 (12
# panels) in 6 chunks, not 12: see the session 20 (thr10) section of docs/performance.md
X_REREADS, WIDE_MIN_CHUNKS = 1, 4


def chunk_plan(p: dict) -> tuple[str, int, int]:
    """("rows" or "panels", rows or columns per chunk, chunks) of a split FDENSE: columns in
    whole panels where the weights outweigh the rows (few rows: each thread then streams its
    own panels), else rows in whole tiles."""
    m_, k_, n_ = p["M"], p["K"], p["N"]
    tr, width = p.get("rows", ROWS), p.get("cols", COLS) * VEC
    want = max(2, min(MAX_CHUNKS, m_ * k_ * n_ // CHUNK_MACS))
    panels = n_ // width
    tiles = -(-m_ // tr)
    wide = n_ >= m_ and k_ * n_ > WIDE_WEIGHTS and ("implicit" in p or m_ <= WIDE_ROWS)
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

    def dense_chunks(self, k, b, ptrs, counter) -> None:
        """Claim chunks (atomic add on ``counter``) and run each until none is left: blocks of
        rows, or of column panels where the weights outweigh the rows (chunk_plan)."""
        p = k.params
        m_, k_, n_ = p["M"], p["K"], p["N"]
        mode, size, count = chunk_plan(p)
        whole = self.dense_rows(k, size, "chunk") if mode == "rows" else None
        if mode == "rows":
            last = self.dense_rows(k, m_ - (count - 1) * size, "chunk_last")
        else:
            whole = self.dense_rows(k, m_, "chunk", size)
            last = self.dense_rows(k, m_, "chunk_last", n_ - (count - 1) * size)
        with claimed_chunks(b, counter, count) as c:
            x, w, y, bias, koff, res = ptrs
            if mode == "rows":  # rows c * size ..: x, y, a per-element bias and the residual move
                m0 = b.mul(c, c64(size))
                implicit, padded = "implicit" in p, "out_pad" in p  # y_at adds m0 itself
                xo = x if implicit else b.gep(x, [b.mul(m0, c64(k_))], source_etype=F32)
                yo = b.mul(m0, c64(n_))
                ym = b.mul(m0, c64(p["out_heads"])) if "out_heads" in p else yo  # heads.py
                args = [xo, w, y if padded else b.gep(y, [ym], source_etype=F32),
                        b.gep(bias, [yo], source_etype=F32) if p.get("bias") == "mn" else bias,
                        koff, b.gep(res, [yo], source_etype=F32) if p.get("residual") else res,
                        m0 if implicit or padded else c64(0)]
            else:  # columns c * size ..: w (whole panels), y, the bias and the residual move
                n0 = b.mul(c, c64(size))
                # heads.py: chunks start at a head's first column (H divides 64)
                yn = b.mul(b.udiv(n0, c64(p["out_heads"])), c64(m_ * p["out_heads"])) if (
                    "out_heads" in p) else n0
                args = [x, b.gep(w, [b.mul(n0, c64(k_))], source_etype=F32),
                        b.gep(y, [yn], source_etype=F32),
                        b.gep(bias, [n0], source_etype=F32) if p.get("bias") in ("n", "mn")
                        else bias,
                        koff, b.gep(res, [n0], source_etype=F32) if p.get("residual") else res,
                        c64(0)]
            with b.if_else(b.icmp_signed("==", c, c64(count - 1))) as (is_last, other):
                with is_last:
                    b.call(last, args)
                with other:
                    b.call(whole, args)


__all__ = ["DenseChunks", "chunk_plan"]
