"""The MAC array's block configuration and its compute cycles, after Vela's performance model.

An operation runs as a sequence of output blocks (h x w x c, a multiple of the micro-block) that
must fit the shared buffer (SHRAM) together with their input block and accumulators; the block is
chosen to minimise the input and weight re-fetches per output element (Vela's
``find_block_config``). Per block, each kernel element costs 4 cycles per micro-block pass but at
least the weight-buffer refill (``32 * ublock depth / 8`` cycles), repeated for every 32 (or, in
part-kernel mode, 8) input channels; the output stage works per block in parallel with the next
block's MACs (Vela's ``_estimate_conv_cycles``). Small feature maps therefore waste lanes, which
is what makes Vela's estimates of small networks much larger than MACs / MACs-per-cycle.

16-bit input maps (TFLite's 16x8 mode) change four things, as in Vela: the input block holds
twice the bytes per element and at most 16 channels; convolutions and depthwise layers
accumulate in 40-bit accumulators (more SHRAM per output block); part-kernel mode takes 2
kernel elements per pass instead of 4; a depthwise or pooling micro-block pass takes twice the
cycles.
"""

from __future__ import annotations

from math import ceil, inf
from typing import NamedTuple

from .config import NPUConfig

SPLIT_DEPTH = 16  # Vela's OFMSplitDepth
BLOCK_MAX = (32, 64, 128)  # largest output block (h, w, c)
SUB_KERNEL = 8  # kernels larger than 8x8 run as sub-kernels
BANK_BYTES = 1024
RESERVED_OUTPUT_BANKS = 2
RESERVED_END_BANKS = 2


class Query(NamedTuple):
    """One MAC-array operation: kind (conv, dwconv, fc, pool), ifm and ofm (h, w, c), kernel
    (kh, kw), strides, dilations, the input map's element bits (8 or 16) and the factor the
    hardware upscales the input by as it reads it (2: a TRANSPOSE_CONV's zero-inserted input,
    Vela's resampling; ``ifm`` is then the map before upscaling) and the rounding regor adds
    to the upscaled input block's rows and columns (RequiredInputSize's ``rounding``: 1 for
    its nearest resize's AvgPool, whose 8x8 output block then reads a 6x6 input block)."""

    kind: str
    ifm: tuple[int, int, int]
    ofm: tuple[int, int, int]
    kernel: tuple[int, int] = (1, 1)
    strides: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    bits: int = 8
    upscale: int = 1
    rounding: int = 0


class Block(NamedTuple):
    ofm: tuple[int, int, int]
    ifm: tuple[int, int, int]
    partkernel: bool


def round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def _area(q: Query) -> tuple[int, int]:
    return tuple((k - 1) * d + 1 for k, d in zip(q.kernel, q.dilation))


def _partkernel(q: Query) -> bool:
    """Part-kernel-first (8 channels x 4 kernel elements) beats depth-first (32 channels)?"""
    if q.kind != "conv":
        return False
    depth, elems = q.ifm[2], q.kernel[0] * q.kernel[1]
    if depth <= 8:
        return True
    wide = q.bits == 16
    depth_util = depth / round_up(depth, 16 if wide else 32)
    part_util = depth * elems / (round_up(depth, 8) * round_up(elems, 2 if wide else 4))
    return part_util > depth_util


