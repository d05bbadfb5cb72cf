"""The vector kernels' output stage: 16 int32 accumulators of 16 output channels to 16 bytes,
in TFLite's exact fixed-point arithmetic (the unsigned high-multiply form, vector_plan's shortcuts),
TFLite's reference FULLY_CONNECTED double rounding, or the float32 stages of ONNX Runtime,
fbgemm and oneDNN. A kernel family (``em.vstage``)."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import F32, F64, I8, I32, I64, Family, c64, via

from .vector_types import B16, B64, H16, Q32, V8, V16, W32, V16x64, kconst, vconcat, vpart


class OutputStage(Family):
    # what it uses of the other kernel families (through the emit context)
    vload = via("vector")

    def vrequant(self, b, acc, g, o, p, corr=True, cache=None):
        """16 int32 accumulators of channels o.. o+15 -> 16 output bytes (TFLite's stage);
        ``corr`` False: the accumulators started from the channels' constant term; ``cache``
        (a dict): the channels' constants loaded once for every pixel of a tile (LLVM cannot
        reuse them across the output stores, which may alias them). With "flip_out" (a
        kernel whose only reader is a VNNI convolution, lower/flip_input.py) the bytes are
        stored as y ^ 0x80, the uint8 form that convolution reads."""
        value = self.vrequant_bytes(b, acc, g, o, p, corr, cache)
        return b.xor(value, kconst(B16, -128)) if p.get("flip_out") else value

    def vrequant_bytes(self, b, acc, g, o, p, corr=True, cache=None, lanes=False):
        """vrequant's bytes, as the output's dtype holds them; ``lanes`` (the TFLite stages):
        the int32 lanes before the clamp instead (the value + the output zero point), for
        ``vnarrow``."""

        def chan(name):
            if cache is None:
                return self.vload(b, g[name], b.mul(o, c64(4)), V16)
            if name not in cache:
                cache[name] = self.vload(b, g[name], b.mul(o, c64(4)), V16)
            return cache[name]

        a = b.add(acc, chan("corr")) if corr else acc  # int32 wrap-around, as TFLite's
        if p["rounding"] in ("onnx", "fbgemm", "onednn"):
            return self.vrequant_onnx(b, a, chan, o, g, p["rounding"])
        if p["rounding"] == "tflite_double":
            return self.vrequant_double(b, a, chan, o, g, p)
        if p["rounding"] == "tflite_builtin":
            return self.vrequant_upward(b, a, chan, p, lanes)
        if p["rq_zp"]:
            x = b.sub(b.sext(a, V16x64), kconst(V16x64, p["rq_zp"]))
            if p["left"]:  # a multiplier above 1: TFLite shifts left first (int32 wrap-around)
                x = b.sext(b.trunc(b.shl(x, b.zext(chan("lshift"), V16x64)), V16), V16x64)
            high = b.ashr(
                b.add(b.mul(x, b.sext(chan("mult"), V16x64)), kconst(V16x64, 1 << 30)),
                kconst(V16x64, 31),
            )
            high = b.trunc(high, V16)
        else:
            if p["left"]:
                a = b.shl(a, chan("lshift"))  # int32 wrap-around
            # SRDHM + rnd + RDBPOT's sign term in one (vector_stage.unsigned_high_mul)
            if p.get("umul"):
                t = self.vsrdhm_unsigned(b, a, chan)
                if p.get("offset"):  # a = x + offset (vector_stage.offset_accumulators)
                    # RDBPOT's -1 where a < offset = 2^30: a is in [0, 2^31), so that is
                    # (a >> 30) - 1, the -1 in the addends (one shift and an add, not a
                    # compare, a mask-to-vector move and an add)
                    t = b.add(t, b.lshr(a, kconst(V16, p["offset"].bit_length() - 1)))
                else:
                    negative = b.icmp_signed("<", a, kconst(V16, 0))
                    t = b.add(t, b.select(negative, chan("negc"), kconst(V16, 0)))
                y = b.ashr(t, chan("rshift"))
                return self.vfinish(b, y, chan, p, lanes)
            high = self.vsrdhm(b, a, chan("mult"), chan("multo") if "multo" in g else None)
        sign = b.ashr(high, kconst(V16, 31))
        if not p.get("round_all"):
            sign = b.and_(sign, chan("rmask"))
        y = b.ashr(b.add(b.add(high, chan("rnd")), sign), chan("rshift"))
        return self.vfinish(b, y, chan, p, lanes)

    def vrequant_upward(self, b, a, chan, p, lanes=False):
        """TFLite's optimized kernels' stage ("tflite_builtin": ties upward twice): the high 32
        bits of (x << bls) * M + addend, as 32 x 32 -> 64-bit products of the even and of the
        odd lanes, shifted right by bsh (vector_stage.upward_constants); then zero point and
        clamp."""
        if p["rq_zp"]:
            a = b.sub(a, kconst(V16, p["rq_zp"]))  # int32 wrap-around: the shift wraps anyway
        q = ir.VectorType(I64, 8)
        x = b.shl(a, chan("bls"))
        c32 = kconst(q, 32)

        def low_signed(v):  # each 64-bit lane's low int32, sign-extended: VPMULDQ's operand
            v = b.bitcast(v, q)
            return b.ashr(b.shl(v, c32), c32)

        # the odd lanes moved down to the even positions by a 32-bit shuffle (VPSHUFD), so both
        # halves are VPMULDQ products: an arithmetic 64-bit shift of the odd lanes has no AVX2
        # instruction (VPSRAQ is AVX-512's) and was emulated, 19,217 against 14,219
        # instructions in MobileNetV2's convolutions on -isa=avxvnni
        down = ir.Constant(V16, [i + 1 if i % 2 == 0 else i for i in range(16)])
        m = chan("mult")
        even = b.mul(low_signed(x), low_signed(m))
        odd = b.mul(low_signed(b.shuffle_vector(x, x, down)),
                    low_signed(b.shuffle_vector(m, m, down)))
        even = b.add(even, b.bitcast(chan("bhe"), q))
        odd = b.add(odd, b.bitcast(chan("bho"), q))
        pick = ir.Constant(V16, [i + 1 if i % 2 == 0 else 16 + i for i in range(16)])
        high = b.shuffle_vector(b.bitcast(even, V16), b.bitcast(odd, V16), pick)
        return self.vfinish(b, b.ashr(high, chan("bsh")), chan, p, lanes)

    def vfinish(self, b, y, chan, p, lanes=False):
        """The shifted value + the output zero point (unless folded), clamped, narrowed
        (``lanes``: not clamped, the int32 lanes)."""
        if not p.get("fold_zp"):  # else the zero point is in rnd (vector_stage.stage_flags)
            y = b.add(y, chan("ozp"))
        if lanes:
            return y
        lo, hi = chan("lo"), chan("hi")
        if p.get("saturate"):  # the type's range: a saturating narrowing (VPMOVSDB / VPMOVUSDB)
            lo, hi = (kconst(V16, v) for v in {"int8": (-128, 127), "uint8": (0, 255)}[
                p["saturate"]])
        y = b.select(b.icmp_signed("<", y, lo), lo, y)
        y = b.select(b.icmp_signed(">", y, hi), hi, y)
        return b.trunc(y, B16)

    def vnarrow(self, b, ys, g, o0, p, cache=None):
        """2 or 4 vectors of int32 lanes (vrequant_bytes' ``lanes``, channels o0.. in order,
        16 a vector) -> their 32 or 64 output bytes: saturating packs (VPACKSSDW, then
        VPACKSSWB or VPACKUSWB: 3 uops for 64 outputs where VPMOVSDB takes 2 per 16), one
        VPERMD to undo the packs' 128-bit lanes, the clamp on the bytes (2 uops for 64
        outputs, not 2 per 16; the bounds "lo8" / "hi8", vector_stage.output_constants) and
        "flip_out"'s xor. Exact: both saturations are monotone and the clamp range lies within
        the output type's."""
        n, unsigned = len(ys), p["out_dtype"] == "uint8"
        bytes_ty = ir.VectorType(I8, 16 * n)
        pack_dw = self._intrinsic("llvm.x86.avx512.packssdw.512", W32, [V16, V16])
        kind = "us" if unsigned else "ss"
        pack_wb = self._intrinsic(f"llvm.x86.avx512.pack{kind}wb.512", B64, [W32, W32])
        words = [b.call(pack_dw, [ys[i], ys[i + 1]]) for i in range(0, n, 2)]
        packed = b.bitcast(b.call(pack_wb, [words[0], words[-1]]), V16)
        # 128-bit lane i holds dword i of every vector in turn: output dword d is vector
        # d // 4's dword d % 4
        order = ir.Constant(ir.VectorType(I32, 4 * n), [4 * (d % 4) + d // 4
                                                        for d in range(4 * n)])
        out = b.bitcast(b.shuffle_vector(packed, packed, order), bytes_ty)
        return self._bytes_clamp(b, out, g, o0, p, cache)

    def vnarrow_pair(self, b, y0, y1, g, o, p, cache=None):
        """Two pixels' 16 int32 lanes (vrequant_bytes' ``lanes``, channels o.., AVX2 registers
        of 8) -> their 2 x 16 output bytes, pixel 0's first: a VPACKSSDW per pixel, one
        VPACKSSWB (VPACKUSWB) and one VPERMD, 4 shuffles for 32 outputs where a pixel's own
        narrowing takes 4 for 16; then the clamp on the bytes and "flip_out" (as vnarrow)."""
        unsigned = p["out_dtype"] == "uint8"
        pack_dw = self._intrinsic("llvm.x86.avx2.packssdw", H16, [V8, V8])
        kind = "us" if unsigned else "ss"
        pack_wb = self._intrinsic(f"llvm.x86.avx2.pack{kind}wb", Q32, [H16, H16])
        words = [b.call(pack_dw, [vpart(b, y, 0, 8), vpart(b, y, 1, 8)]) for y in (y0, y1)]
        packed = b.bitcast(b.call(pack_wb, words), V8)
        # 128-bit lane 0 holds channels 0-3 and 8-11 of each pixel, lane 1 channels 4-7, 12-15
        order = ir.Constant(V8, [0, 4, 1, 5, 2, 6, 3, 7])
        out = b.bitcast(b.shuffle_vector(packed, packed, order), Q32)
        return self._bytes_clamp(b, out, g, o, p, cache, pair=True)

    def _bytes_clamp(self, b, out, g, o, p, cache, pair=False):
        """``out`` (output bytes of channels o.., or with ``pair`` two pixels' 16 each)
        clamped to "lo8" / "hi8" unless the packs' saturation is the clamp; "flip_out"'s xor."""
        unsigned = p["out_dtype"] == "uint8"
        if not p.get("saturate"):
            def bound(name):
                key = (name, out.type.count, pair)
                if cache is None or key not in cache:
                    if pair:
                        half = self.vload(b, g[name], o, B16)
                        value = vconcat(b, half, half)
                    else:
                        value = self.vload(b, g[name], o, out.type)
                    if cache is None:
                        return value
                    cache[key] = value
                return cache[key]

            lo, hi = bound("lo8"), bound("hi8")
            less = b.icmp_unsigned if unsigned else b.icmp_signed
            out = b.select(less("<", out, lo), lo, out)
            out = b.select(less(">", out, hi), hi, out)
        if p.get("flip_out"):
            out = b.xor(out, kconst(out.type, -128))
        return out

    def vsrdhm_unsigned(self, b, x, chan):
        """high32(x_u * 2M + 2^31 + rnd * 2^32) per int32 lane, x_u the lane read as unsigned:
        VPMULUDQ of the even lanes and of the odd lanes (shifted down) by 2M mod 2^32, the
        64-bit addends of each channel, and the high halves interleaved back."""
        q = ir.VectorType(I64, 8)
        low = kconst(q, 0xFFFFFFFF)
        xq = b.bitcast(x, q)
        even = b.mul(b.and_(xq, low), b.and_(b.bitcast(chan("mult2"), q), low))
        odd = b.mul(b.lshr(xq, kconst(q, 32)), b.and_(b.bitcast(chan("mult2o"), q), low))
        even = b.add(even, b.bitcast(chan("heven"), q))
        odd = b.add(odd, b.bitcast(chan("hodd"), q))
        lanes = ir.Constant(V16, [i + 1 if i % 2 == 0 else 16 + i for i in range(16)])
        return b.shuffle_vector(b.bitcast(even, V16), b.bitcast(odd, V16), lanes)

    def vsrdhm(self, b, x, m, m_odd=None):
        """(x * m + 2^30) >> 31 per int32 lane (TFLite's SaturatingRoundingDoublingHighMul for
        m > 0), with 32 x 32 -> 64-bit multiplies of the even lanes and of the odd lanes
        (VPMULDQ: LLVM selects it for products of sign-extended-in-register operands) and the
        results' 32-bit halves blended back; no 16 x int64 vector is ever formed. ``m_odd``: the
        odd channels' multipliers already in the even positions (one shift less per vector)."""
        q = ir.VectorType(I64, 8)
        xq, mq, c32 = b.bitcast(x, q), b.bitcast(m, q), kconst(q, 32)
        even = b.mul(b.ashr(b.shl(xq, c32), c32), b.ashr(b.shl(mq, c32), c32))
        if m_odd is None:
            m_odd = b.ashr(mq, c32)
        else:
            m_odd = b.bitcast(m_odd, q)
            m_odd = b.ashr(b.shl(m_odd, c32), c32)
        odd = b.mul(b.ashr(xq, c32), m_odd)
        half = kconst(q, 1 << 30)
        even = b.lshr(b.add(even, half), kconst(q, 31))  # the result in each low half
        odd = b.shl(b.add(odd, half), kconst(q, 1))  # ... in each high half
        lanes = ir.Constant(V16, [i if i % 2 == 0 else 16 + i for i in range(16)])
        return b.shuffle_vector(b.bitcast(even, V16), b.bitcast(odd, V16), lanes)

    def vrequant_double(self, b, a, chan, o, g, p):
        """TFLite's reference FULLY_CONNECTED: round half away from zero (llvm.round) of
        double(acc - rq_zp) * the real scale (one double product), + zero point, saturated."""
        d16 = ir.VectorType(F64, 16)
        x = b.sitofp(a, d16)
        if p["rq_zp"]:
            x = b.fsub(x, ir.Constant(d16, [ir.Constant(F64, float(p["rq_zp"]))] * 16))
        v = b.fmul(x, self.vload(b, g["dscale"], b.mul(o, c64(8)), d16))
        name = "llvm.round.v16f64"
        fn = self.module.globals.get(name) or ir.Function(
            self.module, ir.FunctionType(d16, [d16]), name=name
        )
        v = b.call(fn, [v])
        big = ir.Constant(d16, [ir.Constant(F64, 1e9)] * 16)
        small = ir.Constant(d16, [ir.Constant(F64, -1e9)] * 16)
        v = b.select(b.fcmp_ordered(">", v, big), big, v)
        v = b.select(b.fcmp_ordered("<", v, small), small, v)
        y = b.add(b.fptosi(v, V16), chan("ozp"))
        lo, hi = chan("lo"), chan("hi")
        y = b.select(b.icmp_signed("<", y, lo), lo, y)
        y = b.select(b.icmp_signed(">", y, hi), hi, y)
        return b.trunc(y, B16)

    def vrequant_onnx(self, b, a, chan, o, g, rounding="onnx"):
        """The float32 output stages, rounded half to even, saturated:
        "onnx" (MLAS): float32(acc) * scale + zero point;
        "fbgemm" (PyTorch's ReQuantizeOutput): (float32(acc) - fzp) * scale + zero point, fzp
        the negated fractional bias (pytorch_x86.fbgemm_output);
        "onednn": ((float32(acc) * scale - fzp) * finv + float32(zero point)), the zero point
        added before the rounding (pytorch_x86.onednn_output)."""
        f16 = ir.VectorType(F32, 16)

        def fchan(name):
            return self.vload(b, g[name], b.mul(o, c64(4)), f16)

        v = b.sitofp(a, f16)
        if rounding == "fbgemm":
            v = b.fmul(b.fsub(v, fchan("fzp")), fchan("fscale"))
        elif rounding == "onednn":
            v = b.fsub(b.fmul(v, fchan("fscale")), fchan("fzp"))
            v = b.fadd(b.fmul(v, fchan("finv")), b.sitofp(chan("ozp"), f16))
        else:
            v = b.fmul(v, fchan("fscale"))
        name = "llvm.roundeven.v16f32"
        fn = self.module.globals.get(name) or ir.Function(
            self.module, ir.FunctionType(f16, [f16]), name=name
        )
        v = b.call(fn, [v])
        big = ir.Constant(f16, [ir.Constant(F32, 1e9)] * 16)  # saturates either way
        small = ir.Constant(f16, [ir.Constant(F32, -1e9)] * 16)
        v = b.select(b.fcmp_ordered(">", v, big), big, v)
        v = b.select(b.fcmp_ordered("<", v, small), small, v)
        y = b.fptosi(v, V16)
        if rounding != "onednn":
            y = b.add(y, chan("ozp"))
        lo, hi = chan("lo"), chan("hi")
        y = b.select(b.icmp_signed("<", y, lo), lo, y)
        y = b.select(b.icmp_signed(">", y, hi), hi, y)
        return b.trunc(y, B16)

