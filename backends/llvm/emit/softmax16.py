"""QSOFTMAX16: TFLite's int16 softmax (reference_ops::SoftmaxInt16, emulation/tflite_int16.py)
row by row over the last axis: the row's maximum, each x - max rescaled and looked up in the
interpolated exp table (stored in the output row, as TFLite does), the int32 sum normalised by
its leading zeros, its reciprocal from the 1/(1+x) table, and a rounding shift."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.kinds import Kind, emits

from .base import I16, I32, I64, Family, c64, for_range


def _lookup(emitter, b, table, v):
    """TFLite's int16 LUTLookup of ``v`` (i64 in [-32768, 32767]) in a 513-entry i32 table."""
    index = b.add(c64(256), b.ashr(v, c64(7)))
    offset = b.and_(v, c64(0x7F))
    base = b.sext(emitter.load_at(b, table, index, I32), I64)
    nxt = b.sext(emitter.load_at(b, table, b.add(index, c64(1)), I32), I64)
    delta = b.ashr(b.add(b.mul(b.sub(nxt, base), offset), c64(64)), c64(7))
    return b.sext(b.trunc(b.add(base, delta), I16), I64)  # the int16 result wraps


class Softmax16Kernels(Family):
    """TFLite's int16 softmax (QSOFTMAX16)."""

    @emits(Kind.QSOFTMAX16)
    def k_qsoftmax16(self, k):
        p = k.params
        fn, b, (x, y) = self.function(k, 1)
        exp_lut, recip_lut = self.cargs["exp_lut"], self.cargs["recip_lut"]
        n = p["n"]
        cell = b.alloca(I64)
        ctlz = self.module.globals.get("llvm.ctlz.i32") or ir.Function(
            self.module, ir.FunctionType(I32, [I32, ir.IntType(1)]), "llvm.ctlz.i32"
        )

        def get(ptr, at):
            return b.sext(self.load_at(b, ptr, at, I16), I64)

        with for_range(b, p["rows"], "r") as r:
            row = b.mul(r, c64(n))
            b.store(c64(-32768), cell)
            with for_range(b, n, "j") as j:
                v, top = get(x, b.add(row, j)), b.load(cell, typ=I64)
                b.store(b.select(b.icmp_signed(">", v, top), v, top), cell)
            top = b.load(cell, typ=I64)
            b.store(c64(0), cell)
            with for_range(b, n, "j") as j:
                diff = b.sub(get(x, b.add(row, j)), top)
                scaled = self.mbqm(b, diff, c64(p["mult"]), c64(p["shift"]))
                e = _lookup(
                    self, b, exp_lut, self.clamp(b, b.add(scaled, c64(32767)), -32768, 32767)
                )
                self.store_at(b, b.trunc(e, I16), y, b.add(row, j), I16)
                b.store(b.add(b.load(cell, typ=I64), e), cell)
            total = b.trunc(b.load(cell, typ=I64), I32)
            head = b.zext(b.call(ctlz, [total, ir.Constant(ir.IntType(1), 0)]), I64)
            shifted = b.ashr(
                b.add(b.shl(b.zext(total, I64), b.sub(head, c64(1))), c64(1 << 13)), c64(14)
            )
            sym = self.clamp(b, b.sub(shifted, c64((1 << 15) + (1 << 16))), -32768, 32767)
            recip = _lookup(self, b, recip_lut, sym)
            right = b.sub(c64(31), head)
            half = b.shl(c64(1), b.sub(right, c64(1)))
            with for_range(b, n, "j") as j:
                e = get(y, b.add(row, j))
                v = b.ashr(b.add(b.mul(e, recip), half), right)
                self.store_at(b, b.trunc(self.clamp(b, v, 0, 32767), I16), y, b.add(row, j), I16)
        b.ret_void()
        return fn
