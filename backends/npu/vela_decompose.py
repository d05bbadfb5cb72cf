"""Operators Vela 5.2 runs as several NPU operations, charged as its rewrite (the cycle model,
cycles.py, calls these for one operation of ours): MEAN over any of H, W and C (all-ones
depthwise convolutions, partial-sum additions, a scaling multiplication), ARG_MAX (four
operations) and the bilinear resizes (copies and 2x2 depthwise convolutions, or upscaling
average pools)."""

from __future__ import annotations

from math import ceil

import numpy as np

from .blocks import Query, mac_cycles, single_mac_op
from .config import NPUConfig
from .program import TensorDesc
from .vela_access import map_transfers

# Vela's output-stage cycles per element of an elementwise op reading 32-bit data (its index 1),
# per MAC-array size and cores; other designs: 1.5x the add rate
WIDE_ELEMENTWISE_CYCLES = {(128, 1): 1.25, (256, 1): 1.125, (512, 2): 0.5625}
STANDALONE_LUT_MACS = 128
MEAN_KERNEL_MAX = 4096  # Vela's largest depthwise kernel area for one MEAN convolution
MEAN_HEIGHT_MAX = 64  # and its largest kernel height


def _wide_elementwise_cycles(config: NPUConfig) -> float:
    key = (config.macs_per_cycle, config.cores)
    return WIDE_ELEMENTWISE_CYCLES.get(key, 1.5 * config.add_output_cycles)


