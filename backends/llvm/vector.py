"""The vector kernels' IR (plans in vplan.py): a register tile of 16 x int32 accumulators per
(pixel, 16 output channels), fed by ``vpdpbusd`` (VNNI), or without VNNI by ``vpmaddwd`` of
int16 weights into int32 pair accumulators (exact) or ``vpmaddubsw`` (the int16 pair saturation
ONNX Runtime and PyTorch have there), and a vector output stage."""

from __future__ import annotations

from llvmlite import ir

from .codegen import F32, F64, I8, I32, I64, c64, for_range
from .vplan import dw_row_pairs

V16 = ir.VectorType(I32, 16)
PTR8 = ir.PointerType()
V16x64 = ir.VectorType(I64, 16)
B16 = ir.VectorType(I8, 16)
B64 = ir.VectorType(I8, 64)
Q32 = ir.VectorType(I8, 32)  # one AVX2 register of bytes
H16 = ir.VectorType(ir.IntType(16), 16)  # ... of int16
V8 = ir.VectorType(I32, 8)  # ... of int32
V32 = ir.VectorType(I32, 32)  # int32 pair sums of 16 output channels
W64 = ir.VectorType(ir.IntType(16), 64)  # 16 channels x 4 int16 weights
DW_TILE = 8  # output pixels per step of the paired depthwise kernel


def _part(b, vec, index: int, size: int):
    """Elements index*size .. (index+1)*size - 1 of ``vec``."""
    return b.shuffle_vector(vec, vec, ir.Constant(ir.VectorType(I32, size),
                                                  list(range(index * size, (index + 1) * size))))


def _concat(b, x, y):
    n = x.type.count
    return b.shuffle_vector(x, y, ir.Constant(ir.VectorType(I32, 2 * n), list(range(2 * n))))


def vsplat(b, value, ty=V16):
    """A vector of ``ty`` with every lane ``value`` (a scalar of its element type)."""
    one = b.insert_element(ir.Constant(ty, ir.Undefined), value, ir.Constant(I32, 0))
    mask = ir.Constant(ir.VectorType(I32, ty.count), [0] * ty.count)
    return b.shuffle_vector(one, ir.Constant(ty, ir.Undefined), mask)


def kconst(ty, value):
    return ir.Constant(ty, [ir.Constant(ty.element, int(value))] * ty.count)


