"""BATCH_MATMUL as Vela 5.2 runs it: a Transpose of the second operand into SRAM and a compound
MatMul (regor's EthosU55Performance::EstimateMatMulCycles, read in the 2026 source Vela 5.2
is built from, and checked against its debug database, `vela --enable-debug-db`: perf's
npu_cycles, perf_debug_main's ao and cmd cycles and blocks, on generated shapes: tools/
gen_matmul_models.py, tests/backends/npu/test_npu_matmul_vela.py).

    Transpose  the second operand (b, K, N) to (b, N, K), or with adj_y a copy of (b, N, K)
               (Vela's Transpose of type None): vela_layout.hardware_transpose_cycles
               without the scheduler's access bound (Vela's total counts NPU cycles)
    MatMul     per output column (N of them) an elementwise MUL of the first operand by that
               column, 32-bit products to a scratch map, and a ReduceSum of the products'
               channels into the column, each costed alone, its first block's input and last
               block's output transfers included (a single operation: OpScheduling::Single):

      MUL        ofm (b, M, K) int32 in the scratch memory: per element the 32-bit-out MUL
                 rate (regor's index 2), but at least a quarter of (the slowest block
                 transfer / the block's elements + that rate); the block: regor's elementwise
                 search on the map after MatMulDependencyFit (``mul_block``)
      ReduceSum  (b, M, K) -> (b, M, 1) in the block model: its fractional block count,
                 32 * ublock depth / 8 cycles per block and K / ifm block depth passes, the
                 output stage at the conv rate, then + the first ifm block's transfer (read as
                 8-bit data: regor passes the operand's type, not the scratch map's) + the
                 last ofm block's transfer, each with its memory's latency

The scratch map lives where Vela puts feature maps: SRAM on the U55, DRAM on the U65 (the
debug database's tensors: the Int32 scratch '#15' in Dram), so on the U65 every column pays
DRAM's read and write latencies (u65-256, 4x8x6: 873 cycles per column, 6 columns).

Bits are untouched: only the cycle charge follows Vela (npu.batch_matmul computes the int32
product and npu.requantize_wide its output stage). The reshapes around the product and its
requantize are folded into Vela's MatMul (its output stage rescales): they cost nothing.
Not charged: Vela's op cycles are max(the above, each memory's access cycles), the latter
far smaller on every shape checked (SRAM 90 against 756 cycles for 4x8x6 on u55-256).
"""

from __future__ import annotations

from fractions import Fraction
from math import ceil

import numpy as np

from .blocks import BLOCK_MAX, round_up
from .config import NPUConfig
from .program import NPUOp, Program
from .vela_access import bandwidth, burst_factor, memory_latency
from .vela_copy import RESHAPES
from .vela_layout import hardware_transpose_cycles
from .vela_softmax import MUL_WIDE_OUT_CYCLES

MATMUL = "qnn.batch_matmul"
MAC_PASS = 32  # input channels per ReduceSum pass (its ifm block depth at most)


def _mul_wide_out(config: NPUConfig) -> float:
    """Output cycles per element of a MUL with a 32-bit output (regor's index 2)."""
    key = (config.macs_per_cycle, config.cores)
    return MUL_WIDE_OUT_CYCLES.get(key, 2 * config.conv_output_cycles)


def dependency_fit(shape: tuple) -> tuple:
    """regor's MatMulDependencyFit on an (h, w, c) map: the rows (the columns while the rows
    fit one block) split in three or two where each part keeps at least 4, so that several
    blocks run between the MUL and the ReduceSum that depends on it."""
    axis = 0 if shape[0] > BLOCK_MAX[0] else 1
    if shape[axis] <= BLOCK_MAX[axis]:
        for divider in (3, 2):
            if shape[axis] >= 4 * divider:
                fitted = list(shape)
                fitted[axis] = ceil(shape[axis] / divider)
                return tuple(fitted)
    return tuple(shape)


def _transfer(config, memory: str, shape, block, item: int, write: bool) -> int:
    """regor's MinimumIfmCycles / MinimumOfmCycles for one map: the memory's latency and the
    block's bytes (clipped to the map) in bursts over bandwidth, truncated as regor does."""
    nbytes = int(np.prod([min(a, b) for a, b in zip(shape, block)])) * item
    moved = int(nbytes * burst_factor(config, memory, shape, block, item, write) + 1e-9)
    return memory_latency(config, memory, write) + int(moved / bandwidth(config, memory))


