"""The 8-bit tables: LUT (one input through a 256-entry table, or 65,536 for 16x8 LOGISTIC /
TANH) and LUT2 (two inputs through a 256 x 256 table made with the op's own reference: the
quantized add, subtract and multiply), element by element or, for LUT2 of same-shape inputs,
whole vectors by gathers (AVX-512 / AVX2 gathers, the generic llvm.masked.gather on
-isa=plain). A kernel family (emit/base.py's Family)."""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from partita.backends.llvm.emit.base import F32, I8, I32, Family, c64, for_range, via
from partita.backends.llvm.kinds import Kind, emits
from partita.backends.llvm.plan import Kernel

from .vector_types import PTR8, kconst

# LUT2's gather lanes per ISA family (the AVX-512 one for amx too; generic on plain)
GATHER_LANES = {"vnni": 16, "avx2": 8, "avxvnni": 8, "plain": 16}


class TableKernels(Family):
    # what it uses of the other kernel families (through the emit context)
    vload = via("vector")
    prefetch_lines = via("vector")
    part_function = via("gemm")
    split_run = via("pool")
    elements = via("int8")
    lut_dequantize = via("qvec")

    @emits(Kind.LUT)
    def k_lut(self, k: Kernel):
        fn, b, (x, y) = self.function(k, 1)
        out, src = self.dtype(k.output), self.dtype(k.inputs[0])
        table = self.cargs["table"]
        i16 = ir.IntType(16)  # int16 -> int16: a 65,536-entry table (16x8 LOGISTIC / TANH)
        ety = F32 if out == "float32" else i16 if out == "int16" else I8
        offset = {"int8": 128, "int16": 32768}.get(src, 0)

        def lut_range(lb, ps, lo, hi):
            x, y, table = ps[:3]
            if k.params.get("dequant"):  # whole vectors of 16 first, the rest by the table
                lo = self.lut_dequantize(lb, k, ps, lo, hi, src)
            with for_range(lb, lb.sub(hi, lo), "e") as e:
                e = lb.add(e, lo)
                v = self.signed(lb, self.load_at(lb, x, e, i16 if src == "int16" else I8), src)
                self.store_at(lb, self.load_at(lb, table, lb.add(v, c64(offset)), ety), y, e,
                              ety)

        extra = [self.cargs["dq_scale"], self.cargs["dq_zp"]] if k.params.get("dequant") else []
        self.elements(k, b, [x, y, table, *extra], lut_range)
        b.ret_void()
        return fn

    @emits(Kind.LUT2)
    def k_lut2(self, k: Kernel):
        """out[e] = table[a[ia(e)], b[ib(e)]]: the flat index split by the output's dims, then
        recombined with each input's (broadcast) strides."""
        fn, b, (x1, x2, y) = self.function(k, 2)
        table = self.cargs["table"]
        offs = [128 if self.dtype(i) == "int8" else 0 for i in k.inputs]
        shape, strides = k.params["out_shape"], k.params["strides"]
        dense = [int(np.prod(shape[i + 1 :])) for i in range(len(shape))]
        flat = all(shape[i] == 1 or s[i] == dense[i] for s in strides for i in range(len(shape)))
        total, start, isa = int(np.prod(shape)), 0, k.params.get("gather")
        if isa and k.params.get("threads", 1) > 1:  # the vectors in halves, one per thread
            steps = total // GATHER_LANES[isa]
            parts = [
                self.part_function(k, f"p{j}", [x1, x2, y, table], lambda pb, ps, r=r: (
                    self.lut2_gather(pb, ps[:2], ps[2], ps[3], total, offs, isa, r)))
                for j, r in enumerate(((0, steps // 2), (steps // 2, steps)))
            ]
            self.split_run(k, b, [x1, x2, y, table], parts)
            start = total - total % GATHER_LANES[isa]
        elif isa:  # whole vectors by gathers (vector.py), the tail below
            start = self.lut2_gather(b, (x1, x2), y, table, total, offs, isa)
        with for_range(b, total - start, "e") as e:
            e = b.add(e, c64(start))
            rest, ia, ib = e, c64(0), c64(0)
            if flat:  # no broadcasting: both inputs are read at the output's flat index
                ia = ib = e
            for axis in reversed(range(len(shape)) if not flat else ()):
                coord = b.srem(rest, c64(shape[axis]))
                rest = b.sdiv(rest, c64(shape[axis]))
                ia = b.add(ia, b.mul(coord, c64(strides[0][axis])))
                ib = b.add(ib, b.mul(coord, c64(strides[1][axis])))
            va = b.add(
                self.signed(b, self.load_at(b, x1, ia, I8), self.dtype(k.inputs[0])), c64(offs[0])
            )
            vb = b.add(
                self.signed(b, self.load_at(b, x2, ib, I8), self.dtype(k.inputs[1])), c64(offs[1])
            )
            self.store_at(b, self.load_at(b, table, b.add(b.mul(va, c64(256)), vb), I8), y, e, I8)
        b.ret_void()
        return fn

    def lut2_gather(self, b, xs, y, table, total: int, offs, isa: str, steps=None) -> int:
        """y[e] = table[a[e] * 256 + b[e]] for whole vectors of ``e`` (GATHER_LANES[isa];
        ``steps``: only the vectors [lo, hi)): each lane gathers the 32-bit word at its byte of
        the table (padded by 4 bytes) and keeps the low byte. -isa=plain writes the gather as
        the generic llvm.masked.gather (a vector gather where the target has one, lane by lane
        elsewhere). Returns where the scalar tail starts."""
        lanes = GATHER_LANES[isa]
        vb, vi = ir.VectorType(I8, lanes), ir.VectorType(I32, lanes)
        if isa == "plain":
            mask_ty = ir.VectorType(ir.IntType(1), lanes)
            ptrs_ty = ir.VectorType(PTR8, lanes)
            masked = self._intrinsic(f"llvm.masked.gather.v{lanes}i32.v{lanes}p0", vi,
                                     [ptrs_ty, I32, mask_ty, vi])

            def gather(index):
                ptrs = b.gep(table, [index], source_etype=I8)
                ptrs.type = ptrs_ty  # a vector of addresses (llvmlite types it as one)
                return b.call(masked, [ptrs, ir.Constant(I32, 1), kconst(mask_ty, 1),
                                       kconst(vi, 0)])
        elif isa == "vnni":
            mask_ty = ir.VectorType(ir.IntType(1), 16)
            gather = self._intrinsic("llvm.x86.avx512.mask.gather.dpi.512", vi,
                                     [vi, PTR8, vi, mask_ty, I32])
            extra = [kconst(mask_ty, 1), ir.Constant(I32, 1)]
        else:
            gather = self._intrinsic("llvm.x86.avx2.gather.d.d.256", vi, [vi, PTR8, vi, vi, I8])
            extra = [kconst(vi, -1), ir.Constant(I8, 1)]
        self.prefetch_lines(b, table, 65536)  # a cold table streams in sequentially
        lo, hi = steps if steps is not None else (0, total // lanes)
        with for_range(b, hi - lo, "v") as v:
            at = b.mul(b.add(v, c64(lo)), c64(lanes))
            a, c = (self.vload(b, x, at, vb) for x in xs)
            # int8 bytes index the table from -128: flipping the top bit adds 128
            a, c = (b.zext(b.xor(v, kconst(vb, -128)) if off else v, vi)
                    for v, off in zip((a, c), offs))
            index = b.or_(b.shl(a, kconst(vi, 8)), c)
            words = (gather(index) if isa == "plain"
                     else b.call(gather, [kconst(vi, 0), table, index, *extra]))
            b.store(b.trunc(words, vb), b.gep(y, [at], source_etype=I8), align=1)
        return hi * lanes
