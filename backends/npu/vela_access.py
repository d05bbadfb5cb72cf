"""Vela 5.2's memory access rules, per block, and its rule for native elementwise operations
(regor's EstimateMinimumMemoryCycles, EstimateMemoryTransfer and EstimateElementwiseCycles),
as the cycle model (cycles.py) uses them: the first-byte latency of each memory, the bursts a
block of an NHWC map moves in, an elementwise operation's output block and element access, and
its cycles (per output element the output stage's rate, but at least a quarter of one block's
minimum memory cycles per block element plus the rate), and the flat shape Vela moves a map as
where the operation does not care for its shape."""

from __future__ import annotations

from math import ceil, isqrt

import numpy as np

from .blocks import BLOCK_MAX, round_up
from .config import NPUConfig
from .program import NPUOp, TensorDesc
from .vela_deepen import SHALLOW_DEPTH, deepened_shape


def bandwidth(config: NPUConfig, memory: str) -> float:
    if memory == "sram":
        return config.sram_bandwidth
    if memory == config.weight_memory:
        return config.weight_bandwidth
    return config.spill_bandwidth or config.weight_bandwidth


# Vela 5.2's native elementwise operations (regor's EstimateElementwiseCycles) and the output
# rate each runs at: ADD/SUB its advanced add/sub rate, MUL the multiplier's, MAXIMUM/MINIMUM
# the plain output rate (the conv output rate's entry of the same table)
ELEMENTWISE_RATES = {
    "qnn.add": "add_output_cycles",
    "qnn.subtract": "add_output_cycles",
    "qnn.mul": "mul_output_cycles",
    "maximum": "conv_output_cycles",
    "minimum": "conv_output_cycles",
}
# an activation fused into an elementwise operation that runs at the activation unit's rate
# (Vela's int16 sigmoid/tanh fused into an ADD: regor's output cycles per element are the
# slower of the operation's and the activation's; the integer LSTM's gate ADDs, vela_lstm.py)
FUSED_LUT_ACTIVATIONS = ("sigmoid", "tanh")
SRAM_BURST_BYTES = 32  # vela.ini's Sram_burst_length
OFFCHIP_WRITE_LATENCY = {"dram": 250, "flash": 0}  # vela.ini's *_write_latency
# Vela's output-stage cycles per element of an elementwise op reading 32-bit data (its index 1),
# per MAC-array size and cores; other designs: 1.5x the add rate
WIDE_ELEMENTWISE_CYCLES = {(128, 1): 1.25, (256, 1): 1.125, (512, 2): 0.5625}


# our tables for what Vela runs as a native unary elementwise operation: TFLite's int8 ABS
# (Vela's ABS, the plain output rate) and NEG (Vela's NEG, at the add/sub rate: 192 cycles
# for 256 values on u55-256)
UNARY_RATES = {
    "negative": "add_output_cycles",
    "cast+subtract+abs+qnn.requantize": "conv_output_cycles",
}


COPY_DEPTH = 16  # the depth Vela reshapes a map to where its size allows


def flat_shape(shape) -> tuple[int, int, int]:
    """The h x w x c map Vela 5.2 moves a map of ``shape`` as, where the operation does not
    care for its shape (a reshape's MemoryCopy, an elementwise operation or a table on NHWC
    maps, vela_copy.py and vela_unary.py): its elements as 16 channels where the size allows
    (else its own depth), rows and columns as near a square as they divide (an 8x8x4 map is
    one 4x4x16 block: Vela's debug database, one-op ABS, ADD, MUL, LOGISTIC, RELU, RESHAPE)."""
    dims = tuple(int(d) for d in shape) or (1,)
    n = int(np.prod(dims))
    c = COPY_DEPTH if n % COPY_DEPTH == 0 else dims[-1]
    m = n // c
    h = max(d for d in range(1, isqrt(m) + 1) if m % d == 0)
    return h, m // h, c


def deepens(config, op: NPUOp, ins, out) -> bool:
    """Whether Vela 5.2 runs this elementwise operation on ``deepened_shape``: its output is
    shallower than 8 channels and has more than 16 elements, and no operand broadcasts (a
    scalar does not)."""
    shape = nhwc(out.shape)
    elems = int(np.prod(out.shape))
    return shape[2] < SHALLOW_DEPTH and elems > 16 and not broadcasts(config, op, ins, out)


