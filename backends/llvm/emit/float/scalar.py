"""Scalar kernels of float ops that come from Relay graphs and PyTorch: transposed
convolutions (FCONVT), einsum (EINSUM), batch normalization (BNORM) and the exact float mean
over H and W (FMEAN); plain loops that compute as the reference does (float64 sums, or exact
integer ones), written for correctness over speed (no test model of a frontend has them on a
hot path)."""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from partita.backends.llvm.emit.base import (
    ELEM,
    F32,
    F64,
    I64,
    Family,
    c64,
    for_range,
    layout_index,
)
from partita.backends.llvm.kinds import Kind, emits
from partita.backends.llvm.plan import Kernel


class FloatScalarKernels(Family):
    @emits(Kind.FCONVT)
    def k_fconvt(self, k: Kernel):
        """nn.conv2d_transpose (lower/float_conv_transpose.py): out[n, o, oy, ox] =
        float32(sum in float64 of x[n, c, iy, ix] * w[c, o - group's first, a, b] over the
        group's channels c and the taps (a, b) with oy + top - a*dh = iy*sh,
        ox + left - b*dw = ix*sw inside the input)."""
        fn, b, (x, y) = self.function(k, 1)
        p, wts = k.params, self.cargs["weights"]
        n, c, h, wd = p["in"]
        _, oc, oh, ow = p["out"]
        kh, kw = p["kernel"]
        (sh, sw), (dh, dw), (top, left) = p["strides"], p["dilation"], p["pad"]
        cg, og = c // p["groups"], oc // p["groups"]
        nchw = p["layout"] == "NCHW"

        def at(dims, ni, ci, yi, xi):
            return layout_index(b, nchw, dims, ni, ci, yi, xi)

        integer = p.get("integer")  # [data dtype, output dtype]: exact int64 sums
        acc_ty = I64 if integer else F64
        acc = b.alloca(acc_ty)
        with (for_range(b, n, "n") as ni, for_range(b, oc, "o") as o,
              for_range(b, oh, "oy") as oy, for_range(b, ow, "ox") as ox):
            b.store(ir.Constant(acc_ty, 0), acc)
            grp = b.sdiv(o, c64(og))
            with for_range(b, cg, "c") as ci, for_range(b, kh, "a") as ka, \
                    for_range(b, kw, "bb") as kb:
                ry = b.sub(b.add(oy, c64(top)), b.mul(ka, c64(dh)))
                rx = b.sub(b.add(ox, c64(left)), b.mul(kb, c64(dw)))
                iy, ix = b.sdiv(ry, c64(sh)), b.sdiv(rx, c64(sw))
                inside = b.and_(
                    b.and_(b.icmp_signed(">=", ry, c64(0)), b.icmp_signed(">=", rx, c64(0))),
                    b.and_(b.and_(b.icmp_signed("==", b.srem(ry, c64(sh)), c64(0)),
                                  b.icmp_signed("==", b.srem(rx, c64(sw)), c64(0))),
                           b.and_(b.icmp_signed("<", iy, c64(h)),
                                  b.icmp_signed("<", ix, c64(wd)))))
                with b.if_then(inside):
                    cin = b.add(b.mul(grp, c64(cg)), ci)
                    xi = at(p["in"], ni, cin, iy, ix)
                    widx = b.add(b.mul(b.add(b.mul(b.add(b.mul(cin, c64(og)),
                                                         b.srem(o, c64(og))), c64(kh)), ka),
                                       c64(kw)), kb)
                    if integer:
                        v = self.load_at(b, x, xi, ELEM[integer[0]])
                        v = b.zext(v, I64) if integer[0] == "uint8" else b.sext(v, I64)
                        prod = b.mul(v, self.load_at(b, wts, widx, I64))
                        b.store(b.add(b.load(acc, typ=I64), prod), acc)
                    else:
                        v = self.load_at(b, x, xi, F32)
                        wv = self.load_at(b, wts, widx, F32)
                        prod = b.fmul(b.fpext(v, F64), b.fpext(wv, F64))
                        b.store(b.fadd(b.load(acc, typ=F64), prod), acc)
            if integer:  # two's-complement wrap to the output's width
                ty = ELEM[integer[1]]
                out = b.trunc(b.load(acc, typ=I64), ty)
            else:
                ty, out = F32, b.fptrunc(b.load(acc, typ=F64), F32)
            self.store_at(b, out, y, at(p["out"], ni, o, oy, ox), ty)
        b.ret_void()
        return fn

    @emits(Kind.EINSUM)
    def k_einsum(self, k: Kernel):
        """einsum (einsum.py): loops over the output labels, then the summed ones; the
        products of the operands' elements added in float64, rounded to float32 once."""
        p = k.params
        n_in = len(k.inputs)
        fn, b, args = self.function(k, n_in)
        xs, y = args[:n_in], args[n_in]
        loops, n_out = p["loops"], p["n_out"]
        acc = b.alloca(F64)
        out_strides = [int(np.prod(loops[i + 1 : n_out], dtype=np.int64)) for i in range(n_out)]

        def nest(depth, idx):
            if depth == n_out:
                b.store(ir.Constant(F64, 0.0), acc)
            if depth == len(loops):
                prod = ir.Constant(F64, 1.0)
                for x, strides in zip(xs, p["strides"]):
                    at = c64(0)
                    for i, st in zip(idx, strides):
                        if st:
                            at = b.add(at, b.mul(i, c64(st)))
                    prod = b.fmul(prod, b.fpext(self.load_at(b, x, at, F32), F64))
                b.store(b.fadd(b.load(acc, typ=F64), prod), acc)
            else:
                with for_range(b, loops[depth], f"l{depth}") as i:
                    nest(depth + 1, [*idx, i])
            if depth == n_out:
                at = c64(0)
                for i, st in zip(idx, out_strides):
                    at = b.add(at, b.mul(i, c64(st)))
                self.store_at(b, b.fptrunc(b.load(acc, typ=F64), F32), y, at, F32)

        nest(0, [])
        b.ret_void()
        return fn

    @emits(Kind.BNORM)
    def k_bnorm(self, k: Kernel):
        """nn.batch_norm's result (float_ops.lower_batch_norm_item): per element, in float64
        as the reference, ((x - mean[c]) / sqrt(var[c] + eps)) * gamma[c] + beta[c], rounded
        to float32; each parameter a float64 constant or a float32 buffer (widened exactly)."""
        p = k.params
        fn, b, args = self.function(k, len(k.inputs))
        x, y = args[0], args[-1]

        def param(name, c):
            kind, where = p["sources"][name]
            if kind == "const":
                return self.load_at(b, self.cargs[where], c, F64)
            return b.fpext(self.load_at(b, args[where], c, F32), F64)

        sqrt = self.module.declare_intrinsic("llvm.sqrt", [F64])
        with for_range(b, p["outer"], "o") as o, for_range(b, p["C"], "c") as c:
            m, gamma, beta = param("mean", c), param("gamma", c), param("beta", c)
            sd = b.call(sqrt, [b.fadd(param("var", c), ir.Constant(F64, p["eps"]))])
            base = b.mul(b.add(b.mul(o, c64(p["C"])), c), c64(p["inner"]))
            with for_range(b, p["inner"], "i") as i:
                at = b.add(base, i)
                v = b.fdiv(b.fsub(b.fpext(self.load_at(b, x, at, F32), F64), m), sd)
                if p["scale"]:
                    v = b.fmul(v, gamma)
                if p["center"]:
                    v = b.fadd(v, beta)
                self.store_at(b, b.fptrunc(v, F32), y, at, F32)
        b.ret_void()
        return fn

    @emits(Kind.FMEAN)
    def k_fmean(self, k: Kernel):
        """out[c] = float32(sum over pixels of float64(x[p, c]) / n): the reference's float64
        sum, exact here (context._exact_float_mean), divided and rounded once."""
        fn, b, (x, y) = self.function(k, 1)
        batch, h, w, c = self.shape(k.inputs[0])
        acc = b.alloca(F64)
        with for_range(b, batch, "n") as nb, for_range(b, c, "ch") as ch:
            xb = b.add(b.mul(nb, c64(h * w * c)), ch)  # image nb, channel ch
            b.store(ir.Constant(F64, 0.0), acc)
            with for_range(b, h * w, "e") as e:
                v = b.fpext(self.load_at(b, x, b.add(b.mul(e, c64(c)), xb), F32), F64)
                b.store(b.fadd(b.load(acc, typ=F64), v), acc)
            mean = b.fdiv(b.load(acc, typ=F64), ir.Constant(F64, float(h * w)))
            self.store_at(b, b.fptrunc(mean, F32), y, b.add(b.mul(nb, c64(c)), ch), F32)
        b.ret_void()
        return fn
