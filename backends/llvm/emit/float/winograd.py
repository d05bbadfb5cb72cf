"""Winograd F(2 x 2, 3 x 3) float32 convolutions (FWINO; lower/float_winograd.py plans them and
transforms the weights). The output's 2 x 2 tiles go in blocks of ``per`` tiles; per block, in
a scratch of its thread's own (the kernel's workspace, half each with two threads):

    V[e][t][c] = (B^T d_t B)[e]       d_t the 4 x 4 window of the padded input at tile t
    M[e][t][o] = sum_c V[e][t][c] U[e][c][o]     16 products (gemm.py's, on U's panels)
    y[tile t's 2 x 2 pixels][o] = (A^T M[.][t][o] A) (+ bias, + residual, relu)

vectorized over 16 channels (an odd output's last tiles store only their pixels inside).
With ``threads`` 2 the chunks the two threads claim (runtime/threads.py split_chunks) are
blocks, or (``parts`` 2: few blocks) a block's half of the output channels, each computing its
block's transform itself; every output is written by one chunk, so the bits are one thread's."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import F32, Family, c64, for_range, via
from partita.backends.llvm.kinds import Kind, emits

from .gemm import V16F, VEC


class FloatWinograd(Family):
    # what it uses of the other kernel families (through the emit context)
    gemm = via("gemm")
    gemm_cells = via("gemm")
    vload_f = via("gemm")
    vstore_f = via("gemm")
    split_chunks = via("pool")

    @emits(Kind.FWINO)
    def k_fwino(self, k):
        p = k.params
        fn, b, args = self.function(k, len(k.inputs))
        x, ws, y = args[0], args[1], args[-1]
        null = ir.Constant(ir.PointerType(), None)
        res = args[2] if p.get("residual") else null
        w, bias = self.cargs["wt"], self.cargs.get("bias", null)
        chunks = p["blocks"] * p["parts"]
        body = self.block_range(k)
        if p.get("threads", 1) < 2:
            b.call(body, [x, w, y, bias, res, ws, c64(0), c64(chunks)])
            b.ret_void()
            return fn
        def enter(eb, ps, back):  # the worker's scratch: the workspace's second half
            at = c64(p["scratch"] if back else 0)
            return [*ps[:5], eb.gep(ps[5], [at], source_etype=F32)]

        self.split_chunks(k, b, [x, w, y, bias, res, ws], chunks, 1,
                          lambda eb, ps, lo, hi: eb.call(body, [*ps, lo, hi]),
                          around=(enter, lambda eb: None))
        b.ret_void()
        return fn

    def block_range(self, k) -> ir.Function:
        """``void name(x, w, y, bias, residual, scratch, i64 lo, i64 hi)``: chunks [lo, hi)."""
        p = k.params
        ptr = ir.PointerType()
        i64 = c64(0).type
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [ptr] * 6 + [i64, i64]),
                         name=f"{k.name}_blocks")
        fn.linkage = "internal"
        for arg in fn.args[:6]:
            arg.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        x, w, y, bias, res, v, lo, hi = fn.args
        cells = self.gemm_cells(b, p)
        per, c, o, parts = p["per"], p["C"], p["O"], p["parts"]
        part = o // parts
        m = b.gep(v, [c64(16 * per * c)], source_etype=F32)  # the products, after V
        with for_range(b, b.sub(hi, lo), "chunk") as i:
            chunk = b.add(lo, i)
            blk, half = b.udiv(chunk, c64(parts)), b.urem(chunk, c64(parts))
            t0 = b.mul(blk, c64(per))
            self.transform_in(b, p, x, v, t0)
            n0 = b.mul(half, c64(part))
            with for_range(b, 16, "e") as e:
                self.product(b, p, cells, v, w, m, e, n0, part)
            self.transform_out(b, p, m, y, bias, res, t0, n0, part)
        b.ret_void()
        return fn

    def tile_at(self, b, p, t, height, width, channels):
        """Tile t's top-left output pixel (row, column) and that pixel's element index in an
        NHWC array of ``height`` x ``width`` x ``channels`` images (the padded input, whose
        window starts there, or the output): an image's tiles in rows, the images one after
        another."""
        th, tw = p["th"], p["tw"]
        img, t = b.udiv(t, c64(th * tw)), b.urem(t, c64(th * tw))
        oy, ox = b.mul(b.udiv(t, c64(tw)), c64(2)), b.mul(b.urem(t, c64(tw)), c64(2))
        row = b.add(b.mul(img, c64(height)), oy)
        return oy, ox, b.mul(b.add(b.mul(row, c64(width)), ox), c64(channels))

    def transform_in(self, b, p, x, v, t0):
        """V[e][t - t0][c] for the block's tiles: the padded input's 4 x 4 window at (2 ty,
        2 tx), B^T d B on its rows then its columns."""
        per, c, hp, wp = p["per"], p["C"], p["hp"], p["wp"]
        with for_range(b, per, "wt") as tl:
            _, _, base = self.tile_at(b, p, b.add(t0, tl), hp, wp, c)
            with for_range(b, c // VEC, "wc") as cv:
                at = b.add(base, b.mul(cv, c64(VEC)))
                d = [[self.vload_f(b, x, b.add(at, c64((i * wp + j) * c))) for j in range(4)]
                     for i in range(4)]
                rows = [bt_combine(b, [d[i][j] for i in range(4)]) for j in range(4)]  # [j][i]
                out = b.add(b.mul(tl, c64(c)), b.mul(cv, c64(VEC)))
                for i in range(4):
                    for j, value in enumerate(bt_combine(b, [rows[jj][i] for jj in range(4)])):
                        self.vstore_f(b, value, v, b.add(out, c64((4 * i + j) * per * c)))

    def product(self, b, p, cells, v, w, m, e, n0, part):
        """M[e][t][n0 .. n0 + part] = V[e] x U[e]'s columns n0 .. n0 + part (U's panels,
        float_products.panels: a panel of ``cols`` vectors is [K][cols x 16], panels in a
        row)."""
        per, c, o = p["per"], p["C"], p["O"]
        wide = p.get("cols", 4)
        vb, ub, mb = b.mul(e, c64(per * c)), b.mul(e, c64(c * o)), b.mul(e, c64(per * o))
        ub = b.add(ub, b.mul(n0, c64(c)))  # panel n0 // width starts at n0 x K

        def w_at(kk, n, vi, cols):
            step = wide * VEC if cols == wide else VEC
            return b.add(ub, b.add(b.add(b.mul(n, c64(c)), b.mul(kk, c64(step))), c64(vi * VEC)))

        self.gemm(b, cells, per, part, c,
                  lambda mm, kk: b.add(vb, b.add(b.mul(mm, c64(c)), kk)),
                  w_at,
                  lambda mm, n: b.add(mb, b.add(b.mul(mm, c64(o)), b.add(n0, n))),
                  v, w, m)

    def transform_out(self, b, p, m, y, bias, res, t0, n0, part):
        """y's 2 x 2 pixels of each tile, channels n0 .. n0 + part: A^T M A, + bias, + the
        residual, relu (float_conv.epilogue's order)."""
        per, o = p["per"], p["O"]
        oh, ow = p["out"]
        with for_range(b, per, "yt") as tl:
            oy, ox, base = self.tile_at(b, p, b.add(t0, tl), oh, ow, o)
            with for_range(b, part // VEC, "yc") as cv:
                ch = b.add(n0, b.mul(cv, c64(VEC)))
                at = b.add(b.mul(tl, c64(o)), ch)
                mv = [[self.vload_f(b, m, b.add(at, c64((4 * i + j) * per * o))) for j in range(4)]
                      for i in range(4)]
                cols = [at_combine(b, [mv[i][j] for i in range(4)]) for j in range(4)]  # [j][r]
                add = self.vload_f(b, bias, ch) if p.get("bias", "none") != "none" else None
                for r in range(2):
                    for s, value in enumerate(at_combine(b, [cols[j][r] for j in range(4)])):
                        inside = self.inside(b, p, oy, ox, r, s)
                        if inside is None:
                            self.store_pixel(b, p, value, add, res, y, base, ch, r, s)
                            continue
                        with b.if_then(inside):  # an odd output's last row or column
                            self.store_pixel(b, p, value, add, res, y, base, ch, r, s)

    def inside(self, b, p, oy, ox, r, s):
        """Whether tile pixel (r, s) at (oy, ox) is in the output (None: always, even sizes)."""
        oh, ow = p["out"]
        conds = []
        if r and oh % 2:
            conds.append(b.icmp_unsigned("<", b.add(oy, c64(r)), c64(oh)))
        if s and ow % 2:
            conds.append(b.icmp_unsigned("<", b.add(ox, c64(s)), c64(ow)))
        if not conds:
            return None
        return conds[0] if len(conds) == 1 else b.and_(conds[0], conds[1])

    def store_pixel(self, b, p, value, add, res, y, base, ch, r, s):
        """value (+ bias, + the residual, relu) stored at tile pixel (r, s)."""
        o, ow = p["O"], p["out"][1]
        zero = ir.Constant(V16F, [ir.Constant(F32, 0.0)] * VEC)
        if add is not None:
            value = b.fadd(value, add)
        at = b.add(b.add(base, c64((r * ow + s) * o)), ch)
        if p.get("residual"):
            value = b.fadd(value, self.vload_f(b, res, at))
        if p.get("relu"):  # as np.maximum(x, 0): -0 -> +0, NaN stays NaN
            value = b.select(b.fcmp_ordered("<=", value, zero), zero, value)
        self.vstore_f(b, value, y, at)


def bt_combine(b, d):
    """B^T d for one column of 4 vectors: d0 - d2, d1 + d2, d2 - d1, d1 - d3."""
    return [b.fsub(d[0], d[2]), b.fadd(d[1], d[2]), b.fsub(d[2], d[1]), b.fsub(d[1], d[3])]


def at_combine(b, m):
    """A^T m for one column of 4 vectors: m0 + m1 + m2, m1 - m2 - m3."""
    return [b.fadd(b.fadd(m[0], m[1]), m[2]), b.fsub(b.fsub(m[1], m[2]), m[3])]


__all__ = ["FloatWinograd"]
