"""The exact AVX2 int8 products' k-step loops of the vector convolution kernel (vconv.py):
VPMADDUBSW(|x|, VPSIGNB(w, x)) on signed activations where no weight is -128 (sign_step);
``vpmaddubsw`` on the weights' two nibbles into int16 sums widened every few k-steps
(exact_avx2_plan.nibble_split), and the sparse second product of the unsafe weight pairs'
remainders (exact_avx2_plan.ubsw_split)."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import I8, I32, I64, Family, c64, for_range, via

from .vector_types import B64, H16, Q32, V8, V16, vconcat, vpart, vsplat


class ExactAVX2Steps(Family):
    """A kernel family: the exact AVX2 k-steps of VectorKernels' ``k_vconv`` (the nibbles
    kernel's steps and the ubsw kernel's second product)."""

    # what it uses of the other kernel families (through the emit context)
    vload = via("vector")
    mac_step = via("vector")

    def nibble_steps(self, b, src, g, p, accs, tile, start, flip):
        """The exact VPMADDUBSW kernel for any weights (exact_avx2_plan.nibble_split): per k-step
        the input quad times the weights' high nibbles h and low nibbles l, pair sums added in
        int16 (no int16 sum can overflow within ``nibbles`` k-steps); after each block of
        them widened into the int32 sums as 16 * VPMADDWD(h sums, 1) + VPMADDWD(l sums, 1)."""
        oy, ox0, rows, vecs = tile
        c4, taps = p["Cs"] // 4, p["KH"] * p["KW"]
        total, blk = taps * c4, min(p["nibbles"], taps * c4)
        h32 = ir.VectorType(ir.IntType(16), 32)
        entry = ir.IRBuilder(b.function.entry_basic_block)
        entry.position_at_start(b.function.entry_basic_block)
        sums = [[(entry.alloca(h32), entry.alloca(h32)) for _ in range(vecs)]
                for _ in range(rows)]
        ubsw = self._intrinsic("llvm.x86.avx2.pmadd.ub.sw", H16, [Q32, Q32])
        madd = self._intrinsic("llvm.x86.avx2.pmadd.wd", V8, [H16, H16])
        ones, sixteens = ir.Constant(H16, [1] * 16), ir.Constant(H16, [16] * 16)

        def block(first, count):
            for r in range(rows):
                for v in range(vecs):
                    for acc in sums[r][v]:
                        b.store(ir.Constant(h32, None), acc)
            with for_range(b, count, "nb") as j:
                t = b.add(first, j)
                if taps == 1:
                    ky, kx, c = c64(0), c64(0), t
                else:
                    tap, c = b.udiv(t, c64(c4)), b.urem(t, c64(c4))
                    ky, kx = b.udiv(tap, c64(p["KW"])), b.urem(tap, c64(p["KW"]))
                wrow = b.add(start, b.mul(t, c64(vecs * 128)))
                ws = [[b.bitcast(self.vload(b, g["weights"], b.add(wrow, c64(128 * v + 64 * i)),
                                            V16), B64) for i in range(2)] for v in range(vecs)]
                iy = b.add(b.mul(oy, c64(p["sh"])), b.mul(ky, c64(p["dh"])))
                ix0 = b.add(b.mul(ox0, c64(p["sw"])), b.mul(kx, c64(p["dw"])))
                row = b.mul(iy, c64(p["Ws"]))
                for r in range(rows):
                    pix = b.add(row, b.add(ix0, c64(r * p["sw"])))
                    a = self.vload(b, src, b.add(b.mul(pix, c64(p["Cs"])), b.mul(c, c64(4))),
                                   I32)
                    a = a if flip is None else b.xor(a, flip)
                    a = b.bitcast(vsplat(b, a), B64)
                    halves = [vpart(b, a, i, 32) for i in range(2)]
                    for v in range(vecs):
                        for part, acc in zip(ws[v], sums[r][v]):
                            prod = [b.call(ubsw, [halves[i], vpart(b, part, i, 32)])
                                    for i in range(2)]
                            b.store(b.add(b.load(acc, typ=h32), vconcat(b, *prod)), acc)
            for r in range(rows):
                for v in range(vecs):
                    (hi, lo), wide = sums[r][v], []
                    for i in range(2):
                        hs, ls = (vpart(b, b.load(x, typ=h32), i, 16) for x in (hi, lo))
                        wide.append(b.add(b.call(madd, [hs, sixteens]),
                                          b.call(madd, [ls, ones])))
                    acc = accs[r][v]
                    b.store(b.add(b.load(acc, typ=V16), vconcat(b, *wide)), acc)

        full, rest = divmod(total, blk)
        with for_range(b, full, "nblk") as n:
            block(b.mul(n, c64(blk)), c64(blk))
        if rest:
            block(c64(full * blk), c64(rest))

    def sign_step(self, b, accs, a, ws, halves=None):
        """One k-step of one pixel of the sign kernel: acc += VPMADDWD(VPMADDUBSW(|a|,
        VPSIGNB(w, a)), 1) per weight vector, a the splat of 4 signed input bytes: each
        product a * w = |a| * (sign(a) * w) with |a| <= 128 and |sign(a) * w| <= 127 (no
        weight is -128), so a pair sums to at most 2 * 128 * 127 = 32512: exact in int16.
        ``halves``: per vector, how many of its two 8-channel halves hold output channels (1:
        the upper half is padding, its products skipped and its sums left as they are)."""
        ubsw = self._intrinsic("llvm.x86.avx2.pmadd.ub.sw", H16, [Q32, Q32])
        madd = self._intrinsic("llvm.x86.avx2.pmadd.wd", V8, [H16, H16])
        psign = self._intrinsic("llvm.x86.avx2.psign.b", Q32, [Q32, Q32])
        absb = self._intrinsic("llvm.abs.v32i8", Q32, [Q32, ir.IntType(1)])
        ones = ir.Constant(H16, [1] * 16)
        a = vpart(b, b.bitcast(a, B64), 0, 32)  # the same 4 bytes in both halves
        mag = b.call(absb, [a, ir.Constant(ir.IntType(1), 0)])
        for v, (acc, w) in enumerate(zip(accs, ws)):
            w = b.bitcast(w, B64)
            live = 2 if halves is None else halves[v]
            sums = [b.call(madd, [b.call(ubsw, [mag, b.call(psign, [vpart(b, w, i, 32), a])]),
                                  ones]) for i in range(live)]
            old = b.load(acc, typ=V16)
            if live == 2:
                b.store(b.add(old, vconcat(b, *sums)), acc)
            else:
                b.store(vconcat(b, b.add(vpart(b, old, 0, 8), sums[0]), vpart(b, old, 1, 8)), acc)

    def fix_steps(self, b, src, g, p, accs, tile, panel, flip):
        """The second, sparse product of the exact VPMADDUBSW kernel: for each of the panel's
        k-steps with unsafe weight pairs (fixk[fixoff[panel] .. fixoff[panel + 1]]), the same
        input bytes against the pairs' remainders (fixw, V x 64 bytes per entry)."""
        vecs, c4 = tile[3], p["Cs"] // 4
        lo = b.sext(b.load(b.gep(g["fixoff"], [b.mul(panel, c64(4))], source_etype=I8),
                           typ=I32), I64)
        hi = b.sext(b.load(b.gep(g["fixoff"], [b.mul(b.add(panel, c64(1)), c64(4))],
                                 source_etype=I8), typ=I32), I64)
        with for_range(b, b.sub(hi, lo), "fx") as n:
            e = b.add(n, lo)
            step = b.sext(b.load(b.gep(g["fixk"], [b.mul(e, c64(4))], source_etype=I8),
                                 typ=I32), I64)
            tap, c = b.udiv(step, c64(c4)), b.urem(step, c64(c4))
            ky, kx = b.udiv(tap, c64(p["KW"])), b.urem(tap, c64(p["KW"]))
            ws = [self.vload(b, g["fixw"], b.add(b.mul(e, c64(64 * p["V"])), c64(64 * v)), V16)
                  for v in range(vecs)]
            self.mac_step(b, src, p, accs, tile, (ky, kx, c), ws, flip)
