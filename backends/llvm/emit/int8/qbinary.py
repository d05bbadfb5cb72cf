"""QBIN: qnn.add / subtract / mul element by element with per-channel-pair parameters
(qbinary.py); QRESCALE: one qnn.concatenate input brought to the output's parameters
(gather.py, data wider than 8 bits). A kernel family (it uses nest,
load_value, store_value of FloatKernels and rint_i64 of IntKernels)."""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from partita.backends.llvm.emit.base import F32, F64, I32, I64, Family, c64, for_range, via
from partita.backends.llvm.kinds import Kind, emits


class QBinaryKernels(Family):
    # what it uses of the other kernel families (through the emit context)
    load_value = via("floats")
    nest = via("floats")
    rint_i64 = via("ints")
    store_value = via("floats")

    @emits(Kind.QBIN)
    def k_qbin(self, k):
        """out[e] = the op on lhs[ia(e)], rhs[ib(e)] with pair pair(e)'s parameters, saturated
        to the output's dtype (the three offsets come from one loop nest over the output)."""
        p = k.params
        fn, b, (x1, x2, y) = self.function(k, 2)
        dtypes = [self.dtype(i) for i in k.inputs]
        out = self.dtype(k.output)
        info = np.iinfo(out)

        def body(index, offs):
            lhs = self.load_value(b, x1, offs[0], dtypes[0])[1]
            rhs = self.load_value(b, x2, offs[1], dtypes[1])[1]
            v = getattr(self, f"_qbin_{p['mode']}")(b, p, offs[2], lhs, rhs)
            v = self.clamp(b, v, int(info.min), int(info.max))
            self.store_value(b, ("i", v), y, index, out)

        self.nest(b, p["out_shape"], p["strides"], body)
        b.ret_void()
        return fn

    def _pair_int(self, b, name, pair):
        return b.sext(self.load_at(b, self.cargs[name], pair, I32), I64)

    def _pair_f32(self, b, name, pair):
        return b.fptrunc(self.load_at(b, self.cargs[name], pair, F64), F32)

    def _qbin_tflite_add(self, b, p, pair, lhs, rhs):
        """TFLite ADD / SUB (rhs's multiplier negated for SUB, by the lowering)."""
        g = lambda name: self._pair_int(b, name, pair)  # noqa: E731
        left = c64(p["left"])
        a = self.mbqm(b, b.shl(b.sub(lhs, g("lz")), left), g("q1"), g("e1"))
        c = self.mbqm(b, b.shl(b.sub(rhs, g("rz")), left), g("q2"), g("e2"))
        raw = b.sext(b.trunc(b.add(a, c), I32), I64)  # int32 wrap-around
        return b.add(self.mbqm(b, raw, g("qo"), g("eo")), c64(p["oz"]))

    def _qbin_tflite_mul(self, b, p, pair, lhs, rhs):
        """TFLite MUL: MultiplyByQuantizedMultiplier of the wrapped int32 product (a left shift
        by a 32-bit count: modulo 32 on x86, as requantize)."""
        g = lambda name: self._pair_int(b, name, pair)  # noqa: E731
        prod = b.mul(b.sub(lhs, g("lz")), b.sub(rhs, g("rz")))
        prod = b.sext(b.trunc(prod, I32), I64)
        shift = g("shift")
        shift = b.select(b.icmp_signed(">", shift, c64(0)), b.and_(shift, c64(31)), shift)
        return b.add(self.mbqm(b, prod, g("q"), shift), c64(p["oz"]))

    def _qbin_onnx_add(self, b, p, pair, lhs, rhs):
        """MLAS QLinearAdd: rint(fma(a, ra, fma(b, rb, fixed))), B the per-span scalar side."""
        fma = self.module.declare_intrinsic("llvm.fma", [F32], ir.FunctionType(F32, [F32] * 3))
        a, c = (rhs, lhs) if p["swap"] else (lhs, rhs)
        inner = b.call(fma, [b.sitofp(c, F32), self._pair_f32(b, "rb", pair),
                             self._pair_f32(b, "fixed", pair)])
        return self.rint_i64(b, b.call(fma, [b.sitofp(a, F32), self._pair_f32(b, "ra", pair),
                                             inner]))

    def _qbin_onnx_mul(self, b, p, pair, lhs, rhs):
        """MLAS QLinearMul: rint(float32(product) * scale + float32(zp_out)), two roundings."""
        prod = b.mul(b.sub(lhs, self._pair_int(b, "lz", pair)),
                     b.sub(rhs, self._pair_int(b, "rz", pair)))
        v = b.fmul(b.sitofp(prod, F32), self._pair_f32(b, "scale", pair))
        return self.rint_i64(b, b.fadd(v, ir.Constant(F32, float(np.float32(p["oz"])))))

    def _qbin_onnx_float(self, b, p, pair, lhs, rhs):
        """QuantizeLinear(DequantizeLinear(lhs) op DequantizeLinear(rhs)), all in float32."""
        dl = b.fmul(b.sitofp(b.sub(lhs, self._pair_int(b, "lz", pair)), F32),
                    self._pair_f32(b, "ls", pair))
        dr = b.fmul(b.sitofp(b.sub(rhs, self._pair_int(b, "rz", pair)), F32),
                    self._pair_f32(b, "rs", pair))
        v = {"add": b.fadd, "sub": b.fsub, "mul": b.fmul}[p["op"]](dl, dr)
        q = self.rint_i64(b, b.fdiv(v, ir.Constant(F32, p["os"])))
        return b.add(q, c64(p["oz"]))

    @emits(Kind.QRESCALE)
    def k_qrescale(self, k):
        """qnn_elemwise._rescale of each element, saturated to the dtype: "tflite" in float32
        (x * scale + bias, rounded half away; a value no int64 holds becomes INT64_MIN, as
        numpy's conversion on x86), "onnx" rint(float32(x - zp) * s / s_out) in float32."""
        p = k.params
        fn, b, (x, y) = self.function(k, 1)
        dtype = self.dtype(k.inputs[0])
        info = np.iinfo(dtype)
        f32 = lambda v: ir.Constant(F32, float(v))  # noqa: E731
        with for_range(b, p["count"], "e") as e:
            v = self.load_value(b, x, e, dtype)[1]
            if p["mode"] == "tflite":
                t = b.fpext(b.fadd(b.fmul(b.sitofp(v, F32), f32(p["scale"])), f32(p["bias"])), F64)
                fabs = self.module.declare_intrinsic("llvm.fabs", [F64])
                floor = self.module.declare_intrinsic("llvm.floor", [F64])
                r = b.call(floor, [b.fadd(b.call(fabs, [t]), ir.Constant(F64, 0.5))])
                r = b.select(b.fcmp_ordered("<", t, ir.Constant(F64, 0.0)), b.fneg(r), r)
                fits = b.fcmp_ordered("<", b.call(fabs, [r]), ir.Constant(F64, 2.0**63))
                q = b.select(fits, b.fptosi(r, I64), c64(-(1 << 63)))
            else:
                d = b.fmul(b.sitofp(b.sub(v, c64(p["zp"])), F32), f32(p["s"]))
                q = self.rint_i64(b, b.fdiv(d, f32(p["so"])))
            q = self.clamp(b, b.add(q, c64(p["zo"])), int(info.min), int(info.max))
            self.store_value(b, ("i", q), y, e, dtype)
        b.ret_void()
        return fn


__all__ = ["QBinaryKernels"]
