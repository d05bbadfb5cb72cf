"""The vector convolutions' tile epilogue: a register tile's int32 sums (``out[r][v]``, 16
channels each) through the output stage (vector_output_stage.OutputStage) to their output
bytes, stored at their pixels (in a depthwise kernel's padded input with ``out_pad``). Unrolled
for tiles of up to two channel vectors, and of four where the AVX-512 packs narrow a pixel's
vectors together; AVX-VNNI's one-vector tiles narrow pixels in pairs. A kernel family
(``em.tiles``; vconv.py's VCONV and amx.py's blocks call ``conv_epilogue``)."""

from __future__ import annotations

from partita.backends.llvm.emit.base import I8, Family, c64, for_range, via

from .vector_types import V16, vconcat, vpart

# the output stage's per-channel constants loaded once per channel vector of a tile, not once
# per pixel (conv_epilogue)
HOIST_CHANNELS = True
# the output stage of a tile of one or two channel vectors unrolled (epilogue_unrolled), two
# whole vectors' bytes stored together (MERGE_STORES)
UNROLL_EPILOGUE = True
MERGE_STORES = True
# AVX-512 tiles of 2 or 4 whole channel vectors: a pixel's int32 lanes narrowed together by
# saturating packs and clamped as bytes (OutputStage.vnarrow), the 6 x 4 tile's epilogue
# unrolled too; AVX-VNNI's tiles of one vector: two pixels at a time (vnarrow_pair)
PACK_NARROW = True


class TileEpilogue(Family):
    # what it uses of the other kernel families (through the emit context)
    vrequant = via("vstage")
    vrequant_bytes = via("vstage")
    vnarrow = via("vstage")
    vnarrow_pair = via("vstage")
    vstore = via("vector")

    def epilogue_unrolled(self, b, y, g, p, out, tile, corr):
        """conv_epilogue for tiles of one or two channel vectors (or four, _packs), unrolled
        over them (the sums' slots at constant indices, so they stay in registers), and where
        the vectors are whole (OC a multiple of 16) a pixel's output bytes narrowed and
        stored together: by OutputStage.vnarrow (_packs), else LLVM's own narrowing of two
        clamped vectors (one VPACKSSDW pair, VPACKSSWB and VPERMQ for 32 channels)."""
        oy, ox0, o0, rows, vecs = tile
        caches = [{} if HOIST_CHANNELS else None for _ in range(vecs)]
        packs = _packs(p, vecs)
        whole = packs or (vecs == 2 and p["OC"] % 16 == 0 and MERGE_STORES)
        # a tile never crosses a row of the padded output when the row width is a multiple
        # of the tile: one division per tile, not per pixel
        pad = p.get("out_pad")
        first = (_out_index(b, p, oy, ox0)
                 if pad and pad[4] % p["R"] == 0 and p["isa"] != "amx" else None)
        pairs, pending = _pixel_pairs(p, vecs), None
        for r in range(rows):
            at = (_out_index(b, p, oy, b.add(ox0, c64(r))) if first is None else
                  b.add(first, c64(r * p["OC"])))
            if pairs and (pending is not None or r + 1 < rows):  # AVX-VNNI: pixel pairs
                slot = b.gep(out, [c64(r)], source_etype=V16)
                lanes = self.vrequant_bytes(b, b.load(slot, typ=V16), g, o0, p, corr=corr,
                                            cache=caches[0], lanes=True)
                if pending is None:
                    pending = (at, lanes)
                    continue
                both = self.vnarrow_pair(b, pending[1], lanes, g, o0, p, caches[0])
                for half, where in enumerate((pending[0], at)):
                    ptr = b.gep(y, [b.add(where, o0)], source_etype=I8)
                    b.store(vpart(b, both, half, 16), ptr, align=1)
                pending = None
                continue
            values = []
            for v in range(vecs):
                slot = b.gep(out, [c64(r * vecs + v)], source_etype=V16)
                o = b.add(o0, c64(16 * v))
                stage = self.vrequant_bytes if packs else self.vrequant
                values.append(stage(b, b.load(slot, typ=V16), g, o, p, corr=corr,
                                    cache=caches[v], **({"lanes": True} if packs else {})))
            if whole:
                ptr = b.gep(y, [b.add(at, o0)], source_etype=I8)
                value = (self.vnarrow(b, values, g, o0, p, caches[0]) if packs
                         else vconcat(b, *values))
                b.store(value, ptr, align=1)
                continue
            for v, value in enumerate(values):
                o = b.add(o0, c64(16 * v))
                self.vstore(b, value, y, b.add(at, o), o, p["OC"])

    def conv_epilogue(self, b, y, g, p, out, tile, corr, skip=None):
        """The output stage of a tile's sums, ``out[r][v]`` (16 x int32 each): requantized and
        stored at their pixels; ``corr``: the sums lack the channels' constant term; ``skip``
        (an i64): the first rows another tile has stored already."""
        oy, ox0, o0, rows, vecs = tile

        def stage(v, r, cache=None):
            slot = b.gep(out, [b.add(b.mul(r, c64(vecs)), v)], source_etype=V16)
            o = b.add(o0, b.mul(v, c64(16)))
            value = self.vrequant(b, b.load(slot, typ=V16), g, o, p, corr=corr, cache=cache)
            at = _out_index(b, p, oy, b.add(ox0, r))
            self.vstore(b, value, y, b.add(at, o), o, p["OC"])

        if skip is None and UNROLL_EPILOGUE and (vecs <= 2 or _packs(p, vecs)):
            return self.epilogue_unrolled(b, y, g, p, out, tile, corr)
        # channels outer: the per-channel constants and the tail test stay out of the pixel
        # loop, which is unrolled where its count is known (no loop counter per 16 outputs)
        with for_range(b, vecs, "ev") as v:
            if skip is None:
                cache = {} if HOIST_CHANNELS else None  # one block: the loads dominate
                for r in range(rows):
                    stage(v, c64(r), cache)
            else:
                count = c64(rows) if skip is None else b.sub(c64(rows), skip)
                with for_range(b, count, "er") as r:
                    stage(v, r if skip is None else b.add(r, skip))


