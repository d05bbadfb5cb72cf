"""AMX tiles for the int8 vector convolution (``k_vconv`` on ``-isa=amx``, emit/int8/vconv.py)
and for dynamic quantization's int32 product (``k_dynq_dense``, emit/int8/dynq_dense.py): tiles 0-3
accumulate a block of 32 pixels (rows) x 32 channels (tile 2 * a + v: A tile a, B tile v),
tiles 4-5 hold the block's two 16-pixel x 64-byte slices of input, 6-7 the two 1 KB weight
slices (16 k-quads x 16 channels x 4); every tile is 16 rows of 64 bytes. The input's rows
are read where they lie when they start on cache lines, else from a copy that puts them there
(``amx_stage``)."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import I8, Family, c64, for_range, via
from partita.backends.llvm.kinds import Kind
from partita.backends.llvm.lower.vector_plan import by_channels

from .vector_types import PTR8, V16, vsplat

I32 = ir.IntType(32)
B64 = ir.VectorType(I8, 64)
# the most bytes a block's staged A rows take (amx_stage): R = 32 pixels of up to 1,024 bytes
AMX_STAGE_BYTES = 32 << 10


def _tile_config() -> list[int]:
    cfg = [0] * 64
    cfg[0] = 1  # palette 1
    for t in range(8):
        cfg[16 + 2 * t] = 64  # bytes per row (little-endian u16)
        cfg[48 + t] = 16  # rows
    return cfg


# every AMX kernel's one tile configuration: palette 1, eight tiles of 16 rows x 64 bytes (a
# split kernel's parts load it once, and their chunks' functions run on it: emit/emulate.py's
# stand-ins start such a function's tiles from it)
TILE_CONFIG = _tile_config()


def transpose16(b, rows) -> list:
    """16 vectors of 16 lanes transposed (lane i of vector j -> lane j of vector i): 4 stages
    of pairwise shuffles, each swapping the off-diagonal blocks of its size."""
    rows = list(rows)
    for size in (8, 4, 2, 1):
        for i in range(16):
            if i & size:
                continue
            lo = [c if c & size == 0 else 16 + c - size for c in range(16)]
            hi = [c + size if c & size == 0 else 16 + c for c in range(16)]
            a, c = rows[i], rows[i + size]
            rows[i] = b.shuffle_vector(a, c, ir.Constant(ir.VectorType(I32, 16), lo))
            rows[i + size] = b.shuffle_vector(a, c, ir.Constant(ir.VectorType(I32, 16), hi))
    return rows


class AMXTiles(Family):
    """The AMX blocks of the int8 vector convolution; its output stage is the vector family's."""

    # what it uses of the other kernel families and of the emit context
    conv_epilogue = via("tiles")
    dynq_store = via("dynq")
    dynq_value = via("dynq")

    def amx_cells(self, b, p):
        """The block's int32 sums as the output stage reads them, ``out[32][V]``."""
        return b.alloca(V16, size=p["R"] * p["V"])

    def amx_config(self):
        """The 64-byte tile configuration (TILE_CONFIG)."""
        name = "amx_tile_config"
        if name in self.module.globals:
            return self.module.globals[name]
        cfg = TILE_CONFIG
        ty = ir.ArrayType(I8, 64)
        g = ir.GlobalVariable(self.module, ty, name)
        g.initializer = ir.Constant(ty, cfg)
        g.global_constant, g.linkage, g.align = True, "internal", 64
        return g

    def amx_call(self, b, name, *args):
        types = [I8 if isinstance(a, int) else a.type for a in args]
        fn = self._intrinsic(f"llvm.x86.{name}", ir.VoidType(), types)
        return b.call(fn, [ir.Constant(I8, a) if isinstance(a, int) else a for a in args])

    def amx_enter(self, b) -> None:
        """Load the tile configuration (~55 ns with its release, measured: once per kernel or
        split part, not per chunk)."""
        self.amx_call(b, "ldtilecfg", b.bitcast(self.amx_config(), PTR8))

    def amx_leave(self, b) -> None:
        self.amx_call(b, "tilerelease")

    def amx_rows(self, b, src, y, g, p, out, bounds=None, configure: bool = True):
        """Blocks of 32 pixels (``bounds``: block indices [lo, hi)); the last block ends at the
        last pixel, overlapping its neighbour: the overlap's sums are computed twice, its
        outputs stored once. ``configure`` False: the caller has loaded the tile configuration
        (amx_enter) and releases it (a split kernel's part, around all its chunks)."""
        m, nvec = p["OW"], -(-p["OC"] // 16)
        blocks = -(-m // p["R"])
        pairs, odd = divmod(nvec, 2)
        lo, hi = bounds if bounds is not None else (c64(0), c64(blocks))
        clo, chi = c64(0), c64(pairs + odd)  # channel pairs (a last single vector if odd)
        if bounds is not None and by_channels(Kind.VCONV, p):
            (lo, hi), (clo, chi) = (c64(0), c64(blocks)), bounds
        stage = self.amx_stage(b, p)
        if configure:
            self.amx_enter(b)
        with for_range(b, b.sub(hi, lo), "mb") as i:
            start = b.mul(b.add(i, lo), c64(p["R"]))
            m0 = b.select(b.icmp_signed(">", start, c64(m - p["R"])), c64(m - p["R"]), start)
            skip = b.sub(start, m0)  # rows the previous block stored (the last block only)
            a = (src, m0, p["C"])  # the A tiles' bytes: base, first row, row stride
            if stage is not None:
                self.amx_stage_rows(b, src, stage, m0, p)
                a = (b.bitcast(stage, PTR8), c64(0), 64 * p["KB"])
            if pairs:
                with for_range(b, b.sub(self.clamp(b, chi, 0, pairs), clo), "nb") as j:
                    nb = b.mul(b.add(j, clo), c64(2))
                    self.amx_block(b, a, y, g, p, out, (m0, skip), nb, 2)
            if odd:
                with b.if_then(b.icmp_signed(">", chi, c64(pairs))):
                    self.amx_block(b, a, y, g, p, out, (m0, skip), c64(nvec - 1), 1)
        if configure:
            self.amx_leave(b)

    def amx_stage(self, b, p):
        """A block's A rows on cache lines (``amx_stage_rows``), or None: a tile row 64 bytes
        off a line costs two lines' loads, and TILELOADD then runs ~6x slower (16 rows x 64
        bytes: ~60 cycles instead of ~10 here; benchmarks/amx_loop_ceiling.py). So where the
        pixels' stride C is no multiple of 64, each block of R pixels is first copied to a
        buffer of R rows of KB x 64 bytes (in L1), which every channel pair's tiles then read."""
        size = p["R"] * 64 * p["KB"]
        if p["C"] % 64 == 0 or size > AMX_STAGE_BYTES:
            return None
        stage = b.alloca(B64, size=size // 64)
        stage.align = 64
        return stage

    def amx_stage_rows(self, b, src, stage, m0, p):
        """Pixels m0 .. m0 + R of ``src`` (C bytes apart) into ``stage`` (64 x KB bytes apart):
        KB x 64 bytes a pixel (the bytes past the pixel's C meet zero weights), one unaligned
        64-byte load and one aligned store each."""
        c, kb = p["C"], p["KB"]
        with for_range(b, p["R"], "amx_stage") as r:
            at = b.mul(b.add(m0, r), c64(c))
            for j in range(kb):
                value = b.load(b.gep(src, [b.add(at, c64(64 * j))], source_etype=I8),
                               typ=B64, align=1)
                b.store(value, b.gep(stage, [b.add(b.mul(r, c64(kb)), c64(j))],
                                     source_etype=B64), align=64)

    def amx_load_a(self, b, a_rows, kb) -> None:
        """Tiles 4 and 5: the block's two 16-pixel x 64-byte slices ``kb`` of A, ``a_rows`` =
        (base, first row, stride in bytes)."""
        src, a0, c = a_rows
        at = b.add(b.mul(a0, c64(c)), b.mul(kb, c64(64)))
        for a in range(2):
            ptr = b.gep(src, [b.add(at, c64(16 * c * a))], source_etype=I8)
            self.amx_call(b, "tileloadd64", 4 + a, ptr, c64(c))

    def amx_block(self, b, a_rows, y, g, p, out, rows, nb, vecs):
        """32 pixels from m0 x ``vecs`` x 16 channels from 16 * nb: sums over the 64-deep
        slices into tiles, stored to ``out``, then the output stage for the pixels from
        m0 + skip (``rows`` = (m0, skip)); the A tiles read ``a_rows`` (amx_load_a)."""
        (m0, skip), kb_count = rows, p["KB"]
        dot = "tdpbssd" if p["signed"] else "tdpbusd"
        for a in range(2):
            for v in range(vecs):
                self.amx_call(b, "tilezero", 2 * a + v)
        with for_range(b, kb_count, "kb") as kb:
            self.amx_load_a(b, a_rows, kb)
            for v in range(vecs):
                slab = b.add(b.mul(b.add(nb, c64(v)), c64(kb_count)), kb)
                ptr = b.gep(g["weights"], [b.mul(slab, c64(1024))], source_etype=I8)
                self.amx_call(b, "tileloadd64", 6 + v, ptr, c64(64))
            for a in range(2):
                for v in range(vecs):
                    self.amx_call(b, dot, 2 * a + v, 4 + a, 6 + v)
        for a in range(2):
            for v in range(vecs):
                ptr = b.gep(out, [c64((16 * a * vecs + v) * 64)], source_etype=I8)
                self.amx_call(b, "tilestored64", 2 * a + v, ptr, c64(vecs * 64))
        tile = (c64(0), m0, b.mul(nb, c64(16)), p["R"], vecs)
        # every block but a row's last, overlapping one stores all its rows: the unrolled
        # epilogue (channel constants loaded once, a pixel's vectors narrowed together); the
        # last one the row loop from its first own row
        with b.if_else(b.icmp_signed("==", skip, c64(0))) as (whole, last):
            with whole:
                self.conv_epilogue(b, y, g, p, out, tile, corr=True)
            with last:
                self.conv_epilogue(b, y, g, p, out, tile, corr=True, skip=skip)

    def amx_dense_rows(self, b, args, p, epi=None):
        """DYNQ_DENSE's outputs of weight rows [lo, hi) (multiples of 16: whole B tiles) for
        every data row (``args`` = ws, y, w, zw, cz, zx, lo, hi as ``_dynq_rows``): blocks of
        R (32, or 16 when M < 32) rows x 32 weight rows (a last 16 when hi - lo is odd in
        16s), TDPBUSD over 64-byte slices of x' (ws, rows of Kp bytes) and of the weights (1 KB
        slabs, lower/dynamic_int8.py), then out = S - zw[n] rowsum[m] - zx' cz[n] in <16 x i32>
        lanes (``epi``: through the fused epilogue, dynq_dense.py ``dynq_store``); the last row
        block ends at row M, overlapping its neighbour (stored once)."""
        ws, y, w, zw, cz, zx, lo, hi = args
        m_, kp, r_ = p["M"], p["Kp"], p["R"]
        kb_count = kp // 64
        sums = b.gep(ws, [c64(m_ * kp)], source_etype=I8)
        out = b.alloca(V16, size=r_ * 2)
        zxv = vsplat(b, zx)
        self.amx_call(b, "ldtilecfg", b.bitcast(self.amx_config(), PTR8))
        width = b.sub(hi, lo)
        pairs = b.udiv(width, c64(32))

        def blocks(n0, vecs):
            with for_range(b, -(-m_ // r_), "mb") as mb:
                start = b.mul(mb, c64(r_))
                m0 = b.select(b.icmp_signed(">", start, c64(m_ - r_)), c64(m_ - r_), start)
                self._amx_dense_block(b, (ws, w, sums, y, zw, cz, zxv, epi), p, out, m0,
                                      b.sub(start, m0), n0, vecs, kb_count)

        with for_range(b, pairs, "nb") as j:
            blocks(b.add(lo, b.mul(j, c64(32))), 2)
        with b.if_then(b.icmp_unsigned("!=", b.urem(width, c64(32)), c64(0))):
            blocks(b.sub(hi, c64(16)), 1)
        self.amx_call(b, "tilerelease")

    def _amx_dense_block(self, b, ptrs, p, out, m0, skip, n0, vecs, kb_count):
        ws, w, sums, y, zw, cz, zxv, epi = ptrs
        kp, r_ = p["Kp"], p["R"]
        tiles_a = r_ // 16
        for a in range(tiles_a):
            for v in range(vecs):
                self.amx_call(b, "tilezero", 2 * a + v)
        slab0 = b.mul(b.udiv(n0, c64(16)), c64(kb_count))
        with for_range(b, kb_count, "kb") as kb:
            for a in range(tiles_a):
                at = b.add(b.mul(b.add(m0, c64(16 * a)), c64(kp)), b.mul(kb, c64(64)))
                self.amx_call(b, "tileloadd64", 4 + a, b.gep(ws, [at], source_etype=I8),
                              c64(kp))
            for v in range(vecs):
                slab = b.add(b.add(slab0, c64(v * kb_count)), kb)
                ptr = b.gep(w, [b.mul(slab, c64(1024))], source_etype=I8)
                self.amx_call(b, "tileloadd64", 6 + v, ptr, c64(64))
            for a in range(tiles_a):
                for v in range(vecs):
                    self.amx_call(b, "tdpbusd", 2 * a + v, 4 + a, 6 + v)
        for a in range(tiles_a):
            for v in range(vecs):
                ptr = b.gep(out, [c64((16 * a * vecs + v) * 64)], source_etype=I8)
                self.amx_call(b, "tilestored64", 2 * a + v, ptr, c64(vecs * 64))
        def sums_of(r, v):  # row r's int32 outputs of vector v: S - zw rowsum - zx' cz
            rsv = vsplat(b, b.load(b.gep(sums, [b.add(m0, r)], source_etype=I32), typ=I32))
            n = b.add(n0, c64(16 * v))
            acc = b.load(b.gep(out, [b.add(b.mul(r, c64(vecs)), c64(v))], source_etype=V16),
                         typ=V16, align=4)
            zwv = b.load(b.gep(zw, [n], source_etype=I32), typ=V16, align=4)
            czv = b.load(b.gep(cz, [n], source_etype=I32), typ=V16, align=4)
            return b.sub(b.sub(acc, b.mul(zwv, rsv)), b.mul(zxv, czv)), n

        if p.get("out_perm", (None,))[0] == "heads_t":  # K's [H][S]: whole columns of 16 rows
            self._amx_heads_t(b, p, sums_of, y, epi, m0, vecs)  # (the overlap stored again:
            return                                                # the same values)
        with for_range(b, b.sub(c64(r_), skip), "er") as i:
            r = b.add(skip, i)
            for v in range(vecs):
                s, n = sums_of(r, v)
                self.dynq_store(b, p, s, b.add(m0, r), n, y, epi)

    def _amx_heads_t(self, b, p, sums_of, y, epi, m0, vecs):
        """A block's outputs into K's [H][S] heads layout (lower/dynq_epilogue.py "heads_t"):
        per 16 rows and vector, the 16 epilogue vectors transposed (transpose16) and stored
        a column (16 rows) at a time."""
        h, m_ = p["out_perm"][1], p["M"]
        for g in range(p["R"] // 16):
            for v in range(vecs):
                values = []
                for j in range(16):  # n: the vector's first column, the same for each row
                    r = c64(16 * g + j)
                    s, n = sums_of(r, v)
                    values.append(self.dynq_value(b, p, s, b.add(m0, r), n, epi))
                cols = transpose16(b, values)
                head, col = b.udiv(n, c64(h)), b.urem(n, c64(h))
                base = b.add(b.mul(head, c64(m_ * h)), b.add(m0, c64(16 * g)))
                for i, vec in enumerate(cols):
                    at = b.add(base, b.mul(b.add(col, c64(i)), c64(m_)))
                    b.store(vec, b.gep(y, [at], source_etype=ir.FloatType()), align=4)
