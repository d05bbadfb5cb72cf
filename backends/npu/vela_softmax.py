"""SOFTMAX as Vela 5.2 runs it (the 16x8 one: ``softmax16_as_vela``). int8: regor's 8-bit
softmax graph, 29 NPU operations, read off its debug database (`vela --enable-debug-db`, the
one-op softmax (1x16) and softmax_4d (1x4x4x8) models of tests/models/tflite/ops, u55-256
and u65-256) and charged operation by operation with this model's rules. For an h x w x c
input (rows h x w, classes c):

    a max pool over the classes, (h*w) x c x 1 in a 1 x c window, to an 8-bit row maximum;
    a SUB of the row maximum with the exp table fused (32-bit out, the LUT's output rate);
    an ASR by a constant scalar (32-bit, NHWC);
    a ReduceSum over the classes to the 32-bit row sum;
    a CLZ of the row sums (unary 32-bit);
    twenty binary 32-bit operations on the h x w x 1 row sums (the reciprocal's
        Newton-Raphson steps): ten with a constant scalar read from the weight memory, ten
        of two row-sum maps;
    a MUL of the exponentials by the row reciprocals, an ADD of a constant h x w x c map
        read from the weight memory, and an ASR writing the 8-bit output.

Each elementwise operation costs the slower of its output stage (vela_access.elementwise_cycles
at Vela's 32-bit rates, regor's indices 0 and 1) and each memory's access (bytes over
bandwidth; Vela keeps the intermediates in NHCWB16 bricks, their depth rounded up to 16; a
map read from the weight memory in the bursts of its NHWC shape); the max pool and the
ReduceSum run in the block model. Per operation against Vela on u55-256: the twenty row-sum
operations 288 (scalar) / 384 (two maps) cycles on softmax_4d (16 rows), the ADD of the
constant 2,048 (test_npu_layout_vela.py holds the totals).
"""

from __future__ import annotations

from .blocks import Query, mac_cycles, round_up
from .config import NPUConfig
from .program import TensorDesc
from .vela_access import (
    bandwidth,
    block_transfer,
    burst_factor,
    elementwise_block,
    map_transfer,
    nhwc,
    wide_elementwise_cycles,
)

# Vela's output cycles per element of a unary operation on 32-bit data (regor's index 0) per
# MAC-array size and cores; other designs: the plain output rate x 2.5
UNARY_WIDE_CYCLES = {(128, 1): 0.75, (256, 1): 0.625, (512, 2): 0.3125}
ROW_SCALAR_OPS = 10  # the reciprocal's operations with a constant scalar
ROW_MAP_OPS = 10  # and those of two row-sum maps


def _unary_wide(config: NPUConfig) -> float:
    key = (config.macs_per_cycle, config.cores)
    return UNARY_WIDE_CYCLES.get(key, 2.5 * config.conv_output_cycles)


def _bytes(t: TensorDesc, brick: bool) -> float:
    h, w, c = nhwc(t.shape)
    depth = round_up(c, 16) if brick and h * w * c > 1 else c
    return h * w * depth * _item(t)


def _output_stage(config: NPUConfig, ins, out: TensorDesc, rate: float, brick: bool) -> float:
    """regor's EstimateElementwiseCycles (vela_access.elementwise_cycles), a scalar operand's
    block transfer included in the minimum memory cycles: a constant scalar read from the
    U65's DRAM binds the softmax's scalar operations (68 cycles for 16 values on u65-256, 18
    from the U55's flash)."""
    shape = nhwc(out.shape)
    block = elementwise_block(config, shape)
    reads = [block_transfer(config, t.memory, nhwc(t.shape), block, _item(t), False) for t in ins]
    write = block_transfer(config, out.memory, shape, block, _item(out), True)
    per_elem = max(rate, ((max(reads) + write) / (block[0] * block[1] * block[2]) + rate) / 4)
    depth = round_up(shape[2], 16) if brick else shape[2]
    return per_elem * shape[0] * shape[1] * depth


