"""The IR of spatial_lower.py's kernels: float32 average pooling (FAVGPOOL) and bilinear
resizing (FRESIZE), NCHW or NHWC. Mixed into float_kernels.FloatKernels (through
data_kernels.DataKernels)."""

from __future__ import annotations

from llvmlite import ir

from .codegen import F32, F64, I32, I64, c64, for_range


class SpatialKernels:
    def at4(self, b, p, n, y, x, c, hw):
        """The flat index of (n, y, x, c) in an NHWC or NCHW buffer of spatial size ``hw``."""
        h, w = hw
        if p["nhwc"]:
            return b.add(b.mul(b.add(b.mul(b.add(b.mul(n, c64(h)), y), c64(w)), x), c64(p["C"])), c)
        return b.add(b.mul(b.add(b.mul(b.add(b.mul(n, c64(p["C"])), c), c64(h)), y), c64(w)), x)

    def k_favgpool(self, k):
        """y = float32(sum of the window's taps in float64, row-major, / count[oy, ox]); the
        sum starts at +0.0 as numpy's does (so -0.0 taps sum to +0.0) and a tap outside the
        input adds +0.0 (the reference pads with zeros)."""
        p = k.params
        fn, b, (x, y) = self.function(k, 1)
        counts = self.cargs["counts"]
        h, w = p["H"], p["W"]
        (ph, pw), (sh, sw), (dh, dw) = p["pool"], p["strides"], p["dilation"]
        top, left = p["padding"][0], p["padding"][1]
        acc = b.alloca(F64)
        with (
            for_range(b, p["N"], "n") as n,
            for_range(b, p["OH"], "oy") as oy,
            for_range(b, p["OW"], "ox") as ox,
            for_range(b, p["C"], "ch") as ch,
        ):
            b.store(ir.Constant(F64, 0.0), acc)
            with for_range(b, ph, "ky") as ky, for_range(b, pw, "kx") as kx:
                iy = b.sub(b.add(b.mul(oy, c64(sh)), b.mul(ky, c64(dh))), c64(top))
                ix = b.sub(b.add(b.mul(ox, c64(sw)), b.mul(kx, c64(dw))), c64(left))
                inside = b.and_(
                    b.and_(b.icmp_signed(">=", iy, c64(0)), b.icmp_signed("<", iy, c64(h))),
                    b.and_(b.icmp_signed(">=", ix, c64(0)), b.icmp_signed("<", ix, c64(w))),
                )
                # clamped so the load stays in bounds; the value is replaced outside
                cy = b.select(inside, iy, c64(0))
                cx = b.select(inside, ix, c64(0))
                v = b.fpext(self.load_at(b, x, self.at4(b, p, n, cy, cx, ch, (h, w)), F32), F64)
                v = b.select(inside, v, ir.Constant(F64, 0.0))
                b.store(b.fadd(b.load(acc, typ=F64), v), acc)
            count = self.load_at(b, counts, b.add(b.mul(oy, c64(p["OW"])), ox), F64)
            mean = b.fdiv(b.load(acc, typ=F64), count)
            out = self.at4(b, p, n, oy, ox, ch, (p["OH"], p["OW"]))
            self.store_at(b, b.fptrunc(mean, F32), y, out, F32)
        b.ret_void()
        return fn

    def k_fresize(self, k):
        """y = v00*(1-dy)*(1-dx) + v10*dy*(1-dx) + v01*(1-dy)*dx + v11*dy*dx, left to right in
        float32 (nn_image's reference); rows, columns and weights are compile-time tables."""
        p = k.params
        fn, b, (x, y) = self.function(k, 1)
        g = self.cargs
        hw = (p["H"], p["W"])

        def table(name, i):
            v = self.load_at(b, g[name], i, F64 if name.startswith("w") else I32)
            return b.fptrunc(v, F32) if name.startswith("w") else b.sext(v, I64)

        with (
            for_range(b, p["N"], "n") as n,
            for_range(b, p["OH"], "oy") as oy,
            for_range(b, p["OW"], "ox") as ox,
        ):
            y0, y1, wy0, wy1 = (table(t, oy) for t in ("y0", "y1", "wy0", "wy1"))
            x0, x1, wx0, wx1 = (table(t, ox) for t in ("x0", "x1", "wx0", "wx1"))
            with for_range(b, p["C"], "ch") as ch:

                def tap(row, col):
                    return self.load_at(b, x, self.at4(b, p, n, row, col, ch, hw), F32)

                terms = [
                    b.fmul(b.fmul(tap(y0, x0), wy0), wx0),
                    b.fmul(b.fmul(tap(y1, x0), wy1), wx0),
                    b.fmul(b.fmul(tap(y0, x1), wy0), wx1),
                    b.fmul(b.fmul(tap(y1, x1), wy1), wx1),
                ]
                total = b.fadd(b.fadd(b.fadd(terms[0], terms[1]), terms[2]), terms[3])
                out = self.at4(b, p, n, oy, ox, ch, (p["OH"], p["OW"]))
                self.store_at(b, total, y, out, F32)
        b.ret_void()
        return fn


__all__ = ["SpatialKernels"]
