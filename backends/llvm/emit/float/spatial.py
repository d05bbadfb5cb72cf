"""The IR of float_spatial.py's kernels: pooling (FPOOL: float32 average, max of float32 or
integers) and bilinear resizing (FRESIZE), NCHW or NHWC. A kernel family
(emit/base.py's Family)."""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from partita.backends.llvm.emit.base import F32, F64, I32, I64, Family, c64, for_range, via
from partita.backends.llvm.kinds import Kind, emits


class SpatialKernels(Family):
    # what it uses of the other kernel families (through the emit context)
    load_value = via("floats")
    store_value = via("floats")

    def at4(self, b, p, n, y, x, c, hw):
        """The flat index of (n, y, x, c) in an NHWC or NCHW buffer of spatial size ``hw``."""
        h, w = hw
        if p["nhwc"]:
            return b.add(b.mul(b.add(b.mul(b.add(b.mul(n, c64(h)), y), c64(w)), x), c64(p["C"])), c)
        return b.add(b.mul(b.add(b.mul(b.add(b.mul(n, c64(p["C"])), c), c64(h)), y), c64(w)), x)

    def windows(self, k, b, x, cell, init, step):
        """For each output (n, oy, ox, c): ``cell`` set to ``init``, then ``step(inside, the
        tap's flat index, clamped into the input)`` for each tap in row-major order; yields
        (n, oy, ox, c) once, the builder inside the output loops after the taps."""
        p = k.params
        h, w = p["H"], p["W"]
        (ph, pw), (sh, sw), (dh, dw) = p["pool"], p["strides"], p["dilation"]
        top, left = p["padding"][0], p["padding"][1]
        with (
            for_range(b, p["N"], "n") as n,
            for_range(b, p["OH"], "oy") as oy,
            for_range(b, p["OW"], "ox") as ox,
            for_range(b, p["C"], "ch") as ch,
        ):
            b.store(init, cell)
            with for_range(b, ph, "ky") as ky, for_range(b, pw, "kx") as kx:
                iy, ix, inside = self.window_tap(b, (oy, ox), (ky, kx), (sh, sw), (dh, dw),
                                                     (top, left), (h, w))
                # clamped so the load stays in bounds; ``step`` replaces the value outside
                cy, cx = b.select(inside, iy, c64(0)), b.select(inside, ix, c64(0))
                step(inside, self.at4(b, p, n, cy, cx, ch, (h, w)))
            yield n, oy, ox, ch

    @emits(Kind.FPOOL)
    def k_fpool(self, k):
        """ "avg" (float32): float32(the window's taps summed in float64, row-major, /
        count[oy, ox]), the sum starting at +0.0 as numpy's (-0.0 taps sum to +0.0), a tap
        outside the input adding +0.0 (the reference pads with zeros). "max" (float32 or any
        integer dtype): the largest tap inside the input, nan if any tap is nan, the later of equal
        taps (so the sign of a zero is numpy's max's)."""
        p = k.params
        fn, b, (x, y) = self.function(k, 1)
        dtype = self.dtype(k.inputs[0])
        avg = p["mode"] == "avg"
        kind = "f" if dtype == "float32" else "i"
        if avg or kind == "f":
            ty, init = F64, ir.Constant(F64, 0.0 if avg else float("-inf"))
        else:
            ty, init = I64, c64(np.iinfo(dtype).min)
        cell = b.alloca(ty)

        def step(inside, at):
            v = self.load_value(b, x, at, dtype)[1]
            old = b.load(cell, typ=ty)
            if avg:
                new = b.fadd(old, b.select(inside, v, ir.Constant(F64, 0.0)))
            elif kind == "f":  # nan wins and stays; of equal taps the later (numpy: -0.0, 0.0)
                take = b.or_(b.fcmp_unordered("uno", v, v), b.fcmp_ordered(">=", v, old))
                take = b.and_(b.and_(take, inside), b.fcmp_ordered("ord", old, old))
                new = b.select(take, v, old)
            else:
                new = b.select(b.and_(inside, b.icmp_signed(">", v, old)), v, old)
            b.store(new, cell)

        for n, oy, ox, ch in self.windows(k, b, x, cell, init, step):
            value = b.load(cell, typ=ty)
            if avg:
                count = self.load_at(
                    b, self.cargs["counts"], b.add(b.mul(oy, c64(p["OW"])), ox), F64
                )
                value = b.fdiv(value, count)
            out = self.at4(b, p, n, oy, ox, ch, (p["OH"], p["OW"]))
            self.store_value(b, (kind if not avg else "f", value), y, out, self.dtype(k.output))
        b.ret_void()
        return fn

    @emits(Kind.FRESIZE)
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