def mul_block(config: NPUConfig, shape: tuple) -> tuple[int, int, int]:
    """The MUL's output block (regor's elementwise search: the largest block, the fitted map
    in micro-blocks up to the largest block, one core's micro-block deep: 2x4x8 for 4x8 on
    u65-512, whose other elementwise blocks are two cores deep)."""
    ub = config.ofm_block
    return tuple(round_up(min(s, m), u) for s, m, u in zip(shape, BLOCK_MAX, ub))


def mul_cycles(config: NPUConfig, ifm: tuple, mems: tuple[str, str, str]) -> int:
    """One column's MUL: the first operand (b, M, K) by a column read from ``mems[1]`` into a
    32-bit map in ``mems[2]`` (``mems[0]``: the first operand's memory)."""
    rate = _mul_wide_out(config)
    elements = int(np.prod(ifm))
    block = mul_block(config, dependency_fit(ifm))
    blocks = max(
        _transfer(config, mems[2], ifm, block, 4, True),
        _transfer(config, mems[0], ifm, block, 1, False),
        _transfer(config, mems[1], ifm, block, 1, False),
    )
    ao = ceil(rate * elements)
    cmd = ceil((blocks / int(np.prod(block)) + rate) / 4 * elements)
    return max(ao, cmd)


def reduce_block(config: NPUConfig, ifm: tuple) -> tuple[tuple, tuple]:
    """(ofm block, ifm block) regor's FindBlockConfig gives the ReduceSum of a (b, M, K) map
    (its MatMul's main configuration): over output blocks of micro-blocks one micro-block
    deep, the fewest input fetches per output element of the fitted output, halved where two
    input blocks hold the fitted input, ties to the block covering more of the input if it is
    at most 4 x 4; the input block as deep as K up to MAC_PASS (SHRAM's limit not checked:
    small blocks win on the shapes checked)."""
    ub = config.ofm_block
    ofm, fitted = dependency_fit((ifm[0], ifm[1], 1)), dependency_fit(ifm)
    depth = min(round_up(ifm[2], 8), MAC_PASS)
    space = [round_up(min(o, m), u) for o, m, u in zip(ofm[:2], BLOCK_MAX, ub)]
    best, best_cost, best_coverage = None, None, None
    for h in range(ub[0], space[0] + 1, ub[0]):
        for w in range(ub[1], space[1] + 1, ub[1]):
            rows = min(h, 1) if ofm[0] == 1 and ub[0] == 2 else h  # regor's FitBlockForOFM
            fetch = Fraction(h * w * fitted[2]) * Fraction(ofm[1], w) * Fraction(ofm[0], rows)
            cost = fetch / (ofm[0] * ofm[1])
            if int(np.prod(fitted)) < 2 * h * w * depth:
                cost /= 2
            if best_cost is not None and cost > best_cost:
                continue
            if best_cost is not None and cost == best_cost:
                coverage = Fraction(fitted[0] * fitted[1], min(fitted[0], h) * min(fitted[1], w))
                if h > 4 or w > 4 or best_coverage is not None and coverage > best_coverage:
                    continue
                best_coverage = coverage
            else:
                best_coverage = None
            best, best_cost = (h, w), cost
    return (*best, ub[2]), (*best, depth)


