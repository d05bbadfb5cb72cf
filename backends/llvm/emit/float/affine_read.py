"""A product that computes its x as it packs it: the batch norm + relu that
lower/float_bn_reads.py hands to the 1 x 1 products reading it, applied to each row of a row
block before that block's tiles run (emit/float/gemm.py's ``pack``), instead of an EWISE pass
and its buffer."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import F32, c64, for_range

I32 = ir.IntType(32)
# the packing prefetches the next row block's rows into L2 (ResNet's 9 packing products, one
# process, 15 rounds, load 10: 9.67 ms without, 9.39 with)
PACK_AHEAD = True


def affine_row(fam, b, x, at, aff, k_, k0, kn, into, to, ahead, vector_type, locality) -> None:
    """into[to + j] = relu(x[at + k0 + j] * s[k] + t[k]) for j < kn, k = k0 + j (``aff``:
    s then t, k_ floats each), in vectors of ``vector_type`` through ``fam``'s masked loads and
    stores: the EWISE's float32 steps in its order (a multiply, an add: no FMA) and its relu
    (numpy's maximum(v, 0): -0 -> +0, NaN stays), so the same bits; x[ahead + k0 + j]
    prefetched (``locality``: into L2, the next row block's row: it arrives while this block's
    tiles are summed, not when the next block is packed)."""
    lanes = vector_type.count
    zero = ir.Constant(vector_type, [ir.Constant(F32, 0.0)] * lanes)

    def vector(j, mask=None):
        kk = b.add(k0, j)
        if PACK_AHEAD:
            prefetch = fam._intrinsic("llvm.prefetch.p0", ir.VoidType(),
                                      [ir.PointerType(), I32, I32, I32])
            b.call(prefetch, [b.gep(x, [b.add(ahead, kk)], source_etype=F32),
                              ir.Constant(I32, 0), ir.Constant(I32, locality),
                              ir.Constant(I32, 1)])
        v = fam.vload_f(b, x, b.add(at, kk), mask)
        v = b.fmul(v, fam.vload_f(b, aff, kk, mask))
        v = b.fadd(v, fam.vload_f(b, aff, b.add(kk, c64(k_)), mask))
        keep = b.or_(b.fcmp_ordered(">", v, zero), b.fcmp_unordered("uno", v, v))
        fam.vstore_f(b, b.select(keep, v, zero), into, b.add(to, j), mask)

    full, tail = divmod(kn, lanes)
    if full:
        with for_range(b, full, "pk") as j:
            vector(b.mul(j, c64(lanes)))
    if tail:
        vector(c64(full * lanes), tail)
