"""Scalar kernels of the products int_products.py and runtime_weights.py lower:

    GCONV   nn.conv2d / nn.conv2d_transpose reading its weights from a buffer in any kernel
            layout: exact int64 sums wrapped to the output dtype, or float64 sums rounded once
    IBMM    nn.batch_matmul of integers and qnn.batch_matmul: exact int64 sums of
            (x - zx) * (y - zy), wrapped to the output dtype, or to the accumulator's and then
            requantized (any qnn.requantize semantics: integer.requantize_value)
    WPACK   float32 weights computed at run time packed as FCONV's constant ones are,
            [groups][K][Mp] with zeros past the M columns of each group

Plain loops that compute what the references compute (partita/ops/nn_conv.py, nn.py, qnn.py);
written for correctness over speed. A kernel family; they use load_value /
store_value of kernels.FloatKernels.
"""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.kinds import Kind, emits

from .base import F32, F64, I32, I64, Family, c64, for_range, layout_index, via


def exact_bmm(b, p, operands, zero_points, load, emit) -> None:
    """The loops of an exact batched integer product (IBMM, QBMM): for each (bt, m, n),
    ``emit((bt, m, n), total)`` with the i64 sum over k of (x - zx) (y - zy); x and y read by
    ``load(ptr, index, dtype)`` (an i64) as p's transposes (``ta``, ``tb``), batch counts
    (``bx``, ``by``: a batch of 1 broadcast) and ``dtypes`` say."""
    (x, w), (zx, zy) = operands, zero_points
    m_, k_, n_ = p["M"], p["K"], p["N"]
    cell = b.alloca(I64)
    with (for_range(b, p["B"], "bt") as bt, for_range(b, m_, "m") as m,
          for_range(b, n_, "n") as n):
        xb = b.mul(bt if p["bx"] > 1 else c64(0), c64(m_ * k_))
        yb = b.mul(bt if p["by"] > 1 else c64(0), c64(n_ * k_))
        b.store(c64(0), cell)
        with for_range(b, k_, "k") as kk:
            xi = b.add(b.mul(kk, c64(m_)), m) if p["ta"] else b.add(b.mul(m, c64(k_)), kk)
            yi = b.add(b.mul(n, c64(k_)), kk) if p["tb"] else b.add(b.mul(kk, c64(n_)), n)
            xv = b.sub(load(x, b.add(xb, xi), p["dtypes"][0]), zx)
            yv = b.sub(load(w, b.add(yb, yi), p["dtypes"][1]), zy)
            b.store(b.add(b.load(cell, typ=I64), b.mul(xv, yv)), cell)
        emit((bt, m, n), b.load(cell, typ=I64))


