"""Kernels as plain loops over NHWC buffers: the scalar int8 convolution / dense (the "plain"
instruction set), quantize (its 16-lane loops are quant_vectors.py), copies, transposes,
IM2COL, max pooling and the quantized mean (the float Relay ops' loops are float/scalar.py;
the 8-bit tables LUT and LUT2 are tables.py). A kernel family (emit/base.py's Family).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from partita.backends.llvm.emit.base import (
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    Family,
    c64,
    for_range,
    via,
)
from partita.backends.llvm.kinds import Kind, emits
from partita.backends.llvm.plan import Kernel

RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}
ELEMENT_CHUNK = 1 << 14  # elements per claimed chunk of a split QUANT / LUT (threads 2)
# MAXPOOL: windows of at most this many taps are written out tap by tap, larger ones are loops
# (each tap's IR is ~30 instructions: a mutated model's 65536 x 3 window made LLVM run for
# minutes; fuzz seed 2501, case 76,730)
UNROLLED_TAPS = 64


class ScalarKernels(Family):
    # what it uses of the other kernel families (through the emit context)
    mbqm_upward = via("ints")
    split_chunks = via("pool")
    quant_vectors = via("qvec")

    def weight(self, b, g, index, k: Kernel):
        """A weight widened to i64 (stored as bytes, signed or not as the model's weights)."""
        v = self.load_at(b, g["weights"], index, I8)
        return b.sext(v, I64) if k.params["w_dtype"] == "int8" else b.zext(v, I64)


    # -- MAC kernels -------------------------------------------------------------------------
    @emits(Kind.CONV)
    def k_conv(self, k: Kernel):
        return self._conv(k, depthwise=False)

    @emits(Kind.DWCONV)
    def k_dwconv(self, k: Kernel):
        return self._conv(k, depthwise=True)

    def _conv(self, k: Kernel, depthwise: bool):
        fn, b, (x, y) = self.function(k, 1)
        g = self.globals_of(k)
        _, h, w, c = self.shape(k.inputs[0])
        _, oh, ow, oc = self.shape(k.output)
        o_, kh, kw, ci = k.arrays["weights"].shape
        p = k.params
        (sh, sw), (dh, dw) = p["strides"], p["dilation"]
        top, left = p["padding"][0], p["padding"][1]
        in_dtype = p["in_dtype"]
        acc_ptr = b.alloca(I64)  # allocas in the entry block
        with (
            for_range(b, oh, "oy") as oy,
            for_range(b, ow, "ox") as ox,
            for_range(b, oc, "oc") as o,
        ):
            b.store(c64(0), acc_ptr)
            wzp = b.sext(self.load_at(b, g["w_zp"], o, I32), I64)
            with for_range(b, kh, "ky") as ky, for_range(b, kw, "kx") as kx:
                iy, ix, inside = self.window_tap(b, (oy, ox), (ky, kx), (sh, sw), (dh, dw),
                                                     (top, left), (h, w))
                with b.if_then(inside):
                    base = b.mul(b.add(b.mul(iy, c64(w)), ix), c64(c))
                    wbase = b.mul(b.add(b.mul(b.add(b.mul(o, c64(kh)), ky), c64(kw)), kx), c64(ci))
                    if depthwise:
                        xv = self.signed(b, self.load_at(b, x, b.add(base, o), I8), in_dtype)
                        wv = self.weight(b, g, wbase, k)
                        term = b.mul(b.sub(xv, c64(p["in_zp"])), b.sub(wv, wzp))
                        b.store(b.add(b.load(acc_ptr, typ=I64), term), acc_ptr)
                    else:
                        with for_range(b, ci, "ic") as ic:
                            xv = self.signed(b, self.load_at(b, x, b.add(base, ic), I8), in_dtype)
                            wv = self.weight(b, g, b.add(wbase, ic), k)
                            term = b.mul(b.sub(xv, c64(p["in_zp"])), b.sub(wv, wzp))
                            b.store(b.add(b.load(acc_ptr, typ=I64), term), acc_ptr)
            value = self.output_stage(b, b.load(acc_ptr, typ=I64), k, g, o)
            index = b.add(b.mul(b.add(b.mul(oy, c64(ow)), ox), c64(oc)), o)
            self.store_at(b, value, y, index, value.type)
        b.ret_void()
        return fn

    @emits(Kind.FC)
    def k_fc(self, k: Kernel):
        fn, b, (x, y) = self.function(k, 1)
        g = self.globals_of(k)
        *lead, depth = self.shape(k.inputs[0])
        rows = int(np.prod(lead, dtype=np.int64))
        units = k.arrays["weights"].shape[0]
        in_dtype = k.params["in_dtype"]
        acc_ptr = b.alloca(I64)
        with for_range(b, rows, "r") as r, for_range(b, units, "u") as u:
            b.store(c64(0), acc_ptr)
            wzp = b.sext(self.load_at(b, g["w_zp"], u, I32), I64)
            with for_range(b, depth, "d") as d:
                xv = self.signed(
                    b, self.load_at(b, x, b.add(b.mul(r, c64(depth)), d), I8), in_dtype
                )
                wv = self.weight(b, g, b.add(b.mul(u, c64(depth)), d), k)
                term = b.mul(b.sub(xv, c64(k.params["in_zp"])), b.sub(wv, wzp))
                b.store(b.add(b.load(acc_ptr, typ=I64), term), acc_ptr)
            value = self.output_stage(b, b.load(acc_ptr, typ=I64), k, g, u)
            self.store_at(b, value, y, b.add(b.mul(r, c64(units)), u), value.type)
        b.ret_void()
        return fn

    # -- quantize, copies, pooling -----------------------------------------------------------------
    @emits(Kind.QUANT)
    def k_quant(self, k: Kernel):
        """float32 -> int8/uint8/int16/int32, per tensor or per channel (context.quant_params):
        x / scale in float32, then round half away from zero (TFLite) or half to even (ONNX),
        + zero point, saturated; "fbgemm" (PyTorch): one fused multiply-add by float32(1 /
        scale) with the zero point, rounded half to even."""
        fn, b, (x, y) = self.function(k, 1)
        pointers = [x, y, self.cargs["scale"], self.cargs["zp"]]
        self.elements(k, b, pointers, lambda eb, ps, lo, hi: self.quant_range(k, eb, ps, lo, hi))
        b.ret_void()
        return fn

    def elements(self, k, b, pointers, emit) -> None:
        """``emit(builder, pointers, lo, hi)`` over the output's flat indices: all here, or
        with ``threads`` 2 in chunks of ELEMENT_CHUNK the driver's worker shares
        (runtime/threads.py split_chunks)."""
        total = int(np.prod(self.shape(k.output)))
        if k.params.get("threads", 1) > 1:
            self.split_chunks(k, b, pointers, total, ELEMENT_CHUNK, emit)
        else:
            emit(b, pointers, c64(0), c64(total))

    def quant_range(self, k, b, pointers, lo, hi) -> None:
        x, y, scales, zps = pointers
        p = k.params
        if p.get("vector"):  # whole vectors of 16 first, the rest one by one below
            lo = self.quant_vectors(k, b, pointers, lo, hi)
        out_ty = {"int8": I8, "uint8": I8, "int16": ir.IntType(16), "int32": I32}[p["out_dtype"]]
        info = np.iinfo(p["out_dtype"])
        lo_q, hi_q = int(info.min), int(info.max)
        floor = self.module.declare_intrinsic("llvm.floor", [F64])
        fabs = self.module.declare_intrinsic("llvm.fabs", [F64])
        rint = self.module.declare_intrinsic("llvm.rint", [F64])
        fma = self.module.declare_intrinsic("llvm.fma", [F32], ir.FunctionType(F32, [F32] * 3))
        with for_range(b, b.sub(hi, lo), "e") as e:
            e = b.add(e, lo)
            c = b.urem(b.udiv(e, c64(p["inner"])), c64(p["C"])) if p["C"] > 1 else c64(0)
            scale = b.fptrunc(self.load_at(b, scales, c, F64), F32)
            zp = b.sext(self.load_at(b, zps, c, I32), I64)
            v = self.load_at(b, x, e, F32)
            q = b.fpext(b.fdiv(v, scale), F64)
            if p["round"] == "fbgemm":  # fma(x, float32(1 / scale), zp), one rounding, even
                inverse = b.fdiv(ir.Constant(F32, 1.0), scale)
                q = b.fpext(b.call(fma, [v, inverse, b.sitofp(zp, F32)]), F64)
                zp = c64(0)
            if p["round"] == "tflite":
                r = b.call(floor, [b.fadd(b.call(fabs, [q]), ir.Constant(F64, 0.5))])
                r = b.select(b.fcmp_ordered("<", q, ir.Constant(F64, 0.0)), b.fneg(r), r)
            else:
                r = b.call(rint, [q])
            r = b.select(b.fcmp_unordered("uno", r, r), ir.Constant(F64, 0.0), r)  # NaN -> 0
            r = b.select(
                b.fcmp_ordered("<", r, ir.Constant(F64, -(2.0**40))),
                ir.Constant(F64, -(2.0**40)),
                r,
            )
            r = b.select(
                b.fcmp_ordered(">", r, ir.Constant(F64, 2.0**40)), ir.Constant(F64, 2.0**40), r
            )
            v = self.clamp(b, b.add(b.fptosi(r, I64), zp), lo_q, hi_q)
            self.store_at(b, b.trunc(v, out_ty), y, e, out_ty)

    @emits(Kind.COPY)
    def k_copy(self, k: Kernel):
        fn, b, (x, y) = self.function(k, 1)
        n = int(np.prod(self.shape(k.output))) * np.dtype(self.dtype(k.output)).itemsize
        with for_range(b, n, "e") as e:
            self.store_at(b, self.load_at(b, x, e, I8), y, e, I8)
        b.ret_void()
        return fn

    @emits(Kind.TRANSPOSE)
    def k_transpose(self, k: Kernel):
        """out[i0, i1, ...] = x[...] with out axis j = input axis perm[j], element by element."""
        fn, b, (x, y) = self.function(k, 1)
        in_shape, out_shape = self.shape(k.inputs[0]), self.shape(k.output)
        size = np.dtype(self.dtype(k.output)).itemsize
        ty = {1: I8, 2: ir.IntType(16), 4: I32, 8: I64}[size]
        in_strides = np.cumprod((list(in_shape) + [1])[:0:-1])[::-1].tolist() if in_shape else []
        # the split axis (threads 2): the first longer than 1; the loops above it run once
        axis = next((j for j, n in enumerate(out_shape) if n > 1), None)
        if axis is None:
            axis, n_axis, inner = 0, 1, 1
        else:
            n_axis, inner = out_shape[axis], int(np.prod(out_shape[axis + 1 :]))
        self.first_axis(k, b, [x, y], n_axis, inner, lambda rb, ps, lo, hi: self.transpose_part(
            k, rb, ps, lo, hi, axis, ty, in_strides))
        b.ret_void()
        return fn

    def transpose_part(self, k, b, pointers, lo, hi, axis, ty, in_strides) -> None:
        """TRANSPOSE with output axis ``axis`` over [lo, hi) (the axes before it are 1)."""
        import contextlib

        x, y = pointers
        out_shape = self.shape(k.output)
        with contextlib.ExitStack() as stack:
            idx = []
            for j, n in enumerate(out_shape):
                if out_shape and j == axis:
                    i = stack.enter_context(for_range(b, b.sub(hi, lo), f"t{j}"))
                    idx.append(b.add(i, lo))
                else:
                    idx.append(stack.enter_context(for_range(b, n, f"t{j}")))
            src, dst = c64(0), c64(0)
            for j, i in enumerate(idx):
                src = b.add(src, b.mul(i, c64(in_strides[k.params["perm"][j]])))
                dst = b.add(b.mul(dst, c64(out_shape[j])), i)
            self.store_at(b, self.load_at(b, x, src, ty), y, dst, ty)

    @emits(Kind.IM2COL)
    def k_im2col(self, k: Kernel):
        """y[oy, ox, (ky, kx, c)] = x[oy*sh + ky*dh - top, ox*sw + kx*dw - left, c], the input
        zero point outside (8-bit data) or 0.0 (float32)."""
        fn, b, (x, y) = self.function(k, 1)
        _, oh, ow, kc = self.shape(k.output)
        self.first_axis(k, b, [x, y], oh, ow * kc,
                        lambda rb, ps, lo, hi: self.im2col_rows(k, rb, ps, lo, hi))
        b.ret_void()
        return fn

    def im2col_rows(self, k, b, pointers, lo, hi) -> None:
        """IM2COL's output rows [lo, hi)."""
        x, y = pointers
        _, h, w, c = self.shape(k.inputs[0])
        _, oh, ow, kc = self.shape(k.output)
        p = k.params
        (sh, sw), (dh, dw), (kh, kw) = p["strides"], p["dilation"], p["kernel"]
        top, left = p["padding"][0], p["padding"][1]
        ety = F32 if self.dtype(k.inputs[0]) == "float32" else I8  # float conv: zeros outside
        zp = ir.Constant(F32, 0.0) if ety is F32 else ir.Constant(I8, p["in_zp"] & 0xFF)
        with (
            for_range(b, b.sub(hi, lo), "oy") as oy0,
            for_range(b, ow, "ox") as ox,
            for_range(b, kh, "ky") as ky,
            for_range(b, kw, "kx") as kx,
        ):
            oy = b.add(oy0, lo)
            iy, ix, inside = self.window_tap(b, (oy, ox), (ky, kx), (sh, sw), (dh, dw),
                                                 (top, left), (h, w))
            base = b.mul(b.add(b.mul(b.add(b.mul(oy, c64(ow)), ox), c64(kh)), ky), c64(kw))
            dst = b.mul(b.add(base, kx), c64(c))
            src = b.mul(b.add(b.mul(iy, c64(w)), ix), c64(c))
            with for_range(b, c, "ic") as ic:
                with b.if_else(inside) as (then, otherwise):
                    with then:
                        v = self.load_at(b, x, b.add(src, ic), ety)
                        self.store_at(b, v, y, b.add(dst, ic), ety)
                    with otherwise:
                        self.store_at(b, zp, y, b.add(dst, ic), ety)

    def first_axis(self, k, b, pointers, n: int, inner: int, emit) -> None:
        """``emit(builder, pointers, lo, hi)`` over [0, n) of the kernel's split loop (each
        index ``inner`` elements): all here, or with ``threads`` 2 in chunks of about
        ELEMENT_CHUNK elements the driver's worker shares (runtime/threads.py split_chunks)."""
        if k.params.get("threads", 1) > 1 and n > 1:
            size = min(max(1, ELEMENT_CHUNK // max(1, inner)), -(-n // 2))
            self.split_chunks(k, b, pointers, n, size, emit)
        else:
            emit(b, pointers, c64(0), c64(n))

    @emits(Kind.MAXPOOL)
    def k_maxpool(self, k: Kernel):
        """Max pooling of NHWC 8-bit or float32 data: per output pixel, its row of channels
        starts at the type's least value (float -inf) and each window tap inside the image
        updates the whole row (a contiguous loop LLVM vectorizes); padding is never read. A
        float tap wins when it is nan or >= the best so far (numpy's max: nan wins, of equal
        taps the later, so a zero's sign is numpy's); a pixel whose window lies wholly in the
        padding gets 0 (8-bit) or -inf. With ``threads`` 2 the output rows in chunks the
        driver's worker shares (first_axis)."""
        fn, b, (x, y) = self.function(k, 1)
        _, h, w, c = self.shape(k.inputs[0])
        _, oh, ow, _ = self.shape(k.output)
        p = k.params
        (ph, pw), (sh, sw), (dh, dw) = p["pool"], p["strides"], p["dilation"]
        top, left = p["padding"][0], p["padding"][1]
        dtype = self.dtype(k.inputs[0])
        floats = dtype == "float32"
        ety = F32 if floats else I8
        least = (ir.Constant(F32, float("-inf")) if floats else
                 ir.Constant(I8, -128 if dtype == "int8" else 0))

        def better(eb, v, cur):
            if floats:
                take = eb.or_(eb.fcmp_unordered("uno", v, v), eb.fcmp_ordered(">=", v, cur))
                return eb.and_(take, eb.fcmp_ordered("ord", cur, cur))
            return eb.icmp_signed(">", v, cur) if dtype == "int8" else eb.icmp_unsigned(">", v, cur)

        def rows(eb, ps, lo, hi):
            xp, yp = ps
            seen = eb.alloca(ir.IntType(1))  # whether a pixel's window met the image
            with for_range(eb, eb.sub(hi, lo), "r") as i:
                r = eb.add(lo, i)  # image r // oh, output row r % oh
                nb, oy = eb.udiv(r, c64(oh)), eb.urem(r, c64(oh))
                xb = eb.mul(nb, c64(h * w * c))
                with for_range(eb, ow, "ox") as ox:
                    out = eb.mul(eb.add(eb.mul(r, c64(ow)), ox), c64(c))
                    with for_range(eb, c, "ch") as ch:
                        self.store_at(eb, least, yp, eb.add(out, ch), ety)
                    eb.store(ir.Constant(ir.IntType(1), 0), seen)

                    def tap(ky, kx):
                        iy, ix, inside = self.window_tap(
                            eb, (oy, ox), (ky, kx), (sh, sw), (dh, dw), (top, left), (h, w))
                        eb.store(eb.or_(eb.load(seen, typ=ir.IntType(1)), inside), seen)
                        with eb.if_then(inside):
                            src = eb.add(xb, eb.mul(eb.add(eb.mul(iy, c64(w)), ix), c64(c)))
                            with for_range(eb, c, "ch") as ch:
                                v = self.load_at(eb, xp, eb.add(src, ch), ety)
                                at = eb.add(out, ch)
                                cur = self.load_at(eb, yp, at, ety)
                                self.store_at(eb, eb.select(better(eb, v, cur), v, cur), yp,
                                              at, ety)

                    if ph * pw <= UNROLLED_TAPS:  # the window's taps written out
                        for ky in range(ph):
                            for kx in range(pw):
                                tap(c64(ky), c64(kx))
                    else:  # a large window (a mutated model's 65536 x 3): loops, not IR per tap
                        with for_range(eb, ph, "ky") as ky, for_range(eb, pw, "kx") as kx:
                            tap(ky, kx)
                    if not floats:  # no tap inside: 0, as the scalar loop's start truncated
                        with eb.if_then(eb.not_(eb.load(seen, typ=ir.IntType(1)))):
                            with for_range(eb, c, "ch") as ch:
                                self.store_at(eb, ir.Constant(I8, 0), yp, eb.add(out, ch), I8)

        self.first_axis(k, b, [x, y], self.shape(k.inputs[0])[0] * oh, ow * c, rows)
        b.ret_void()
        return fn

    @emits(Kind.MEAN)
    def k_mean(self, k: Kernel):
        """out[o, c] over the reduced run of axes [outer][n][inner] (H and W of NHWC: n = H*W,
        inner = C; a transformer's last axis: inner = 1)."""
        fn, b, (x, y) = self.function(k, 1)
        p = k.params
        n, c = p["n"], p["inner"]
        dtype = self.dtype(k.inputs[0])
        lo, hi = RANGE[p["out_dtype"]]
        ety = I16 if dtype == "int16" else I8  # TFLite's 16x8 MEAN: int16 in and out
        rint32 = self.module.declare_intrinsic("llvm.roundeven", [F32])
        # ``row_sums``: the sums of a row of channels, pixel by pixel (contiguous: LLVM vectorises
        # the adds; lower.MEAN_ROW channels at most, and int32 holds any sum of fewer than 2^23
        # 8-bit values); else each channel's column is summed on its own
        sums = b.alloca(I32, c64(c)) if p.get("row_sums") else None
        acc = b.alloca(I64)
        with for_range(b, p["outer"], "o") as o:
            base = b.mul(o, c64(n * c))
            if sums is not None:
                with for_range(b, c, "z") as ch:
                    self.store_at(b, ir.Constant(I32, 0), sums, ch, I32)
                with for_range(b, n, "e") as e, for_range(b, c, "ch") as ch:
                    at = b.add(base, b.add(b.mul(e, c64(c)), ch))
                    v = b.trunc(self.signed(b, self.load_at(b, x, at, ety), dtype), I32)
                    self.store_at(b, b.add(self.load_at(b, sums, ch, I32), v), sums, ch, I32)
            with for_range(b, c, "ch") as ch:
                self.mean_out(b, k, x, y, o, ch, base, sums, acc, rint32, lo, hi, ety)
        b.ret_void()
        return fn

    def mean_legacy(self, b, p, s32, lo, hi):
        """TFLite <= 2.12's MEAN of the int32 sum ``s32`` (qmean.legacy_mean's modes)."""
        n, mode = p["n"], p["legacy"]
        if mode == "copy":  # C's division: toward zero
            return b.sdiv(s32, c64(n))
        if mode == "float":
            fm = b.fdiv(b.sitofp(s32, F32), ir.Constant(F32, float(n)))
            t = b.fadd(b.fmul(fm, ir.Constant(F32, p["fscale"])), ir.Constant(F32, p["fbias"]))
            t64 = b.fpext(t, F64)  # round half away from zero, exact in float64
            floor = self.module.declare_intrinsic("llvm.floor", [F64])
            fabs = self.module.declare_intrinsic("llvm.fabs", [F64])
            r = b.call(floor, [b.fadd(b.call(fabs, [t64]), ir.Constant(F64, 0.5))])
            r = b.select(b.fcmp_ordered("<", t64, ir.Constant(F64, 0.0)), b.fneg(r), r)
            r = b.fadd(b.fptrunc(r, F32), ir.Constant(F32, float(p["out_zp"])))
            r = b.select(b.fcmp_ordered("<", r, ir.Constant(F32, float(lo))),
                         ir.Constant(F32, float(lo)), r)
            r = b.select(b.fcmp_ordered(">", r, ir.Constant(F32, float(hi))),
                         ir.Constant(F32, float(hi)), r)
            # nan (an infinite scale times 0): numpy's INT64_MIN, whose low byte is 0
            r = b.select(b.fcmp_unordered("uno", r, r), ir.Constant(F32, 0.0), r)
            return b.fptosi(r, I64)
        if mode == "q4_int8":  # MBQM of the zero-point-free sum, then (x +- n/2) / n
            d = b.sext(b.trunc(b.sub(s32, c64(p["in_zp"] * n)), I32), I64)
            acc = self.mbqm(b, d, c64(p["multiplier"]), c64(p["shift"]))
            half = b.select(b.icmp_signed("<", acc, c64(0)), c64(-(n // 2)), c64(n // 2))
            v = b.add(b.sdiv(b.add(acc, half), c64(n)), c64(p["out_zp"]))
        else:  # q4_uint8
            v = b.add(self.mbqm(b, s32, c64(p["multiplier"]), c64(p["shift"])), c64(p["bias"]))
        return self.clamp(b, v, lo, hi)

    def mean_out(self, b, k, x, y, o, ch, base, sums, acc, rint32, lo, hi, ety=I8):
        """Channel ``ch`` of MEAN's output row ``o``: its sum (from ``sums``, or summed here
        down the channel's column), requantized."""
        p = k.params
        n, c = p["n"], p["inner"]
        if sums is not None:
            total = b.sext(self.load_at(b, sums, ch, I32), I64)
        else:
            b.store(c64(0), acc)
            with for_range(b, n, "e") as e:
                at = b.add(base, b.add(b.mul(e, c64(c)), ch))
                v = self.signed(b, self.load_at(b, x, at, ety), self.dtype(k.inputs[0]))
                b.store(b.add(b.load(acc, typ=I64), v), acc)
            total = b.load(acc, typ=I64)
        if "legacy" in p:
            v = self.mean_legacy(b, p, b.sext(b.trunc(total, I32), I64), lo, hi)
            self.store_at(b, b.trunc(v, I8), y, b.add(b.mul(o, c64(c)), ch), I8)
            return
        s = b.sub(total, c64(p["in_zp"] * p["n"]))
        if "scale" in p:  # "onnx": float32(int32 sum) * float32 scale, half to even
            f = b.fmul(b.sitofp(b.trunc(s, I32), F32), ir.Constant(F32, p["scale"]))
            v = b.fptosi(b.call(rint32, [f]), I64)
        else:
            s32 = b.sext(b.trunc(s, I32), I64)
            v = self.mbqm(b, s32, c64(p["multiplier"]), c64(p["shift"]))
            if p.get("upward"):  # TFLite's optimized MEAN: NEON blocks of 16 round upward
                up = self.mbqm_upward(b, s32, c64(p["multiplier"]), c64(p["shift"]))
                v = b.select(b.icmp_signed("<", ch, c64(p["upward"])), up, v)
        v = self.clamp(b, b.add(v, c64(p["out_zp"])), lo, hi)
        self.store_at(b, b.trunc(v, ety), y, b.add(b.mul(o, c64(c)), ch), ety)