def _item(t: TensorDesc) -> int:
    return {"int32": 4, "int16": 2}.get(t.dtype, 1)


def elementwise_op(config: NPUConfig, ins, out: TensorDesc, rate: float, bricks) -> float:
    """One elementwise operation: the slower of its output stage and its memories' access;
    ``bricks``: per operand (inputs, then the output) whether Vela stores it in NHCWB16."""
    compute = _output_stage(config, ins, out, rate, bricks[-1])
    block = elementwise_block(config, nhwc(out.shape))
    access: dict[str, float] = {}
    for i, (t, brick) in enumerate(zip((*ins, out), bricks)):
        write = i == len(ins)
        nbytes = _bytes(t, brick)
        if i == 1 and _bytes(ins[0], False) > _item(ins[0]) and nbytes == _item(t):
            # a scalar second operand off-chip is read in one burst (Vela's ASR of the 16
            # exponentials by a flash scalar: 128 cycles on u55-256, 128 bytes at 1 per cycle)
            nbytes = 0 if t.memory == "sram" else config.offchip_burst_bytes
        elif t.memory != "sram" and not brick:
            nbytes *= burst_factor(config, t.memory, nhwc(t.shape), block, _item(t), write)
        access[t.memory] = access.get(t.memory, 0.0) + nbytes
    return max(compute, *(n / bandwidth(config, m) for m, n in access.items()))


def _reduce_sum(config: NPUConfig, src: TensorDesc, dst: TensorDesc, bricked: bool) -> float:
    """A ReduceSum over the classes in the block model, at least its SRAM access."""
    h, w, c = nhwc(src.shape)
    reduce = Query("conv", (h, w, c), (h, w, 1), bits=8 * _item(src))
    transfer = map_transfer(config, src, dst, ("sram", "sram"))
    compute = mac_cycles(config, reduce, config.conv_output_cycles, transfer, fill=True)[0]
    return max(compute, (_bytes(src, bricked) + _bytes(dst, True)) / config.sram_bandwidth)


def softmax_as_vela(config: NPUConfig, ifm: TensorDesc, dst: str) -> float | None:
    """Cycles of a SOFTMAX over the last axis of ``ifm`` (where it lives) writing its output
    (of the input's type) to ``dst`` as Vela's operations: int8 (``softmax8_as_vela``), 16x8
    (``softmax16_as_vela``); None for another type."""
    if ifm.dtype == "int16":
        return softmax16_as_vela(config, ifm, dst)
    return softmax8_as_vela(config, ifm, dst) if ifm.dtype == "int8" else None


def softmax8_as_vela(config: NPUConfig, ifm: TensorDesc, dst: str) -> float:
    """Cycles of an int8 SOFTMAX over the last axis of ``ifm`` (where it lives) writing its
    output to ``dst``, as Vela's 29 operations (module docstring)."""
    h, w, c = nhwc(ifm.shape)
    x = TensorDesc((1, h, w, c), "int8", ifm.memory)
    # the row maximum lives where the input does (Vela's debug database: DRAM on u65-256)
    row_max = TensorDesc((1, h, w, 1), "int8", ifm.memory)
    exps = TensorDesc((1, h, w, c), "int32", "sram")
    sums = TensorDesc((1, h, w, 1), "int32", "sram")
    scalar = TensorDesc((1,), "int32", config.weight_memory)
    offsets = TensorDesc((1, h, w, c), "int32", config.weight_memory)
    out = TensorDesc((1, h, w, c), "int8", dst)
    wide = wide_elementwise_cycles(config)

    pool = Query("pool", (h * w, c, 1), (h * w, 1, 1), (1, c))
    transfer = map_transfer(config, x, row_max, (x.memory, row_max.memory))
    cycles = mac_cycles(config, pool, config.pool_output_cycles, transfer, fill=True)[0]
    lut = max(config.add_output_cycles, config.lut_cycles)
    cycles += elementwise_op(config, [x, row_max], exps, lut, (False, False, True))
    cycles += elementwise_op(config, [exps, scalar], exps, wide, (True, False, False))
    cycles += _reduce_sum(config, exps, sums, False)
    cycles += elementwise_op(config, [sums], sums, _unary_wide(config), (True, True))
    cycles += ROW_SCALAR_OPS * elementwise_op(
        config, [sums, scalar], sums, wide, (True, False, True)
    )
    cycles += ROW_MAP_OPS * elementwise_op(config, [sums, sums], sums, wide, (True, True, True))
    cycles += elementwise_op(config, [exps, sums], exps, wide, (True, True, True))
    cycles += elementwise_op(config, [offsets, exps], exps, wide, (False, True, True))
    cycles += elementwise_op(config, [exps, sums], out, wide, (True, True, False))
    return cycles


