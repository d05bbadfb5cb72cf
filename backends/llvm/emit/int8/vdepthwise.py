"""The depthwise vector kernel (VDW): 16 channels per vector; with VNNI, input rows in byte
quads or int16 pairs shared by two output rows (vector_plan.dw_row_pairs), on AVX2 the int16
pairs by VPMADDWD (rows at least DW_ROW_PAIRS_MIN_WIDTH wide), else a tap loop (with fbgemm's
int16 pair saturation where asked). A kernel family (``em.vdw``)."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import I32, Family, c64, for_range, via
from partita.backends.llvm.kinds import Kind, emits
from partita.backends.llvm.lower.vector_plan import dw_row_pairs
from partita.backends.llvm.runtime.chunks import chunk_size

from .vector_types import B16, B64, H16, V8, V16, V32, kconst, vconcat, vpart

DW_TILE = 8  # output pixels per step of the paired depthwise kernel
# AVX2 depthwise: a pair of byte vectors interleaved as bytes, then widened (weave_bytes), else
# widened first and interleaved as int16 (what LLVM turns into cross-lane shuffles)
WEAVE_BYTES = True


class DepthwiseKernels(Family):
    # what it uses of the other kernel families (through the emit context)
    pack_input = via("pack")
    ranged = via("vector")
    split_chunks = via("pool")
    vglobals = via("vector")
    vload = via("vector")
    vrequant = via("vstage")
    vstore = via("vector")

    @emits(Kind.VDW)
    def k_vdw(self, k):
        """Depthwise; with ``threads`` 2 the output rows in chunks (even-sized with row pairs)
        that this thread and the driver's worker claim one at a time (split_chunks)."""
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
        ranged = self.ranged(k, names, rows)  # one body for every chunk of rows
        size = chunk_size(p["OH"], multiple=2 if p.get("rowpairs") else 1)
        self.split_chunks(k, b, pointers, p["OH"], size,
                          lambda eb, ps, lo, hi: eb.call(ranged, [*ps, lo, hi]), tag="_rows")
        b.ret_void()
        return fn

    def dw_rows(self, b, src, y, g, p, oy0, oy1):
        """Output rows [oy0, oy1): 16 channels per vector, the taps' weights held in registers
        across a row."""
        if p.get("rowpairs"):
            return self.dw_rows_paired(b, src, y, g, p, oy0, oy1)
        if p.get("tap_pairs"):
            return self.dw_rows_tap_pairs(b, src, y, g, p, oy0, oy1)
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

    def dw_rows_tap_pairs(self, b, src, y, g, p, oy0, oy1):
        """Exact depthwise without VNNI: two taps' inputs and weights widened to int16 and
        interleaved per channel, one VPMADDWD per 8 channels summing both taps' products in
        int32 (an odd last tap paired with a zero weight)."""
        cs, taps = p["Cs"], p["KH"] * p["KW"]
        ext = b.sext if p["signed"] else b.zext
        weave = ir.Constant(ir.VectorType(I32, 32), [i // 2 + (i % 2) * 16 for i in range(32)])
        madd = self._intrinsic("llvm.x86.avx2.pmadd.wd", V8, [H16, H16])
        groups = [(t, t + 1 if t + 1 < taps else None) for t in range(0, taps, 2)]
        oy0, oy1 = (v if isinstance(v, ir.Value) else c64(v) for v in (oy0, oy1))
        with for_range(b, b.sub(oy1, oy0), "oy") as i, for_range(b, cs // 16, "cv") as cv:
            oy = b.add(i, oy0)
            o = b.mul(cv, c64(16))
            w16 = [b.sext(self.vload(b, g["weights"], b.add(c64(t * cs), o), B16), H16)
                   for t in range(taps)]
            zero = ir.Constant(H16, None)
            ws = [b.shuffle_vector(w16[t0], zero if t1 is None else w16[t1], weave)
                  for t0, t1 in groups]
            ws = [[vpart(b, w, half, 16) for half in range(2)] for w in ws]
            corr = self.vload(b, g["corr"], b.mul(o, c64(4)), V16)
            with for_range(b, p["OW"], "ox") as ox:
                acc = corr

                def tap_input(t):
                    ky, kx = divmod(t, p["KW"])
                    iy = b.add(b.mul(oy, c64(p["sh"])), c64(ky * p["dh"]))
                    ix = b.add(b.mul(ox, c64(p["sw"])), c64(kx * p["dw"]))
                    at = b.add(b.mul(b.add(b.mul(iy, c64(p["Ws"])), ix), c64(cs)), o)
                    return self.vload(b, src, at, B16)

                for (t0, t1), (w_lo, w_hi) in zip(groups, ws):
                    x0 = tap_input(t0)
                    x1 = x0 if t1 is None else tap_input(t1)
                    if WEAVE_BYTES:
                        x_lo, x_hi = weave_bytes(b, x0, x1, ext)
                    else:
                        x = b.shuffle_vector(ext(x0, H16), ext(x1, H16), weave)
                        x_lo, x_hi = vpart(b, x, 0, 16), vpart(b, x, 1, 16)
                    lo = b.call(madd, [x_lo, w_lo])
                    hi = b.call(madd, [x_hi, w_hi])
                    acc = b.add(acc, vconcat(b, lo, hi))
                value = self.vrequant(b, acc, g, o, p, corr=False)
                pix = b.add(b.mul(oy, c64(p["OW"])), ox)
                self.vstore(b, value, y, b.add(b.mul(pix, c64(p["OC"])), o), o, p["OC"])

    def dw_rows_paired(self, b, src, y, g, p, oy0, oy1):
        """VNNI depthwise: input rows in groups (byte quads by VPDPBUSD, or int16 pairs by
        VPDPWSSD; exact either way); AVX2: int16 pairs by VPMADDWD + VPADDD, channel vectors
        outer with ``cv_outer``. Output rows go two at a time: both read each interleaved
        group of input rows (vector_plan.dw_row_pairs), and
        DW_TILE output pixels per step share each input column. An odd last row is computed
        with the row before it again, a row's last pixels with the tile before them (the same
        bytes written twice), so each kernel has one unrolled body."""
        oy0, oy1 = (v if isinstance(v, ir.Value) else c64(v) for v in (oy0, oy1))

        def rows(cv=None):
            if p["OH"] < 2:
                with for_range(b, b.sub(oy1, oy0), "oy") as i:
                    self.dw_paired_rows(b, src, y, g, p, b.add(oy0, i), 1, cv)
                return
            steps = b.ashr(b.add(b.sub(oy1, oy0), c64(1)), c64(1))
            with for_range(b, steps, "oy2") as i:
                oy = b.add(oy0, b.shl(i, c64(1)))
                last = c64(p["OH"] - 2)
                oy = b.select(b.icmp_signed(">", oy, last), last, oy)
                self.dw_paired_rows(b, src, y, g, p, oy, 2, cv)

        if not p.get("cv_outer"):  # channel vectors inside each row step
            return rows()
        with for_range(b, p["Cs"] // 16, "cv") as cv:  # each vector's weights loaded once
            rows(cv)

    def dw_paired_rows(self, b, src, y, g, p, oy, nrows, cv=None):
        """Output rows oy .. oy + nrows - 1 (nrows 1 or 2), every channel vector (or the
        channel vector ``cv``, an i64 value). Each input
        column of a row group becomes one vector: 16 channels x (4 bytes, read as x ^ 0x80
        for int8, summed by VPDPBUSD) or x (2 int16, by VPDPWSSD)."""
        cs, kh, kw, size = p["Cs"], p["KH"], p["KW"], p["rowpairs"]
        groups, uses = dw_row_pairs(kh, p["sh"], p["dh"], nrows, size)
        table = g["wpairs" if nrows == 1 else "wpairs2"]
        ext = b.sext if p["signed"] else b.zext
        h16 = ir.VectorType(ir.IntType(16), 16)
        w32 = ir.VectorType(ir.IntType(16), 32)
        avx2 = size == 2 and p.get("isa") in ("avx2", "avxvnni")
        halves = avx2 and WEAVE_BYTES  # a column as two halves (weave_bytes)
        if avx2:  # VPMADDWD + VPADDD per half
            madd = self._intrinsic("llvm.x86.avx2.pmadd.wd", V8, [H16, H16])

            def dot(acc, col, w):
                col = col if halves else [vpart(b, col, i, 16) for i in range(2)]
                products = [b.call(madd, [col[i], vpart(b, w, i, 16)]) for i in range(2)]
                return b.add(acc, vconcat(b, *products))

            wty = w32
        elif p.get("isa") == "plain":  # VPMADDWD + VPADDD as generic IR, for any target
            wide = ir.VectorType(I32, 32)
            even = ir.Constant(V16, list(range(0, 32, 2)))
            odd = ir.Constant(V16, list(range(1, 32, 2)))

            def dot(acc, col, w):
                prod = b.mul(b.sext(col, wide), b.sext(w, wide))
                return b.add(acc, b.add(b.shuffle_vector(prod, prod, even),
                                        b.shuffle_vector(prod, prod, odd)))

            wty = w32
        else:
            fn = (self._intrinsic("llvm.x86.avx512.vpdpwssd.512", V16, [V16, w32, w32])
                  if size == 2 else
                  self._intrinsic("llvm.x86.avx512.vpdpbusd.512", V16, [V16, B64, B64]))
            wty = w32 if size == 2 else B64

            def dot(acc, col, w):
                return b.call(fn, [acc, col, w])

        step = 4
        zip_ = ir.Constant(V32, [i // 2 + (16 if i % 2 else 0) for i in range(32)])
        quad = ir.Constant(ir.VectorType(I32, 64),
                           [k * 16 + c for c in range(16) for k in range(4)])
        cat = ir.Constant(V32, list(range(32)))
        flip = kconst(B16, -128) if p["signed"] else None

        def column(ix, rows, o):
            """One input column of a row group (channels o ..), interleaved per channel."""
            parts = []
            for rel in rows:
                if rel is None:
                    parts.append(ir.Constant(B16, None) if size == 4 or halves
                                 else ir.Constant(h16, None))
                    continue
                iy = b.add(b.mul(oy, c64(p["sh"])), c64(rel))
                at = b.add(b.mul(b.add(b.mul(iy, c64(p["Ws"])), ix), c64(cs)), o)
                v = self.vload(b, src, at, B16)
                if size == 2 and not halves:
                    v = ext(v, h16)
                elif flip is not None and size == 4:
                    v = b.xor(v, flip)
                parts.append(v)
            if halves:
                return weave_bytes(b, parts[0], parts[1], ext)
            if size == 2:
                return b.shuffle_vector(parts[0], parts[1], zip_)
            low = b.shuffle_vector(parts[0], parts[1], cat)
            high = b.shuffle_vector(parts[2], parts[3], cat)
            return b.shuffle_vector(low, high, quad)

        tile_w = p.get("dw_tile", DW_TILE)
        full, rest = divmod(p["OW"], tile_w)
        def channels(cv):
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
                                                      rows, o)
                            for j in range(nrows):
                                if (j, q, kx) in ws:
                                    accs[j][r] = dot(accs[j][r], columns[col],
                                                        ws[j, q, kx])
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
                ox0 = b.mul(t, c64(tile_w))
                last = c64(p["OW"] - tile_w)
                tile(b.select(b.icmp_signed(">", ox0, last), last, ox0), tile_w)

        if cv is not None:
            return channels(cv)
        with for_range(b, cs // 16, "cv") as cv:
            channels(cv)

    def sat16(self, b, v):
        lo, hi = kconst(V16, -(1 << 15)), kconst(V16, (1 << 15) - 1)
        v = b.select(b.icmp_signed("<", v, lo), lo, v)
        return b.select(b.icmp_signed(">", v, hi), hi, v)


def weave_bytes(b, first, second, ext):
    """Two 16-channel byte vectors interleaved per channel and widened to int16 pairs, as two
    halves of 8 channels each: (first[c], second[c]) for c = 0..7, then c = 8..15 (the
    weights' pair layout). The bytes are interleaved before widening (VPUNPCKLBW /
    VPUNPCKHBW within 128 bits, then VPMOVSXBW), so no shuffle crosses 128-bit lanes; an empty
    inline asm keeps LLVM from merging the two halves back into one 256-bit shuffle (it
    otherwise builds them with two VPERMQ, a 256-bit VPUNPCKLBW and VEXTRACTI128)."""
    low = ir.Constant(V16, [i // 2 + (i % 2) * 16 for i in range(16)])
    high = ir.Constant(V16, [8 + i // 2 + (i % 2) * 16 for i in range(16)])
    keep = ir.InlineAsm(ir.FunctionType(B16, [B16]), "", "=x,0")
    return tuple(ext(b.call(keep, [b.shuffle_vector(first, second, m)]), H16)
                 for m in (low, high))
