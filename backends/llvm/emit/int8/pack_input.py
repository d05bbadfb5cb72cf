"""The vector kernels' input packing (``em.pack``): a convolution's or depthwise layer's input
copied into a padded buffer of 4- or 16-channel pixel slots, the border the input zero point, so
that the kernels' loads need no bounds (vector_plan's "pack", "Hs", "Ws", "Cs"); with "flipped"
(int8 input of the VNNI kernels) every byte is stored as x ^ 0x80 (= x + 128 as uint8), so that
the kernel broadcasts its activations straight from memory (vector_plan.FLIP_INPUT)."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import I8, I32, I64, Family, c64, for_range, via

from .vector_types import B16, B64, V16, vsplat

# a 1-3 channel image's 16-pixel packing as four 16-byte shuffles (VPSHUFB + blend of the
# zero point; LLVM compiles the one 48 -> 64-byte shuffle to VPINSRB / VPEXTRB per byte)
PACK_BY_QUARTERS = True


class InputPacking(Family):
    vload = via("vector")

    def pack_input(self, b, x, dst, p, copy=True):
        """dst[Hs][Ws][Cs] = x placed at (top, left), the rest filled with the zero point;
        without ``copy`` only the border is filled (a producer wrote the inside)."""
        self.pack_rows(b, x, dst, p, self.pack_zero(b, self.cargs["izp"], p), c64(0),
                       c64(p["H"]), copy)

    def pack_zero(self, b, izp, p):
        """The byte the border holds: the input zero point (x ^ 0x80 where "flipped")."""
        zp = b.trunc(b.load(izp, typ=I32), I8)
        return b.xor(zp, ir.Constant(I8, -128)) if p.get("flipped", False) else zp

    def pack_rows(self, b, x, dst, p, zp, y0, y1, copy=True):
        """pack_input for input rows [y0, y1) (i64 values): their padded rows whole (border
        and pixels), the padded rows above the image where y0 is 0 and below it where y1 is
        H. Ranges that tile [0, H) write every byte once: a split kernel's chunks pack its
        input on both threads (vconv.PACK_SPLIT_BYTES)."""
        memset = self.module.declare_intrinsic("llvm.memset", [ir.PointerType(), I64])
        memcpy = self.module.declare_intrinsic(
            "llvm.memcpy", [ir.PointerType(), ir.PointerType(), I64]
        )
        false = ir.Constant(ir.IntType(1), 0)
        flipped = p.get("flipped", False)
        hs, ws, cs, c = p["Hs"], p["Ws"], p["Cs"], p["C"]
        top, left, height = p["pad"][0], p["pad"][1], p["H"]
        row, width = ws * cs, p["W"] * c
        if flipped and copy and cs != c:
            raise ValueError("flipped packing takes whole rows (Cs == C) only")
        with b.if_then(b.icmp_signed("==", y0, c64(0))):
            b.call(memset, [dst, zp, c64(top * row), false])
        with b.if_then(b.icmp_signed("==", y1, c64(height))):
            after = (top + height) * row
            b.call(memset, [b.gep(dst, [c64(after)], source_etype=I8), zp,
                            c64(hs * row - after), false])
        pixels = cs == 4 and p["W"] >= 16  # 1-3 channels (an image): 16 pixels per shuffle
        with for_range(b, b.sub(y1, y0), "py") as i:
            y = b.add(y0, i)
            at = b.mul(b.add(y, c64(top)), c64(row))
            if cs == c or not copy:  # whole rows: one copy per row, the zero point beside it
                b.call(memset, [b.gep(dst, [at], source_etype=I8), zp, c64(left * cs), false])
                start = b.add(at, c64(left * cs))
                if copy:
                    src = b.gep(x, [b.mul(y, c64(width))], source_etype=I8)
                    to = b.gep(dst, [start], source_etype=I8)
                    if flipped:
                        self.copy_flipped(b, src, to, width)
                    else:
                        b.call(memcpy, [to, src, c64(width), false])
                rest = b.gep(dst, [b.add(start, c64(width))], source_etype=I8)
                b.call(memset, [rest, zp, c64(row - left * cs - width), false])
            else:  # pixels of fewer channels than their slots: the row's zero points first
                b.call(memset, [b.gep(dst, [at], source_etype=I8), zp, c64(row), false])
                if pixels:
                    self.pack_pixels(b, x, dst, p, zp, y)
                else:
                    self.pack_slots(b, x, dst, p, y)

    def pack_slots(self, b, x, dst, p, y):
        """Input row ``y``'s pixels into their slots one memcpy each (pack_rows' fallback)."""
        memcpy = self.module.declare_intrinsic(
            "llvm.memcpy", [ir.PointerType(), ir.PointerType(), I64]
        )
        c, cs, ws, top, left = p["C"], p["Cs"], p["Ws"], p["pad"][0], p["pad"][1]
        with for_range(b, p["W"], "px") as xx:
            src = b.gep(x, [b.mul(b.add(b.mul(y, c64(p["W"])), xx), c64(c))], source_etype=I8)
            to = b.mul(b.add(b.mul(b.add(y, c64(top)), c64(ws)), b.add(xx, c64(left))), c64(cs))
            b.call(memcpy, [b.gep(dst, [to], source_etype=I8), src, c64(c),
                            ir.Constant(ir.IntType(1), 0)])

    def copy_flipped(self, b, src, dst, size: int):
        """dst[i] = src[i] ^ 0x80 for ``size`` bytes (a multiple of 4): 64 bytes per step, then
        4 at a time."""
        top = ir.Constant(B64, [0x80 - 256] * 64)
        with for_range(b, size // 64, "flip") as i:
            at = b.mul(i, c64(64))
            value = self.vload(b, src, at, B64)
            b.store(b.xor(value, top), b.gep(dst, [at], source_etype=I8), align=1)
        if size % 64:
            with for_range(b, (size % 64) // 4, "flip4") as i:
                at = b.add(c64(size - size % 64), b.mul(i, c64(4)))
                value = self.vload(b, src, at, I32)
                b.store(b.xor(value, ir.Constant(I32, 0x80808080 - (1 << 32))),
                        b.gep(dst, [at], source_etype=I8), align=1)

    def pack_pixels(self, b, x, dst, p, zp, y):
        """pack_rows for 4-channel slots of 1-3 channel pixels, input row ``y``: 16 pixels (16
        c bytes) at a time widened to 64 bytes by one byte shuffle with the zero point (VPERMB
        where the CPU has it), the row's last pixels by the same shuffle of its last 16; the
        border already holds the zero point."""
        c, ws, width = p["C"], p["Ws"], p["W"]
        top, left = p["pad"][0], p["pad"][1]
        src_ty = ir.VectorType(I8, 16 * c)
        fill = vsplat(b, zp, src_ty)
        picks = [j * c + k if k < c else 16 * c for j in range(16) for k in range(4)]
        mask = ir.Constant(ir.VectorType(I32, 64), picks)

        fill16 = vsplat(b, zp, B16)
        keep = ir.InlineAsm(ir.FunctionType(B16, [B16]), "", "=x,0")
        # by quarters only on the x86 tiers: the empty asm that keeps the 16-byte loads apart
        # names an x86 register class, and -isa=plain is generic IR for any CPU
        quarters = PACK_BY_QUARTERS and p.get("isa", "plain") != "plain"

        def move(y, px):  # pixels px .. px+15 of row y
            src = b.mul(b.add(b.mul(y, c64(width)), px), c64(c))
            at = b.mul(b.add(b.mul(b.add(y, c64(top)), c64(ws)), b.add(px, c64(left))), c64(4))
            if not quarters:
                pixels = self.vload(b, x, src, src_ty)
                b.store(b.shuffle_vector(pixels, fill, mask),
                        b.gep(dst, [at], source_etype=I8), align=1)
                return
            for j in range(4):  # 4 pixels (4c bytes) from a 16-byte load inside the 16c
                start = min(4 * c * j, 16 * c - 16)  # the last quarter's load ends with them
                chunk = b.call(keep, [self.vload(b, x, b.add(src, c64(start)), B16)])
                picks16 = [4 * c * j - start + q * c + k if k < c else 16
                           for q in range(4) for k in range(4)]
                quarter = b.shuffle_vector(chunk, fill16, ir.Constant(V16, picks16))
                b.store(quarter, b.gep(dst, [b.add(at, c64(16 * j))], source_etype=I8),
                        align=1)

        with for_range(b, width // 16, "pv") as v:
            move(y, b.mul(v, c64(16)))
        if width % 16:
            move(y, c64(width - 16))
