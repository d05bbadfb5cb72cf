"""The vector kernels' IR (plans in vector_plan.py): a register tile of 16 x int32 accumulators per
(pixel, 16 output channels), fed by ``vpdpbusd`` (VNNI), or without VNNI exactly by
``vpmaddubsw`` on weights whose every pair is safe plus a sparse second product for the rest
(exact_avx2_plan.ubsw_split), by ``vpmaddubsw`` on the weights' two nibbles into int16 sums widened
every few k-steps (nibble_split), or by ``vpmaddwd`` of int16 weights into int32 pair
accumulators; or by ``vpmaddubsw`` alone where it is the semantics (the int16 pair saturation
ONNX Runtime and PyTorch have there); the output stage is vector_output_stage.py, depthwise
vdepthwise.py, the vector types vector_types.py."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import I8, I32, I64, Family, c64, for_range, via
from partita.backends.llvm.kinds import Kind, emits
from partita.backends.llvm.lower.vector_plan import by_channels, channel_groups
from partita.backends.llvm.runtime.chunks import chunk_size, split_work

from .vector_types import (
    B64,
    H16,
    PTR8,
    Q32,
    V8,
    V16,
    V32,
    W64,
    kconst,
    vconcat,
    vpart,
    vsplat,
)

# a pointwise convolution's single row: channel groups outer, pixel tiles inner (False: pixel
# tiles outer, every channel group per tile)
CHANNELS_OUTER = True
# the sign kernel leaves out the products of a channel vector's upper half where it is padding
# (OC % 16 in 1..8: a 24-channel layer computes 24 channels, not 32; _live_halves)
SKIP_PADDING_HALF = True
# -threads=2: an input of at least this many bytes that the kernel packs (pack_input: MobileNetV2's
# 224 x 224 x 3 image into 4-byte slots) is packed by rows in chunks on both threads before its
# own split (a second hand-off), not on the driver's thread while the worker waits
PACK_SPLIT_BYTES = 1 << 16

class VectorKernels(Family):
    """A kernel family: ``k_vconv`` (its output stage is vector_output_stage.OutputStage,
    ``k_vdw`` vdepthwise.DepthwiseKernels)."""

    # what it uses of the other kernel families (through the emit context)
    split_chunks = via("pool")
    vrequant = via("vstage")
    conv_epilogue = via("tiles")
    amx_cells = via("amx")
    amx_rows = via("amx")
    amx_enter = via("amx")
    amx_leave = via("amx")
    pack_input = via("pack")
    pack_rows = via("pack")
    pack_zero = via("pack")
    nibble_steps = via("exact_avx2")
    fix_steps = via("exact_avx2")
    sign_step = via("exact_avx2")

    def vglobals(self, k):
        return self.cargs

    def vload(self, b, ptr, byte_offset, ty):
        return b.load(b.gep(ptr, [byte_offset], source_etype=I8), typ=ty, align=1)

    def vstore(self, b, value, y, index, o, oc):
        """Store 16 bytes at y[index..]; only the lanes below ``oc - o`` at the channel tail
        (a masked store: one VMOVDQU8 with AVX-512)."""
        ptr = b.gep(y, [index], source_etype=I8)
        if oc % 16 == 0:  # no tail: every vector is whole
            b.store(value, ptr, align=1)
            return
        live = b.sub(c64(oc), o)
        lanes = ir.Constant(ir.VectorType(I32, 16), list(range(16)))
        mask = b.icmp_signed("<", lanes, vsplat(b, b.trunc(live, I32), ir.VectorType(I32, 16)))
        fn = self._intrinsic("llvm.masked.store.v16i8.p0", ir.VoidType(),
                             [value.type, PTR8, I32, mask.type])
        if oc % 16 != 1:
            b.call(fn, [value, ptr, ir.Constant(I32, 1), mask])
            return
        # A one-lane tail is stored as one byte: LLVM 22's x86 back end emits a masked store
        # of a truncated <16 x i32> whose mask has one lane as a 4-byte VMOVD/VMOVSS on
        # AVX-512 targets, three bytes past the lane (past the end of the output at its last
        # pixel). test_llvm_tail_store.py holds both.
        with b.if_else(b.icmp_signed("==", live, c64(1))) as (one, other):
            with one:
                b.store(b.extract_element(value, ir.Constant(I32, 0)), ptr, align=1)
            with other:
                b.call(fn, [value, ptr, ir.Constant(I32, 1), mask])

    def prefetch_lines(self, b, ptr, size: int, locality: int = 3):
        """Software prefetches of the ``size`` bytes at ``ptr``, one per 64-byte line, in order."""
        prefetch = self.module.declare_intrinsic(
            "llvm.prefetch.p0", (), ir.FunctionType(ir.VoidType(), [PTR8, I32, I32, I32]))
        with for_range(b, -(-size // 64), "line") as line:
            at = b.gep(ptr, [b.mul(line, c64(64))], source_etype=I8)
            b.call(prefetch, [at, ir.Constant(I32, 0), ir.Constant(I32, locality),
                              ir.Constant(I32, 1)])

    # -- dot products ------------------------------------------------------------------
    def dot4(self, b, acc, a, w, isa, pairs=False):
        """acc + sum over 4 byte pairs of u8(a) * s8(w), per 32-bit lane: VPDPBUSD (VNNI; two
        256-bit ones with AVX-VNNI), or
        with ``pairs`` adjacent products summed into an int16 with saturation first (VPMADDUBSW,
        then VPMADDWD to widen): the semantics, or exact where no weight pair can saturate
        (exact_avx2_plan.ubsw_split). Other exact sums without VNNI take ``madd_wide`` or
        ``nibble_steps``."""
        if isa == "vnni" and not pairs:
            fn = self.module.declare_intrinsic(
                "llvm.x86.avx512.vpdpbusd.512", (), ir.FunctionType(V16, [V16, B64, B64])
            )
            return b.call(fn, [acc, b.bitcast(a, B64), b.bitcast(w, B64)])
        if isa == "avxvnni" and not pairs:  # two VEX VPDPBUSDs (AVX-VNNI) on the halves
            fn = self._intrinsic("llvm.x86.avx512.vpdpbusd.256", V8, [V8, Q32, Q32])
            a, w = b.bitcast(a, B64), b.bitcast(w, B64)
            halves = [b.call(fn, [vpart(b, acc, i, 8), vpart(b, a, i, 32), vpart(b, w, i, 32)])
                      for i in range(2)]
            return vconcat(b, halves[0], halves[1])
        if not pairs:
            raise ValueError("exact AVX2 dot products are madd_wide's (int16 weights)")
        a, w = b.bitcast(a, B64), b.bitcast(w, B64)
        if isa == "plain":  # VPMADDUBSW + VPMADDWD's sums as generic IR, for any target
            wide = ir.VectorType(I32, 64)
            prod = b.mul(b.zext(a, wide), b.sext(w, wide))
            pair = b.add(_lanes(b, prod, 0, 32), _lanes(b, prod, 1, 32))
            lo, hi = kconst(V32, -(1 << 15)), kconst(V32, (1 << 15) - 1)
            pair = b.select(b.icmp_signed("<", pair, lo), lo, pair)
            pair = b.select(b.icmp_signed(">", pair, hi), hi, pair)
            return b.add(acc, b.add(_lanes(b, pair, 0, 16), _lanes(b, pair, 1, 16)))
        madd = self._intrinsic("llvm.x86.avx2.pmadd.wd", V8, [H16, H16])
        ubsw = self._intrinsic("llvm.x86.avx2.pmadd.ub.sw", H16, [Q32, Q32])
        ones = ir.Constant(H16, [1] * 16)
        halves = [b.call(madd, [b.call(ubsw, [vpart(b, a, i, 32), vpart(b, w, i, 32)]), ones])
                  for i in range(2)]
        return b.add(acc, vconcat(b, halves[0], halves[1]))

    def widened_splat(self, b, a):
        """The 4 activation bytes of a 32-bit scalar, zero-extended to int16, in every 64-bit
        group of a <64 x i16> vector."""
        four = b.zext(b.bitcast(a, ir.VectorType(I8, 4)), ir.VectorType(ir.IntType(16), 4))
        return b.bitcast(vsplat(b, b.bitcast(four, I64), ir.VectorType(I64, 16)), W64)

    def madd_wide(self, b, acc, a16, w16, isa="avx2"):
        """acc (<32 x i32> pair sums) + VPMADDWD of int16 activations and weights; ``isa``
        plain: the same sums as generic IR (products of adjacent lanes, added in int32)."""
        if isa == "plain":
            wide = ir.VectorType(I32, 64)
            prod = b.mul(b.sext(a16, wide), b.sext(w16, wide))
            even = b.shuffle_vector(prod, prod, ir.Constant(V32, list(range(0, 64, 2))))
            odd = b.shuffle_vector(prod, prod, ir.Constant(V32, list(range(1, 64, 2))))
            return b.add(acc, b.add(even, odd))
        madd = self._intrinsic("llvm.x86.avx2.pmadd.wd", V8, [H16, H16])
        q = [b.call(madd, [vpart(b, a16, i, 16), vpart(b, w16, i, 16)]) for i in range(4)]
        return b.add(acc, vconcat(b, vconcat(b, q[0], q[1]), vconcat(b, q[2], q[3])))

    # -- convolution / dense ----------------------------------------------------------------------
    @emits(Kind.VCONV)
    def k_vconv(self, k):
        """The convolution; with ``threads`` 2 the output rows (a pointwise convolution's
        pixel tiles, AMX blocks or channel groups) in chunks that this thread and the driver's
        worker claim one at a time (split_chunks)."""
        p = k.params

        def rows(rb, args, g):
            if p["isa"] == "amx":
                return self.amx_rows(rb, args[0], args[1], g, p, self.amx_cells(rb, p),
                                     (args[-2], args[-1]), configure=False)
            self.conv_rows(rb, args[0], args[1], g, p, *self.conv_cells(rb, p),
                           (args[-2], args[-1]))

        if self.range_mode(k) == "body":  # the driver's module has the rest
            return self.ranged(k, self.constant_names(k), rows)
        fn, b, args = self.function(k, len(k.inputs))
        x, y = args[0], args[-1]
        amx = p["isa"] == "amx"
        accs, out = (None, self.amx_cells(b, p)) if amx else self.conv_cells(b, p)
        if p.get("prefetch") and not (p.get("threads", 1) > 1 and by_channels(k.kind, p)):
            self.prefetch_lines(b, self.vglobals(k)["weights"], p["prefetch"])
        src = x
        if p["pack"]:
            src = args[1]
            if p.get("threads", 1) > 1 and p["H"] * p["W"] * p["C"] >= PACK_SPLIT_BYTES:
                izp = self.vglobals(k)["izp"]  # the rows packed on both threads, first
                self.split_chunks(
                    k, b, [x, src, izp], p["H"], chunk_size(p["H"]),
                    lambda eb, ps, lo, hi: self.pack_rows(
                        eb, ps[0], ps[1], p, self.pack_zero(eb, ps[2], p), lo, hi),
                    tag="_pack")
            else:
                self.pack_input(b, x, src, p)
        if p.get("threads", 1) < 2:
            if amx:
                self.amx_rows(b, src, y, self.vglobals(k), p, out, None)
            else:
                self.conv_rows(b, src, y, self.vglobals(k), p, accs, out, None)
            b.ret_void()
            return fn
        names = list(self.vglobals(k))
        pointers = [src, y, *(self.vglobals(k)[n] for n in names)]
        # one function for any range of rows (pixel tiles, AMX blocks or channel groups),
        # called by both halves' wrappers
        ranged = self.ranged(k, names, rows)
        if by_channels(k.kind, p):
            total = channel_groups(p)
        else:
            total = (-(-p["OW"] // p["R"]) if amx else
                     p["OH"] if p["OH"] > 1 else p["OW"] // p["R"])
        size = chunk_size(total, work=split_work(k), isa=p["isa"])
        self.split_chunks(k, b, pointers, total, size,
                          lambda eb, ps, lo, hi: eb.call(ranged, [*ps, lo, hi]), tag="_units",
                          around=(lambda eb, ps, back: self.amx_enter(eb), self.amx_leave)
                          if amx else None)
        b.ret_void()
        return fn

    def ranged(self, k, names, build) -> ir.Function:
        """``void {name}_range(src, y, constants..., lo, hi)``: a split kernel's code for any
        range of rows, ``build(builder, args, constants by name)``; declared only when another
        module defines it (kernels.range_mode), else defined (internal when it is all here)."""
        ty = ir.FunctionType(ir.VoidType(), [PTR8] * (2 + len(names)) + [I64, I64])
        fn = ir.Function(self.module, ty, f"{k.name}_range")
        mode = self.range_mode(k)
        if mode == "declare":
            return fn
        if mode == "full":
            fn.linkage = "internal"
        fn.attributes.add("noinline")
        for arg in fn.args[:-2]:  # as the kernel's own (kernels.function): disjoint buffers
            arg.add_attribute("noalias")
        rb = ir.IRBuilder(fn.append_basic_block("entry"))
        args = list(fn.args)
        build(rb, args, dict(zip(names, args[2:-2])))
        rb.ret_void()
        return fn

    def conv_cells(self, b, p):
        """The accumulator tile and the spill slots, allocated where ``b`` stands (a function's
        entry block, so that LLVM keeps the tile in registers)."""
        acc_type = V32 if p.get("wide") else V16
        accs = [[b.alloca(acc_type) for _ in range(p["V"])] for _ in range(p["R"])]
        return accs, b.alloca(V16, size=p["R"] * p["V"])

    def conv_rows(self, b, src, y, g, p, accs, out, bounds=None):
        """Every tile, or (``bounds`` (lo, hi), i64 values) the output rows [lo, hi), or for a
        pointwise convolution's single row its full pixel tiles [lo, hi) and the tail tile with
        the last of them."""
        ow, nvec = p["OW"], -(-p["OC"] // 16)
        r_full, r_tail = divmod(ow, p["R"])
        g_full, v_tail = divmod(nvec, p["V"])
        rows_split = p["OH"] > 1
        groups = None  # a channel split's [lo, hi) of channel groups (vector_plan.by_channels)
        if bounds is not None and by_channels(Kind.VCONV, p):
            groups, bounds = bounds, None
        lo, hi = bounds if bounds is not None else (c64(0), c64(p["OH"] if rows_split else r_full))
        if not rows_split and groups is None and p["OH"] == 1 and CHANNELS_OUTER:
            return self.conv_row_by_channels(b, src, y, g, p, accs, out, (lo, hi), r_full)
        oh0, ohn = (lo, b.sub(hi, lo)) if rows_split else (c64(0), c64(p["OH"]))
        t0, tn = (c64(0), c64(r_full)) if rows_split else (lo, b.sub(hi, lo))
        with for_range(b, ohn, "oy") as i:
            oy = b.add(i, oh0)
            if r_full:
                with for_range(b, tn, "ot") as t:
                    ox0 = b.mul(b.add(t, t0), c64(p["R"]))
                    self.conv_group(b, src, y, g, p, accs, out, (oy, ox0, p["R"]), groups)
            if r_tail:  # the tail tile: in every row, or with the last of the pixel tiles
                base = c64(r_full * p["R"])
                if rows_split or groups is not None:
                    self.conv_group(b, src, y, g, p, accs, out, (oy, base, r_tail), groups)
                else:
                    with b.if_then(b.icmp_signed("==", hi, c64(r_full))):
                        self.conv_group(b, src, y, g, p, accs, out, (oy, base, r_tail))

    def conv_row_by_channels(self, b, src, y, g, p, accs, out, bounds, r_full):
        """A single row's pixel tiles [lo, hi) (the tail tile with the last of them), channel
        groups outer: a group's weight panel stays in L1 across the tiles, where the pixel-outer
        order streams every panel from L2 once per tile."""
        (lo, hi), nvec, r_tail = bounds, -(-p["OC"] // 16), p["OW"] % p["R"]
        g_full, v_tail = divmod(nvec, p["V"])

        def over_tiles(o0, vecs):
            with for_range(b, b.sub(hi, lo), "ot") as t:
                ox0 = b.mul(b.add(t, lo), c64(p["R"]))
                self.conv_tile(b, src, y, g, p, accs, out, (c64(0), ox0, o0, p["R"], vecs))
            if r_tail:
                with b.if_then(b.icmp_signed("==", hi, c64(r_full))):
                    self.conv_tile(b, src, y, g, p, accs, out,
                                   (c64(0), c64(r_full * p["R"]), o0, r_tail, vecs))

        # the last full group by itself where its last vector's upper half is padding (a
        # constant o0: conv_tile leaves that half's products out, _live_halves)
        peel = 1 if g_full and not v_tail and 0 < p["OC"] % 16 <= 8 else 0
        if g_full - peel:
            with for_range(b, g_full - peel, "og") as og:
                over_tiles(b.mul(og, c64(16 * p["V"])), p["V"])
        if peel:
            over_tiles(c64(16 * p["V"] * (g_full - 1)), p["V"])
        if v_tail:
            over_tiles(c64(16 * p["V"] * g_full), v_tail)

    def conv_group(self, b, src, y, g, p, accs, out, at, groups=None):
        """The tiles of ``rows`` pixels at (oy, ox0) (``at``) over every output channel vector,
        or over the channel groups [lo, hi) of ``groups`` (groups of V vectors, the last one
        the narrower tail if there is one)."""
        (oy, ox0, rows), nvec = at, -(-p["OC"] // 16)
        g_full, v_tail = divmod(nvec, p["V"])
        lo, hi = groups if groups is not None else (c64(0), c64(g_full + (v_tail > 0)))
        if groups is None and g_full and not v_tail and 0 < p["OC"] % 16 <= 8:
            # the last group with a constant o0 (its padding half skipped, _live_halves)
            if g_full > 1:
                with for_range(b, g_full - 1, "og") as og:
                    o0 = b.mul(og, c64(16 * p["V"]))
                    self.conv_tile(b, src, y, g, p, accs, out, (oy, ox0, o0, rows, p["V"]))
            o0 = c64(16 * p["V"] * (g_full - 1))
            self.conv_tile(b, src, y, g, p, accs, out, (oy, ox0, o0, rows, p["V"]))
            return
        if g_full:
            with for_range(b, b.sub(self.clamp(b, hi, 0, g_full), lo), "og") as og:
                o0 = b.mul(b.add(og, lo), c64(16 * p["V"]))
                self.conv_tile(b, src, y, g, p, accs, out, (oy, ox0, o0, rows, p["V"]))
        if v_tail:
            with b.if_then(b.icmp_signed(">", hi, c64(g_full))):
                o0 = c64(16 * p["V"] * g_full)
                self.conv_tile(b, src, y, g, p, accs, out, (oy, ox0, o0, rows, v_tail))

    def conv_tile(self, b, src, y, g, p, accs, out, tile):
        oy, ox0, o0, rows, vecs = tile
        wide = p.get("wide", False)
        # the accumulators start from the channels' constant term (corr), the wide pair sums
        # from zero (corr is added after their reduction)
        starts = ([ir.Constant(V32, None)] * vecs if wide else
                  [self.vload(b, g["corr"], b.mul(b.add(o0, c64(16 * v)), c64(4)), V16)
                   for v in range(vecs)])
        for r in range(rows):
            for v in range(vecs):
                b.store(starts[v], accs[r][v])
        c4 = p["Cs"] // 4
        tile_at = (oy, ox0, rows, vecs, _live_halves(p, o0, vecs))
        # int8 -> uint8 as x ^ 0x80 on the scalar (a vector xor of the splat sends LLVM 22's
        # DAG combiner into a loop when it feeds vpdpbusd)
        # (the sign kernel reads signed bytes: it flips uint8 input instead)
        # (a "flipped" packed copy holds the flipped bytes already: vector_plan.FLIP_INPUT)
        flip = (ir.Constant(I32, 0x80808080 - (1 << 32))
                if p["signed"] != bool(p.get("sign")) and not p.get("flipped") else None)
        # bytes per packed weight (the wide kernel's weights stay bytes with "w8")
        size = 2 if (wide and not p.get("w8")) or p.get("nibbles") else 1
        # the panel of this tile's channel group (vector_plan._panels)
        panel = b.udiv(o0, c64(16 * p["V"]))
        start = b.mul(panel, c64(p["KH"] * p["KW"] * c4 * p["V"] * 64 * size))
        if p.get("nibbles"):
            self.nibble_steps(b, src, g, p, accs, (oy, ox0, rows, vecs), start, flip)
        else:
            self.main_steps(b, src, g, p, accs, tile_at, start, flip)
        if p.get("fix"):  # the unsafe pairs' remainders (exact_avx2_plan.ubsw_split)
            self.fix_steps(b, src, g, p, accs, (oy, ox0, rows, vecs), panel, flip)
        for r in range(rows):
            for v in range(vecs):
                slot = b.gep(out, [c64(r * vecs + v)], source_etype=V16)
                acc = b.load(accs[r][v], typ=V32 if wide else V16)
                if wide:  # the pair sums of each lane's 4 products, added once
                    even = b.shuffle_vector(acc, acc, ir.Constant(V16, list(range(0, 32, 2))))
                    odd = b.shuffle_vector(acc, acc, ir.Constant(V16, list(range(1, 32, 2))))
                    acc = b.add(even, odd)
                b.store(acc, slot)
        self.conv_epilogue(b, y, g, p, out, (oy, ox0, o0, rows, vecs), corr=wide)

    def main_steps(self, b, src, g, p, accs, tile, start, flip):
        """Every k-step of a tile (taps, then channel quads) against its packed weights."""
        vecs, c4, wide = tile[3], p["Cs"] // 4, p.get("wide", False)
        w8 = wide and p.get("w8", False)  # int8 weights sign-extended here, not in the plan
        size = 2 if wide and not w8 else 1
        with (
            for_range(b, p["KH"], "ky") as ky,
            for_range(b, p["KW"], "kx") as kx,
            for_range(b, c4, "c4") as c,
        ):
            tap = b.add(b.mul(ky, c64(p["KW"])), kx)
            wrow = b.add(start, b.mul(b.add(b.mul(tap, c64(c4)), c), c64(vecs * 64 * size)))
            ws = [self.vload(b, g["weights"], b.add(wrow, c64(64 * size * v)),
                             W64 if wide and not w8 else B64 if w8 else V16)
                  for v in range(vecs)]
            ws = [b.sext(w, W64) for w in ws] if w8 else ws
            self.mac_step(b, src, p, accs, tile, (ky, kx, c), ws, flip)

    def mac_step(self, b, src, p, accs, tile, step, ws, flip):
        """One k-step of a tile: the 4 input bytes at (ky, kx, channel quad c) of each of the
        tile's pixels against the step's weight vectors ``ws``."""
        (oy, ox0, rows, vecs, *halves), (ky, kx, c) = tile, step
        wide = p.get("wide", False)
        pairs = p.get("pairs", False) or p.get("ubsw", False)
        iy = b.add(b.mul(oy, c64(p["sh"])), b.mul(ky, c64(p["dh"])))
        ix0 = b.add(b.mul(ox0, c64(p["sw"])), b.mul(kx, c64(p["dw"])))
        row = b.mul(iy, c64(p["Ws"]))
        for r in range(rows):
            pix = b.add(row, b.add(ix0, c64(r * p["sw"])))
            at = b.add(b.mul(pix, c64(p["Cs"])), b.mul(c, c64(4)))
            a = self.vload(b, src, at, I32)
            a = a if flip is None else b.xor(a, flip)
            if wide:
                a = self.widened_splat(b, a)
                for v in range(vecs):
                    b.store(self.madd_wide(b, b.load(accs[r][v], typ=V32), a, ws[v],
                                           p["isa"]), accs[r][v])
                continue
            a = vsplat(b, a)
            if p.get("sign"):
                self.sign_step(b, accs[r], a, ws, halves[0] if halves else None)
                continue
            for v in range(vecs):
                b.store(self.dot4(b, b.load(accs[r][v], typ=V16), a, ws[v], p["isa"], pairs),
                        accs[r][v])


def _live_halves(p, o0, vecs: int):
    """Per channel vector of a tile at the constant first channel ``o0``, how many of its two
    8-channel halves hold output channels (2 or 1; a vector past OC keeps 1); None where o0 is
    not a constant or no vector has an empty upper half (the sign kernel skips such halves'
    products: a layer of 24 channels computes 24, not 32)."""
    if (not SKIP_PADDING_HALF or not isinstance(o0, ir.Constant) or p["OC"] % 16 == 0
            or p["OC"] % 16 > 8):
        return None
    live = [p["OC"] - (o0.constant + 16 * v) for v in range(vecs)]
    halves = [2 if n > 8 else 1 for n in live]
    return halves if 1 in halves else None


def _lanes(b, vec, first: int, count: int):
    """Lanes first, first + 2, ... of ``vec`` (``count`` of them): the even or odd products."""
    return b.shuffle_vector(vec, vec, ir.Constant(ir.VectorType(I32, count),
                                                  list(range(first, 2 * count, 2))))