class VectorKernels:
    """Mixed into the kernel emitter: ``k_vconv`` and ``k_vdw``."""

    def vglobals(self, k):
        return self.cargs

    def vload(self, b, ptr, byte_offset, ty):
        return b.load(b.gep(ptr, [byte_offset], source_etype=I8), typ=ty, align=1)

    # -- padding copy ---------------------------------------------------------------------------
    def pack_input(self, b, x, dst, p, copy=True):
        """dst[Hs][Ws][Cs] = x placed at (top, left), the rest filled with the zero point;
        without ``copy`` only the border is filled (a producer wrote the inside)."""
        memset = self.module.declare_intrinsic("llvm.memset", [ir.PointerType(), I64])
        memcpy = self.module.declare_intrinsic(
            "llvm.memcpy", [ir.PointerType(), ir.PointerType(), I64]
        )
        false = ir.Constant(ir.IntType(1), 0)
        zp = b.trunc(b.load(self.cargs["izp"], typ=I32), I8)
        hs, ws, cs, c = p["Hs"], p["Ws"], p["Cs"], p["C"]
        top, left = p["pad"][0], p["pad"][1]
        if cs == c or not copy:  # whole rows: one copy per row, the zero point in the border
            row, width = ws * cs, p["W"] * c
            b.call(memset, [dst, zp, c64(top * row), false])
            after = (top + p["H"]) * row
            b.call(
                memset,
                [b.gep(dst, [c64(after)], source_etype=I8), zp, c64(hs * row - after), false],
            )
            with for_range(b, p["H"], "py") as y:
                at = b.mul(b.add(y, c64(top)), c64(row))
                b.call(memset, [b.gep(dst, [at], source_etype=I8), zp, c64(left * cs), false])
                start = b.add(at, c64(left * cs))
                if copy:
                    src = b.gep(x, [b.mul(y, c64(width))], source_etype=I8)
                    b.call(memcpy, [b.gep(dst, [start], source_etype=I8), src, c64(width),
                                    false])
                rest = b.gep(dst, [b.add(start, c64(width))], source_etype=I8)
                b.call(memset, [rest, zp, c64(row - left * cs - width), false])
            return
        b.call(memset, [dst, zp, c64(hs * ws * cs), false])
        if cs == 4 and p["W"] >= 16:  # 1-3 channels (an image): 16 pixels per shuffle
            return self.pack_pixels(b, x, dst, p, zp)
        with for_range(b, p["H"], "py") as y, for_range(b, p["W"], "px") as xx:
            src = b.gep(x, [b.mul(b.add(b.mul(y, c64(p["W"])), xx), c64(c))], source_etype=I8)
            at = b.mul(b.add(b.mul(b.add(y, c64(top)), c64(ws)), b.add(xx, c64(left))), c64(cs))
            b.call(memcpy, [b.gep(dst, [at], source_etype=I8), src, c64(c), false])

    def pack_pixels(self, b, x, dst, p, zp):
        """pack_input for 4-channel slots of 1-3 channel pixels: 16 pixels (16 c bytes) at a
        time widened to 64 bytes by one byte shuffle with the zero point (VPERMB where the CPU
        has it), a row's last pixels by the same shuffle of its last 16; the border already
        holds the zero point."""
        c, ws, width = p["C"], p["Ws"], p["W"]
        top, left = p["pad"][0], p["pad"][1]
        src_ty = ir.VectorType(I8, 16 * c)
        fill = vsplat(b, zp, src_ty)
        picks = [j * c + k if k < c else 16 * c for j in range(16) for k in range(4)]
        mask = ir.Constant(ir.VectorType(I32, 64), picks)

        def move(y, px):  # pixels px .. px+15 of row y
            pixels = self.vload(b, x, b.mul(b.add(b.mul(y, c64(width)), px), c64(c)), src_ty)
            at = b.mul(b.add(b.mul(b.add(y, c64(top)), c64(ws)), b.add(px, c64(left))), c64(4))
            b.store(b.shuffle_vector(pixels, fill, mask), b.gep(dst, [at], source_etype=I8),
                    align=1)

        with for_range(b, p["H"], "py") as y:
            with for_range(b, width // 16, "pv") as v:
                move(y, b.mul(v, c64(16)))
            if width % 16:
                move(y, c64(width - 16))

    # -- output stage ---------------------------------------------------------------------------
    def vrequant(self, b, acc, g, o, p, corr=True):
        """16 int32 accumulators of channels o.. o+15 -> 16 output bytes (TFLite's stage);
        ``corr`` False: the accumulators started from the channels' constant term."""

        def chan(name):
            return self.vload(b, g[name], b.mul(o, c64(4)), V16)

        a = b.add(acc, chan("corr")) if corr else acc  # int32 wrap-around, as TFLite's
        if p["rounding"] in ("onnx", "fbgemm", "onednn"):
            return self.vrequant_onnx(b, a, chan, o, g, p["rounding"])
        if p["rounding"] == "tflite_double":
            return self.vrequant_double(b, a, chan, o, g, p)
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
            if p.get("umul"):  # SRDHM + rnd + RDBPOT's sign term in one (vplan._unsigned_high_mul)
                t = self.vsrdhm_unsigned(b, a, chan)
                negative = b.icmp_signed("<", a, kconst(V16, 0))
                t = b.add(t, b.select(negative, chan("negc"), kconst(V16, 0)))
                y = b.ashr(t, chan("rshift"))
                return self.vfinish(b, y, chan, p)
            high = self.vsrdhm(b, a, chan("mult"), chan("multo") if "multo" in g else None)
        sign = b.ashr(high, kconst(V16, 31))
        if not p.get("round_all"):
            sign = b.and_(sign, chan("rmask"))
        y = b.ashr(b.add(b.add(high, chan("rnd")), sign), chan("rshift"))
        return self.vfinish(b, y, chan, p)

    def vfinish(self, b, y, chan, p):
        """The shifted value + the output zero point (unless folded), clamped, narrowed."""
        if not p.get("fold_zp"):  # else the zero point is in rnd (vplan._stage_flags)
            y = b.add(y, chan("ozp"))
        lo, hi = chan("lo"), chan("hi")
        if p.get("saturate"):  # the type's range: a saturating narrowing (VPMOVSDB / VPMOVUSDB)
            lo, hi = (kconst(V16, v) for v in {"int8": (-128, 127), "uint8": (0, 255)}[
                p["saturate"]])
        y = b.select(b.icmp_signed("<", y, lo), lo, y)
        y = b.select(b.icmp_signed(">", y, hi), hi, y)
        return b.trunc(y, B16)

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

    def dw_rows_paired(self, b, src, y, g, p, oy0, oy1):
        """VNNI depthwise: input rows in pairs, each lane an int16 pair of one channel's two
        rows, summed into int32 by VPDPWSSD (exact: 8-bit x 8-bit products). Output rows go
        two at a time: both read each interleaved pair of input rows (vplan.dw_row_pairs), and
        DW_TILE output pixels per step share each input column. An odd last row is computed
        with the row before it again, a row's last pixels with the tile before them (the same
        bytes written twice), so each kernel has one unrolled body."""
        oy0, oy1 = (v if isinstance(v, ir.Value) else c64(v) for v in (oy0, oy1))
        if p["OH"] < 2:
            with for_range(b, b.sub(oy1, oy0), "oy") as i:
                self.dw_paired_rows(b, src, y, g, p, b.add(oy0, i), 1)
            return
        steps = b.ashr(b.add(b.sub(oy1, oy0), c64(1)), c64(1))
        with for_range(b, steps, "oy2") as i:
            oy = b.add(oy0, b.shl(i, c64(1)))
            last = c64(p["OH"] - 2)
            oy = b.select(b.icmp_signed(">", oy, last), last, oy)
            self.dw_paired_rows(b, src, y, g, p, oy, 2)

    def dw_paired_rows(self, b, src, y, g, p, oy, nrows):
        """Output rows oy .. oy + nrows - 1 (nrows 1 or 2), every channel vector. Each input
        column of a row group becomes one vector: 16 channels x (4 bytes, read as x ^ 0x80
        for int8, summed by VPDPBUSD) or x (2 int16, by VPDPWSSD)."""
        cs, kh, kw, size = p["Cs"], p["KH"], p["KW"], p["rowpairs"]
        groups, uses = dw_row_pairs(kh, p["sh"], p["dh"], nrows, size)
        table = g["wpairs" if nrows == 1 else "wpairs2"]
        ext = b.sext if p["signed"] else b.zext
        h16 = ir.VectorType(ir.IntType(16), 16)
        w32 = ir.VectorType(ir.IntType(16), 32)
        if size == 2:
            dot = self.module.declare_intrinsic(
                "llvm.x86.avx512.vpdpwssd.512", (), ir.FunctionType(V16, [V16, w32, w32]))
            wty, step = w32, 4
        else:
            dot = self.module.declare_intrinsic(
                "llvm.x86.avx512.vpdpbusd.512", (), ir.FunctionType(V16, [V16, B64, B64]))
            wty, step = B64, 4
        zip_ = ir.Constant(V32, [i // 2 + (16 if i % 2 else 0) for i in range(32)])
        quad = ir.Constant(ir.VectorType(I32, 64),
                           [k * 16 + c for c in range(16) for k in range(4)])
        cat = ir.Constant(V32, list(range(32)))
        flip = kconst(B16, -128) if p["signed"] else None

        def column(ix, rows):
            """One input column of a row group, interleaved per channel."""
            parts = []
            for rel in rows:
                if rel is None:
                    parts.append(ir.Constant(B16, None) if size == 4 else ir.Constant(h16, None))
                    continue
                iy = b.add(b.mul(oy, c64(p["sh"])), c64(rel))
                at = b.add(b.mul(b.add(b.mul(iy, c64(p["Ws"])), ix), c64(cs)), o)
                v = self.vload(b, src, at, B16)
                if size == 2:
                    v = ext(v, h16)
                elif flip is not None:
                    v = b.xor(v, flip)
                parts.append(v)
            if size == 2:
                return b.shuffle_vector(parts[0], parts[1], zip_)
            low = b.shuffle_vector(parts[0], parts[1], cat)
            high = b.shuffle_vector(parts[2], parts[3], cat)
            return b.shuffle_vector(low, high, quad)

        full, rest = divmod(p["OW"], DW_TILE)
        with for_range(b, cs // 16, "cv") as cv:
            o = b.mul(cv, c64(16))
            ws = {(j, q, kx): self.vload(b, table, b.mul(b.add(
                      c64((((j * len(groups)) + q) * kw + kx) * cs), o), c64(step)), wty)
                  for j in range(nrows) for q in range(len(groups)) for kx in range(kw)
                  if any(ky is not None for ky in uses[j][q])}  # fmt: skip
            corr = self.vload(b, g["corr"], b.mul(o, c64(4)), V16)

            def tile(ox0, count):
                accs = [[corr] * count for _ in range(nrows)]
                for q, rows in enumerate(groups):
                    columns = {}
                    for r in range(count):
                        for kx in range(kw):
                            col = r * p["sw"] + kx * p["dw"]
                            if col not in columns:
                                columns[col] = column(b.add(b.mul(ox0, c64(p["sw"])), c64(col)),
                                                      rows)
                            for j in range(nrows):
                                if (j, q, kx) in ws:
                                    accs[j][r] = b.call(dot, [accs[j][r], columns[col],
                                                              ws[j, q, kx]])
                for j in range(nrows):
                    for r in range(count):
                        value = self.vrequant(b, accs[j][r], g, o, p, corr=False)
                        pix = b.add(b.mul(b.add(oy, c64(j)), c64(p["OW"])), b.add(ox0, c64(r)))
                        self.vstore(b, value, y, b.add(b.mul(pix, c64(p["OC"])), o), o,
                                    p["OC"])

            if not full:  # a row narrower than a tile
                tile(c64(0), rest)
                return
            with for_range(b, full + (1 if rest else 0), "ot") as t:
                ox0 = b.mul(t, c64(DW_TILE))
                last = c64(p["OW"] - DW_TILE)
                tile(b.select(b.icmp_signed(">", ox0, last), last, ox0), DW_TILE)

    def sat16(self, b, v):
        lo, hi = kconst(V16, -(1 << 15)), kconst(V16, (1 << 15) - 1)
        v = b.select(b.icmp_signed("<", v, lo), lo, v)
        return b.select(b.icmp_signed(">", v, hi), hi, v)

    def vstore(self, b, value, y, index, o, oc):
        """Store 16 bytes at y[index..]; only the lanes below ``oc - o`` at the channel tail."""
        if oc % 16 == 0:  # no tail: every vector is whole
            b.store(value, b.gep(y, [index], source_etype=I8), align=1)
            return
        full = b.icmp_signed("<=", b.add(o, c64(16)), c64(oc))
        with b.if_else(full) as (then, otherwise):
            with then:
                b.store(value, b.gep(y, [index], source_etype=I8), align=1)
            with otherwise, for_range(b, b.sub(c64(oc), o), "lane") as lane:
                self.store_at(b, b.extract_element(value, lane), y, b.add(index, lane), I8)

    def prefetch_lines(self, b, ptr, size: int, locality: int = 3):
        """Software prefetches of the ``size`` bytes at ``ptr``, one per 64-byte line, in order."""
        prefetch = self.module.declare_intrinsic(
            "llvm.prefetch.p0", (), ir.FunctionType(ir.VoidType(), [PTR8, I32, I32, I32]))
        with for_range(b, -(-size // 64), "line") as line:
            at = b.gep(ptr, [b.mul(line, c64(64))], source_etype=I8)
            b.call(prefetch, [at, ir.Constant(I32, 0), ir.Constant(I32, locality),
                              ir.Constant(I32, 1)])

    # -- two-input tables ------------------------------------------------------------------
    def lut2_gather(self, b, xs, y, table, total: int, offs, isa: str) -> int:
        """y[e] = table[a[e] * 256 + b[e]] for whole vectors of ``e`` (16 lanes with AVX-512, 8
        with AVX2): each lane gathers the 32-bit word at its byte of the table (padded by 4
        bytes) and keeps the low byte. Returns where the scalar tail starts."""
        lanes = 16 if isa == "vnni" else 8
        vb, vi = ir.VectorType(I8, lanes), ir.VectorType(I32, lanes)
        if isa == "vnni":
            mask_ty = ir.VectorType(ir.IntType(1), 16)
            gather = self._intrinsic("llvm.x86.avx512.mask.gather.dpi.512", vi,
                                     [vi, PTR8, vi, mask_ty, I32])
            extra = [kconst(mask_ty, 1), ir.Constant(I32, 1)]
        else:
            gather = self._intrinsic("llvm.x86.avx2.gather.d.d.256", vi, [vi, PTR8, vi, vi, I8])
            extra = [kconst(vi, -1), ir.Constant(I8, 1)]
        self.prefetch_lines(b, table, 65536)  # a cold table streams in sequentially
        steps = total // lanes
        with for_range(b, steps, "v") as v:
            at = b.mul(v, c64(lanes))
            a, c = (self.vload(b, x, at, vb) for x in xs)
            # int8 bytes index the table from -128: flipping the top bit adds 128
            a, c = (b.zext(b.xor(v, kconst(vb, -128)) if off else v, vi)
                    for v, off in zip((a, c), offs))
            index = b.or_(b.shl(a, kconst(vi, 8)), c)
            words = b.call(gather, [kconst(vi, 0), table, index, *extra])
            b.store(b.trunc(words, vb), b.gep(y, [at], source_etype=I8), align=1)
        return steps * lanes

    # -- dot products ------------------------------------------------------------------
    def dot4(self, b, acc, a, w, isa, pairs=False):
        """acc + sum over 4 byte pairs of u8(a) * s8(w), per 32-bit lane: VPDPBUSD (VNNI), or
        with ``pairs`` adjacent products summed into an int16 with saturation first (VPMADDUBSW,
        then VPMADDWD to widen). Exact sums without VNNI take ``madd_wide`` instead."""
        if isa == "vnni" and not pairs:
            fn = self.module.declare_intrinsic(
                "llvm.x86.avx512.vpdpbusd.512", (), ir.FunctionType(V16, [V16, B64, B64])
            )
            return b.call(fn, [acc, b.bitcast(a, B64), b.bitcast(w, B64)])
        if not pairs:
            raise ValueError("exact AVX2 dot products are madd_wide's (int16 weights)")
        a, w = b.bitcast(a, B64), b.bitcast(w, B64)
        madd = self._intrinsic("llvm.x86.avx2.pmadd.wd", V8, [H16, H16])
        ubsw = self._intrinsic("llvm.x86.avx2.pmadd.ub.sw", H16, [Q32, Q32])
        ones = ir.Constant(H16, [1] * 16)
        halves = [b.call(madd, [b.call(ubsw, [_part(b, a, i, 32), _part(b, w, i, 32)]), ones])
                  for i in range(2)]
        return b.add(acc, _concat(b, halves[0], halves[1]))

    def widened_splat(self, b, a):
        """The 4 activation bytes of a 32-bit scalar, zero-extended to int16, in every 64-bit
        group of a <64 x i16> vector."""
        four = b.zext(b.bitcast(a, ir.VectorType(I8, 4)), ir.VectorType(ir.IntType(16), 4))
        return b.bitcast(vsplat(b, b.bitcast(four, I64), ir.VectorType(I64, 16)), W64)

    def madd_wide(self, b, acc, a16, w16):
        """acc (<32 x i32> pair sums) + VPMADDWD of int16 activations and weights."""
        madd = self._intrinsic("llvm.x86.avx2.pmadd.wd", V8, [H16, H16])
        q = [b.call(madd, [_part(b, a16, i, 16), _part(b, w16, i, 16)]) for i in range(4)]
        return b.add(acc, _concat(b, _concat(b, q[0], q[1]), _concat(b, q[2], q[3])))

    def _intrinsic(self, name, ret, args):
        return self.module.declare_intrinsic(name, (), ir.FunctionType(ret, args))

    # -- convolution / dense ----------------------------------------------------------------------
    def k_vconv(self, k):
        """The convolution; with ``threads`` 2 the output rows (a pointwise convolution's
        pixel tiles) split in two halves, the second on a POSIX thread (split_run)."""
        p = k.params

        def rows(rb, args, g):
            self.conv_rows(rb, args[0], args[1], g, p, *self.conv_cells(rb, p),
                           (args[-2], args[-1]))

        if self.range_mode(k) == "body":  # the driver's module has the rest
            return self.ranged(k, self.constant_names(k), rows)
        fn, b, args = self.function(k, len(k.inputs))
        x, y = args[0], args[-1]
        accs, out = self.conv_cells(b, p)
        if p.get("prefetch"):
            self.prefetch_lines(b, self.vglobals(k)["weights"], p["prefetch"])
        src = x
        if p["pack"]:
            src = args[1]
            self.pack_input(b, x, src, p)
        if p.get("threads", 1) < 2:
            self.conv_rows(b, src, y, self.vglobals(k), p, accs, out, None)
            b.ret_void()
            return fn
        names = list(self.vglobals(k))
        pointers = [src, y, *(self.vglobals(k)[n] for n in names)]
        # one function for any range of rows (or pixel tiles), called by both halves' wrappers
        ranged = self.ranged(k, names, rows)
        total = p["OH"] if p["OH"] > 1 else p["OW"] // p["R"]
        halves = [(0, total // 2), (total // 2, total)]
        parts = [
            self.part_function(
                k, f"half{i}", pointers,
                lambda pb, ps, lo=lo, hi=hi: pb.call(ranged, [*ps, c64(lo), c64(hi)]),
            )
            for i, (lo, hi) in enumerate(halves)
        ]
        self.split_run(k, b, pointers, parts)
        b.ret_void()
        return fn

    def ranged(self, k, names, build) -> ir.Function:
        """``void {name}_range(src, y, constants..., lo, hi)``: a split kernel's code for any
        range of rows, ``build(builder, args, constants by name)``; declared only when another
        module defines it (kernels.range_mode), else defined (internal when it is all here)."""
        ty = ir.FunctionType(ir.VoidType(), [PTR8] * (2 + len(names)) + [I64, I64])
        fn = ir.Function(self.module, ty, f"{k.name}_range")
        mode = self.range_mode(k)
        if mode == "declare":
            return fn
        if mode == "full":
            fn.linkage = "internal"
        fn.attributes.add("noinline")
        rb = ir.IRBuilder(fn.append_basic_block("entry"))
        args = list(fn.args)
        build(rb, args, dict(zip(names, args[2:-2])))
        rb.ret_void()
        return fn

    def conv_cells(self, b, p):
        """The accumulator tile and the spill slots, allocated where ``b`` stands (a function's
        entry block, so that LLVM keeps the tile in registers)."""
        acc_type = V32 if p.get("wide") else V16
        accs = [[b.alloca(acc_type) for _ in range(p["V"])] for _ in range(p["R"])]
        return accs, b.alloca(V16, size=p["R"] * p["V"])

    def conv_rows(self, b, src, y, g, p, accs, out, bounds=None):
        """Every tile, or (``bounds`` (lo, hi), i64 values) the output rows [lo, hi), or for a
        pointwise convolution's single row its full pixel tiles [lo, hi) and the tail tile with
        the last of them."""
        ow, nvec = p["OW"], -(-p["OC"] // 16)
        r_full, r_tail = divmod(ow, p["R"])
        g_full, v_tail = divmod(nvec, p["V"])
        rows_split = p["OH"] > 1
        lo, hi = bounds if bounds is not None else (c64(0), c64(p["OH"] if rows_split else r_full))
        oh0, ohn = (lo, b.sub(hi, lo)) if rows_split else (c64(0), c64(p["OH"]))
        t0, tn = (c64(0), c64(r_full)) if rows_split else (lo, b.sub(hi, lo))
        with for_range(b, ohn, "oy") as i:
            oy = b.add(i, oh0)
            if r_full:
                with for_range(b, tn, "ot") as t:
                    ox0 = b.mul(b.add(t, t0), c64(p["R"]))
                    self.conv_group(b, src, y, g, p, accs, out, oy, ox0, p["R"], g_full, v_tail)
            if r_tail:  # the tail tile: in every row, or with the last of the pixel tiles
                base = c64(r_full * p["R"])
                if rows_split:
                    self.conv_group(b, src, y, g, p, accs, out, oy, base, r_tail, g_full, v_tail)
                else:
                    with b.if_then(b.icmp_signed("==", hi, c64(r_full))):
                        self.conv_group(b, src, y, g, p, accs, out, oy, base, r_tail, g_full,
                                        v_tail)

    def conv_group(self, b, src, y, g, p, accs, out, oy, ox0, rows, g_full, v_tail):
        """The tiles of ``rows`` pixels at (oy, ox0) over every output channel vector."""
        for vecs, gcount, gbase in ((p["V"], g_full, 0), (v_tail, 1, g_full * p["V"])):
            if not vecs or not gcount:
                continue
            with for_range(b, gcount, "og") as og:
                o0 = b.mul(b.add(b.mul(og, c64(vecs)), c64(gbase)), c64(16))
                self.conv_tile(b, src, y, g, p, accs, out, (oy, ox0, o0, rows, vecs))

    def conv_tile(self, b, src, y, g, p, accs, out, tile):
        oy, ox0, o0, rows, vecs = tile
        wide = p.get("wide", False)
        # the accumulators start from the channels' constant term (corr), the wide pair sums
        # from zero (corr is added after their reduction)
        starts = ([ir.Constant(V32, None)] * vecs if wide else
                  [self.vload(b, g["corr"], b.mul(b.add(o0, c64(16 * v)), c64(4)), V16)
                   for v in range(vecs)])
        for r in range(rows):
            for v in range(vecs):
                b.store(starts[v], accs[r][v])
        c4, cs = p["Cs"] // 4, p["Cs"]
        # int8 -> uint8 as x ^ 0x80 on the scalar (a vector xor of the splat sends LLVM 22's
        # DAG combiner into a loop when it feeds vpdpbusd)
        flip = ir.Constant(I32, 0x80808080 - (1 << 32)) if p["signed"] else None
        with (
            for_range(b, p["KH"], "ky") as ky,
            for_range(b, p["KW"], "kx") as kx,
            for_range(b, c4, "c4") as c,
        ):
            iy = b.add(b.mul(oy, c64(p["sh"])), b.mul(ky, c64(p["dh"])))
            ix0 = b.add(b.mul(ox0, c64(p["sw"])), b.mul(kx, c64(p["dw"])))
            tap = b.add(b.mul(ky, c64(p["KW"])), kx)
            size = 2 if wide else 1  # bytes per packed weight
            # the panel of this tile's channel group (vplan._panels), then the k-step's row
            panel = b.mul(b.udiv(o0, c64(16 * p["V"])),
                          c64(p["KH"] * p["KW"] * c4 * p["V"] * 64 * size))
            wrow = b.add(panel, b.mul(b.add(b.mul(tap, c64(c4)), c), c64(vecs * 64 * size)))
            ws = [self.vload(b, g["weights"], b.add(wrow, c64(64 * size * v)),
                             W64 if wide else V16)
                  for v in range(vecs)]
            row = b.mul(iy, c64(p["Ws"]))
            for r in range(rows):
                pix = b.add(row, b.add(ix0, c64(r * p["sw"])))
                at = b.add(b.mul(pix, c64(cs)), b.mul(c, c64(4)))
                a = self.vload(b, src, at, I32)
                a = a if flip is None else b.xor(a, flip)
                if wide:
                    a = self.widened_splat(b, a)
                    for v in range(vecs):
                        b.store(self.madd_wide(b, b.load(accs[r][v], typ=V32), a, ws[v]),
                                accs[r][v])
                    continue
                a = vsplat(b, a)
                for v in range(vecs):
                    b.store(
                        self.dot4(b, b.load(accs[r][v], typ=V16), a, ws[v], p["isa"],
                                  p.get("pairs", False)),
                        accs[r][v],
                    )
        for r in range(rows):
            for v in range(vecs):
                slot = b.gep(out, [c64(r * vecs + v)], source_etype=V16)
                acc = b.load(accs[r][v], typ=V32 if wide else V16)
                if wide:  # the pair sums of each lane's 4 products, added once
                    even = b.shuffle_vector(acc, acc, ir.Constant(V16, list(range(0, 32, 2))))
                    odd = b.shuffle_vector(acc, acc, ir.Constant(V16, list(range(1, 32, 2))))
                    acc = b.add(even, odd)
                b.store(acc, slot)
        # channels outer: the per-channel constants and the tail test stay out of the pixel loop
        with for_range(b, vecs, "ev") as v, for_range(b, rows, "er") as r:
            slot = b.gep(out, [b.add(b.mul(r, c64(vecs)), v)], source_etype=V16)
            o = b.add(o0, b.mul(v, c64(16)))
            value = self.vrequant(b, b.load(slot, typ=V16), g, o, p, corr=wide)
            pix = b.add(b.mul(oy, c64(p["OW"])), b.add(ox0, r))
            if p.get("out_pad"):  # into a depthwise kernel's padded input (write_into_halos)
                ws, cs, top, left, width = p["out_pad"]
                row = b.add(b.udiv(pix, c64(width)), c64(top))
                pix = b.add(b.mul(row, c64(ws)), b.add(b.urem(pix, c64(width)), c64(left)))
            self.vstore(b, value, y, b.add(b.mul(pix, c64(p["OC"])), o), o, p["OC"])

    # -- depthwise ---------------------------------------------------------------------
    def k_vdw(self, k):
        """Depthwise; with ``threads`` 2 the output rows split in two halves (split_run)."""
        p = k.params

        def rows(rb, args, g):
            self.dw_rows(rb, args[0], args[1], g, p, args[-2], args[-1])

        if self.range_mode(k) == "body":  # the driver's module has the rest
            return self.ranged(k, self.constant_names(k), rows)
        fn, b, (x, src, y) = self.function(k, 2)
        self.pack_input(b, x, src, p, copy=not p.get("prepadded"))
        if p.get("threads", 1) < 2:
            self.dw_rows(b, src, y, self.vglobals(k), p, 0, p["OH"])
            b.ret_void()
            return fn
        names = list(self.vglobals(k))
        pointers = [src, y, *(self.vglobals(k)[n] for n in names)]
        ranged = self.ranged(k, names, rows)  # one body for both halves
        mid = p["OH"] // 2
        parts = [
            self.part_function(
                k, f"half{i}", pointers,
                lambda pb, ps, lo=lo, hi=hi: pb.call(ranged, [*ps, c64(lo), c64(hi)]),
            )
            for i, (lo, hi) in enumerate(((0, mid), (mid, p["OH"])))
        ]
        self.split_run(k, b, pointers, parts)
        b.ret_void()
        return fn

    def dw_rows(self, b, src, y, g, p, oy0, oy1):
        """Output rows [oy0, oy1): 16 channels per vector, the taps' weights held in registers
        across a row."""
        if p.get("rowpairs"):
            return self.dw_rows_paired(b, src, y, g, p, oy0, oy1)
        cs, taps = p["Cs"], p["KH"] * p["KW"]
        ext = b.sext if p["signed"] else b.zext
        oy0, oy1 = (v if isinstance(v, ir.Value) else c64(v) for v in (oy0, oy1))
        with for_range(b, b.sub(oy1, oy0), "oy") as i, for_range(b, cs // 16, "cv") as cv:
            oy = b.add(i, oy0)
            o = b.mul(cv, c64(16))
            ws = [
                b.sext(self.vload(b, g["weights"], b.add(c64(t * cs), o), B16), V16)
                for t in range(taps)
            ]
            corr = self.vload(b, g["corr"], b.mul(o, c64(4)), V16)
            with for_range(b, p["OW"], "ox") as ox:
                acc, pair = corr, None
                for t in range(taps):
                    ky, kx = divmod(t, p["KW"])
                    iy = b.add(b.mul(oy, c64(p["sh"])), c64(ky * p["dh"]))
                    ix = b.add(b.mul(ox, c64(p["sw"])), c64(kx * p["dw"]))
                    at = b.add(b.mul(b.add(b.mul(iy, c64(p["Ws"])), ix), c64(cs)), o)
                    product = b.mul(ext(self.vload(b, src, at, B16), V16), ws[t])
                    if not p.get("pairs"):
                        acc = b.add(acc, product)
                    elif pair is None and t < taps - 1:
                        pair = product
                    else:  # fbgemm's AVX2 depthwise: tap pairs saturate to int16 (VPMADDUBSW)
                        both = product if pair is None else b.add(pair, product)
                        acc = b.add(acc, self.sat16(b, both))
                        pair = None
                value = self.vrequant(b, acc, g, o, p, corr=False)
                pix = b.add(b.mul(oy, c64(p["OW"])), ox)
                self.vstore(b, value, y, b.add(b.mul(pix, c64(p["OC"])), o), o, p["OC"])
