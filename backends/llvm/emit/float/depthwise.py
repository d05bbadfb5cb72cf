"""The IR of the float depthwise path and the global average pool (float_conv.py's
``_lower_depthwise`` and ``lower_fgap``), each output summed in a given float32 order:

    FPAD     a zero-padded copy (channels padded to a multiple of 16) for FDW, and for the
             float product that reads a convolution's taps in place (gemm.py)
    FDW      depthwise: 16 channels per vector, the taps' weights in registers, 4 pixels a step
    FGAP     global average pool in MLAS's or PyTorch's add order, 16 channels per vector

A kernel family (emit/base.py's Family); the sum of blocks, the epilogue and the partial
vectors are FCONV's (conv.py). Vector lanes are independent outputs and no fast-math flag is
set, so each output's chain keeps its order.
"""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import F32, Family, c64, for_range, via
from partita.backends.llvm.kinds import Kind, emits
from partita.backends.llvm.numerics.sum_order import ZERO, pool_program

from .conv import I32T, POS0
from .gemm import V16F, VEC

PIX = 4  # FDW: output pixels per step


class FloatDepthwiseKernels(Family):
    # what it uses of the other kernel families (through the emit context)
    blocks_sum = via("fconv")
    epilogue = via("fconv")
    vfma = via("gemm")
    vload_f = via("gemm")
    vload_lanes = via("fconv")
    vstore_f = via("gemm")
    vstore_lanes = via("fconv")

    # -- FPAD, FDW ---------------------------------------------------------------------------
    @emits(Kind.FPAD)
    def k_fpad(self, k):
        """y = x zero-padded by (top, left, bottom, right), channels zero-padded to Cp."""
        fn, b, (x, y) = self.function(k, 1)
        n, h, w, c = self.shape(k.inputs[0])
        _, hp, wp, cp = self.shape(k.output)
        top, left = k.params["padding"][:2]
        total = n * hp * wp * cp
        with for_range(b, total // VEC, "z") as z:
            self.vstore_f(b, POS0, y, b.mul(z, c64(VEC)))
        with for_range(b, total % VEC, "zt") as z:  # channels not a multiple of 16
            self.store_at(b, ir.Constant(F32, 0.0), y, b.add(z, c64(total // VEC * VEC)), F32)
        with for_range(b, n * h, "ny") as ny, for_range(b, w, "ix") as ix:
            img, iy = b.sdiv(ny, c64(h)), b.srem(ny, c64(h))
            src = b.mul(b.add(b.mul(ny, c64(w)), ix), c64(c))
            row = b.add(b.mul(img, c64(hp)), b.add(iy, c64(top)))
            dst = b.mul(b.add(b.mul(row, c64(wp)), b.add(ix, c64(left))), c64(cp))
            with for_range(b, c, "ic") as ic:
                self.store_at(b, self.load_at(b, x, b.add(src, ic), F32), y, b.add(dst, ic), F32)
        b.ret_void()
        return fn

    @emits(Kind.FDW)
    def k_fdw(self, k):
        """Depthwise over the FPAD copy: per 16 channels, the taps' weights loaded once; output
        pixels PIX at a time (independent chains), each summed as the blocks say."""
        p = k.params
        fn, b, (x, y) = self.function(k, 1)
        wt, bias = self.cargs["wt"], self.cargs.get("bias")
        n, hp, wp, cp = self.shape(k.inputs[0])
        _, oh, ow, c = self.shape(k.output)
        full, tail = divmod(c, VEC)
        with for_range(b, n, "img") as img:
            if full:
                with for_range(b, full, "cv") as cv:
                    self._fdw_channels(b, p, (x, wt, bias, y), img, b.mul(cv, c64(VEC)), VEC,
                                       (hp, wp, cp, oh, ow, c))
            if tail:
                self._fdw_channels(b, p, (x, wt, bias, y), img, c64(full * VEC), tail,
                                   (hp, wp, cp, oh, ow, c))
        b.ret_void()
        return fn

    def _fdw_channels(self, b, p, ptrs, img, c0, lanes, dims):
        x, wt, bias, y = ptrs
        hp, wp, cp, oh, ow, c = dims
        (kh, kw), (sh, sw), (dh, dw) = p["kernel"], p["strides"], p["dilation"]
        blocks = [tuple(v) for v in p["blocks"]]
        taps = [(ky * dh * wp + kx * dw) * cp for ky in range(kh) for kx in range(kw)]
        ws = [self.vload_f(b, wt, b.add(c64(t * cp), c0)) for t in range(len(taps))]
        with for_range(b, oh, "oy") as oy:
            top = b.mul(b.add(b.mul(img, c64(hp)), b.mul(oy, c64(sh))), c64(wp))
            for npix, count, x0 in ((PIX, ow // PIX, 0), (1, ow % PIX, ow // PIX * PIX)):
                if count == 0:
                    continue
                with for_range(b, count, "ot") as ot:
                    ox = b.add(c64(x0), b.mul(ot, c64(npix)))
                    bases = [b.add(b.mul(b.add(top, b.mul(b.add(ox, c64(j)), c64(sw))),
                                         c64(cp)), c0) for j in range(npix)]

                    def product(t, j, bases=bases):
                        return self.vload_f(b, x, b.add(bases[j], c64(taps[t]))), ws[t]

                    def chain(k0, k1, init, product=product, npix=npix):
                        acc = [init] * npix
                        for t in range(k0, k1):
                            for j in range(npix):
                                xv, wv = product(t, j)
                                acc[j] = self.vfma(b, xv, wv, acc[j])
                        return acc

                    sums = self.blocks_sum(b, blocks, npix, product, chain)
                    for j in range(npix):
                        value = self.epilogue(b, sums[j], p, bias, c0)
                        pix = b.add(b.mul(b.add(b.mul(img, c64(oh)), oy), c64(ow)),
                                    b.add(ox, c64(j)))
                        self.vstore_lanes(b, value, y, b.add(b.mul(pix, c64(c)), c0), lanes)

    # -- FGAP --------------------------------------------------------------------------------
    @emits(Kind.FGAP)
    def k_fgap(self, k):
        """Global average pool of float32 (NHWC or NCHW; 16 channels per vector):
        sum_order.pool_program's adds, then / float32(H * W)."""
        fn, b, (x, y) = self.function(k, 1)
        shape = self.shape(k.inputs[0])
        layout = k.params["layout"]
        n, c = shape[0], shape[layout.index("C")]
        pixels = shape[layout.index("H")] * shape[layout.index("W")]
        prog = pool_program(k.params["accumulate"], pixels)
        # (pixel stride, channel stride) of the input
        steps = (c, 1) if layout == "NHWC" else (1, pixels)
        full, tail = divmod(c, VEC)
        with for_range(b, n, "img") as img:
            src, dst = b.mul(img, c64(pixels * c)), b.mul(img, c64(c))
            if full:
                with for_range(b, full, "cv") as cv:
                    c0 = b.mul(cv, c64(VEC))
                    self._fgap_vector(b, (x, y), prog, b.add(src, b.mul(c0, c64(steps[1]))),
                                      b.add(dst, c0), VEC, (pixels, *steps))
            if tail:
                self._fgap_vector(b, (x, y), prog, b.add(src, c64(full * VEC * steps[1])),
                                  b.add(dst, c64(full * VEC)), tail, (pixels, *steps))
        b.ret_void()
        return fn

    def _fgap_vector(self, b, ptrs, prog, src, dst, lanes, dims):
        x, y = ptrs
        pixels, step, lane_step = dims
        values: dict[int, ir.Value] = {ZERO: POS0}

        def value(i):
            if i in values:
                return values[i]
            at = b.add(src, c64(i * step))  # a pixel, loaded when first added
            if lane_step == 1:
                values[i] = self.vload_lanes(b, x, at, lanes)
            else:  # NCHW: the channels' pixels lie H * W apart
                vec = POS0
                for j in range(lanes):
                    v = self.load_at(b, x, b.add(at, c64(j * lane_step)), F32)
                    vec = b.insert_element(vec, v, ir.Constant(I32T, j))
                values[i] = vec
            return values[i]

        for j, (a, a2) in enumerate(prog):
            values[pixels + j] = b.fadd(value(a), value(a2))
        total = values[pixels + len(prog) - 1]
        count = ir.Constant(V16F, [ir.Constant(F32, float(pixels))] * VEC)
        self.vstore_lanes(b, b.fdiv(total, count), y, dst, lanes)


__all__ = ["FloatDepthwiseKernels"]
