"""Per-tensor conversions between float32 and 8- or 16-bit integers, 16 lanes a step: the
vector loops of the LUT kernel's dequantize (8-bit -> float32) and of the ONNX QUANT kernel
(float32 -> 8/16 bits). Each returns where the scalar loop (scalar.py) takes over for the last
elements, so the vector and scalar parts compute the same values element for element. A kernel
family (``em.qvec``)."""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from partita.backends.llvm.emit.base import F32, F64, I8, I32, Family, c64, for_range


class QuantVectors(Family):
    def lut_dequantize(self, b, k, pointers, lo, hi, src: str):
        """qnn.dequantize of 8-bit data to float32, per tensor, 16 elements a step: (x - zp)
        (an exact integer) as float64, times float64(scale), rounded to float64 and then to
        float32 -- the reference's arithmetic, so the table's values. Returns where the
        table loop starts."""
        x, y, _, scale_ptr, zp_ptr = pointers
        v16i, v16d = ir.VectorType(I32, 16), ir.VectorType(F64, 16)
        scale = _splat16(b, self.load_at(b, scale_ptr, c64(0), F64), v16d)
        zp = _splat16(b, self.load_at(b, zp_ptr, c64(0), I32), v16i)
        steps = b.udiv(b.sub(hi, lo), c64(16))
        with for_range(b, steps, "ev") as i:
            e = b.add(lo, b.mul(i, c64(16)))
            v = b.load(b.gep(x, [e], source_etype=I8), typ=ir.VectorType(I8, 16), align=1)
            v = b.sext(v, v16i) if src == "int8" else b.zext(v, v16i)
            f = b.fmul(b.sitofp(b.sub(v, zp), v16d), scale)
            b.store(b.fptrunc(f, ir.VectorType(F32, 16)), b.gep(y, [e], source_etype=F32),
                    align=4)
        return b.add(lo, b.mul(steps, c64(16)))

    def quant_vectors(self, k, b, pointers, lo, hi):
        """QUANT "onnx" per tensor to 8 or 16 bits, 16 elements a step: float32 x / scale,
        rint (half to even: exact in float32, as the scalar loop's float64 rint of the same
        float32), NaN -> 0, clamped to [min - zp, max - zp] (integers, exact in float32), + zp:
        the scalar loop's values element for element. Returns where the scalar rest starts."""
        p = k.params
        x, y, scales, zps = pointers
        bits = 16 if p["out_dtype"] == "int16" else 8
        info = np.iinfo(p["out_dtype"])
        v16f, v16i = ir.VectorType(F32, 16), ir.VectorType(I32, 16)
        out_ty = ir.VectorType(ir.IntType(bits), 16)
        rint = self.module.globals.get("llvm.rint.v16f32") or ir.Function(
            self.module, ir.FunctionType(v16f, [v16f]), name="llvm.rint.v16f32")

        scale = _splat16(b, b.fptrunc(self.load_at(b, scales, c64(0), F64), F32), v16f)
        zp = self.load_at(b, zps, c64(0), I32)
        low_f = _splat16(b, b.sitofp(b.sub(ir.Constant(I32, int(info.min)), zp), F32), v16f)
        high_f = _splat16(b, b.sitofp(b.sub(ir.Constant(I32, int(info.max)), zp), F32), v16f)
        zero = ir.Constant(v16f, [ir.Constant(F32, 0.0)] * 16)
        steps = b.udiv(b.sub(hi, lo), c64(16))
        with for_range(b, steps, "ev") as i:
            e = b.add(lo, b.mul(i, c64(16)))
            v = b.load(b.gep(x, [e], source_etype=F32), typ=v16f, align=4)
            r = b.call(rint, [b.fdiv(v, scale)])
            r = b.select(b.fcmp_unordered("uno", r, r), zero, r)
            r = b.select(b.fcmp_ordered("<", r, low_f), low_f, r)
            r = b.select(b.fcmp_ordered(">", r, high_f), high_f, r)
            q = b.add(b.fptosi(r, v16i), _splat16(b, zp, v16i))
            b.store(b.trunc(q, out_ty), b.gep(y, [e], source_etype=ir.IntType(bits)), align=1)
        return b.add(lo, b.mul(steps, c64(16)))


def _splat16(b, value, ty):
    """``value`` in all 16 lanes of vector type ``ty`` (the per-tensor scale and zero point of
    the vector quantize and dequantize loops)."""
    vec = b.insert_element(ir.Constant(ty, ir.Undefined), value, ir.Constant(I32, 0))
    return b.shuffle_vector(vec, ir.Constant(ty, ir.Undefined),
                            ir.Constant(ir.VectorType(I32, 16), [0] * 16))
