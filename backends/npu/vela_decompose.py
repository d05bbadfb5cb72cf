"""Operators Vela 5.2 runs as several NPU operations, charged as its rewrite (the cycle model,
cycles.py, calls these for one operation of ours): MEAN over any of H, W and C (all-ones
depthwise convolutions, partial-sum additions, a scaling multiplication), ARG_MAX (four
operations) and the bilinear resizes (copies and 2x2 depthwise convolutions, or upscaling
average pools)."""

from __future__ import annotations

from math import ceil

import numpy as np

from .blocks import Query, find_block, mac_cycles, round_up, single_mac_op
from .config import NPUConfig
from .program import TensorDesc
from .vela_access import (
    block_transfer,
    elementwise_block,
    elementwise_pass,
    flat_shape,
    map_transfer,
    map_transfers,
    memory_latency,
    wide_elementwise_cycles,
)
from .vela_pad import copy_cycles
from .vela_softmax import elementwise_op
from .weight_staging import transfer_cycles, weights_staged

STANDALONE_LUT_MACS = 128
MEAN_KERNEL_MAX = 4096  # Vela's largest depthwise kernel area for one MEAN convolution
MEAN_HEIGHT_MAX = 64  # and its largest kernel height


def mean_as_vela(
    config: NPUConfig,
    ifm: tuple,
    bits: int,
    axes: tuple = (1, 2),
    src: str | None = None,
    reshaped: bool = False,
    bricked: bool = False,
    staged: bool = True,
    dst: tuple[str, bool] = ("sram", True),
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
    the input is a map between two operations, read in full bursts; ``staged``: the kernels,
    scales and biases are in SRAM, else read where they live, the scales and biases at that
    memory's latency (weight_staging.weights_staged: a one-op MEAN's on the U65, 78 of its
    convolution's 142 MAC and output cycles in mean_axis2 on u65-256); ``dst``: the memory
    the output is written to and whether in NHCWB16 bricks, as an intermediate map).
    Returns (compute cycles, kernel and bias bytes from the weight memory, bytes of the 32-bit
    intermediate sums written and read in SRAM)."""
    convs, out = mean_convolutions(ifm, bits, axes)
    latency = None if staged else config.dma_latency_cycles
    compute, weights = 0.0, 0
    for q, nbytes in convs:
        if src is None:
            compute += mac_cycles(config, q, config.mul_output_cycles)[0]
        else:
            read = TensorDesc((1, *q.ifm), "int16" if bits == 16 else "int8", src)
            sums = TensorDesc((1, *out), "int32", "sram")
            transfers = map_transfers(config, read, sums, (src, "sram"), bricked)
            compute += single_mac_op(config, q, config.mul_output_cycles, transfers, latency)
        weights += nbytes
    elems = out[0] * out[1] * out[2]
    wide = wide_elementwise_cycles(config)
    compute += (len(convs) - 1) * elems * wide  # the partial-sum additions
    scaling = elems * wide
    if src is not None:  # the multiplication takes the longer of its rate and the scalar's read
        scaling = max(scaling, _scalar_read(config, out[2], reshaped))
        scaling = max(scaling, _scaling_issue(config, out, bits, reshaped, *dst))
    return compute + scaling, weights, 4 * elems * 2 * len(convs)


def mean_convolutions(ifm: tuple, bits: int, axes: tuple) -> tuple[list, tuple]:
    """``mean_as_vela``'s all-ones depthwise convolutions: ([(block query, kernel, scale and
    bias bytes)], the sums' h x w x c map)."""
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
    out = (1 if red_h else h, 1 if red_w else w, c)
    convs = []
    for i in range(ceil(kh_all / rows)):
        kh = min(rows, kh_all - i * rows)
        q = Query("dwconv", (kh if red_h else h, w, c), out, (kh, kw), bits=bits)
        convs.append((q, ones_kernel_bytes(kh * kw, c) + BIAS_RECORD_BYTES * c))
    return convs, out