def _ifm_block(q: Query, ofm: tuple[int, int, int], ublock, ifm_depth: int):
    areas = _area(q)  # regor's RequiredInputSize: the input rows read, before upscaling
    dims = [
        round_up(-(-((o - 1) * s + min(a, SUB_KERNEL) + q.rounding) // q.upscale), u)
        for o, s, a, u in zip(ofm[:2], q.strides, areas, ublock[:2])
    ]
    return (dims[0], dims[1], ifm_depth)


def _acc40_granule(config: NPUConfig) -> int:
    """SHRAM banks allocated at a time for 40-bit accumulators: Vela's tables give 4 more than
    for 32-bit ones on the 128-, 256- and 512-MAC arrays (8 -> 12, 16 -> 20)."""
    return config.shram_acc_granule + 4


def _acc40(q: Query) -> bool:
    """16-bit inputs accumulate in 40 bits (except pooling)."""
    return q.bits == 16 and q.kind != "pool"


def _fits(config: NPUConfig, ofm, ifm, q: Query | None = None) -> bool:
    """Input block (double-buffered) and 32- or 40-bit accumulators fit the SHRAM banks."""
    bits = q.bits if q is not None else 8
    ifm_bytes = ifm[0] * ifm[1] * round_up(ifm[2] * bits // 8, 8)
    ifm_banks = round_up(-(-ifm_bytes // BANK_BYTES) * 2, config.shram_ifm_granule)
    wide = q is not None and _acc40(q)
    acc_bytes = ofm[0] * ofm[1] * round_up(ofm[2], 8) * (40 if wide else 32) // 8
    granule = _acc40_granule(config) if wide else config.shram_acc_granule
    acc_banks = round_up(-(-acc_bytes // BANK_BYTES) * 2, granule)
    acc_start = config.shram_banks - RESERVED_END_BANKS - acc_banks  # the LUT banks at the end
    return RESERVED_OUTPUT_BANKS + ifm_banks <= acc_start


def _fetch_cost(q: Query, ofm, ifm, repeats: int, weight_wh: int, equal_depth: bool) -> float:
    """Input and weight fetches per output element for output block ``ofm`` (Vela's
    expression, in its float order: ties between blocks depend on it)."""
    oh, ow, oc = q.ofm
    full = (ceil(oh / ofm[0]), ceil(ow / ofm[1]), ceil(oc / ofm[2]))
    weight = weight_wh * q.ifm[2] * (full[0] * full[1])
    if not equal_depth:
        weight *= ofm[2] * (oc / ofm[2])
    fetch = ifm[0] * ifm[1] * q.ifm[2] * repeats * ((oh / ofm[0]) * (ow / ofm[1]))
    if not equal_depth:
        fetch *= full[2]
    cost = (fetch + weight) / (oh * ow * oc)
    if q.ifm[0] * q.ifm[1] * q.ifm[2] < ifm[0] * ifm[1] * ifm[2] * 2:
        cost /= 2  # the whole input fits both buffers
    return cost


def find_block(config: NPUConfig, q: Query) -> Block:
    """The output block with the fewest input and weight fetches per output element."""
    ublock = config.ofm_block
    oh, oc = q.ofm[0], q.ofm[2]
    partkernel = _partkernel(q)
    equal_depth = q.kind in ("dwconv", "pool")
    if q.bits == 16:
        ifm_depth = round_up(min(q.ifm[2], 16), 4)
    else:
        ifm_depth = round_up(min(q.ifm[2], 16 if partkernel else 32), 8)
    space = [round_up(min(o, m), u) for o, m, u in zip(q.ofm, BLOCK_MAX, ublock)]
    repeats = ceil(_area(q)[0] / SUB_KERNEL) * ceil(_area(q)[1] / SUB_KERNEL)
    weight_wh = _area(q)[0] * _area(q)[1] if q.kind != "pool" else 0  # Vela uses the dilated area
    best, best_cost, best_coverage = None, inf, inf
    depth = max(ublock[2], min(space[2], SPLIT_DEPTH))
    if depth < oc:
        depth = round_up(depth, SPLIT_DEPTH)
    while depth <= space[2]:
        wont_fit = set()  # Vela skips the transpose of a block that did not fit
        for h in range(ublock[0], space[0] + 1, ublock[0]):
            for w in range(ublock[1], space[1] + 1, ublock[1]):
                if (h, w) in wont_fit:
                    continue
                ofm = (h, w, depth)
                ifm = _ifm_block(q, ofm, ublock, depth if equal_depth else ifm_depth)
                if oh == 1 and q.kernel[0] == 1 and ublock[0] == 2:
                    ofm = (1, w, depth)  # Vela's 1-D optimisation for 256/512-MAC arrays
                if not _fits(config, ofm, ifm, q):
                    wont_fit.add((w, h))
                    continue
                cost = _fetch_cost(q, ofm, ifm, repeats, weight_wh, equal_depth)
                if cost < best_cost:
                    best, best_cost = Block((h, w, depth), ifm, partkernel), cost
                    best_coverage = inf
                elif cost == best_cost and h <= 4 and w <= 4:
                    # equal cost: prefer the block that covers more of a small input
                    covered = min(q.ifm[0], ifm[0]) * min(q.ifm[1], ifm[1])
                    coverage = q.ifm[0] * q.ifm[1] / covered
                    if coverage <= best_coverage:
                        best, best_coverage = Block((h, w, depth), ifm, partkernel), coverage
        depth += ublock[2]
        if depth < oc:
            depth = round_up(depth, SPLIT_DEPTH)
    if best is None:  # nothing fits: the smallest block (Vela would refuse the op)
        best = Block(tuple(ublock), _ifm_block(q, ublock, ublock, ifm_depth), partkernel)
    return best


def _dpu_block_cycles(
    config: NPUConfig, q: Query, block: Block, ofm_block, regor: bool = False
) -> float:
    """MAC cycles of one output block; ``regor``: Vela 5.2's estimate, whose pooling takes
    ifm bits / 2 cycles per micro-block and kernel element (4 for 8-bit inputs; the legacy
    estimate 1, 2 for 16-bit)."""
    ublock = config.ofm_block
    one_d = q.kind != "pool" and q.ofm[0] == 1 and q.kernel[0] == 1
    if one_d and ublock[0] == 2 and q.ofm[1] % 2 == 0:  # 1-D rows use a 1x4 micro-block
        ublock = (1, 4, ublock[2])
        ofm_block = (1, ofm_block[1], ofm_block[2])
    n_xy = ceil(ofm_block[0] / ublock[0]) * ceil(ofm_block[1] / ublock[1])
    n_z = ceil(ofm_block[2] / ublock[2])
    wb = 32 * ublock[2] // 8
    limit = (1, 1) if q.kind == "fc" else (SUB_KERNEL, SUB_KERNEL)
    kh, kw = q.kernel
    subs = [
        min(kh - i * limit[0], limit[0]) * min(kw - j * limit[1], limit[1])
        for i in range(ceil(kh / limit[0]))
        for j in range(ceil(kw / limit[1]))
    ]
    ifm_depth = min(q.ifm[2], block.ifm[2])
    per_ublock = 32 / config.ifm_depth_per_cycle  # cycles for one 32-channel pass (4 on Ethos-U)
    cycles = 0.0
    for elems in subs:
        wide = 2 if q.bits == 16 else 1  # 16-bit depthwise and pooling passes take twice as long
        if q.kind == "pool":
            steps, c = 1, max(4, elems) * n_xy * n_z * (q.bits // 2 if regor else wide)
        elif q.kind == "dwconv":
            steps = ceil(elems / 4)
            c = max(wb, per_ublock * n_xy * wide) * steps * n_z
        elif block.partkernel:
            steps = ceil(elems / (2 if q.bits == 16 else 4))
            c = max(wb, per_ublock * n_xy) * steps * ceil(ifm_depth / 8) * n_z
        else:
            steps = elems
            c = max(wb, per_ublock * n_xy) * steps * n_z
        # the accumulator pipeline's delay: 3 cycles for 40-bit accumulators on the 64- and
        # 128-MAC arrays, else 2
        lag = 3 if _acc40(q) and config.macs_per_cycle in (64, 128) else 2
        delay = 0
        if n_xy == 1:
            delay = lag * steps if n_z == 1 else lag * (steps - 1) * n_z if steps > 1 else 0
        if block.partkernel:
            delay *= ceil(ifm_depth / 8)
        cycles += c + delay
    if q.kind in ("conv", "fc"):
        cycles *= ceil(q.ifm[2] / ifm_depth)
    # the presets' arrays are exactly ublock x depth-per-cycle x cores MACs wide; a custom
    # macs_per_cycle scales the rate
    nominal = ublock[0] * ublock[1] * ublock[2] * config.ifm_depth_per_cycle * config.cores
    return cycles / config.cores * nominal / config.macs_per_cycle


def _output_stage_elems(config: NPUConfig, q: Query, ofm_block) -> float:
    """Elements the output stage handles per block. Pooling (and QUANTIZE, run as a 1x1 average
    pool): the block's depth rounded up to the micro-block's, and on a multi-core array the
    cores split the depth in micro-block slices, so a map shallower than one slice per core
    keeps the others idle (Vela 5.2 charges a 3-channel QUANTIZE 19,283 cycles on u65-256 and
    16,667 on u65-512, about 96x96 x 8 channels at the one-core rate; the rate in the config
    is the whole array's; a 16-bit pool keeps both cores busy: the 16x8 nearest resize's
    AvgPool on u65-512, 6x6x8 blocks, ao 36 per block in Vela's debug database). MAC
    operations: the block as it is (Vela's legacy estimate, which
    tests/backends/npu/test_npu_blocks.py compares)."""
    h, w, d = ofm_block
    if q.kind != "pool":
        return h * w * d
    slices = ceil(d / config.ofm_block[2])
    if q.bits == 16:  # no idle core
        return h * w * slices * config.ofm_block[2]
    return h * w * slices * config.ofm_block[2] * config.cores / min(config.cores, slices)


def _fractional_blocks(config: NPUConfig, q: Query, ofm_block) -> float:
    """How many output blocks the map is, counted in micro-blocks (regor's numOfmBlks)."""
    ublock = config.ofm_block
    if q.kind != "pool" and q.ofm[0] == 1 and q.kernel[0] == 1 and ublock[0] == 2:
        if q.ofm[1] % 2 == 0:  # the 1-D rows' 1x4 micro-block
            ublock = (1, 4, ublock[2])
    whole = ceil(q.ofm[0] / ublock[0]) * ceil(q.ofm[1] / ublock[1]) * ceil(q.ofm[2] / ublock[2])
    one = ceil(ofm_block[0] / ublock[0]) * ceil(ofm_block[1] / ublock[1])
    return whole / (one * ceil(ofm_block[2] / ublock[2]))


def mac_cycles(
    config: NPUConfig,
    q: Query,
    output_cycles_per_elem: float,
    transfer=None,
    fill: bool = False,
    const_latency: float | None = None,
    block: Block | None = None,
) -> tuple[float, Block]:
    """Compute cycles of one MAC-array operation and the block it runs with. ``transfer``
    (input block, output block) -> cycles: the minimum memory cycles of one block where the
    maps live (Vela 5.2's EstimateMinimumMemoryCycles); default: both in SRAM, one byte per
    element, full bursts (Vela's legacy estimate). ``const_latency``: the first-byte latency
    of the memory the scales and biases are fetched from per block (default SRAM's; the
    weight memory's when Vela leaves the weights there, weight_staging.py). ``block``: the
    block to run with (default: find_block's for the whole map; a cascaded operation's is
    chosen for its stripe, vela_cascade.py)."""
    if block is None:
        block = find_block(config, q)
    ofm_block = tuple(min(a, b) for a, b in zip(q.ofm, block.ofm))
    ifm_block = tuple(min(a, b) for a, b in zip(q.ifm, block.ifm))
    dpu = _dpu_block_cycles(config, q, block, ofm_block, regor=fill)
    out_elems = ofm_block[0] * ofm_block[1] * ofm_block[2]
    output = ceil(output_cycles_per_elem * _output_stage_elems(config, q, ofm_block))
    if q.kind != "pool":  # scale and bias fetch per block
        latency = config.sram_latency_cycles if const_latency is None else const_latency
        output = max(output, 10 * ofm_block[2] * latency / 256)
    # per-block command overhead: the input and output block transfers through SRAM
    if transfer is None:
        moved = (
            2 * config.sram_latency_cycles
            + (ifm_block[0] * ifm_block[1] * ifm_block[2] + out_elems) / config.sram_bandwidth
        )
    else:
        moved = transfer(block.ifm, block.ofm)
    first = moved + output + dpu
    cmd = first / 4
    raw = dpu, output
    dpu, output = max(dpu, cmd), max(output, cmd)
    blocks = (
        ceil(q.ofm[0] / ofm_block[0])
        * ceil(q.ofm[1] / ofm_block[1])
        * ceil(q.ofm[2] / ofm_block[2])
    )
    if fill:  # Vela 5.2: the first block's transfers, MACs and output stage in sequence, then
        # the other blocks counted in micro-blocks (regor's fractional numOfmBlks: a 144-deep
        # map in 128-deep blocks is 1.125 blocks, not 2)
        blocks = _fractional_blocks(config, q, ofm_block)
        if blocks <= 1:  # regor's one block: its MACs and its output stage each at least the
            # command issue bound, (MACs + output) / 4 (EstimateMacOpCycles' balanced cycles;
            # binds a pool's small output stage: maxpool_same_k3s1 on u55-128, 1,620 + 425)
            issue = sum(raw) / 4
            return moved + sum(max(c, issue) for c in raw), block
        return first + (blocks - 1) * max(dpu, output), block
    total = dpu * blocks + output if dpu > output else output * blocks + dpu
    return total, block


def single_mac_op(
    config: NPUConfig,
    q: Query,
    output_cycles_per_elem: float,
    transfers,
    const_latency: float | None = None,
) -> float:
    """Cycles of one MAC-array operation that is both the first and the last of its schedule,
    as regor's EstimateMacOpCycles charges it (scheduling First | Last): per output block
    (counted in micro-blocks) the MACs or the output stage, whichever binds, each at least a
    quarter of the command's issue time (the MACs, the output stage and, for more than one
    block, the difference of the block's input and output transfers), then the other of the
    two once, plus one input and one output block transfer. ``transfers`` (input block, output
    block) -> (read cycles, write cycles); ``const_latency``: as mac_cycles'. Used for MEAN's
    convolutions (vela_decompose.py):
    their one block pays its MACs plus the issue quarter, where mac_cycles' fill pays the
    output stage instead (0.80 of Vela on big_map_288's 144x144 MEAN). Also Vela's MemoryCopy
    (vela_pad.copy_cycles) and the Quantize after a MAC operation (vela_quantize.py), with
    ``const_latency`` 0 (no scales and biases), to within 2 cycles of their debug-database
    rows."""
    block = find_block(config, q)
    ofm_block = tuple(min(a, b) for a, b in zip(q.ofm, block.ofm))
    dpu = _dpu_block_cycles(config, q, block, ofm_block, regor=True)
    elems = ofm_block[0] * ofm_block[1] * ofm_block[2]
    latency = config.sram_latency_cycles if const_latency is None else const_latency
    stage = max(
        ceil(output_cycles_per_elem * elems),
        10 * ofm_block[2] * latency / 256,  # scales and biases per block
    )
    blocks = _fractional_blocks(config, q, ofm_block)
    read, write = transfers(block.ifm, block.ofm)
    cmd = ((abs(write - read) if blocks > 1 else 0) + dpu + stage) / 4
    mac, stage = max(dpu, cmd), max(stage, cmd)
    total = int(mac * blocks) + stage if mac > stage else stage * blocks + mac
    return total + read + write