class ProductKernels(Family):
    # what it uses of the other kernel families (through the emit context)
    load_value = via("floats")
    requantize_value = via("ints")
    store_value = via("floats")
    wrap32 = via("ints")

    # -- GCONV -----------------------------------------------------------------------------
    @emits(Kind.GCONV)
    def k_gconv(self, k):
        """out[n, o, oy, ox] = sum over the group's channels c and taps (a, b) of
        x[n, c, iy, ix] * w[...]: a convolution reads iy = oy*sh + a*dh - top; a transposed one
        gathers the pixels that scatter into (oy, ox): oy + top - a*dh = iy*sh."""
        fn, b, (x, w, y) = self.function(k, 2)
        p = k.params
        n, c, h, wd = p["in"]
        _, oc, oh, ow = p["out"]
        kh, kw = p["kernel"]
        strides, dilation, (top, left) = p["strides"], p["dilation"], p["pad"]
        cg, og = c // p["groups"], oc // p["groups"]
        s_a, s_b, s_h, s_w = p["wstrides"]  # weight strides: (O, I, H, W), transposed (I, O, H, W)
        x_dt, w_dt, out_dt = p["dtypes"]
        floating = out_dt.startswith("float")
        acc_ty = F64 if floating else I64
        acc = b.alloca(acc_ty)
        nchw = p["layout"] == "NCHW"

        def at(dims, ni, ci, yi, xi):
            return layout_index(b, nchw, dims, ni, ci, yi, xi)

        with (for_range(b, n, "n") as ni, for_range(b, oh, "oy") as oy,
              for_range(b, ow, "ox") as ox, for_range(b, oc, "o") as o):
            b.store(ir.Constant(acc_ty, 0), acc)
            grp = b.sdiv(o, c64(og))
            with for_range(b, kh, "a") as ka, for_range(b, kw, "bb") as kb:
                if p["transposed"]:
                    iy, ix, inside = self._gathered_tap(b, (oy, ox), (ka, kb), strides,
                                                        dilation, (top, left), (h, wd))
                    w_at = b.add(b.mul(b.srem(o, c64(og)), c64(s_b)),
                                 b.add(b.mul(ka, c64(s_h)), b.mul(kb, c64(s_w))))
                    w_ch = s_a  # the input channel's stride
                else:
                    iy, ix, inside = self.window_tap(b, (oy, ox), (ka, kb), strides, dilation,
                                                     (top, left), (h, wd))
                    w_at = b.add(b.mul(o, c64(s_a)),
                                 b.add(b.mul(ka, c64(s_h)), b.mul(kb, c64(s_w))))
                    w_ch = s_b
                with b.if_then(inside), for_range(b, cg, "c") as ci:
                    cin = b.add(b.mul(grp, c64(cg)), ci)
                    xv = self.load_value(b, x, at(p["in"], ni, cin, iy, ix), x_dt)[1]
                    # a transposed convolution's weight channel is the input channel itself
                    wch = cin if p["transposed"] else ci
                    wv = self.load_value(b, w, b.add(w_at, b.mul(wch, c64(w_ch))), w_dt)[1]
                    old = b.load(acc, typ=acc_ty)
                    step = b.fadd(old, b.fmul(xv, wv)) if floating else b.add(old, b.mul(xv, wv))
                    b.store(step, acc)
            value = ("f" if floating else "i", b.load(acc, typ=acc_ty))
            self.store_value(b, value, y, at(p["out"], ni, o, oy, ox), out_dt)
        b.ret_void()
        return fn

    def _gathered_tap(self, b, out_yx, tap_yx, strides, dilation, top_left, hw):
        """(iy, ix, inside): the input pixel whose scatter through tap (a, b) lands on output
        pixel (oy, ox) of a transposed convolution, and whether there is one."""
        ry = b.sub(b.add(out_yx[0], c64(top_left[0])), b.mul(tap_yx[0], c64(dilation[0])))
        rx = b.sub(b.add(out_yx[1], c64(top_left[1])), b.mul(tap_yx[1], c64(dilation[1])))
        iy, ix = b.sdiv(ry, c64(strides[0])), b.sdiv(rx, c64(strides[1]))
        inside = b.and_(
            b.and_(b.icmp_signed(">=", ry, c64(0)), b.icmp_signed(">=", rx, c64(0))),
            b.and_(b.and_(b.icmp_signed("==", b.srem(ry, c64(strides[0])), c64(0)),
                          b.icmp_signed("==", b.srem(rx, c64(strides[1])), c64(0))),
                   b.and_(b.icmp_signed("<", iy, c64(hw[0])), b.icmp_signed("<", ix, c64(hw[1])))))
        return iy, ix, inside

    # -- IBMM ------------------------------------------------------------------------------
    @emits(Kind.IBMM)
    def k_ibmm(self, k):
        """out[bt, m, n] = sum_k (x[bt, m, k] - zx) * (y[bt, k, n] - zy) (transposes and a batch
        of 1 broadcast as the op says) in i64, stored wrapped, or requantized (``rq``)."""
        p = k.params
        fn, b, args = self.function(k, len(k.inputs))
        x, w, y = args[0], args[1], args[-1]
        m_, n_ = p["M"], p["N"]
        out_dt, rq = self.dtype(k.output), p.get("rq")
        # zero points: constants, or scalars read from a buffer ["buf", input, dtype]
        zx, zy = (c64(z) if isinstance(z, int) else self.load_value(b, args[z[1]], c64(0), z[2])[1]
                  for z in (p["zx"], p["zy"]))

        def store(index, total):
            value = ("i", total)
            if rq is not None:
                value = self._requantized(b, total, rq, index)
            bt, m, n = index
            at = b.add(b.mul(b.add(b.mul(bt, c64(m_)), m), c64(n_)), n)
            self.store_value(b, value, y, at, out_dt)

        exact_bmm(b, p, (x, w), (zx, zy),
                  lambda ptr, at, dtype: self.load_value(b, ptr, at, dtype)[1], store)
        b.ret_void()
        return fn

    def _requantized(self, b, total, rq, index):
        """The accumulator (``total`` wrapped to rq["acc"]) requantized at its channel (the
        output index along the requantize's axis; 0 per tensor)."""
        acc = self.wrap32(b, total) if rq["acc"] == "int32" else total
        ch = index[rq["axis"]] if rq["axis"] >= 0 else c64(0)
        g = self.cargs

        def int_at(name):
            return b.sext(self.load_at(b, g[name], ch, I32), I64)

        zi = (("f", self.load_at(b, g["rq_zi"], ch, F64)) if rq["float_zp"]
              else ("i", int_at("rq_zi")))
        vals = [("i", acc), ("i", int_at("rq_q")), ("i", int_at("rq_shift")),
                ("f", self.load_at(b, g["rq_scale"], ch, F64)), zi, ("i", int_at("rq_zo"))]
        return self.requantize_value(b, vals, rq)

    # -- WPACK -----------------------------------------------------------------------------
    @emits(Kind.WPACK)
    def k_wpack(self, k):
        """y[g][kk][mm] = w[g * gstride + sum(index * stride over kdims) + mm * mstride] for
        mm < M, +0 up to Mp; kk runs over the kdims' indices, the first outermost."""
        p = k.params
        fn, b, (w, y) = self.function(k, 1)
        m_, mp = p["M"], p["Mp"]
        kdims = p["kdims"]
        kk_total = 1
        for size, _ in kdims:
            kk_total *= size
        zero = ir.Constant(F32, 0.0)

        def nest(depth, kk, src):
            if depth == len(kdims):
                dst = b.mul(b.add(b.mul(g, c64(kk_total)), kk), c64(mp))
                with for_range(b, m_, "mm") as mm:
                    v = self.load_at(b, w, b.add(src, b.mul(mm, c64(p["mstride"]))), F32)
                    self.store_at(b, v, y, b.add(dst, mm), F32)
                for mm in range(m_, mp):
                    self.store_at(b, zero, y, b.add(dst, c64(mm)), F32)
                return
            size, stride = kdims[depth]
            with for_range(b, size, f"kd{depth}") as i:
                nest(depth + 1, b.add(b.mul(kk, c64(size)), i), b.add(src, b.mul(i, c64(stride))))

        with for_range(b, p["G"], "g") as g:
            nest(0, c64(0), b.mul(g, c64(p["gstride"])))
        b.ret_void()
        return fn


__all__ = ["ProductKernels"]
