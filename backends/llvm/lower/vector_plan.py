"""Plans for the vector kernels: weights pre-packed at compile time, per-channel requantization
constants, register tiles per instruction set.

    CONV/FC -> VCONV   weights [KH*KW][C/4][OCp][4] int8 for ``vpdpbusd`` (u8 x s8, 4-deep dots);
                       int8 activations are read as ``x ^ 0x80`` (= x + 128, unsigned) and the
                       constant part of the zero-point algebra goes into one int32 per channel:
                       corr = bias - zx' * sum(w)   (zx' = zx + 128 for int8 input)
    DWCONV  -> VDW     weights [KH*KW][Cp] int8, channels 16 to a vector

Both read a padded copy of the input (``Hs x Ws x Cs``, the border filled with the input's zero
point) when the convolution pads or its channels are not a multiple of the vector step. The
output stage uses the exact identities of docs/performance.md:
``SRDHM(x, M) = (x*M + 2^30) >> 31`` and
``RDBPOT(x, e) = (x + ((1 << e) >> 1) + (e > 0 ? x >> 31 : 0)) >> e``.
"""

from __future__ import annotations

import numpy as np
from partita.backends.llvm.kinds import Kind

from partita.ops.emulation.tflite_fixedpoint import wrap_int32

from .exact_avx2_plan import nibble_split, pair_safe, ubsw_split  # noqa: F401 (pair_safe: API)
from .vector_stage import output_constants, stage_flags

ISAS = ("auto", "amx", "vnni", "avxvnni", "avx2", "plain")
FLOAT_STAGES = ("onnx", "fbgemm", "onednn")  # output stages in float32 (vector kernels only)
# accumulator tiles (pixels R x vectors V): VNNI has 32 zmm registers, AVX2 16 ymm (a 16-lane
# vector is two of them)
TILES = {"vnni": {1: 12, 2: 10, 3: 8, 4: 6}, "avx2": {1: 4, 2: 2}, "avx2_wide": {1: 3},
         "avx2_nibbles": {1: 2},
         # the ubsw kernel's panels of 16 channels: fewer (panel, k-step)s with an unsafe pair
         # than 32 (per-channel int8 weights of Laplace-like spread, 576 x 96: 16% vs 29%)
         "avx2_ubsw": {1: 4},
         # the sign kernel: one more register per k-step (the signed weights) than plain pairs
         "avx2_sign": {1: 4, 2: 2},
         # AVX-VNNI's 16 ymm registers: 6 pixels x 1 vector (two ymm of 8 channels) where
         # there are 6 pixels, else 2 x 2 (a dense layer of one row: 4 independent sums). On
         # the Xeon of session 21, MobileNetV2's K >= 64 kernels' minima (one process,
         # interleaved, load 7-8) 1.645 -> 1.460 ms against 2 x 2 everywhere; 7 x 1 spills
         "avxvnni": {1: 6, 2: 2},
         # -isa=plain's int16-weight kernel where LLVM vectorizes the generic IR at zmm width
         # (a host with AVX-512BW): 32 registers hold 3 vectors x 4 pixels of <32 x i32> pair
         # sums (MobileNetV2 1.0 224 on an Intel Xeon: 6.10 -> 4.62 ms against avx2_wide's 1 x 3)
         "plain_zmm": {1: 8, 2: 6, 3: 4}}