def _packs(p, vecs: int) -> bool:
    """Whether a tile of ``vecs`` channel vectors narrows by OutputStage.vnarrow: AVX-512
    (VNNI, or an AMX block's), 2 or 4 whole vectors (OC a multiple of 16), a TFLite stage."""
    return (PACK_NARROW and p["isa"] in ("vnni", "amx") and vecs in (2, 4) and p["OC"] % 16 == 0
            and p["rounding"] in ("tflite", "tflite_builtin") and not p.get("wide"))


def _pixel_pairs(p, vecs: int) -> bool:
    """Whether a tile of one whole channel vector (AVX-VNNI's 6 x 1) narrows two pixels at a
    time by OutputStage.vnarrow_pair (a TFLite stage, OC a multiple of 16)."""
    return (PACK_NARROW and p["isa"] == "avxvnni" and vecs == 1 and p["OC"] % 16 == 0
            and p["rounding"] in ("tflite", "tflite_builtin") and not p.get("wide"))


def _out_index(b, p, oy, ox):
    """The output byte offset of pixel (oy, ox)'s first channel (in a depthwise kernel's
    padded input with ``out_pad``, write_into_halos)."""
    pix = b.add(b.mul(oy, c64(p["OW"])), ox)
    if p.get("out_pad"):
        ws, _, top, left, width = p["out_pad"]
        row = b.add(b.udiv(pix, c64(width)), c64(top))
        pix = b.add(b.mul(row, c64(ws)), b.add(b.urem(pix, c64(width)), c64(left)))
    return b.mul(pix, c64(p["OC"]))
