"""DYNQ_DENSE's register tile on AVX-512 VNNI (``k_dynq_dense`` with param ``tile``,
emit/data.py): ROWS data rows x up to COLS vectors of 16 weight rows, each step of K one k-quad:
the data row's 4 bytes of x' broadcast to every lane, the weights' 64 bytes (16 weight rows x 4,
lower/dynamic_int8.py packs them so) read once per step, one VPDPBUSD per row and vector into
its int32 accumulator (exact, wrapping as the reference's sum wrapped to int32). No horizontal
reduction: each lane is one output. Then out = S - zw[n] rowsum[m] - zx' cz[n] in lanes."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import I8, I32, Family, c64, for_range

from .vector_types import B64, V16, vsplat

ROWS, COLS = 6, 4  # the tile: 24 zmm accumulators, 4 weight vectors, 1 broadcast


class VNNIDense(Family):
    """The VNNI register tile of the dynamic-int8 product."""

    def vnni_dense_rows(self, b, args, p):
        """Outputs of weight rows [lo, hi) (multiples of 16) for every data row (``args`` = ws,
        y, w, zw, cz, zx, lo, hi as ``_dynq_rows``): groups of COLS vectors (the last group
        what is left), each against tiles of ROWS data rows (the last tile the M % ROWS left)."""
        ws, y, w, zw, cz, zx, lo, hi = args
        m_ = p["M"]
        cells = [[b.alloca(V16) for _ in range(COLS)] for _ in range(ROWS)]
        zxv = vsplat(b, zx)
        width = COLS * 16
        groups = b.udiv(b.sub(hi, lo), c64(width))

        def group(n0, vecs):
            full, rem = divmod(m_, ROWS)
            with for_range(b, full, "mt") as mt:
                self._tile(b, (ws, w, y, zw, cz, zxv), p, cells[:ROWS], b.mul(mt, c64(ROWS)),
                           n0, vecs)
            if rem:
                self._tile(b, (ws, w, y, zw, cz, zxv), p, cells[:rem], c64(full * ROWS), n0,
                           vecs)

        with for_range(b, groups, "ng") as g:
            group(b.add(lo, b.mul(g, c64(width))), COLS)
        left = b.udiv(b.urem(b.sub(hi, lo), c64(width)), c64(16))  # vectors in the last group
        n_last = b.add(lo, b.mul(groups, c64(width)))
        for vecs in range(1, COLS):
            with b.if_then(b.icmp_unsigned("==", left, c64(vecs))):
                group(n_last, vecs)

    def _tile(self, b, ptrs, p, cells, m0, n0, vecs):
        ws, w, y, zw, cz, zxv = ptrs
        m_, n_, kp = p["M"], p["N"], p["Kp"]
        quads = kp // 4
        dot = self._intrinsic("llvm.x86.avx512.vpdpbusd.512", V16, [V16, B64, B64])
        zero = ir.Constant(V16, None)
        for row in cells:
            for v in range(vecs):
                b.store(zero, row[v])
        base = b.mul(b.udiv(n0, c64(16)), c64(quads * 64))  # the weights' [N/16][Kp/4][64]
        with for_range(b, quads, "kq") as q:
            wv = [b.load(b.gep(w, [b.add(base, b.add(b.mul(c64(v * quads), c64(64)),
                                                      b.mul(q, c64(64))))], source_etype=I8),
                         typ=B64, align=1) for v in range(vecs)]
            for r, row in enumerate(cells):
                at = b.add(b.mul(b.add(m0, c64(r)), c64(kp)), b.mul(q, c64(4)))
                quad = b.load(b.gep(ws, [at], source_etype=I8), typ=I32, align=1)
                xv = b.bitcast(vsplat(b, quad), B64)
                for v in range(vecs):
                    b.store(b.call(dot, [b.load(row[v], typ=V16), xv, wv[v]]), row[v])
        sums = b.gep(ws, [c64(m_ * kp)], source_etype=I8)
        for r, row in enumerate(cells):
            m = b.add(m0, c64(r))
            rsv = vsplat(b, b.load(b.gep(sums, [m], source_etype=I32), typ=I32))
            for v in range(vecs):
                n = b.add(n0, c64(16 * v))
                zwv = b.load(b.gep(zw, [n], source_etype=I32), typ=V16, align=4)
                czv = b.load(b.gep(cz, [n], source_etype=I32), typ=V16, align=4)
                s = b.sub(b.sub(b.load(row[v], typ=V16), b.mul(zwv, rsv)), b.mul(zxv, czv))
                b.store(s, b.gep(y, [b.add(b.mul(m, c64(n_)), n)], source_etype=I32), align=4)


__all__ = ["COLS", "ROWS", "VNNIDense"]