def _scaling_issue(
    config: NPUConfig, sums: tuple, bits: int, reshaped: bool, dst: str, brick: bool
) -> float:
    """The MEAN multiplication's command-issue bound (regor's EstimateElementwiseCycles): per
    element a quarter of (the block's slowest transfer / its elements + the 32-bit rate), the
    slowest transfer being the int32 scalar's read from the weight memory, its first-byte
    latency first (Vela's debug database, u65-256: mean_axis2's Mul on its 2x2x16 block, 72
    cycles for 32 elements writing DRAM; mean_axis2_in_graph's on 8x1x8 sums in bricks, 162).
    The sums run on their flat shape where the output is reshaped (Vela keeps them NHWC), else
    in bricks; the elements are the output's, its depth rounded up to 16 in bricks (``brick``:
    an intermediate map; a region's output is NHWC: mean_hw's Mul, 4 elements, cmd 17)."""
    shape = flat_shape(sums) if reshaped else sums
    block = elementwise_block(config, shape)
    out_item = 2 if bits == 16 else 1
    scalar = memory_latency(config, config.weight_memory, False)
    scalar += _scalar_read(config, shape[2], True)  # one block's transfer: the element itself
    minimum = max(
        scalar,
        block_transfer(config, "sram", shape, block, 4, False, not reshaped),
        block_transfer(config, dst, shape, block, out_item, True, brick and not reshaped),
    )
    bricked = brick and not reshaped
    elems = shape[0] * shape[1] * (-(-shape[2] // 16) * 16 if bricked else shape[2])
    per_elem = (minimum / (block[0] * block[1] * block[2]) + wide_elementwise_cycles(config)) / 4
    return ceil(per_elem * elems)


def mean_staged(config: NPUConfig, op, ifm, out, slack: float | None) -> bool:
    """Whether Vela stages the first of a qnn.mean's convolutions' kernels, scales and biases
    in SRAM (weight_staging.weights_staged; ``slack``: the previous operation's cycles)."""
    from .compiler import unit_attrs
    from .constraints import mean_geometry

    nhwc, axes = mean_geometry(ifm.shape, unit_attrs(op.params)[1])
    bits = 16 if ifm.dtype == "int16" else 8
    (q, nbytes), *_ = mean_convolutions(nhwc, bits, axes)[0]
    return weights_staged(config, q, find_block(config, q), nbytes, slack)


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


def mean_tail(config: NPUConfig, op, ifm, out) -> float:
    """Cycles of the last of Vela's operations for a qnn.mean operation (``mean_as_vela``'s
    multiplication, the sums' map scaled to the output), under which the next operation's
    weights are moved (weight_staging.prefetch_stall). Vela 167 cycles for mean_axis2's 8 x 1
    x 8 sums on u65-256 (est_op_cycles_without_buffering): the slack is regor's scheduler
    estimate, the bricked int32 sums and the output where they are before SRAM placement
    (off-chip on the U65: 158; the run's cycles, 72 here, below it)."""
    from .compiler import unit_attrs
    from .constraints import mean_geometry

    nhwc, axes = mean_geometry(ifm.shape, unit_attrs(op.params)[1])
    kept = tuple(1 if i in axes else d for i, d in enumerate(nhwc))
    reshaped = (1,) * (4 - len(out.shape)) + tuple(int(d) for d in out.shape) != kept
    elems = int(np.prod(kept))
    depth = 1 if 3 in axes else kept[3]
    run = max(elems * wide_elementwise_cycles(config), _scalar_read(config, depth, reshaped))
    far = config.spill_memory if config.spill_memory != "none" else "sram"
    sums, scaled = TensorDesc(kept, "int32", far), TensorDesc(kept, out.dtype, far)
    return max(run, elementwise_pass(config, "qnn.mul", [sums], scaled, {}, True, False))


def mean_op_as_vela(
    config: NPUConfig,
    op,
    ifm,
    out,
    src: str | None = None,
    bricked: bool = False,
    staged: bool = True,
    dst: tuple[str, bool] = ("sram", True),
):
    """``mean_as_vela`` of a qnn.mean UNIT operation reading ``ifm`` and writing ``out``
    (TensorDescs)."""
    from .compiler import unit_attrs
    from .constraints import mean_geometry

    nhwc, axes = mean_geometry(ifm.shape, unit_attrs(op.params)[1])
    kept = tuple(1 if i in axes else d for i, d in enumerate(nhwc))  # the sums' map
    reshaped = (1,) * (4 - len(out.shape)) + tuple(int(d) for d in out.shape) != kept
    bits = 16 if ifm.dtype == "int16" else 8
    return mean_as_vela(config, nhwc, bits, axes, src, reshaped, bricked, staged, dst)


def argmax_as_vela(config: NPUConfig, ifm: tuple, io=("sram", "sram")) -> tuple[float, int, int]:
    """ARG_MAX along the channels of an (..., C) map as Vela 5.2 runs it, each operation as
    its debug database shows it (arg_max, 8x8x4, u55-256 / u65-256):
      - a 1x1 depthwise convolution widening the map to 16 bits with the reversed channel
        index in its low bits (the block model: 384 / 1,047 cycles);
      - a 16-bit max pool with a 1 x C window over the map viewed as (H*W, C, 1) (1,115 /
        1,110);
      - a 16-bit table extracting the index, a 1x1 pool with the table in its output stage,
        its 2,048-byte table loaded from the weight memory while the max pool runs: what the
        load takes beyond the max pool is charged (1,177 on u55-256: 2,112 cycles of flash
        against the pool's 1,115; 164 on u65-256, the DRAM load hidden);
      - an ADD of a constant scalar writing the 32-bit indices (vela_softmax.elementwise_op:
        128 / 137).
    No per-operation overhead. Returns (compute cycles, weight bytes, bytes of the 16-bit
    intermediates in SRAM); ``io``: the memories of the input and the output."""

    c = int(ifm[-1])
    hw = int(np.prod(ifm[:-1]))
    h, w = (int(ifm[-3]), int(ifm[-2])) if len(ifm) >= 3 else (1, hw)
    x = TensorDesc((1, h, w, c), "int8", io[0])
    wide = TensorDesc((1, h, w, c), "int16", "sram")
    widen = Query("dwconv", (h, w, c), (h, w, c))
    transfer = map_transfer(config, x, wide, (io[0], "sram"))
    compute = mac_cycles(config, widen, config.conv_output_cycles, transfer, fill=True)[0]
    rows = TensorDesc((1, hw, c, 1), "int16", "sram")
    maxima = TensorDesc((1, hw, 1, 1), "int16", "sram")
    pool = Query("pool", (hw, c, 1), (hw, 1, 1), (1, c), bits=16)
    transfer = map_transfer(config, rows, maxima, ("sram", "sram"))
    pooled = mac_cycles(config, pool, config.pool_output_cycles, transfer, fill=True)[0]
    flat = nhwc_flat(hw)
    table = TensorDesc((1, *flat), "int16", "sram")
    q = Query("pool", flat, flat, bits=16)
    transfer = map_transfer(config, table, table, ("sram", "sram"))
    lut = mac_cycles(config, q, config.conv_output_cycles, transfer, fill=True)[0]
    load = INT16_TABLE_BYTES / config.weight_bandwidth + config.dma_latency_cycles
    compute += pooled + lut + max(0.0, load - pooled)
    out = TensorDesc((1, *flat), "int32", io[1])
    scalar = TensorDesc((1,), "int32", config.weight_memory)
    compute += elementwise_op(
        config, [table, scalar], out, config.add_output_cycles, (True, False, False)
    )
    return compute, c + BIAS_RECORD_BYTES * c, 2 * (2 * hw * c + 2 * hw)


INT16_TABLE_BYTES = 2048  # the hardware's int16 LUT: 512 32-bit entries


def nhwc_flat(n: int) -> tuple[int, int, int]:
    """``n`` values as Vela reshapes a flat map: 16 channels, rows and columns as near a
    square as they divide (64 values: 2x2x16; vela_copy.copy_shape)."""
    c = 16 if n % 16 == 0 else n
    m = n // c
    rows = max(d for d in range(1, int(m**0.5) + 1) if m % d == 0)
    return rows, m // rows, c


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


def resize_bilinear_as_vela(
    config: NPUConfig, ifm: tuple, ofm: tuple, taps, io=("sram", "sram")
) -> float:
    """A bilinear resize as Vela 5.2 runs it, in compute cycles (no per-operation overhead):
    - a 1x1 input: one elementwise pass;
    - half-pixel 2x: the input copied into a map with a one-pixel border (a copy per edge),
      then four depthwise convolutions with 2x2 kernels, one per output phase
      (``_half_pixel_2x``);
    - otherwise (2x, 4x, 8x): log2(factor) - 1 average pools with a 1x1 window, each reading
      its input upscaled 2x (nearest), then an average pool with a factor x factor window,
      each in Vela 5.2's block model for pools (blocks.mac_cycles with ``fill``: the first
      block unoverlapped, regor's pooling rate, no per-operation overhead; Vela's debug
      database for resize_bilinear_4x, u55-256: 1,565 and 19,751 cycles, 14x14x8 and
      20x24x8 blocks), the first reading the input where it lives (``io[0]``) and the last
      writing the output (``io[1]``), the intermediates in SRAM."""
    _, h, w, c = ifm
    _, oh, ow, _ = ofm
    if h == w == 1:
        return oh * ow * c * config.add_output_cycles
    if half_pixel(taps):
        return _half_pixel_2x(config, (h, w, c), (oh, ow, c), io)
    factor = max(2, round(oh / h))
    steps = max(1, int(round(np.log2(factor))))
    compute, sh, sw, src = 0.0, h, w, io[0]
    for _ in range(steps - 1):
        q = Query("pool", (2 * sh, 2 * sw, c), (2 * sh, 2 * sw, c))
        compute += _upscaling_pool(config, q, src, "sram")
        sh, sw, src = 2 * sh, 2 * sw, "sram"
    q = Query("pool", (oh, ow, c), (oh, ow, c), (factor, factor))
    return compute + _upscaling_pool(config, q, src, io[1])


def _half_pixel_2x(config: NPUConfig, ifm: tuple, ofm: tuple, io) -> float:
    """Vela's half-pixel 2x resize (its debug database, resize_bilinear_2x_half_pixel, an
    8x8x4 input): MemoryCopies of the input into a map with a one-pixel border (the interior
    and the top and bottom rows from the input, the left and right columns from the bordered
    map: 446, 153 and 169 cycles each on u55-256, 1,263, 934 and 116 on u65-512), then four
    depthwise convolutions with 2x2 kernels over the bordered map, one per output phase, each
    writing (2h - 1) x (2w - 1) of the output in the block model (1,157 cycles each on
    u55-256, a 16x16x8 block); on the U65 the first waits for its weights (``_first_phase``).
    The copies are vela_pad.copy_cycles' (regor's operation both first and last): the five
    copies' op cycles within 2 of Vela's on all four presets (u65-256: 1,318, 947 and 161;
    reading the U65's DRAM input, 628 cycles per 4x6 block against 56 for its SRAM write, the
    command-issue bound is 173 cycles a block), where the earlier form gave 988 and 631."""
    h, w, c = ifm
    cycles = copy_cycles(config, (h, w, c), io[0], "sram", "int8")
    cycles += 2 * copy_cycles(config, (1, w, c), io[0], "sram", "int8")
    cycles += 2 * copy_cycles(config, (h + 2, 1, c), "sram", "sram", "int8")
    phase = _phase_conv(config, ifm, ofm, ("sram", io[1]))
    return cycles + 3 * phase + _first_phase(config, ifm, ofm, phase)


def _phase_conv(config: NPUConfig, ifm: tuple, ofm: tuple, io) -> float:
    """One phase's 2x2 depthwise convolution over the bordered map, as regor's operation both
    first and last (blocks.single_mac_op), its input block read from an (h + 1) x (w + 1) x c
    NHWC window of the bordered map (Vela's debug database: SramFeatureMap_read per block 1,296
    bytes for the 4-channel one-op model, 9x9x4 in 8-byte runs, read efficiency 0.25; 648 for
    the 8-channel in-graph one, 9x9x8 in whole rows; the U65 estimate's DRAM read 5,184,
    1,296 x 16 in 8-byte runs of 128-byte bursts). Fitted on these two models: the one-op
    phases' op cycles 1,485 / 1,157 / 2,044 / 1,804 on the four presets and the U65 estimates
    2,863 / 2,623, all exactly (the 10x10 window gave 19-38 cycles more, estimates 101 more)."""
    h, w, c = ifm
    oh, ow, _ = ofm
    q = Query("dwconv", (h + 2, w + 2, c), (oh - 1, ow - 1, c), (2, 2))

    def transfers(ifm_block, ofm_block) -> tuple[float, float]:
        read = block_transfer(config, io[0], (h + 1, w + 1, c), ifm_block, 1, False)
        return read, block_transfer(config, io[1], q.ofm, ofm_block, 1, True)

    return single_mac_op(config, q, config.conv_output_cycles, transfers)


def _first_phase(config: NPUConfig, ifm: tuple, ofm: tuple, cycles: float) -> float:
    """The first phase's convolution with its weights' DMA, where Vela stages them from
    off-chip memory (the U65): regor's buffered weights (weight_staging.buffered_cycles), the
    transfer less the slack (the last column copy's scheduler estimate) plus its own
    estimate, the maps off-chip before SRAM placement. Vela's debug database: 505 - 1,042 +
    2,863 = 2,326 on u65-256 (64 bytes: 16 of weights, 48 of records), 508 - 1,026 + 2,623 =
    2,105 on u65-512 (96: two cores' streams); the other three phases 2,044 and 1,804 (the
    previous phase's estimate hides their transfer); ours the same within 3 cycles. The
    weights are charged unencoded, 16-byte aligned per core, as the 2x2 kernels' streams
    were there."""
    off = config.spill_memory
    if config.weight_memory == "sram" or off == "none":
        return cycles
    h, w, c = ifm
    cores = min(config.cores, c)
    per_core = ceil(c / cores)
    nbytes = cores * (round_up(4 * per_core, 16) + round_up(BIAS_RECORD_BYTES * per_core, 16))
    slack = copy_cycles(config, (h + 2, 1, c), off, off, "int8")
    estimate = _phase_conv(config, ifm, ofm, (off, off))
    return max(cycles, transfer_cycles(config, nbytes) - slack + estimate)


def _upscaling_pool(config: NPUConfig, q: Query, src: str, dst: str) -> float:
    ifm, ofm = TensorDesc((1, *q.ifm), "int8", src), TensorDesc((1, *q.ofm), "int8", dst)
    transfer = map_transfer(config, ifm, ofm, (src, dst))
    return mac_cycles(config, q, config.conv_output_cycles, transfer, fill=True)[0]


def resizes_as_vela(op) -> bool:
    """Whether ``op`` is a bilinear resize charged as Vela's operations in the block model
    (no per-operation overhead: resize_bilinear_as_vela)."""
    return op.params.get("op") == "resize_bilinear_taps"
