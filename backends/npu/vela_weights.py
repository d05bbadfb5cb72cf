"""A MAC operation's weight stream as Vela 5.2 writes it for the U55 and U65: the weights
encoded by Arm's reference encoder (ethos-u-vela's public ``npu_encode_weights``, the mlw
codec's ``reorder_encode`` with the accelerator's micro-block depths), in the traversal Vela
picks, one stream per core, each 16-byte aligned after its channels' 10-byte bias and scale
records (also 16-byte aligned).

The cycle model charges these bytes for the weights' DMA and their reads from the weight
memory (cycles.py, weight_staging.py). The simulator keeps computing from the raw OHWI weights:
the encoded stream is in the hardware's order (sub-kernels, micro-blocks, block depth), and the
codec exposes its decoder but not the inverse of that reordering, so decoding would mean
re-implementing Vela's reorder; the bytes DMA moves are what the cycles need.

Checked against Vela 5.2's debug database (``vela --enable-debug-db``, perf_debug's
weight_total_bytes and scales_total_bytes): fc_bias_relu's 512 weights encode to 528 bytes and
160 of records on u55-256, Vela's figures; digits_mobilenetv2's 53 MAC operations on u55-256
encode to 446,592 bytes against Vela's 445,376 (1.003; per operation 0.82-1.09: regor's own
encoder picks slightly different palettes, and it splits the weights of a few operations in
depth, which is not modelled here). tests/backends/npu/test_npu_vela_weights.py.
"""

from __future__ import annotations

import hashlib
from math import ceil

import numpy as np

from .config import NPUConfig
from .program import NPUOp
from .vela_decompose import BIAS_RECORD_BYTES

ALIGN = 16  # Vela aligns each core's scale and weight streams to 16 bytes
_CACHE: dict[tuple, int] = {}
_CACHE_MAX = 4096  # entries (one per distinct weight tensor): a long-running process stays bounded


def _aligned(n: int) -> int:
    return ceil(n / ALIGN) * ALIGN


def accelerator(config: NPUConfig):
    """The ethos-u-vela accelerator whose micro-blocks the encoder uses: by MACs per core (the
    ublock depths are 8 from 64 to 256 MACs; a custom design with other MACs as the 256)."""
    from ethosu.vela.api import NpuAccelerator

    if config.cores > 1:
        return NpuAccelerator.Ethos_U65_512
    names = {32: "Ethos_U55_32", 64: "Ethos_U55_64", 128: "Ethos_U55_128"}
    return NpuAccelerator[names.get(config.macs_per_cycle, "Ethos_U55_256")]


def traversal(op: NPUOp, bits: int = 8) -> str:
    """The order Vela streams a MAC operation's weights in: "depthwise", "part_kernel" (a
    convolution whose kernel fills the MAC array's 8-deep input passes better than its input
    channels fill the 32-deep (16-bit: 16) ones, or input depth up to 8) or "depth_first"
    (a fully connected operation, any other convolution). Vela's debug database on
    digits_mobilenetv2 (perf_debug_main's traversal) agrees on every operation."""
    if op.kind == "DWCONV":
        return "depthwise"
    if op.kind == "FC":
        return "depth_first"
    _, kh, kw, depth = op.arrays["weights"].shape
    kernel = kh * kw
    deep, kernel_step = (32, 4) if bits == 8 else (16, 2)
    depth_use = depth / (ceil(depth / deep) * deep)
    part = depth / (ceil(depth / 8) * 8) * kernel / (ceil(kernel / kernel_step) * kernel_step)
    return "part_kernel" if part >= depth_use or depth <= 8 else "depth_first"


def _volume(op: NPUOp) -> np.ndarray:
    """The weights less their zero points, OHWI (a fully connected op's as 1x1 kernels, a
    depthwise op's with input depth 1), as Vela hands them to the encoder."""
    w = op.arrays["weights"].astype(np.int16)
    zp = op.arrays["w_zp"].astype(np.int16)
    w = w - zp.reshape((-1,) + (1,) * (w.ndim - 1))
    if op.kind == "FC":
        return w[:, None, None, :]
    if op.kind == "DWCONV":
        return w[..., None]
    return w


def encoded_weight_bytes(op: NPUOp, config: NPUConfig, block_depth: int, bits: int = 8) -> int:
    """Bytes of the op's encoded weight streams (every core's, each 16-byte aligned)."""
    from ethosu.vela.api import NpuBlockTraversal, npu_encode_weights

    w = _volume(op)
    order = traversal(op, bits)
    dilation = tuple(int(d) if d in (1, 2) else 1 for d in op.params.get("dilation", (1, 1)))
    digest = hashlib.blake2b(w.tobytes(), digest_size=16).digest()
    key = (digest, w.shape, order, dilation, bits, block_depth, config.cores, config.macs_per_cycle)
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        acc = accelerator(config)
        cores = config.cores
        traverse = (
            NpuBlockTraversal.PART_KERNEL_FIRST
            if order == "part_kernel"
            else NpuBlockTraversal.DEPTH_FIRST
        )
        total = 0
        for core in range(min(cores, w.shape[0])):
            depth = max(1, ceil((block_depth - core) / cores))
            part = np.ascontiguousarray(w[core::cores])
            args = (acc, part, dilation[::-1], bits, depth, order == "depthwise", traverse)
            total += _aligned(len(npu_encode_weights(*args)))
        _CACHE[key] = total
    return _CACHE[key]


def scale_record_bytes(op: NPUOp, config: NPUConfig) -> int:
    """Bytes of the op's bias and scale records: 10 per output channel, each core's 16-byte
    aligned."""
    channels = op.arrays["weights"].shape[0]
    cores = min(config.cores, channels)
    return sum(
        _aligned(BIAS_RECORD_BYTES * len(range(core, channels, cores))) for core in range(cores)
    )


def weight_stream_bytes(op: NPUOp, config: NPUConfig, block_depth: int, bits: int = 8) -> int:
    """What Vela's DMA moves for the op: the encoded weights and their bias and scale records."""
    return encoded_weight_bytes(op, config, block_depth, bits) + scale_record_bytes(op, config)
