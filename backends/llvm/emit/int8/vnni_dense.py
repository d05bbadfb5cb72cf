"""DYNQ_DENSE's register tile on VNNI (``k_dynq_dense`` with param ``tile``, the lanes: 16 in
zmm on AVX-512 VNNI, 8 in ymm on AVX-VNNI; dynq_dense.py): ROWS data rows x up to COLS vectors
of ``tile`` weight rows, each step of K one k-quad: the data row's 4 bytes of x' broadcast to
every lane, the weights' 4 x ``tile`` bytes (lower/dynamic_int8.py packs them so) read once per
step, one VPDPBUSD per row and vector into its int32 accumulator (exact, wrapping as the
reference's sum wrapped to int32). No horizontal reduction: each lane is one output. Then
out = S - zw[n] rowsum[m] - zx' cz[n] in lanes."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import I8, I32, Family, c64, for_range, via

from .vector_types import vsplat

# the tile by lanes: zmm 6 x 4 (24 accumulators, 4 weight vectors, 1 broadcast of 32
# registers), ymm 6 x 2 (12, 2 and 1 of 16)
TILES = {16: (6, 4), 8: (6, 2)}


def tile_columns(lanes: int) -> int:
    """Weight rows per group of the tile's vectors (a split's chunks hold whole groups)."""
    return TILES[lanes][1] * lanes


class VNNIDense(Family):
    """The VNNI register tile of the dynamic-int8 product."""

    dynq_store = via("dynq")

    def vnni_dense_rows(self, b, args, p, epi=None):
        """Outputs of weight rows [lo, hi) (multiples of the lanes) for every data row
        (``args`` = ws, y, w, zw, cz, zx, lo, hi as ``_dynq_rows``; ``epi``: the fused
        epilogue's pointers, dynq_dense.py ``dynq_store``): groups of COLS vectors (the
        last group what is left), each against tiles of ROWS data rows (the last tile the
        M % ROWS left)."""
        ws, y, w, zw, cz, zx, lo, hi = args
        m_, lanes = p["M"], p["tile"]
        ROWS, COLS = TILES[lanes]  # noqa: N806
        vt = ir.VectorType(I32, lanes)
        cells = [[b.alloca(vt) for _ in range(COLS)] for _ in range(ROWS)]
        zxv = vsplat(b, zx, vt)
        width = COLS * lanes
        groups = b.udiv(b.sub(hi, lo), c64(width))

        def group(n0, vecs):
            full, rem = divmod(m_, ROWS)
            with for_range(b, full, "mt") as mt:
                self._tile(b, (ws, w, y, zw, cz, zxv, epi), p, cells[:ROWS],
                           b.mul(mt, c64(ROWS)), n0, vecs)
            if rem:
                self._tile(b, (ws, w, y, zw, cz, zxv, epi), p, cells[:rem], c64(full * ROWS),
                           n0, vecs)

        with for_range(b, groups, "ng") as g:
            group(b.add(lo, b.mul(g, c64(width))), COLS)
        left = b.udiv(b.urem(b.sub(hi, lo), c64(width)), c64(lanes))  # the last group's vectors
        n_last = b.add(lo, b.mul(groups, c64(width)))
        for vecs in range(1, COLS):
            with b.if_then(b.icmp_unsigned("==", left, c64(vecs))):
                group(n_last, vecs)

    def _tile(self, b, ptrs, p, cells, m0, n0, vecs):
        ws, w, y, zw, cz, zxv, epi = ptrs
        m_, kp, lanes = p["M"], p["Kp"], p["tile"]
        quads = kp // 4
        vt, bt = ir.VectorType(I32, lanes), ir.VectorType(I8, 4 * lanes)
        dot = self._intrinsic(f"llvm.x86.avx512.vpdpbusd.{32 * lanes}", vt, [vt, bt, bt])
        zero = ir.Constant(vt, None)
        for row in cells:
            for v in range(vecs):
                b.store(zero, row[v])
        step = 4 * lanes  # bytes of one k-quad of a vector's weight rows
        base = b.mul(b.udiv(n0, c64(lanes)), c64(quads * step))  # [N/lanes][Kp/4][step]
        with for_range(b, quads, "kq") as q:
            wv = [b.load(b.gep(w, [b.add(base, b.add(c64(v * quads * step),
                                                      b.mul(q, c64(step))))], source_etype=I8),
                         typ=bt, align=1) for v in range(vecs)]
            for r, row in enumerate(cells):
                at = b.add(b.mul(b.add(m0, c64(r)), c64(kp)), b.mul(q, c64(4)))
                quad = b.load(b.gep(ws, [at], source_etype=I8), typ=I32, align=1)
                xv = b.bitcast(vsplat(b, quad, vt), bt)
                for v in range(vecs):
                    b.store(b.call(dot, [b.load(row[v], typ=vt), xv, wv[v]]), row[v])
        sums = b.gep(ws, [c64(m_ * kp)], source_etype=I8)
        for r, row in enumerate(cells):
            m = b.add(m0, c64(r))
            rsv = vsplat(b, b.load(b.gep(sums, [m], source_etype=I32), typ=I32), vt)
            for v in range(vecs):
                n = b.add(n0, c64(lanes * v))
                zwv = b.load(b.gep(zw, [n], source_etype=I32), typ=vt, align=4)
                czv = b.load(b.gep(cz, [n], source_etype=I32), typ=vt, align=4)
                s = b.sub(b.sub(b.load(row[v], typ=vt), b.mul(zwv, rsv)), b.mul(zxv, czv))
                self.dynq_store(b, p, s, m, n, y, epi)


__all__ = ["TILES", "VNNIDense", "tile_columns"]