def is_elementwise(op: NPUOp) -> bool:
    return elementwise_rate_name(op) is not None


def elementwise_rate_name(op: NPUOp) -> str | None:
    name = op.params.get("op")
    if op.kind == "UNIT":
        return ELEMENTWISE_RATES.get(name)
    if op.kind == "LUT":
        if name == "qnn.leaky_relu" and op.params.get("in_dtype") == "int16":
            return "conv_output_cycles"  # 16x8: Vela's LeakyRelu, ABS's figures (no table)
        return UNARY_RATES.get(name)
    return None


def memory_latency(config: NPUConfig, memory: str, write: bool) -> int:
    """The first-byte latency of a read or a write of ``memory`` (vela.ini's latencies)."""
    if memory == "sram":
        return config.sram_latency_cycles
    if write:
        return OFFCHIP_WRITE_LATENCY.get(memory, config.dma_latency_cycles // 2)
    return config.dma_latency_cycles


def nhwc(shape: tuple) -> tuple[int, int, int]:
    shape = tuple(int(d) for d in shape) or (1,)
    shape = (1,) * max(0, 3 - len(shape)) + shape
    return (int(np.prod(shape[:-2])), shape[-2], shape[-1])


def burst_factor(config, memory: str, shape, block, item: int, write: bool) -> float:
    """Bytes moved per byte of a map in ``memory`` (h x w x c ``shape``) read or written a
    ``block`` at a time: each burst carries one contiguous run, the block's rows when the block
    spans the map's depth, else one block depth (Vela's EstimateMemoryTransfer for NHWC)."""
    burst = SRAM_BURST_BYTES if memory == "sram" else config.offchip_burst_bytes
    run = block[1] * block[2] * item if shape[2] * item == block[2] else block[2] * item
    if write and not (block[2] <= 16 and shape[2] * item == block[2]):
        run = min(64, 16 * item * config.cores, block[2] * item)
    return burst / max(1, min(burst, run))


def brick_burst_factor(config, memory: str, shape, block, item: int, write: bool) -> float:
    """``burst_factor`` for a map Vela keeps in NHCWB16 bricks (an intermediate map): a burst
    carries 16 channels of the block's columns (of every core's block when writing), or the
    block's columns and depth when a brick row is one block deep (regor's
    EstimateMemoryTransfer, whose brick stride in bytes is compared with the block's depth)."""
    burst = SRAM_BURST_BYTES if memory == "sram" else config.offchip_burst_bytes
    if shape[1] * item * 16 == block[2]:
        run = block[1] * block[2] * item
    else:
        run = 16 * item * block[1] * (config.cores if write else 1)
    return burst / max(1, min(burst, run))


def block_transfer(
    config, memory: str, shape, block, item: int, write: bool, brick: bool = False
) -> float:
    """Cycles to move one block of a map in ``memory``: its first-byte latency and its bytes
    in bursts (``burst_factor``; ``brick``: the map is in NHCWB16 bricks)."""
    nbytes = int(np.prod([min(a, b) for a, b in zip(shape, block)])) * item
    factor = brick_burst_factor if brick else burst_factor
    moved = nbytes * factor(config, memory, shape, block, item, write)
    return memory_latency(config, memory, write) + moved / bandwidth(config, memory)


def elementwise_block(config: NPUConfig, shape) -> tuple[int, int, int]:
    """The output block of an elementwise operation: the map up to Vela's largest block, in
    micro-blocks (the SHRAM-limited search of Vela matters only where the block's costs
    bind: small maps and off-chip ones). On the two-core U65-512 too the block is no deeper
    than the map in micro-blocks (Vela 5.2's debug database: 4x4x8 for the 16x8 ADD and ABS
    on 4x4x8 maps, 8x8x8 for abs_in_graph's ABS; its cmd cycles 180, 172 and 80)."""
    ub = config.ofm_block
    depth = ub[2]
    return (
        round_up(min(shape[0], BLOCK_MAX[0]), ub[0]),
        round_up(min(shape[1], BLOCK_MAX[1]), ub[1]),
        max(depth, round_up(min(shape[2], BLOCK_MAX[2]), depth)),
    )


def _operands(config, op: NPUOp, ins) -> list[tuple[str, int, int]]:
    """(memory, elements, item size) of each operand an elementwise operation reads: its
    inputs and its constant operands of more than one element."""
    operands = [(t.memory, int(np.prod(t.shape)), np.dtype(t.dtype).itemsize) for t in ins]
    return operands + [
        (config.weight_memory, a.size, a.itemsize)
        for a in op.arrays.values()
        if a.size > 1 and op.params.get("op") in ELEMENTWISE_RATES
    ]


def broadcasts(config, op: NPUOp, ins, out) -> bool:
    """Whether an operand has more than one element but fewer than the output."""
    elems = int(np.prod(out.shape))
    return any(1 < n < elems for _, n, _ in _operands(config, op, ins))


def elementwise_access(config, op: NPUOp, ins, out, moved: dict, scaled: dict) -> None:
    """Vela's element access of an elementwise operation that broadcasts (an input or a
    constant operand with more than one element but fewer than the output): every operand is
    read at the output's size, and each map moves in the bursts of its NHWC shape (Vela keeps
    the shapes; without broadcasting it reshapes the maps and bursts are full): the one-op
    ``add_broadcast`` (8x8x4 maps, 8-channel blocks: 8-byte runs) reads 3,072 SRAM bytes on
    u55-256 for 768 bytes of maps, as Vela's report."""
    elems = int(np.prod(out.shape))
    operands = _operands(config, op, ins)
    if not broadcasts(config, op, ins, out):
        return
    moved.clear()
    scaled.clear()
    shape = nhwc(out.shape)
    block = elementwise_block(config, shape)
    item = np.dtype(out.dtype).itemsize
    for i, (memory, _, size) in enumerate([*operands, (out.memory, elems, item)]):
        nbytes = elems * size
        factor = burst_factor(config, memory, shape, block, size, i == len(operands))
        moved[memory] = moved.get(memory, 0) + nbytes
        scaled[memory] = scaled.get(memory, 0.0) + nbytes * factor


def elementwise_cycles(
    config: NPUConfig,
    ins,
    out,
    rate: float,
    brick: bool = False,
    reshaped=None,
    brick_reads: bool = False,
) -> float:
    """Vela 5.2's cycles for a native elementwise operation (regor's
    EstimateElementwiseCycles): per output element the output ``rate``, but at least
    (minimum memory cycles of one block / block elements + rate) / 4, the minimum memory cycles
    being the slower of the slowest input block's transfer and the output block's
    (``block_transfer``; not their sum, which the regor source we read adds: Vela 5.2's cmd
    cycles in its debug database give the read alone where it is the slower, 152 for a one-op
    ABS on u65-256 from DRAM to DRAM, and the write alone where that is, 89 for PRELU's
    MAXIMUM from SRAM to DRAM; ``reshaped``: the h x w x c shape Vela runs the maps as,
    ``flat_shape``), over the output's elements (``brick``: an intermediate map, which Vela
    stores in NHCWB16 bricks, its depth rounded up to 16: MobileNetV2's 8-channel residual ADD
    costs twice its elements' rate on u65-512);
    the block is the output map up to Vela's largest block, in micro-blocks (the SHRAM-limited
    search of Vela matters only where this bound binds: small maps and off-chip ones).
    ``brick_reads``: the inputs are intermediate maps too; bricked maps move in
    ``brick_burst_factor``'s bursts (16x8 abs_in_graph's ABS on u65-256, its maps in DRAM as
    regor's scheduler estimates it: 357 cycles, est_op_cycles_without_buffering)."""
    shape = nhwc(out.shape) if reshaped is None else reshaped
    block = elementwise_block(config, shape)
    item = np.dtype(out.dtype).itemsize
    reads = [
        block_transfer(
            config,
            t.memory,
            nhwc(t.shape) if reshaped is None else reshaped,
            block,
            np.dtype(t.dtype).itemsize,
            False,
            brick_reads,
        )
        for t in ins
        if int(np.prod(t.shape)) > 1
    ]
    write = block_transfer(config, out.memory, shape, block, item, True, brick)
    minimum = max([*reads, write])
    per_elem = max(rate, (minimum / (block[0] * block[1] * block[2]) + rate) / 4)
    if brick:  # an intermediate map in Vela's NHCWB16 layout: the depth in bricks of 16
        return per_elem * shape[0] * shape[1] * round_up(shape[2], 16)
    return per_elem * int(np.prod(out.shape))


def elementwise_op_cycles(config: NPUConfig, op: NPUOp, ins, out, brick: bool, flat: bool) -> float:
    """``elementwise_cycles`` of a native elementwise operation ``op``; ``flat``: it reads
    region inputs and writes a region output (NHWC maps), which Vela runs on the maps'
    ``flat_shape`` where no operand broadcasts (its debug database, one-op ABS, ADD, SUB, NEG,
    MUL, MAXIMUM, MINIMUM on u65-256: one 4x4x16 block for the 8x8x4 maps, cmd cycles 152-184,
    which our rule now gives to the cycle; on the 8x8x8 block 196-228)."""
    rate = getattr(config, elementwise_rate_name(op))
    if op.params.get("activation") in FUSED_LUT_ACTIVATIONS:  # the activation's output rate
        rate = max(rate, config.lut_cycles)
    flat = flat and not broadcasts(config, op, ins, out) and not maps16(ins, out)
    reshaped = flat_shape(out.shape) if flat else None
    if not flat and brick and not maps16(ins, out) and deepens(config, op, ins, out):
        reshaped = deepened_shape(out.shape)  # an intermediate map, shallow: 16 deep
    return elementwise_cycles(config, ins, out, rate, brick, reshaped)


def maps16(ins, out) -> bool:
    """Whether an operation reads and writes 16-bit maps only (16x8)."""
    return all(np.dtype(t.dtype).itemsize == 2 for t in (*ins, out))


def map16_access(config: NPUConfig, ins, out, scaled: dict, bricked=None) -> None:
    """Vela 5.2's access of 16-bit maps by an elementwise operation that writes a region's
    NHWC output (16x8 ABS, LEAKY_RELU, ADD, SUB, MUL, MAXIMUM, MINIMUM): it keeps the maps'
    shape (no ``flat_shape``) and moves each NHWC map in ``burst_factor``'s bursts of one block
    depth, the block no deeper than the map (its debug database, one-op 4x4x8 int16 maps: read
    and write efficiency 0.5 in SRAM on the U55s, 0.125 in DRAM on the U65s; ADD 1,024 + 512
    effective SRAM bytes, 192 cycles, on u55-256 and 4,096 + 2,048 DRAM bytes, 512 cycles, on
    u65-256). ``bricked``: per input, whether it is an intermediate map, which Vela keeps in
    NHCWB16 bricks (depth rounded up to 16) and reads in full bursts; the NHWC inputs of such
    an operation are read at the bricks' depth too (MAXIMUM after its input's QUANTIZE: 512 +
    1,024 SRAM bytes read on u55-256, 512 + 4,096 DRAM bytes on u65-256; 256 and 554 cycles).
    ``scaled`` (bytes weighted by burst efficiency per memory) is replaced."""
    shape = nhwc(out.shape)
    block = tuple(min(b, d) for b, d in zip(elementwise_block(config, shape), shape))
    bricked = bricked or [False] * len(ins)
    depth = round_up(shape[2], 16) / shape[2] if any(bricked) else 1.0
    scaled.clear()
    for t, brick in zip(ins, bricked):
        if int(np.prod(t.shape)) <= 1:
            continue
        factor = 1.0 if brick else burst_factor(config, t.memory, shape, block, 2, False)
        scaled[t.memory] = scaled.get(t.memory, 0.0) + t.nbytes * depth * factor
    factor = burst_factor(config, out.memory, shape, block, 2, True)
    scaled[out.memory] = scaled.get(out.memory, 0.0) + out.nbytes * factor


def map_transfer(config: NPUConfig, ifm, ofm, io: tuple[str, str], bricks=(False, False)):
    """The minimum memory cycles of one block of a MAC-array operation, Vela 5.2's
    EstimateMinimumMemoryCycles: the input block's first-byte latency and bytes in bursts
    plus the output block's, each in the memory its map lives in. ``bricks``: whether the
    input and the output are intermediate maps, which Vela keeps in NHCWB16 bricks (16x8
    abs_in_graph on u55-256, its debug database: the first 3x3 convolution writes its
    8x8x8 int16 map at write efficiency 1.0, 960 op cycles; the last 1x1 one reads the ABS's
    map at read efficiency 1.0, 704)."""
    ishape, oshape = nhwc(ifm.shape), nhwc(ofm.shape)
    isize, osize = np.dtype(ifm.dtype).itemsize, np.dtype(ofm.dtype).itemsize

    def transfer(ifm_block, ofm_block) -> float:
        read = block_transfer(config, io[0], ishape, ifm_block, isize, False, bricks[0])
        return read + block_transfer(config, io[1], oshape, ofm_block, osize, True, bricks[1])

    return transfer


def map_transfers(config: NPUConfig, ifm, ofm, io: tuple[str, str], bricked: bool = False):
    """``map_transfer``'s input and output block transfers apart: (input block, output block)
    -> (read cycles, write cycles) (blocks.single_mac_op). ``bricked``: the input is a map
    between two operations, which Vela keeps in NHCWB16 bricks and reads in full bursts
    (EstimateMemoryTransfer: 16 channels x the block's width per burst)."""
    ishape, oshape = nhwc(ifm.shape), nhwc(ofm.shape)
    isize, osize = np.dtype(ifm.dtype).itemsize, np.dtype(ofm.dtype).itemsize

    def transfers(ifm_block, ofm_block) -> tuple[float, float]:
        if bricked:
            nbytes = int(np.prod([min(a, b) for a, b in zip(ishape, ifm_block)])) * isize
            read = memory_latency(config, io[0], False) + nbytes / bandwidth(config, io[0])
        else:
            read = block_transfer(config, io[0], ishape, ifm_block, isize, False)
        return read, block_transfer(config, io[1], oshape, ofm_block, osize, True)

    return transfers


def elementwise_pass(
    config,
    name: str,
    ins,
    out,
    arrays: dict,
    brick: bool,
    flat: bool,
    brick_reads: bool = False,
    estimate: bool = False,
) -> float:
    """One native elementwise operation as Vela charges it: the slower of its output stage
    (``elementwise_cycles``; ``flat``: on Vela's ``flat_shape`` of the map, where no operand
    broadcasts) and each memory's access (bytes in bursts / bandwidth, no first-byte latency;
    a broadcast operand read at the output's size: ``elementwise_access``). ``estimate``:
    the output stage alone, as regor's scheduler estimates the operation (its
    est_op_cycles_without_buffering: 357 for the 16x8 leaky_relu_in_graph's MAXIMUM on
    u65-256, three 8x8x8 int16 maps in DRAM whose access would take 512)."""
    op = NPUOp("UNIT", name, [], 0, {"op": name}, arrays)
    flat = flat and not broadcasts(config, op, ins, out)
    rate = getattr(config, ELEMENTWISE_RATES.get(name) or UNARY_RATES[name])
    reshaped = flat_shape(out.shape) if flat else None
    compute = elementwise_cycles(config, ins, out, rate, brick, reshaped, brick_reads)
    if estimate:
        return compute
    shape = nhwc(out.shape)
    bricks = round_up(shape[2], 16) / shape[2] if brick else 1.0  # NHCWB16: depth in 16s
    scaled: dict[str, float] = {}
    for t in (*ins, out):
        nbytes = int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize * bricks
        scaled[t.memory] = scaled.get(t.memory, 0.0) + nbytes
    broadcast: dict[str, float] = {}
    elementwise_access(config, op, ins, out, {}, broadcast)
    if broadcast:  # every operand read at the output's size, in the bursts of its shape
        scaled = {m: n * bricks for m, n in broadcast.items()}
    return max(compute, *(n / bandwidth(config, m) for m, n in scaled.items()))


def prelu_as_max(op: NPUOp) -> bool:
    """Whether Vela rewrites this PReLU as a maximum of two products: its constant alpha takes
    more than one value, all below 1 (equal values make it a leaky ReLU, larger ones a
    minimum, a product, a ReLU and an addition)."""
    alpha = (op.arrays["c0"].astype(np.int64) - op.arrays["c4"].astype(np.int64)) * op.arrays[
        "c3"
    ].astype(np.float64)
    return bool(alpha.min() != alpha.max() and alpha.max() < 1)


def prelu_as_vela(config: NPUConfig, op: NPUOp, ifm, ofm, brick: bool, flat: bool) -> float:
    """A PReLU with a constant alpha whose largest value is below 1, as Vela 5.2 rewrites it:
    a multiplication by alpha (the constant read from the weight memory, broadcast over H and
    W), a multiplication by one that rescales the input to the output's quantization (none
    when the two quantizations are equal), and a maximum of the two products, which writes the
    output. The products are SRAM intermediates. Vela charges each operation the slower of its
    output stage and its memories, and no fixed cost; the sum of the two or three is returned.
    ``brick``: the output is an intermediate map, which Vela stores, with the two products
    (copies of the output's tensor), in NHCWB16 bricks; a region output's products are NHWC.
    ``flat``: the PReLU reads a region input and writes a region output, and Vela runs its
    operations that do not broadcast on the maps' ``flat_shape`` (its debug database, one-op
    PRELU on u65-256: the rescaling MUL and the MAXIMUM on 4x4x16 blocks, 160 and 89 cycles)."""
    alpha = op.arrays["c0"]
    if not prelu_as_max(op):
        raise ValueError("prelu_as_vela: alpha must vary and stay below 1 (prelu_as_max)")
    sram = TensorDesc(tuple(ofm.shape), ofm.dtype, "sram")
    cycles = elementwise_pass(config, "qnn.mul", [ifm], sram, {"alpha": alpha}, brick, flat)
    same = all(np.array_equal(op.arrays[a], op.arrays[b]) for a, b in (("c1", "c5"), ("c2", "c6")))
    if not same:
        cycles += elementwise_pass(config, "qnn.mul", [ifm], sram, {}, brick, flat)
    return cycles + elementwise_pass(config, "maximum", [sram, sram], ofm, {}, brick, flat)


def leaky_as_max(op: NPUOp) -> bool:
    """A 16x8 LEAKY_RELU that rescales (its input and output quantizations differ): Vela 5.2
    runs it as a MUL by one that rescales, a MUL by alpha and a MAXIMUM (its per-layer report
    of leaky_relu_in_graph); with equal quantizations, as its native LeakyRelu."""
    leaky16 = op.params.get("op") == "qnn.leaky_relu" and op.params.get("in_dtype") == "int16"
    return leaky16 and bool(op.params.get("rescales"))  # 8-bit: a table, as Vela


def unfused_table(op: NPUOp) -> bool:
    """A 16x8 ABS or LEAKY_RELU: Vela 5.2 runs it as an elementwise operation of its own (its
    per-layer report of abs_in_graph and leaky_relu_in_graph), never in a convolution's output
    stage, so it is not fused either (the simulator's table would be bit-exact there too)."""
    return op.params.get("in_dtype") == "int16" and op.params.get("op") in (
        "cast+subtract+abs+qnn.requantize",
        "qnn.leaky_relu",
    )


def unary16_as_vela(config: NPUConfig, ifm, ofm, brick: bool, flat: bool) -> float:
    """A 16x8 ABS, or LEAKY_RELU with equal quantizations, as Vela's one native elementwise
    operation (Abs, LeakyRelu; ABS's rate): ``elementwise_pass``, the slower of its output
    stage and its memories (Vela's per-layer report of abs_in_graph on u55-256: 512 cycles,
    its 16-bit maps' SRAM traffic). From a region's NHWC input to its output (``flat``) Vela
    keeps the 16-bit map's shape (no ``flat_shape``) and moves it in ``burst_factor``'s bursts
    of one block depth (the debug database of the one-op 4x4x8 int16 ABS: read and write
    efficiency 0.5 in SRAM on the U55s, 0.125 in DRAM on the U65s: 128 and 341 cycles)."""
    name = "cast+subtract+abs+qnn.requantize"
    if not (flat and ofm.dtype == "int16"):
        return elementwise_pass(config, name, [ifm], ofm, {}, brick, flat)
    compute = elementwise_cycles(config, [ifm], ofm, getattr(config, UNARY_RATES[name]))
    scaled: dict[str, float] = {}
    map16_access(config, [ifm], ofm, scaled)
    return max(compute, *(n / bandwidth(config, m) for m, n in scaled.items()))


def leaky_as_vela(config: NPUConfig, ifm, ofm, brick: bool, flat: bool) -> float:
    """``leaky_as_max``'s three operations as Vela charges them (``prelu_as_vela``'s rule with
    a scalar alpha, a command-stream register): the two products SRAM intermediates."""
    sram = TensorDesc(tuple(ofm.shape), ofm.dtype, "sram")
    cycles = 2 * elementwise_pass(config, "qnn.mul", [ifm], sram, {}, brick, flat)
    return cycles + elementwise_pass(config, "maximum", [sram, sram], ofm, {}, brick, flat)


def prelu_tail(config: NPUConfig, ofm, brick: bool, flat: bool) -> float:
    """The MAXIMUM ending Vela's PReLU (prelu_as_vela) as regor's scheduler estimates it, the
    slack the next operation's weight DMA runs under: its maps where they are before SRAM
    placement (off-chip on the U65; prelu_in_graph u65-256: 357, Vela's estimate 335 against
    its 256-cycle run)."""
    m = far_map(config, ofm)
    return elementwise_pass(config, "maximum", [m, m], m, {}, brick, flat, brick, True)


def far_map(config: NPUConfig, t, intermediate: bool = True):
    """Map ``t`` where regor's scheduler estimate places it, before SRAM placement: an
    intermediate map in the spill memory (off-chip on the U65), else where it lives."""
    if not intermediate:
        return t
    memory = config.spill_memory if config.spill_memory != "none" else "sram"
    return TensorDesc(tuple(t.shape), t.dtype, memory)


def unary16_tail(config: NPUConfig, ifm, ofm, brick_in: bool, brick: bool, flat: bool) -> float:
    """The 16x8 ABS or LEAKY_RELU of ``unary16_as_vela`` as regor's scheduler estimates it,
    the slack the next operation's weight DMA runs under: its intermediate maps off-chip (the
    U65), in bricks (abs_in_graph u65-256: 357, est_op_cycles_without_buffering, against its
    256-cycle run)."""
    if flat:
        return unary16_as_vela(config, ifm, ofm, brick, flat)
    name = "cast+subtract+abs+qnn.requantize"
    src, dst = far_map(config, ifm, brick_in), far_map(config, ofm, brick)
    return elementwise_pass(config, name, [src], dst, {}, brick, flat, brick_in, True)


def ifm_block_read(config: NPUConfig, q, block, t) -> tuple[float, float]:
    """Bytes a MAC op reads from its input map, off-chip or in SRAM (every output block fetches
    its input block, with the kernel's overlap; a convolution once per block of output channels)
    and the off-chip burst efficiency: an NHWC read returns one input block's depth per burst,
    or the block's rows when the block spans the map's depth (regor's EstimateMemoryTransfer,
    burst_factor)."""
    (oh, ow, oc), (bh, bw, bd) = q.ofm, block.ofm
    item = np.dtype(t.dtype).itemsize
    ih, iw = min(block.ifm[0], q.ifm[0]), min(block.ifm[1], q.ifm[1])
    fetch = ih * iw * q.ifm[2] * item * ceil(oh / bh) * ceil(ow / bw)
    if q.kind in ("conv", "fc"):
        fetch *= ceil(oc / bd)
    return fetch, burst_factor(config, t.memory, nhwc(t.shape), block.ifm, item, write=False)


def wide_elementwise_cycles(config: NPUConfig) -> float:
    """Vela's output-stage cycles per element of an elementwise op reading 32-bit data."""
    key = (config.macs_per_cycle, config.cores)
    return WIDE_ELEMENTWISE_CYCLES.get(key, 1.5 * config.add_output_cycles)