def mean_as_vela(
    config: NPUConfig,
    ifm: tuple,
    bits: int,
    axes: tuple = (1, 2),
    src: str | None = None,
    reshaped: bool = False,
    bricked: bool = False,
) -> tuple[float, int, int]:
    """A MEAN of an (N, H, W, C) map over ``axes`` (of H, W and C; C only when one of H, W
    and C is 1) the way Vela runs it (regor's ConvertMeanOps): a reduction over the channels
    first moves them into W (the map seen as (N, H or W, C, 1)); then depthwise convolutions
    with all-ones kernels over the reduced axes, of at most 64 rows and 4,096 elements (a map
    taller than 64 rows reduced over H and W whose area fits one kernel is first flattened to
    one row), summing into 32-bit maps, additions of their partial sums, and one
    multiplication that scales the sum to the output. ``src``: the memory the input lives in;
    given, each convolution is charged as Vela 5.2 charges a MAC operation of its own
    (blocks.single_mac_op: the input block read from ``src``, the 32-bit sums written to SRAM),
    else by the legacy estimate, and the multiplication reads its 32-bit scalar from the weight
    memory as regor's MeasureElementAccess does (``_scalar_read``; ``reshaped``: the output's
    shape, padded to 4-D, is not the sums' map, so Vela keeps that map in NHWC; ``bricked``:
    the input is a map between two operations, read in full bursts).
    Returns (compute cycles, kernel and bias bytes from the weight memory, bytes of the 32-bit
    intermediate sums written and read in SRAM)."""
    _, h, w, c = (int(d) for d in ifm)
    red_h, red_w, red_c = (a in axes for a in (1, 2, 3))
    if red_c and c > 1:  # N x H x 1 x C -> N x H x C x 1, else N x 1 x W x C -> N x W x C x 1
        h, red_h = (h, red_h) if w == 1 else (w, red_w)
        w, red_w, c = c, True, 1
    kw = w if red_w else 1
    kh_all = h if red_h else 1
    if kh_all > MEAN_HEIGHT_MAX and red_w and kh_all * kw <= MEAN_KERNEL_MAX:
        h, w, kh_all, kw = 1, h * w, 1, h * w
    rows = max(1, min(MEAN_KERNEL_MAX // kw, kh_all, MEAN_HEIGHT_MAX))
    convs = ceil(kh_all / rows)
    out = (1 if red_h else h, 1 if red_w else w, c)
    compute, weights = 0.0, 0
    for i in range(convs):
        kh = min(rows, kh_all - i * rows)
        q = Query("dwconv", (kh if red_h else h, w, c), out, (kh, kw), bits=bits)
        if src is None:
            compute += mac_cycles(config, q, config.mul_output_cycles)[0]
        else:
            read = TensorDesc((1, *q.ifm), "int16" if bits == 16 else "int8", src)
            sums = TensorDesc((1, *out), "int32", "sram")
            transfers = map_transfers(config, read, sums, (src, "sram"), bricked)
            compute += single_mac_op(config, q, config.mul_output_cycles, transfers)
        weights += ones_kernel_bytes(kh * kw, c) + BIAS_RECORD_BYTES * c
    elems = out[0] * out[1] * out[2]
    wide = _wide_elementwise_cycles(config)
    compute += (convs - 1) * elems * wide  # the partial-sum additions
    scaling = elems * wide
    if src is not None:  # the multiplication takes the longer of its rate and the scalar's read
        scaling = max(scaling, _scalar_read(config, out[2], reshaped))
    return compute + scaling, weights, 4 * elems * 2 * convs


ONES_DEPTH = 16  # channels per encoded block of an all-ones kernel


def ones_kernel_bytes(area: int, channels: int) -> int:
    """The bytes of a MEAN's all-ones depthwise kernel (``area`` weights per channel) as
    Vela's weight encoder writes it: one bit per weight, per block of 16 channels (the last
    padded to 8) rounded up to 8 bytes, plus a 16-byte header. Matches Vela 5.2's debug
    database ("weight_total_bytes") to 3%: 8,080 for 28 x 144 x 16, 1,168 for 8 x 8 x 144 or
    4 x 144 x 16, 448 for 6 x 6 x 96, 80 for 8 x 8 x 4; 368 for 3 x 3 x 240 (376 here)."""
    total, left = 16, channels
    while left > 0:
        depth = min(left, ONES_DEPTH)
        total += -(-(area * -(-depth // 8) * 8) // 64) * 8
        left -= depth
    return total


def _scalar_read(config: NPUConfig, depth: int, reshaped: bool) -> float:
    """Cycles of the MEAN multiplication's read of its int32 scalar from the weight memory, as
    regor charges a non-8-bit scalar operand (MeasureElementAccess, EstimateMemoryTransfer): the
    scalar rounded as the other operand's storage (16 elements when the 32-bit sums are in
    NHCWB16 bricks, 1 when NHWC), read in bursts of the elementwise block's depth x 4 bytes
    (the block depth: the sums' depth in micro-block depths) out of the memory's full burst.
    Vela's figures: 256 cycles on the U55's flash for mean_hw, the in-graph MEANs and BERT's
    (bricked sums, an 8-deep block: 64 bytes in 32-byte bursts of 128), 8 for mean_axis2."""
    unit = config.ofm_block[2] * config.cores
    block_depth = max(unit, -(-min(depth, 128) // unit) * unit)
    nbytes = (1 if reshaped else 16) * 4
    burst = min(config.offchip_burst_bytes, 4 * block_depth)
    return nbytes * config.offchip_burst_bytes / burst / config.weight_bandwidth


BIAS_RECORD_BYTES = 10  # Vela's per-channel bias and scale record


def mean_op_as_vela(config: NPUConfig, op, ifm, out, src: str | None = None, bricked: bool = False):
    """``mean_as_vela`` of a qnn.mean UNIT operation reading ``ifm`` and writing ``out``
    (TensorDescs)."""
    from .compiler import unit_attrs
    from .constraints import mean_geometry

    nhwc, axes = mean_geometry(ifm.shape, unit_attrs(op.params)[1])
    kept = tuple(1 if i in axes else d for i, d in enumerate(nhwc))  # the sums' map
    reshaped = (1,) * (4 - len(out.shape)) + tuple(int(d) for d in out.shape) != kept
    bits = 16 if ifm.dtype == "int16" else 8
    return mean_as_vela(config, nhwc, bits, axes, src, reshaped, bricked)


def argmax_as_vela(config: NPUConfig, ifm: tuple) -> tuple[float, int, int]:
    """ARG_MAX along the channels of an (..., C) map as Vela runs it: a 1x1 depthwise
    convolution widening the map to 16 bits with the reversed channel index in its low bits,
    a 16-bit max pool with a 1 x C window over the map viewed as (H*W, C, 1), a 16-bit table
    extracting the index, and an elementwise pass writing the 32-bit indices.
    Returns (compute cycles of the four operations plus the per-operation overhead of the
    three beyond the first, weight bytes, bytes of the 16-bit intermediates in SRAM)."""
    c = int(ifm[-1])
    hw = int(np.prod(ifm[:-1]))
    h, w = (int(ifm[-3]), int(ifm[-2])) if len(ifm) >= 3 else (1, hw)
    widen = Query("dwconv", (h, w, c), (h, w, c))
    pool = Query("pool", (hw, c, 1), (hw, 1, 1), (1, c), bits=16)
    compute = mac_cycles(config, widen, config.conv_output_cycles)[0]
    compute += mac_cycles(config, pool, config.pool_output_cycles)[0]
    compute += hw * STANDALONE_LUT_MACS / config.macs_per_cycle + hw * config.add_output_cycles
    compute += 3 * config.op_overhead_cycles
    return compute, c + BIAS_RECORD_BYTES * c, 2 * (2 * hw * c + 2 * hw)


def half_pixel(taps: np.ndarray) -> bool:
    """Whether a bilinear resize's tap matrix (output x input positions along one axis) is
    TFLite's half-pixel 2x one (output 1 mixes two inputs unequally; the asymmetric resize gives
    it equal weights)."""
    taps = np.asarray(taps)
    if taps.ndim != 2 or taps.shape[0] != 2 * taps.shape[1] or taps.shape[1] < 2:
        return False
    taps = taps[1].astype(np.float64).ravel()
    taps = taps[taps != 0]
    return len(taps) == 2 and taps[0] != taps[1]


def resize_bilinear_as_vela(config: NPUConfig, ifm: tuple, ofm: tuple, taps) -> float:
    """A bilinear resize as Vela runs it, in compute cycles including the per-operation overhead
    of the operations beyond the first:
      - a 1x1 input: one elementwise pass;
      - half-pixel 2x: the input copied into a map with a one-pixel border (a copy per edge),
        then four depthwise convolutions with 2x2 kernels, one per output phase;
      - otherwise (2x, 4x, 8x): log2(factor) - 1 average pools with a 1x1 window, each reading
        its input upscaled 2x (nearest), then an average pool with a factor x factor window."""
    _, h, w, c = ifm
    _, oh, ow, _ = ofm
    if h == w == 1:
        return oh * ow * c * config.add_output_cycles
    if half_pixel(taps):
        q = Query("dwconv", (oh, ow, c), (oh - 1, ow - 1, c), (2, 2))
        compute = 4 * mac_cycles(config, q, config.conv_output_cycles)[0]
        return compute + 8 * config.op_overhead_cycles  # 5 copies and 4 convolutions
    factor = max(2, round(oh / h))
    steps = max(1, int(round(np.log2(factor))))
    compute, sh, sw = 0.0, h, w
    for _ in range(steps - 1):
        q = Query("pool", (2 * sh, 2 * sw, c), (2 * sh, 2 * sw, c))
        compute += mac_cycles(config, q, config.conv_output_cycles)[0]
        sh, sw = 2 * sh, 2 * sw
    q = Query("pool", (oh, ow, c), (oh, ow, c), (factor, factor))
    compute += mac_cycles(config, q, config.conv_output_cycles)[0]
    return compute + (steps - 1) * config.op_overhead_cycles