# int8 input of the VNNI kernels copied once as uint8 (x ^ 0x80, pack_input; or stored so by its
# producer, flip_input.py) so that the inner
# loop broadcasts each pixel's 4 bytes from memory (a load) instead of a scalar load, xor and a
# GPR -> zmm broadcast on port 5, the port of the second VPDPBUSD: the 6 x 4 tile's loop alone
# (L1 data, inline assembly, /work/scratch) 65% -> 83% of 128 MACs/cycle, the 10 x 2 one 55% -> 84%
FLIP_INPUT = True
# AVX-VNNI's tile of one vector where there are TILES["avxvnni"][1] pixels (else the widest)
AVXVNNI_TALL = True
# VNNI tiles narrow (fewer channel vectors) until a channel group's weight panel is at most this
# many bytes, where more than one tile of pixels reads it (_l1_width; L1d is 48 KB on the Xeon
# of sessions 19-21, 32 KB on a Zen 4): MobileNetV2's 7 x 7 layers of K = 960 (61 KB panels at
# 6 x 4) ran 7-10% faster as 10 x 2 tiles (31 KB) in four interleaved A/Bs of per-kernel minima
# (load 8-10), less as 8 x 3 (46 KB); K = 576 (37 KB at 6 x 4) did not move, and stays
VNNI_L1_PANEL = 40 << 10
# weights this large are software-prefetched into L2, in order, when their kernel starts: the
# pointwise layers at 7 x 7 pixels otherwise wait on memory for every line of their first pass
PREFETCH_BYTES = 1 << 16
# exact AVX2 products by VPMADDUBSW (ubsw_split) where at most this fraction of the
# (panel, k-step)s needs the second product for unsafe weight pairs; MobileNetV2 on Zen 3, one
# process, interleaved: the ubsw kernel without any second product 0.68x the int16-weight
# kernel's time, with one at every k-step 1.10-1.18x, the nibbles kernel 0.95-0.99x
UBSW_MAX_FIX = 0.5
# which exact AVX2 kernel: "auto" (sign where no weight is -128, else ubsw where UBSW_MAX_FIX
# allows, else nibbles), or one forced: "sign" (VPMADDUBSW(|x|, sign(x) * w): |x| <= 128 and
# |w| <= 127 keep every pair sum within int16; falls back where a weight is -128), "ubsw"
# (ubsw_split), "nibbles" (nibble_split), "wide" (int16 weights, VPMADDWD)
EXACT_AVX2 = "auto"
DW_TAP_PAIRS = True  # exact depthwise without VNNI: two taps per VPMADDWD, else one VPMULLD
# exact depthwise without VNNI: int16 pairs of input rows by VPMADDWD, shared by two output rows
# and by a tile's pixels (vdepthwise.dw_rows_paired, as VNNI's VPDPWSSD route), before
# DW_TAP_PAIRS; DW_AVX2_TILE output pixels per step (AVX2's 16 ymm registers)
DW_ROW_PAIRS = True
# 2 pixels (session 18, MobileNetV2 on Zen 3 after vdepthwise.WEAVE_BYTES, per kernel,
# interleaved: 0.8-0.93x the 4-pixel tile's time at 28-56 pixels, equal at 112; 4 pixels x 2
# rows x 2 ymm accumulators took all 16 registers and spilled)
DW_AVX2_TILE = 2
# ... for strides up to this (stride 2 shares a column between fewer pixels: its 112 -> 56
# and 56 -> 28 layers ran 0.6-0.7x the time by tap pairs)
DW_ROW_PAIRS_MAX_STRIDE = 1
DW_CV_OUTER = True  # the AVX2 row-pair kernel: channel vectors outer, row pairs inner
# ... for output rows at least this wide (MobileNetV2 on Zen 3, per kernel, interleaved: 1.2-1.5x
# faster at 112 and 56 pixels, even at 14, slower at 7 and 14 with stride 2: the overlapping
# last tile and repeated last row cost more than the shared loads save), else DW_TAP_PAIRS
DW_ROW_PAIRS_MIN_WIDTH = 16
DW_QUADS = True  # VNNI depthwise: input rows in byte quads (VPDPBUSD), else int16 pairs
# -isa=plain depthwise: int16 pairs of input rows shared by two output rows, as generic IR of
# VPMADDWD's sums (dw_row_pairs), else the tap loop's int32 products (one VPMULLD per tap).
# MobileNetV2 1.0 224 on the Xeon of session 25 (LLVM writes it as VPMADDWD + VPADDD on zmm),
# per-kernel medians in one process: the 17 depthwise kernels 1.12 -> 0.81 ms
DW_PLAIN_ROW_PAIRS = True
# ... at stride 2 only for output rows this wide (the 28 -> 14 and 14 -> 7 layers ran 5-10%
# slower by row pairs than by taps; 112 -> 56 14% faster)
DW_PLAIN_STRIDED_MIN_WIDTH = 32
# output pixels per step where LLVM writes the generic IR in zmm registers (else DW_AVX2_TILE):
# 8 against 4, 7 x 7 layers 15 against 24 us, 28 x 28 52 against 46 us; the rest even
DW_PLAIN_TILE = 8