def reduce_sum_cycles(config: NPUConfig, ifm: tuple, mems: tuple[str, str]) -> int:
    """One column's ReduceSum of the (b, M, K) products in ``mems[0]`` into (b, M, 1) in
    ``mems[1]`` (regor's EstimateMacOpCycles for a single operation)."""
    ub = config.ofm_block
    ofm = (ifm[0], ifm[1], 1)
    ofm_block, ifm_block = reduce_block(config, ifm)
    clipped = tuple(min(a, b) for a, b in zip(ofm, ofm_block))
    ublocks = [ceil(a / u) for a, u in zip(clipped, ub)]
    per_block = int(np.prod(ublocks))
    blocks = int(np.prod([ceil(a / u) for a, u in zip(ofm, ub)])) / per_block
    ao = ceil(config.conv_output_cycles * int(np.prod(clipped)))
    mac = max(32 * ub[2] // 8, 4 * ublocks[0] * ublocks[1]) * ublocks[2]
    if ublocks[0] * ublocks[1] == 1 and ublocks[2] == 1:
        mac += 2  # regor's accumulator delay for a lone micro-block
    mac = mac * ceil(ifm[2] / min(ifm[2], ifm_block[2])) // config.cores
    first = _transfer(config, mems[0], ifm, ifm_block, 1, False)
    last = _transfer(config, mems[1], ofm, ofm_block, 1, True)
    cmd = ((abs(last - first) if blocks > 1 else 0) + mac + ao) / 4
    mac_b, ao_b = max(mac, cmd), max(ao, cmd)
    if mac_b > ao_b:
        total = int(int(mac_b * blocks) + ao_b)
    else:
        total = int(ao_b * blocks + mac_b)
    return total + last + first


def matmul_cycles(config: NPUConfig, ifm: tuple, cols: int, mems: tuple) -> int:
    """Vela's compound MatMul of a (b, M, K) map by ``cols`` columns; ``mems``: the memories
    of the first operand, the transposed second one, the scratch map and the output."""
    per_column = mul_cycles(config, ifm, mems[:3]) + reduce_sum_cycles(config, ifm, mems[2:])
    return per_column * cols


def scratch_memory(config: NPUConfig) -> str:
    """Where Vela puts the MatMul's 32-bit scratch map: with the feature maps (the U65's DRAM,
    the U55's SRAM)."""
    return config.spill_memory if config.spill_memory != "none" else "sram"


def _producer(program: Program, t: int) -> NPUOp | None:
    return next((op for op in program.ops if op.output == t), None)


def _readers(program: Program, t: int) -> list[NPUOp]:
    return [op for op in program.ops if t in op.inputs]


def _is_reshape(op: NPUOp | None) -> bool:
    return (
        op is not None
        and op.kind == "UNIT"
        and op.params.get("op") in RESHAPES
        and len(op.inputs) == 1
    )


def _source(program: Program, t: int) -> str:
    """The memory an operand is read from: a region input's (through reshapes), else SRAM."""
    while t not in program.inputs:
        op = _producer(program, t)
        if not _is_reshape(op):
            return "sram"
        t = op.inputs[0]
    return program.tensors[t].memory


def _is_matmul(op: NPUOp | None) -> bool:
    if op is None or op.kind != "UNIT" or op.params.get("op") != MATMUL:
        return False
    return not op.params["attrs"].get("transpose_a", False)


def _feeds_matmul(op: NPUOp, program: Program) -> bool:
    """A reshape whose only readers are Vela MatMuls (possibly through more reshapes)."""
    readers = _readers(program, op.output)
    if not readers or op.output in program.outputs:
        return False
    return all(_is_matmul(r) or _is_reshape(r) and _feeds_matmul(r, program) for r in readers)


def _from_matmul(op: NPUOp, program: Program) -> bool:
    """The requantize of a MatMul's product, or a reshape of one (Vela's output stage)."""
    src = _producer(program, op.inputs[0]) if op.inputs else None
    if op.kind == "UNIT" and op.params.get("op") == "qnn.requantize":
        return _is_matmul(src) and _readers(program, op.inputs[0]) == [op]
    return _is_reshape(op) and src is not None and _from_matmul(src, program)


def _destination(op: NPUOp, program: Program) -> str:
    """The memory the MatMul's output is written to: the region output its requantize (and
    reshapes) end in, else SRAM."""
    t = op.output
    while t not in program.outputs:
        readers = _readers(program, t)
        if len(readers) != 1 or not _from_matmul(readers[0], program):
            return "sram"
        t = readers[0].output
    return program.tensors[t].memory


def matmul_as_vela(config: NPUConfig, op: NPUOp, program: Program) -> float | None:
    """Cycles of ``op`` as Vela runs a BATCH_MATMUL: the Transpose and MatMul for the product,
    0 for the reshapes and the requantize folded into them, None for any other operation."""
    if _is_matmul(op):
        a, b = (program.tensors[t] for t in op.inputs[:2])
        (m, k), batch = a.shape[-2:], int(np.prod(a.shape[:-2]))
        adj_y = op.params["attrs"].get("transpose_b", False)
        n = b.shape[-2] if adj_y else b.shape[-1]
        src = (batch, n, k) if adj_y else (batch, k, n)
        second = _source(program, op.inputs[1])
        io = (second, "sram")
        transpose = hardware_transpose_cycles(config, src, (batch, n, k), io, 1, bound=False)
        mems = (_source(program, op.inputs[0]), "sram", scratch_memory(config))
        mems = (*mems, _destination(op, program))
        return transpose + matmul_cycles(config, (batch, m, k), n, mems)
    if _is_reshape(op) and _feeds_matmul(op, program) or _from_matmul(op, program):
        return 0.0
    return None
