"""WMAC: the scalar kernel of wide_mac.py's qnn.conv2d / qnn.dense (int16 data, int16
weights, int64 accumulators, wide outputs), plain loops written for exactness over speed:

    acc = wrap_acc(sum (x - zx) * (w[o] - zw[o]))     in i64, wrapping as numpy's int64 does
        [+ sum_j sat16(p[2j] + p[2j+1]) - (p[2j] + p[2j+1])]   accumulate="vpmaddubsw..."
    acc = wrap_acc(acc + bias[o])                      [nn.bias_add]
    y = requantize(acc) at channel o                   [qnn.requantize: any semantics]
    y = min(max(y, lo), hi)                            [clip: the op's own bounds]

A kernel family; the requantize is ProductKernels._requantized (the EWISE
step's arithmetic, integer.IntKernels.requantize_value), loads and stores
kernels.FloatKernels' load_value / store_value. The pair term (x86_int8.pair_saturation:
p = raw uint8 data (int8 + 128, padding the input zero point) x raw int8 weight) walks the
``slots`` table wide_mac.pair_slots makes in the mode's pairing order.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from partita.backends.llvm.emit.base import I32, I64, Family, c64, for_range, via
from partita.backends.llvm.kinds import Kind, emits
from partita.backends.llvm.plan import Kernel

TRUE = ir.Constant(ir.IntType(1), 1)


class WideMacKernels(Family):
    # what it uses of the other kernel families (through the emit context)
    _requantized = via("products")
    load_value = via("floats")
    store_value = via("floats")
    wrap32 = via("ints")

    @emits(Kind.WMAC)
    def k_wmac(self, k: Kernel):
        fn, b, (x, y) = self.function(k, 1)
        p = k.params
        acc = b.alloca(I64)  # in the entry block
        if p["op"] == "qnn.conv2d":
            self._wmac_conv(k, b, x, y, acc)
        else:
            self._wmac_dense(k, b, x, y, acc)
        b.ret_void()
        return fn

    def _wmac_term(self, b, k: Kernel, x, x_at, w_at, o):
        """acc += (x[x_at] - zx) * (w[w_at] - zw[o]), in i64."""
        g, p = self.cargs, k.params
        xv = b.sub(self.load_value(b, x, x_at, p["x_dtype"])[1], c64(p["zx"]))
        wv = b.sext(self.load_at(b, g["w"], w_at, I32), I64)
        wv = b.sub(wv, b.sext(self.load_at(b, g["zw"], o, I32), I64))
        return b.mul(xv, wv)

    def _wmac_conv(self, k: Kernel, b, x, y, acc):
        """NHWC data, OHWI weights; output channel o reads its group's input channels."""
        p = k.params
        n, h, w, c = self.shape(k.inputs[0])
        _, oh, ow, oc = self.shape(k.output)
        _, kh, kw, cg = k.arrays["w"].shape
        og = oc // p["groups"]
        with (
            for_range(b, n, "n") as ni,
            for_range(b, oh, "oy") as oy,
            for_range(b, ow, "ox") as ox,
            for_range(b, oc, "o") as o,
        ):
            b.store(c64(0), acc)
            first = b.mul(b.sdiv(o, c64(og)), c64(cg))  # the group's first input channel

            def tap(b, ky, kx, ic):  # (inside, data index, weight index) of a kernel tap
                iy, ix, inside = self.window_tap(
                    b, (oy, ox), (ky, kx), p["strides"], p["dilation"], p["padding"], (h, w)
                )
                pixel = b.add(b.mul(b.add(b.mul(ni, c64(h)), iy), c64(w)), ix)
                wbase = b.mul(b.add(b.mul(b.add(b.mul(o, c64(kh)), ky), c64(kw)), kx), c64(cg))
                return inside, b.add(b.add(b.mul(pixel, c64(c)), first), ic), b.add(wbase, ic)

            if "slots" in k.arrays:
                self._wmac_pairs(b, k, x, acc, o, tap)
            else:
                with for_range(b, kh, "ky") as ky, for_range(b, kw, "kx") as kx:
                    inside, x0, w0 = tap(b, ky, kx, c64(0))
                    with b.if_then(inside), for_range(b, cg, "ic") as ic:
                        term = self._wmac_term(b, k, x, b.add(x0, ic), b.add(w0, ic), o)
                        b.store(b.add(b.load(acc, typ=I64), term), acc)
            pixel = b.add(b.mul(b.add(b.mul(ni, c64(oh)), oy), c64(ow)), ox)
            self._wmac_out(b, k, b.load(acc, typ=I64), y, b.add(b.mul(pixel, c64(oc)), o), o)

    def _wmac_dense(self, k: Kernel, b, x, y, acc):
        *lead, depth = self.shape(k.inputs[0])
        rows = int(np.prod(lead, dtype=np.int64))
        units = k.arrays["w"].shape[0]
        with for_range(b, rows, "r") as r, for_range(b, units, "u") as u:
            b.store(c64(0), acc)

            def tap(b, _ky, _kx, d):
                return TRUE, b.add(b.mul(r, c64(depth)), d), b.add(b.mul(u, c64(depth)), d)

            if "slots" in k.arrays:
                self._wmac_pairs(b, k, x, acc, u, tap)
            else:
                with for_range(b, depth, "d") as d:
                    _, x_at, w_at = tap(b, None, None, d)
                    term = self._wmac_term(b, k, x, x_at, w_at, u)
                    b.store(b.add(b.load(acc, typ=I64), term), acc)
            self._wmac_out(b, k, b.load(acc, typ=I64), y, b.add(b.mul(r, c64(units)), u), u)

    def _wmac_pairs(self, b, k: Kernel, x, acc, o, tap):
        """acc += e[s] + e[s+1] + sat16(p[s] + p[s+1]) - (p[s] + p[s+1]) for each pair of slots
        (ky, kx, channel; ky -1: a zero), e the exact (x - zx) * (w - zw[o]) and p the raw
        product VPMADDUBSW adds: (x + 128 for int8 data, the zero point where padding) * w."""
        g, p = self.cargs, k.params
        zx, lift = c64(p["zx"]), c64(128 if p["x_dtype"] == "int8" else 0)
        zw = b.sext(self.load_at(b, g["zw"], o, I32), I64)
        with for_range(b, k.arrays["slots"].shape[0] // 2, "j") as j:
            raw, exact = c64(0), c64(0)
            for half in (0, 1):
                at = b.add(b.mul(j, c64(6)), c64(3 * half))
                ky, kx, ic = (
                    b.sext(self.load_at(b, g["slots"], b.add(at, c64(i)), I32), I64)
                    for i in range(3)
                )
                valid = b.icmp_signed(">=", ky, c64(0))
                inside, x_at, w_at = tap(b, ky, kx, ic)
                inside = b.and_(valid, inside)
                xv = self.load_value(b, x, b.select(inside, x_at, c64(0)), p["x_dtype"])[1]
                xv = b.select(inside, xv, zx)
                wv = b.sext(self.load_at(b, g["w"], b.select(valid, w_at, c64(0)), I32), I64)
                wv = b.select(valid, wv, c64(0))
                raw = b.add(raw, b.mul(b.add(xv, lift), wv))
                exact = b.add(exact, b.mul(b.sub(xv, zx), b.sub(wv, zw)))
            sat = b.select(b.icmp_signed("<", raw, c64(-(1 << 15))), c64(-(1 << 15)), raw)
            sat = b.select(b.icmp_signed(">", sat, c64((1 << 15) - 1)), c64((1 << 15) - 1), sat)
            term = b.add(exact, b.sub(sat, raw))
            b.store(b.add(b.load(acc, typ=I64), term), acc)

    def _wmac_wrap(self, b, v, dtype: str):
        return self.wrap32(b, v) if dtype == "int32" else v

    def _wmac_out(self, b, k: Kernel, total, y, at, o):
        """The output stage of channel ``o``'s sum ``total``, stored at ``at``."""
        p, g = k.params, self.cargs
        value = self._wmac_wrap(b, total, p["acc"])
        if "bias_lo" in g:  # the int64 bias from its two int32 halves
            hi = b.shl(b.sext(self.load_at(b, g["bias_hi"], o, I32), I64), c64(32))
            lo = b.zext(self.load_at(b, g["bias_lo"], o, I32), I64)
            value = self._wmac_wrap(b, b.add(value, b.or_(hi, lo)), p["acc"])
        out = self.dtype(k.output)
        if "rq" in p:
            value = self._requantized(b, value, p["rq"], (o,))[1]
        if "clip" in p:
            lo, hi = (c64(v) for v in p["clip"])
            value = b.select(b.icmp_signed("<", value, lo), lo, value)
            value = b.select(b.icmp_signed(">", value, hi), hi, value)
        self.store_value(b, ("i", value), y, at, out)


__all__ = ["WideMacKernels"]