def _zmm() -> bool:
    """Whether generic vector IR is compiled for zmm registers here (AVX-512BW on the host; a
    build for another -mcpu keeps this host's choice, which is a tile size, not a result)."""
    from partita.backends.llvm.peak import plain_width

    return plain_width() == 4


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _effective_weights(arrays: dict, params: dict) -> np.ndarray | None:
    """w - w_zp as int8 (OHWI or [units, depth]), or None when that does not fit."""
    if arrays["weights"].dtype == np.int8 and not np.any(arrays["w_zp"]):
        return arrays["weights"]  # symmetric int8 weights (TFLite's): as they are
    w = arrays["weights"].astype(np.int32)
    zp = arrays["w_zp"].reshape((-1,) + (1,) * (w.ndim - 1))
    w = w - zp
    if w.min(initial=0) < -128 or w.max(initial=0) > 127:
        return None
    return w.astype(np.int8)


def _weight_sums(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per output channel (the first axis): sum(w) and sum(|w|), int64."""
    flat = w.reshape(w.shape[0], -1).astype(np.int32)
    return flat.sum(axis=1, dtype=np.int64), np.abs(flat).sum(axis=1, dtype=np.int64)


def dw_row_pairs(kh: int, sh: int, dh: int, nrows: int, size: int = 2) -> tuple[list, list]:
    """How ``nrows`` consecutive output rows of a depthwise convolution read input rows in
    groups of ``size`` (2: int16 pairs for VPDPWSSD, 4: byte quads for VPDPBUSD): the groups
    (input rows relative to the first output row's first, None past the end) and, per output
    row and group, the kernel rows (ky or None) the group's rows meet. The output rows share
    each group's loads and interleaving."""
    rows = sorted({j * sh + ky * dh for j in range(nrows) for ky in range(kh)})
    rows += [None] * (-len(rows) % size)
    groups = [tuple(rows[i : i + size]) for i in range(0, len(rows), size)]

    def ky_of(j, r):
        if r is None or (r - j * sh) % dh or not 0 <= (r - j * sh) // dh < kh:
            return None
        return (r - j * sh) // dh

    return groups, [[tuple(ky_of(j, r) for r in grp) for grp in groups] for j in range(nrows)]


def dw_pair_weights(taps: np.ndarray, sh: int, dh: int, nrows: int, size: int = 2) -> np.ndarray:
    """Weights [output row][group][kx][channel][size] for ``dw_row_pairs`` (int16 pairs or
    int8 quads): the kernel rows each group meets, zero where it meets none."""
    kh, kw, cs = taps.shape
    groups, uses = dw_row_pairs(kh, sh, dh, nrows, size)
    dtype = np.int16 if size == 2 else np.int8
    out = np.zeros((nrows, len(groups), kw, cs, size), dtype)
    for j, per in enumerate(uses):
        for q, kys in enumerate(per):
            for part, ky in enumerate(kys):
                if ky is not None:
                    out[j, q, :, :, part] = taps[ky]
    return out


def _code_params(params: dict, geo: dict) -> dict:
    """Parameters the code depends on; zero points and clip bounds are data (constants)."""
    new = {**params, **geo}
    for key in ("in_zp", "out_zp", "lo", "hi"):
        new.pop(key)
    new["left"] = bool(params["left"])
    return new


def _geometry(kind: str, params: dict, in_shape, out_shape, wshape) -> dict:
    if kind == Kind.FC:
        rows, depth = in_shape
        return {
            "H": 1,
            "W": rows,
            "C": depth,
            "OH": 1,
            "OW": rows,
            "OC": out_shape[1],
            "KH": 1,
            "KW": 1,
            "sh": 1,
            "sw": 1,
            "dh": 1,
            "dw": 1,
            "pad": [0, 0, 0, 0],
        }
    _, h, w, c = in_shape
    _, oh, ow, oc = out_shape
    (sh, sw), (dh, dw) = params["strides"], params["dilation"]
    pad = list(params["padding"])
    geo = {
        "H": h,
        "W": w,
        "C": c,
        "OH": oh,
        "OW": ow,
        "OC": oc,
        "KH": wshape[1],
        "KW": wshape[2],
        "sh": sh,
        "sw": sw,
        "dh": dh,
        "dw": dw,
        "pad": pad,
    }
    if geo["KH"] == geo["KW"] == sh == sw == 1 and not any(pad) and oh == h and ow == w:
        geo.update(H=1, W=h * w, OH=1, OW=oh * ow)  # a pointwise conv is one long row
    return geo


def _padded(geo: dict, step: int, copy: bool = False) -> dict:
    top, left, bottom, right = geo["pad"]
    cs = _round_up(geo["C"], step)
    # rows/columns the kernel window can reach (the stride may leave the last ones unread)
    hs = max(geo["H"] + top + bottom, (geo["OH"] - 1) * geo["sh"] + (geo["KH"] - 1) * geo["dh"] + 1)
    ws = max(geo["W"] + left + right, (geo["OW"] - 1) * geo["sw"] + (geo["KW"] - 1) * geo["dw"] + 1)
    pack = copy or cs != geo["C"] or any(geo["pad"])
    return {"Cs": cs, "Hs": hs if pack else geo["H"], "Ws": ws if pack else geo["W"], "pack": pack}


def vector_kernel(kind: str, params: dict, arrays: dict, in_shape, out_shape, isa: str,
                  overread: bool = False):
    """(kind, params, arrays, scratch bytes) of the vector kernel, or None to keep ``kind``.
    ``isa`` amx: VNNI, with AMX tiles where ``amx_fits``; ``overread``: the input lives in the
    segment's arena, whose slack lets a tile row read up to 63 bytes past its end."""
    amx, isa = isa == "amx", "vnni" if isa == "amx" else isa
    if params["rounding"] not in ("tflite", "tflite_builtin", "tflite_double", *FLOAT_STAGES):
        return None
    if kind not in (Kind.CONV, Kind.DWCONV, Kind.FC) or (
        params["rounding"] == "onnx" and params["rq_zp"]
    ):
        return None
    w = _effective_weights(arrays, params)
    if w is None:
        return None
    params = {**params, "left": bool((arrays["shift"] > 0).any())}
    geo = _geometry(kind, params, in_shape, out_shape, w.shape)
    zx = params["in_zp"]
    signed = params["in_dtype"] == "int8"
    if kind == Kind.DWCONV:
        if params.get("pairs") and (signed or params.get("accumulate") != "vpmaddubsw"):
            return None  # tap pairs of raw uint8 activations (fbgemm's depthwise) only
        geo.update(_padded(geo, 16))
        geo["pack"] = True  # vector loads read 16 channels: always from the padded copy
        cs = geo["Cs"]
        packed = np.zeros((geo["KH"] * geo["KW"], cs), np.int8)
        packed[:, : geo["C"]] = w[:, :, :, 0].transpose(1, 2, 0).reshape(-1, geo["C"])
        colsum, wabs = _weight_sums(w)
        consts = output_constants(arrays, params, colsum, zx, cs)
        new = {**_code_params(params, geo), "signed": signed}
        new.update(stage_flags({**params, **new}, consts, wabs))
        if isa == "vnni" and not params.get("pairs"):  # VPDPWSSD on pairs of input rows
            taps = packed.reshape(geo["KH"], geo["KW"], cs)
            size = 4 if DW_QUADS else 2  # byte quads (VPDPBUSD) or int16 pairs (VPDPWSSD)
            for name, nrows in (("wpairs", 1), ("wpairs2", 2)):
                consts[name] = dw_pair_weights(taps, geo["sh"], geo["dh"], nrows, size)
            new["rowpairs"] = size
            if size == 4 and signed:  # the bytes are read as x ^ 0x80 = x + 128
                consts["corr"] = wrap_int32(
                    consts["corr"].astype(np.int64) - 128 * np.pad(colsum, (0, cs - colsum.size))
                ).astype(np.int32)
        if (isa in ("avx2", "avxvnni") and not params.get("pairs") and DW_ROW_PAIRS
                and geo["OW"] >= DW_ROW_PAIRS_MIN_WIDTH
                and max(geo["sh"], geo["sw"]) <= DW_ROW_PAIRS_MAX_STRIDE):
            taps = packed.reshape(geo["KH"], geo["KW"], cs)
            for name, nrows in (("wpairs", 1), ("wpairs2", 2)):
                consts[name] = dw_pair_weights(taps, geo["sh"], geo["dh"], nrows, 2)
            new.update(rowpairs=2, isa=isa, dw_tile=DW_AVX2_TILE, cv_outer=DW_CV_OUTER)
        elif (isa == "plain" and not params.get("pairs") and DW_PLAIN_ROW_PAIRS
              and (max(geo["sh"], geo["sw"]) == 1 or geo["OW"] >= DW_PLAIN_STRIDED_MIN_WIDTH)):
            # generic IR of VPMADDWD's sums (vdepthwise.dw_paired_rows); a wider tile where
            # LLVM writes it in zmm registers
            taps = packed.reshape(geo["KH"], geo["KW"], cs)
            for name, nrows in (("wpairs", 1), ("wpairs2", 2)):
                consts[name] = dw_pair_weights(taps, geo["sh"], geo["dh"], nrows, 2)
            zmm = _zmm()
            new.update(rowpairs=2, isa=isa, dw_tile=DW_PLAIN_TILE if zmm else DW_AVX2_TILE,
                       cv_outer=not zmm and DW_CV_OUTER)
        elif isa in ("avx2", "avxvnni") and not params.get("pairs") and DW_TAP_PAIRS:
            # VPMADDWD on interleaved pairs of taps (vdepthwise); "isa" names what the code
            # needs of the CPU (host_cpu.lacking)
            new.update(tap_pairs=True, isa=isa)
        return Kind.VDW, new, {"weights": packed, **consts}, geo["Hs"] * geo["Ws"] * cs
    if kind == Kind.FC:
        w = w.reshape(w.shape[0], 1, 1, -1)
    if amx and amx_fits(geo, params, overread):
        return _amx_kernel(params, arrays, geo, w, zx, signed)
    # int8 activations flipped to uint8 once, as the input is copied (pack_input), where the
    # copy keeps whole rows (C a multiple of 4)
    flipped = (FLIP_INPUT and signed and isa in ("vnni", "avxvnni") and not params.get("pairs")
               and geo["C"] % 4 == 0)
    geo.update(_padded(geo, 4, copy=flipped))
    oc, kh, kw, c = w.shape
    cs, ocp = geo["Cs"], _round_up(oc, 16)
    wp = np.zeros((kh, kw, cs, ocp), np.int8)
    wp[:, :, :c, :oc] = w.transpose(1, 2, 3, 0)
    packed = wp.reshape(kh * kw, cs // 4, 4, ocp).transpose(0, 1, 3, 2)
    colsum, wabs = _weight_sums(w)
    nvec = ocp // 16
    # saturating pairs: the AVX2 dot product (VPDPBUSD would sum them exactly); plain writes
    # the same sums as generic vector IR (vconv.dot4)
    code_isa = "avx2" if params.get("pairs") and isa != "plain" else isa
    # exact sums by VPMADDUBSW(|x|, sign(x) * w) on signed activations x (uint8 ones read as
    # x ^ 0x80 = x - 128): |x| <= 128 and |w| <= 127 keep every pair sum within int16
    sign = (code_isa == "avx2" and not params.get("pairs") and EXACT_AVX2 in ("auto", "sign")
            and int(w.min(initial=0)) > -128)
    consts = output_constants(arrays, params, colsum,
                               zx + (0 if sign else 128) if signed else zx - (128 if sign else 0),
                               ocp)
    # exact sums without VNNI: VPMADDUBSW where every weight pair is safe (ubsw_split: the
    # unsafe pairs' remainders in a sparse second product), else int16 weights (packed wide
    # here, not in the loop) and VPMADDWD into int32 pair accumulators, reduced once per tile;
    # "plain" writes the same products as generic vector IR (sign-extended products, even +
    # odd lanes), which LLVM selects for any target (VPMADDWD on x86, widening multiply-adds
    # on Arm)
    exact_avx2 = code_isa == "avx2" and not params.get("pairs") and not sign
    fix, nibbles = None, exact_avx2 and EXACT_AVX2 in ("auto", "nibbles")
    if exact_avx2 and EXACT_AVX2 in ("auto", "ubsw"):
        v = min(max(TILES["avx2_ubsw"]), nvec)
        main, fix = ubsw_split(packed, 16 * v)
        if fix["density"] <= UBSW_MAX_FIX or EXACT_AVX2 == "ubsw":
            packed, nibbles = main, False
        else:
            fix = None
    wide = (code_isa in ("avx2", "plain") and not params.get("pairs") and fix is None
            and not nibbles)
    wide = wide and not sign
    tiles = TILES["avx2_sign" if sign else "plain_zmm" if wide and isa == "plain" and _zmm()
                  else "avx2_wide" if wide else "avx2_nibbles" if nibbles
                  else "avx2_ubsw" if fix is not None else "avx2" if isa == "plain" else isa]
    v = min(max(tiles), nvec)
    if code_isa == "vnni" and geo["OH"] * geo["OW"] > tiles[v]:
        v = _l1_width(tiles, v, kh * kw * cs)
    if AVXVNNI_TALL and code_isa == "avxvnni" and geo["OH"] * geo["OW"] >= tiles[1]:
        v = 1  # the taller tile: more pixels share each weight load (TILES)
    new = {**_code_params(params, geo), "signed": signed, "isa": code_isa, "V": v, "wide": wide}
    new.update(stage_flags({**params, **new}, consts, wabs))
    new["R"] = min(tiles[v], geo["OW"])
    if sign:
        new["sign"] = True
    if flipped:
        new["flipped"] = True
    if nibbles:
        packed, new["nibbles"] = nibble_split(packed)
    packed = _panels(packed, v if nibbles else 16 * v)
    if wide and geo["OH"] * geo["OW"] <= new["R"]:
        # one tile of pixels reads each weight once (a dense layer of one row): the weights
        # stay bytes, sign-extended as they are loaded, for half the memory traffic (the
        # 1280 -> 1000 classifier of MobileNetV2 on -isa=plain, partita profile on an Intel Xeon:
        # 0.148 -> 0.076 ms)
        new["w8"] = True
    elif wide:
        packed = packed.astype(np.int16)
    if fix is not None:
        new["ubsw"], new["fix"] = True, bool(fix["k"].size)
        if fix["k"].size:
            consts.update(fixk=fix["k"], fixoff=fix["off"], fixw=fix["w"])
    scratch = geo["Hs"] * geo["Ws"] * cs if geo["pack"] else 0
    if packed.nbytes >= PREFETCH_BYTES:
        new["prefetch"] = int(packed.nbytes)
    return Kind.VCONV, new, {"weights": np.ascontiguousarray(packed), **consts}, scratch


AMX_ROWS = 32  # pixels per AMX block: two 16-row A tiles against one or two B tiles
AMX_SPLIT_BLOCKS = 3  # up to this many blocks in a row, two threads split the channels
# fewer full pixel tiles than this in a single row (MobileNetV2's 7 x 7 layers: 4 tiles of 12 on
# vnni), two threads split the output channels: each streams half the weights once, and the
# groups even out where 4 tiles cannot (thread_watch.py, Zen 5, four alternating pairs: the
# driver's waits at the kernels' ends 31-34 -> 22-26 us a run, two threads 0.568 -> 0.563 of
# one thread; 2, a fully connected layer only, before)
CHANNEL_SPLIT_TILES = 8


def amx_fits(geo: dict, params: dict, overread: bool) -> bool:
    """AMX takes a pointwise convolution or dense layer (one long row of pixels, no padding)
    with at least one full block of pixels and exact int32 sums; its A tiles read 64 channel
    bytes per pixel, past the last channel when C is no multiple of 64 (those bytes meet zero
    weights), so that needs the arena's slack unless C is a multiple of 64."""
    return (geo["KH"] == geo["KW"] == 1 and geo["H"] == geo["OH"] == 1 and not any(geo["pad"])
            and geo["OW"] >= AMX_ROWS and not params.get("pairs")
            and (overread or geo["C"] % 64 == 0))


def _amx_kernel(params: dict, arrays: dict, geo: dict, w: np.ndarray, zx: int, signed: bool):
    """The AMX form of VCONV: weights [OCp/16][Kp/64][16][16][4], one 1 KB B tile per (16
    output channels, 64-deep slice), zero beyond the C input channels; TDPBSSD (int8 input)
    or TDPBUSD (uint8) sums the raw activations, so corr = bias - zx * sum(w)."""
    oc, c = w.shape[0], geo["C"]
    kp, ocp = _round_up(c, 64), _round_up(oc, 16)
    wk = np.zeros((kp, ocp), np.int8)
    wk[:c, :oc] = w.reshape(oc, c).T
    packed = wk.reshape(kp // 64, 16, 4, ocp // 16, 16).transpose(3, 0, 1, 4, 2)
    colsum, wabs = _weight_sums(w)
    consts = output_constants(arrays, params, colsum, zx, ocp)
    geo.update(Cs=c, Hs=geo["H"], Ws=geo["W"], pack=False)
    new = {**_code_params(params, geo), "signed": signed, "isa": "amx", "V": 2,
           "R": AMX_ROWS, "KB": kp // 64, "wide": False}
    new.update(stage_flags({**params, **new}, consts, wabs))
    if packed.nbytes >= PREFETCH_BYTES:
        new["prefetch"] = int(packed.nbytes)
    return Kind.VCONV, new, {"weights": np.ascontiguousarray(packed), **consts}, 0


def _l1_width(tiles: dict, v: int, depth: int) -> int:
    """The widest tile of at most ``v`` channel vectors (at least 2) whose weight panel, ``depth``
    bytes per output channel, fits VNNI_L1_PANEL: the panel then stays in L1 across the tiles of
    pixels instead of streaming from L2 once per tile."""
    while v > 2 and depth * 16 * v > VNNI_L1_PANEL and v - 1 in tiles:
        v -= 1
    return v


def _panels(packed: np.ndarray, width: int) -> np.ndarray:
    """[KK][C/4][OCp][4] weights as one panel per group of ``width`` output channels (the
    kernel's register tile; the last group may be narrower), each panel [KK][C/4][width][4]:
    a tile reads its weights as one sequential stream, which the hardware prefetchers follow
    when the weights come from memory."""
    ocp = packed.shape[2]
    return np.concatenate([packed[:, :, g : g + width].ravel() for g in range(0, ocp, width)])


# a job for the driver's worker costs ~1-2 us once it runs: kernels of ~5 us and more split
THREAD_MACS = {Kind.VCONV: 1 << 19, Kind.VDW: 1 << 17}


def as_rows(shape) -> tuple:
    """``shape`` as (rows, last axis): a fully connected layer's leading axes are its rows."""
    return (int(np.prod(shape[:-1], dtype=np.int64)), int(shape[-1]))


def im2col_as_1x1(out_shape, params: dict, arrays: dict) -> tuple:
    """A convolution over its IM2COL copy (an odd channel count's pair order): the weights as
    1x1 ones over KH*KW*C channels, stride 1 and no padding; returns the copy's shape."""
    w = arrays["weights"]  # OHWI
    o, kh, kw, c = w.shape
    arrays["weights"] = w.reshape(o, 1, 1, kh * kw * c)
    params.update(strides=[1, 1], dilation=[1, 1], padding=[0, 0, 0, 0])
    return (*out_shape[:3], kh * kw * c)


def split_worthwhile(kind: str, params: dict) -> bool:
    """Whether a vector kernel's work is large enough for ``-threads=2`` to split it (it needs
    two output rows, or two full pixel tiles of a pointwise convolution's single row, or two
    AMX pixel blocks, the last one maybe partial)."""
    if kind not in THREAD_MACS:
        return False
    depth = params["C"] if kind == Kind.VCONV else 1
    macs = params["OH"] * params["OW"] * params["OC"] * params["KH"] * params["KW"] * depth
    if by_channels(kind, params):
        return macs >= THREAD_MACS[kind] and channel_groups(params) >= 2
    tile = params.get("R", params["OW"])
    if params.get("isa") == "amx":
        rows = -(-params["OW"] // tile)
    else:
        rows = params["OH"] if params["OH"] > 1 else params["OW"] // tile
    return macs >= THREAD_MACS[kind] and rows >= 2


def by_channels(kind: str, params: dict) -> bool:
    """Whether a split convolution halves its output channels rather than its rows: a single
    row of pixels that is at most AMX_SPLIT_BLOCKS AMX blocks or fewer than CHANNEL_SPLIT_TILES
    full pixel tiles of the other tiers (MobileNet's 7 x 7 layers, a fully connected layer).
    Each thread then streams half of the weights once, instead of all of them from a cold
    cache."""
    if kind != Kind.VCONV or params["OH"] != 1:
        return False
    if params.get("isa") == "amx":
        return -(-params["OW"] // params["R"]) <= AMX_SPLIT_BLOCKS
    return params["OW"] // params["R"] < CHANNEL_SPLIT_TILES


def channel_groups(params: dict) -> int:
    """The units a channel split deals out: AMX's pairs of 16-channel vectors, or the VNNI
    tile's groups of V vectors (the last one maybe narrower)."""
    nvec = -(-params["OC"] // 16)
    return -(-nvec // (2 if params.get("isa") == "amx" else params["V"]))