def softmax16_as_vela(config: NPUConfig, ifm: TensorDesc, dst: str) -> float:
    """Cycles of a 16x8 SOFTMAX (int16 in and out) as Vela's 15 operations (its debug
    database, tests/models/tflite/int16/softmax.tflite, 1x16: 900 / 1,527 cycles on u55-256 /
    u65-256): a 16-bit max pool; a SUB of the row maximum (32-bit out); a MUL and an ADD of
    constant scalars, the exp table fused into the ADD (16-bit out); a ReduceSum; a CLZ; six
    32-bit operations on the row sums (four with a constant scalar, the last to 16 bits, the
    reciprocal table fused); a MUL of the exponentials by the reciprocals (32-bit out, regor's
    index 2); an ADD of a constant map; an ASR writing the 16-bit output."""
    h, w, c = nhwc(ifm.shape)
    x = TensorDesc((1, h, w, c), "int16", ifm.memory)
    row_max = TensorDesc((1, h, w, 1), "int16", ifm.memory)
    diffs = TensorDesc((1, h, w, c), "int32", "sram")
    exps = TensorDesc((1, h, w, c), "int16", "sram")
    sums = TensorDesc((1, h, w, 1), "int32", "sram")
    recips = TensorDesc((1, h, w, 1), "int16", "sram")
    scalar = TensorDesc((1,), "int32", config.weight_memory)
    offsets = TensorDesc((1, h, w, c), "int32", config.weight_memory)
    out = TensorDesc((1, h, w, c), "int16", dst)
    wide = wide_elementwise_cycles(config)

    pool = Query("pool", (h * w, c, 1), (h * w, 1, 1), (1, c), bits=16)
    transfer = map_transfer(config, x, row_max, (x.memory, row_max.memory))
    cycles = mac_cycles(config, pool, config.pool_output_cycles, transfer, fill=True)[0]
    rate = config.add_output_cycles
    cycles += elementwise_op(config, [x, row_max], diffs, rate, (False, False, True))
    cycles += elementwise_op(config, [diffs, scalar], diffs, wide, (True, False, True))
    cycles += elementwise_op(config, [diffs, scalar], exps, wide, (True, False, True))
    cycles += _reduce_sum(config, exps, sums, True)
    cycles += elementwise_op(config, [sums], sums, _unary_wide(config), (True, True))
    cycles += 4 * elementwise_op(config, [sums, scalar], sums, wide, (True, False, True))
    cycles += 2 * elementwise_op(config, [sums, sums], sums, wide, (True, True, True))
    product = _mul_wide_out(config)
    cycles += elementwise_op(config, [exps, recips], diffs, product, (True, True, True))
    cycles += elementwise_op(config, [offsets, diffs], diffs, wide, (False, True, True))
    cycles += elementwise_op(config, [diffs, sums], out, wide, (True, True, False))
    return cycles


# Vela's output cycles per element of a MUL with a 32-bit output (regor's index 2)
MUL_WIDE_OUT_CYCLES = {(128, 1): 0.75, (256, 1): 0.5, (512, 2): 0.25}


def _mul_wide_out(config: NPUConfig) -> float:
    key = (config.macs_per_cycle, config.cores)
    return MUL_WIDE_OUT_CYCLES.get(key, 2 * config.conv_output_cycles)
