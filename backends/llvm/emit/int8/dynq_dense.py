"""Dynamic quantization's int32 product (DYNQ_DENSE; lower/dynamic_int8.py has the algebra):
x' (x as uint8) packed into rows of Kp bytes with their int32 sums, then the products by
``isa``: AMX tiles (amx.py), VNNI's register tile (vnni_dense.py, param ``tile``), or the
reduction form here (register tiles of DYNQ_TILE data x weight rows over 32 / 64-byte steps of
K, each accumulator reduced once: VPDPBUSD, VPMADDUBSW's saturating pairs, VPMADDWD of
widened operands, or generic IR on -isa=plain); with ``threads`` 2 the weight rows in chunks of
whole tiles that this thread and the driver's worker claim (runtime/threads.py split_chunks)."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import F32, I8, I32, I64, Family, c64, for_range, via
from partita.backends.llvm.emit.float import ewise_vec
from partita.backends.llvm.kinds import Kind, emits
from partita.backends.llvm.lower.dynamic_int8 import scratch_bytes

from .vnni_dense import tile_columns

Q32I = ir.VectorType(I8, 32)  # one AVX2 register of bytes
H16I = ir.VectorType(ir.IntType(16), 16)  # ... of int16
V8I = ir.VectorType(I32, 8)  # ... of int32
DYNQ_TILE = (2, 4)  # the reduction form's register tile: data rows x weight rows (8 accumulators)
DYNQ_DENSE_CHUNKS = 12  # chunks of a split DYNQ_DENSE's weight rows (whole tiles each)


def dynq_dense_chunk(n: int, isa: str = "", tile: int = 0) -> int:
    """Weight rows per chunk of a split DYNQ_DENSE: whole tiles (``isa`` amx: AMX blocks of 32
    weight rows; ``tile`` lanes: VNNI's register tile, 64 in zmm, 16 in ymm), about
    DYNQ_DENSE_CHUNKS chunks (BERT's 768 rows: 12 chunks of 64)."""
    unit = 32 if isa == "amx" else tile_columns(tile) if tile else DYNQ_TILE[1]
    tiles = -(-n // unit)
    return max(1, -(-tiles // DYNQ_DENSE_CHUNKS)) * unit


class DynqDenseKernels(Family):
    """The DYNQ_DENSE kernel: packing, the reduction form, the dispatch to the tiles."""

    # what it uses of the other kernel families (through the emit context)
    load_value = via("floats")
    split_chunks = via("pool")
    amx_dense_rows = via("amx")
    vnni_dense_rows = via("vdense")

    @emits(Kind.DYNQ_DENSE)
    def k_dynq_dense(self, k):
        """int32 out[m, n] = sum_k (x - zx) * (w - zw[n]), x int8/uint8, zx a run-time scalar
        (lower/dynamic_int8.py has the algebra): x' (x as uint8) packed into rows of Kp bytes
        with their sums, then register tiles of TILE_M rows x TILE_N weight rows over 32-byte
        steps of K; with ``threads`` 2 the weight rows in chunks of whole tiles (about
        DYNQ_DENSE_CHUNKS of them) that this thread and the driver's worker claim one at a time
        (runtime/threads.py split_chunks): a late worker holds up one chunk, not half."""
        p = k.params
        fn, b, args = self.function(k, len(k.inputs))
        (x, zx_ptr, ws), y = args[:3], args[-1]
        rows = self._dynq_rows(k)
        w, zw, cz = self.cargs["weights"], self.cargs["zw"], self.cargs["cz"]
        pointers = [ws, y, w, zw, cz, zx_ptr, *self._epi_operands(k, args[3:-1])]
        n_ = p["N"]
        if p.get("threads", 1) < 2:
            self._dynq_pack(b, k, x, ws)
            b.call(rows, [*pointers, c64(0), c64(n_)])
            b.ret_void()
            return fn

        def enter(eb, ps, back):
            """Each part packs x' into a scratch of its own (the worker's: the second half of
            ws, lower/dynamic_int8.py) before its first chunk: both threads at once, where
            the driver alone packed before the split while the worker waited."""
            own = eb.gep(ps[0], [c64(scratch_bytes(p) if back else 0)], source_etype=I8)
            self._dynq_pack(eb, k, ps[-1], own)
            return [own, *ps[1:]]

        chunk = dynq_dense_chunk(n_, p["isa"], p.get("tile", 0))
        self.split_chunks(k, b, [*pointers, x], n_, chunk,
                          lambda eb, ps, lo, hi: eb.call(rows, [*ps[:-1], lo, hi]),
                          around=(enter, lambda eb: None))
        b.ret_void()
        return fn

    def _dynq_pack(self, b, k, x, ws):
        """ws[m][0:Kp] = x'[m] (x as uint8, zeros past K), then the int32 row sums of x': in
        vectors of ``step`` bytes (their sums in int32 lanes), then the last K % step bytes."""
        p = k.params
        m_, k_, kp = p["M"], p["K"], p["Kp"]
        flip = 0x80 if p["x_dtype"] == "int8" else 0
        width = p.get("step", 32)
        bytes_t, lanes_t = ir.VectorType(I8, width), ir.VectorType(I32, width)
        full = k_ // width * width
        sums = b.gep(ws, [c64(m_ * kp)], source_etype=I8)
        cell, vcell = b.alloca(I32), b.alloca(lanes_t)
        memset = self.module.declare_intrinsic("llvm.memset", [ir.PointerType(), I64])
        reduce = self._intrinsic(f"llvm.vector.reduce.add.v{width}i32", I32, [lanes_t])
        with for_range(b, m_, "pm") as m:
            src, dst = b.mul(m, c64(k_)), b.mul(m, c64(kp))
            b.store(ir.Constant(lanes_t, None), vcell)
            with for_range(b, full // width, "pv") as c:
                at = b.mul(c, c64(width))
                v = b.load(b.gep(x, [b.add(src, at)], source_etype=I8), typ=bytes_t, align=1)
                v = b.xor(v, ir.Constant(bytes_t, [flip] * width))
                b.store(v, b.gep(ws, [b.add(dst, at)], source_etype=I8), align=1)
                b.store(b.add(b.load(vcell, typ=lanes_t), b.zext(v, lanes_t)), vcell)
            b.store(b.call(reduce, [b.load(vcell, typ=lanes_t)]), cell)
            with for_range(b, k_ - full, "pk") as t:
                kk = b.add(t, c64(full))
                v = b.xor(self.load_at(b, x, b.add(src, kk), I8), ir.Constant(I8, flip))
                self.store_at(b, v, ws, b.add(dst, kk), I8)
                b.store(b.add(b.load(cell, typ=I32), b.zext(v, I32)), cell)
            if kp > k_:
                tail = b.gep(ws, [b.add(dst, c64(k_))], source_etype=I8)
                b.call(memset, [tail, ir.Constant(I8, 0), c64(kp - k_),
                                ir.Constant(ir.IntType(1), 0)])
            self.store_at(b, b.load(cell, typ=I32), sums, m, I32)

    def _dynq_rows(self, k) -> ir.Function:
        """``void {name}_cols(ws, y, w, zw, cz, zx, lo, hi)``: outputs of weight rows [lo, hi)
        for every row of x', TILE_N weight rows (while they last) by TILE_M data rows."""
        p = k.params
        ptr = ir.PointerType()
        n_ptr = 6 + len(self._epi_sources(p))
        ty = ir.FunctionType(ir.VoidType(), [ptr] * n_ptr + [I64, I64])
        fn = ir.Function(self.module, ty, f"{k.name}_cols")
        fn.linkage = "internal"
        for arg in fn.args[:n_ptr]:
            arg.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        ws, y, w, zw, cz, zx_ptr = fn.args[:6]
        lo, hi = fn.args[n_ptr:]
        epi = self._epi_leaves(p, list(fn.args[6:n_ptr]))
        m_, kp = p["M"], p["Kp"]
        tm, tn = DYNQ_TILE
        offset = 128 if p["x_dtype"] == "int8" else 0
        zx = b.trunc(self.load_value(b, zx_ptr, c64(0), p["zx_dtype"])[1], I32)
        zx = b.add(zx, ir.Constant(I32, offset))
        if p["isa"] == "amx" or p.get("tile"):  # AMX tiles, VNNI's register tile (emit/int8)
            rows_of = self.amx_dense_rows if p["isa"] == "amx" else self.vnni_dense_rows
            rows_of(b, [ws, y, w, zw, cz, zx, lo, hi], p, epi)
            b.ret_void()
            return fn
        step_bytes = p.get("step", 32)
        vt = ir.VectorType(I32, step_bytes // 4)  # the accumulators: 8 lanes, 16 in zmm
        cells = [[b.alloca(vt) for _ in range(tn)] for _ in range(tm)]
        sums = b.gep(ws, [c64(m_ * kp)], source_etype=I8)
        reduce = self._intrinsic(f"llvm.vector.reduce.add.v{vt.count}i32", I32, [vt])

        def tile(m0, n0, rows, cols):
            for r in range(rows):
                for c in range(cols):
                    b.store(ir.Constant(vt, None), cells[r][c])
            with for_range(b, kp // step_bytes, "dk") as step:
                at = b.mul(step, c64(step_bytes))
                xs = [self._dynq_operand(b, ws, b.add(b.mul(b.add(m0, c64(r)), c64(kp)), at),
                                         "uint8", p) for r in range(rows)]
                for c in range(cols):
                    wv = self._dynq_operand(b, w, b.add(b.mul(b.add(n0, c64(c)), c64(kp)), at),
                                            p["w_dtype"], p)
                    for r in range(rows):
                        acc = b.load(cells[r][c], typ=vt)
                        b.store(self._dynq_mac(b, acc, xs[r], wv, p), cells[r][c])
            for r in range(rows):
                m = b.add(m0, c64(r))
                rs = self.load_at(b, sums, m, I32)
                for c in range(cols):
                    n = b.add(n0, c64(c))
                    s = b.call(reduce, [b.load(cells[r][c], typ=vt)])
                    s = b.sub(s, b.mul(self.load_at(b, zw, n, I32), rs))
                    s = b.sub(s, b.mul(zx, self.load_at(b, cz, n, I32)))
                    self.dynq_store(b, p, s, m, n, y, epi)

        blocks = b.udiv(b.sub(hi, lo), c64(tn))
        with for_range(b, blocks, "nb") as nb:
            n0 = b.add(lo, b.mul(nb, c64(tn)))
            with for_range(b, m_ // tm, "mb") as mb:
                tile(b.mul(mb, c64(tm)), n0, tm, tn)
            for r in range(m_ - m_ % tm, m_):
                tile(c64(r), n0, 1, tn)
        with for_range(b, b.sub(b.sub(hi, lo), b.mul(blocks, c64(tn))), "nt") as nt:
            n0 = b.add(lo, b.add(b.mul(blocks, c64(tn)), nt))
            with for_range(b, m_, "mt") as m:
                tile(m, n0, 1, 1)
        b.ret_void()
        return fn

    # -- the fused elementwise epilogue (lower/dynq_epilogue.py) ---------------------------
    @staticmethod
    def _epi_sources(p) -> list:
        """The epilogue's leaves that are operands (buffers, constants), in order."""
        return [leaf for leaf in p.get("epi", {}).get("leaves", []) if leaf[0] != "prod"]

    def _epi_operands(self, k, buffers) -> list:
        """The pointers of the epilogue's operand leaves: its input buffers (``buffers``, the
        kernel's arguments after x, zx and the scratch) and constants."""
        return [buffers[src[1]] if src[0] == "buf" else self.cargs[src[1]]
                for _, _, src in self._epi_sources(k.params)]

    @staticmethod
    def _epi_leaves(p, pointers) -> list | None:
        """Per leaf of the epilogue, its pointer (None for the product's sums)."""
        if "epi" not in p:
            return None
        it = iter(pointers)
        return [None if leaf[0] == "prod" else next(it) for leaf in p["epi"]["leaves"]]

    def dynq_store(self, b, p, s, m, n, y, epi) -> None:
        """out[m, n ..] = ``s`` (int32 lanes, or one int32); with an epilogue (``epi``: a
        pointer per leaf) its tree on ``s`` instead, in float32 steps as the EWISE it replaces
        (ewise_vec.apply), stored as float32."""
        at = b.add(b.mul(m, c64(p["N"])), n)
        if epi is None:
            b.store(s, b.gep(y, [at], source_etype=I32), align=4)
            return
        self._dynq_epi_store(b, p, s, m, n, y, epi, at)

    def dynq_value(self, b, p, s, m, n, epi):
        """The epilogue's float32 lanes for the int32 lanes ``s`` of out[m, n ..]."""
        return self._dynq_epi_store(b, p, s, m, n, None, epi, b.add(b.mul(m, c64(p["N"])), n))

    def _dynq_epi_store(self, b, p, s, m, n, y, epi, at):
        """The epilogue on ``s``; stored at out[m, n ..] (``y``), or returned (``y`` None)."""
        one = not isinstance(s.type, ir.VectorType)
        if one:
            s = b.insert_element(ir.Constant(ir.VectorType(I32, 1), None), s, ir.Constant(I32, 0))
        lanes = s.type.count
        vf = ir.VectorType(F32, lanes)
        leaves, loaded = p["epi"]["leaves"], {}

        def leaf(j):
            how, dtype, _ = leaves[j]
            if how == "prod":
                return s
            if j not in loaded:
                et = F32 if dtype == "float32" else I32
                vt = ir.VectorType(et, lanes)
                if how == "scalar":
                    v = b.load(epi[j], typ=et)
                    v = b.shuffle_vector(b.insert_element(ir.Constant(vt, ir.Undefined), v,
                                                          ir.Constant(I32, 0)),
                                         ir.Constant(vt, ir.Undefined),
                                         ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))
                else:
                    v = b.load(b.gep(epi[j], [n if how == "col" else at], source_etype=et),
                               typ=vt, align=4)
                loaded[j] = v
            return loaded[j]

        def value(node):
            if node[0] == "leaf":
                return leaf(node[1])
            return ewise_vec.apply(b, node[1], [value(c) for c in node[2]], vf)

        out = value(p["epi"]["tree"])
        if y is None:
            return out
        kind, h = p.get("out_perm", (None, 0))
        if kind is not None:  # lower/dynq_epilogue.py _heads: a head's block, [M][H] or [H][M]
            head, col = b.udiv(n, c64(h)), b.urem(n, c64(h))
            block = b.mul(head, c64(p["M"] * h))
            inner = (b.add(b.mul(m, c64(h)), col) if kind == "heads"
                     else b.add(b.mul(col, c64(p["M"])), m))
            at = b.add(block, inner)
        if one or kind == "heads_t":  # lanes M apart in [H][M]: one store each
            for i in range(lanes):
                lane = b.extract_element(out, ir.Constant(I32, i))
                where = b.add(at, c64(i * (p["M"] if kind == "heads_t" else 1)))
                b.store(lane, b.gep(y, [where], source_etype=F32))
            return
        b.store(out, b.gep(y, [at], source_etype=F32), align=4)

    def _dynq_operand(self, b, ptr, at, dtype, p):
        """32 bytes of K at byte ``at``: as bytes for VPMADDUBSW, else widened (int16 halves
        for VPMADDWD; int32 for generic IR)."""
        if p["isa"] in ("vnni", "avxvnni"):  # bytes, as VPDPBUSD reads them
            ty = ir.VectorType(I8, p["step"])
            return b.load(b.gep(ptr, [at], source_etype=I8), typ=ty, align=1)
        v = b.load(b.gep(ptr, [at], source_etype=I8), typ=Q32I, align=1)
        ext = b.sext if dtype == "int8" else b.zext
        if p["isa"] == "plain":
            return ext(v, ir.VectorType(I32, 32))
        if p["pairs"]:
            return v
        return [ext(self._dynq_part(b, v, i, 16), H16I) for i in range(2)]

    @staticmethod
    def _dynq_part(b, v, index, size):
        mask = ir.Constant(ir.VectorType(I32, size), list(range(index * size, (index + 1) * size)))
        return b.shuffle_vector(v, v, mask)

    def _dynq_mac(self, b, acc, xv, wv, p):
        """acc + the partial sums of one step: VPDPBUSD (exact u8 x s8 quads, in the
        accumulator) with VNNI, else ``_dynq_dot``'s."""
        if p["isa"] in ("vnni", "avxvnni"):
            vt, bt = acc.type, xv.type
            width = 512 if p["isa"] == "vnni" else 256
            fn = self._intrinsic(f"llvm.x86.avx512.vpdpbusd.{width}", vt, [vt, bt, bt])
            return b.call(fn, [acc, xv, wv])
        return b.add(acc, self._dynq_dot(b, xv, wv, p))

    def _dynq_dot(self, b, xv, wv, p):
        """<8 x i32> partial sums of 32 products: adjacent pairs saturated to int16 with
        ``pairs`` (VPMADDUBSW's), else exact."""
        if p["isa"] == "plain":
            prod = b.mul(xv, wv)
            if p["pairs"]:
                even = b.add(self._dynq_part_stride(b, prod, 0), self._dynq_part_stride(b, prod, 1))
                lo16 = ir.Constant(ir.VectorType(I32, 16), [-(1 << 15)] * 16)
                hi16 = ir.Constant(ir.VectorType(I32, 16), [(1 << 15) - 1] * 16)
                even = b.select(b.icmp_signed("<", even, lo16), lo16, even)
                even = b.select(b.icmp_signed(">", even, hi16), hi16, even)
                return b.add(self._dynq_part(b, even, 0, 8), self._dynq_part(b, even, 1, 8))
            quads = [self._dynq_part(b, prod, i, 8) for i in range(4)]
            return b.add(b.add(quads[0], quads[1]), b.add(quads[2], quads[3]))
        madd = self._intrinsic("llvm.x86.avx2.pmadd.wd", V8I, [H16I, H16I])
        if p["pairs"]:
            ubsw = self._intrinsic("llvm.x86.avx2.pmadd.ub.sw", H16I, [Q32I, Q32I])
            return b.call(madd, [b.call(ubsw, [xv, wv]), ir.Constant(H16I, [1] * 16)])
        return b.add(b.call(madd, [xv[0], wv[0]]), b.call(madd, [xv[1], wv[1]]))

    @staticmethod
    def _dynq_part_stride(b, v, first):
        """Lanes first, first + 2, ... of a 32-lane vector."""
        mask = ir.Constant(ir.VectorType(I32, 16), list(range(first, 32, 2)))
        return b.shuffle_vector(v, v, mask)


__all__ = ["DYNQ_TILE", "DynqDenseKernels", "dynq_dense_chunk"]
