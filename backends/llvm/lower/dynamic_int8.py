"""Integer products read as int32 (dynamic quantization's MatMulInteger): ``qnn.dense`` whose
input zero point is computed at run time (a ``qnn.dynamic_quantize`` field) and whose int32
accumulator is the result, not requantized. One DYNQ_DENSE kernel: the exact sum of
(x - zx) * (w - zw) over k, wrapped to int32 as the reference casts its int64 sum; with
accumulate="vpmaddubsw" (ONNX Runtime's kernels on x86 CPUs without VNNI) plus what the int16
saturation of each pair of raw u8 x s8 products takes off (x86_int8.pair_saturation).

The kernel (emit/int8/dynq_dense.py) sums x' = x as uint8 (int8 data + 128) times the raw weights in
vectors of 32 bytes of K, as ONNX Runtime's kernels do: VPMADDUBSW then VPMADDWD with ones for
the saturating pairs, VPMADDWD of int16-widened operands for exact sums (generic vector IR for
-isa=plain); with ORT's VNNI semantics (exact sums, int8 weights) and weight rows in whole
vectors, on -isa=amx AMX tiles (16 data rows or more, rows in 16s: emit/int8/amx.py), else
VNNI's register tile (emit/int8/vnni_dense.py: zmm on -isa=vnni / amx, ymm on avxvnni), each
with its own weight layout; and applies the zero points afterwards from the row sums of x' and
the constant column sums: out = S - zw[n] rowsum(x')[m] - (zx + offset) (colsum[n] - K zw[n]),
in int32 (the reference's int64 sum wrapped to int32 is the same value modulo 2^32)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.kinds import Kind

from partita.ir import Constant

from .registry import OP, lowers

CHUNK = 32  # bytes of K per vector step (one AVX2 register)
TILE_N = 4  # weight rows per register tile (emit/int8/dynq_dense.py)

if TYPE_CHECKING:
    from .context import LowerContext


@lowers("qnn.dense", priority=OP)
def lower_int_dense(low: LowerContext, call) -> bool:
    x, w, zx, zw = call.args[:4]
    if (
        isinstance(zx, Constant)
        or not isinstance(w, Constant)
        or not isinstance(zw, Constant)
        or call.checked_type.dtype != "int32"
        or x.checked_type.dtype not in ("int8", "uint8")
        or zx.checked_type.shape != ()
    ):
        return False
    weights = np.asarray(w.data)
    n, k = weights.shape
    m = int(np.prod(x.checked_type.shape[:-1], dtype=np.int64))
    zw = np.broadcast_to(np.asarray(zw.data, np.int64).ravel(), (n,))
    # VPDPBUSD (u8 x s8, exact sums: ORT's VNNI kernels) takes int8 weights: 64-byte steps of
    # K in zmm registers (AVX-512 VNNI), 32-byte ones in ymm (AVX-VNNI)
    vnni = {"vnni": "vnni", "amx": "vnni", "avxvnni": "avxvnni"}.get(low.isa)
    vnni = vnni if call.attrs.accumulate == "exact" and weights.dtype == np.int8 else None
    step = 64 if vnni == "vnni" else CHUNK
    kp = -(-max(k, 1) // step) * step
    # the data offset to uint8 (int8 data + 128), in [N][Kp] weight rows padded with zeros
    # (a zero weight adds nothing, and pairs an odd K's last product with zero)
    padded = np.zeros((n, kp), np.int64)
    padded[:, :k] = weights
    colsum = weights.astype(np.int64).sum(axis=1)
    # AMX tiles (TDPBUSD, exact as VPDPBUSD) for whole 16-row B tiles and 16 data rows or more
    amx = low.isa == "amx" and vnni == "vnni" and n % 16 == 0 and m >= 16
    # else VNNI's register tile (emit/int8/vnni_dense.py: 16 lanes in zmm, 8 in ymm) for weight
    # rows in whole vectors
    lanes = {"vnni": 16, "avxvnni": 8}.get(vnni, 0)
    tile = lanes if not amx and lanes and n % lanes == 0 else 0
    params = {
        "M": m, "K": int(k), "N": int(n), "Kp": int(kp),
        "x_dtype": x.checked_type.dtype, "zx_dtype": zx.checked_type.dtype,
        "w_dtype": str(weights.dtype),
        # a dense has one tap: "vpmaddubsw_tap" pairs as "vpmaddubsw" does
        "pairs": call.attrs.accumulate != "exact",
        # VPMADDUBSW reads int8 weights; uint8 ones pair in generic vector IR
        "isa": "amx" if amx else vnni or ("plain" if low.isa == "plain" or (
            call.attrs.accumulate != "exact" and weights.dtype != np.int8) else "avx2"),
        "step": step,
        "R": 32 if m >= 32 else 16,  # amx: data rows per block
        "tile": tile,
    }  # fmt: skip
    if low.threads > 1 and n >= 2 * TILE_N and (m * n * k >= 1 << 21 or n * k >= 1 << 19):
        # weight rows in chunks over both threads: 2 M multiply-adds or more, or (a pooler's
        # or classifier's few rows) 512 KB of weights to stream
        params["threads"] = 2
    arrays = {
        # bytes (w_dtype says how to read them); amx: 1 KB slabs [N/16][Kp/64] of 16 k-quads x
        # 16 weight rows x 4 bytes, as a B tile holds them
        "weights": _slabs(padded, n, kp) if amx else _quads(padded, n, kp, tile) if tile
        else (padded & 0xFF).astype(np.uint8),
        "zw": _wrap32(zw),
        # out = S - zw[n] * rowsum(x')[m] - zx' * (colsum[n] - K zw[n]), all wrapped to int32
        "cz": _wrap32(colsum - k * zw),
    }
    # x' rows padded to Kp, then their int32 sums; split: a second one the worker packs into
    scratch = low.workspace(scratch_bytes(params) * params.get("threads", 1))
    low.emit(Kind.DYNQ_DENSE, call, [low.src(x), low.src(zx), scratch], params, arrays)
    return True


def scratch_bytes(p: dict) -> int:
    """DYNQ_DENSE's packed x': M rows of Kp bytes, then their int32 sums, to a whole number of
    cache lines (the worker's copy of a split kernel starts on a line of its own)."""
    return -(-(p["M"] * p["Kp"] + 4 * p["M"]) // 64) * 64


def _slabs(padded: np.ndarray, n: int, kp: int) -> np.ndarray:
    tiles = (padded & 0xFF).astype(np.uint8).reshape(n // 16, 16, kp // 64, 16, 4)
    return np.ascontiguousarray(tiles.transpose(0, 2, 3, 1, 4)).reshape(n, kp)


def _quads(padded: np.ndarray, n: int, kp: int, lanes: int) -> np.ndarray:
    """[N/lanes][Kp/4] vectors of ``lanes`` weight rows x 4 bytes of K (VNNI's register tile)."""
    quads = (padded & 0xFF).astype(np.uint8).reshape(n // lanes, lanes, kp // 4, 4)
    return np.ascontiguousarray(quads.transpose(0, 2, 1, 3)).reshape(n, kp)


def _wrap32(a: np.ndarray) -> np.ndarray:
    return (np.asarray(a, np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
