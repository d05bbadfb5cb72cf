"""TFLite's int8 SUM as Vela 5.2 runs it, read off its debug database (`vela --enable-debug-db`:
perf's op cycles, perf_debug's shapes, memories and transpose type, perf_debug_main's mac / ao /
cmd cycles and blocks; the one-op models of tests/models/tflite/ops on u55-256 and u65-256,
figures in tests/backends/npu/test_npu_sum_vela.py):

    Vela reduces only the *first* summed axis (of H, W, C). Over H or W it sees the map as
    (outer, n, inner), n the summed axis (H of h x w x c: (1, h, w*c); W: (h, w, c)), and a
    hardware transpose (NHCW) moves that axis into the channels, (outer, inner, n), into SRAM;
    then one operation sums the channels to (outer, inner, 1), written where the output lives.
    Over C there is no transpose: the operation sums the map's own channels.
    The summing operation is a ReduceSum (a MAC-array operation without weights, scales or
    biases) where the input's zero point is 0, else a 1x1 Conv2D to one channel with all-ones
    weights (the zero point through the weights' offset).

Charged here as: the transpose by vela_layout.hardware_transpose_cycles (n30l's compound
Transpose rule: sum_h's 1x6x20 -> 1x20x6 62 / 553 cycles on u55-256 / u65-256, sum_hw's 1x8x32
96 / 521, sum_w's 6x5x4 120 / 660, Vela's exactly; read off-chip in blocks shallower than the
map, in 32-byte runs: ``transpose_cycles``); the ReduceSum in the block model with the
block a pool of the same maps gets (Vela's 2x4x8, 4x6x8, 4x4x8: perf_debug_main) and a
convolution's MAC passes, 32 channels each (Vela's mac cycles: 32 per block of sum_h's 6
channels, 96 per block of sum_hw_tall's 80), the input block read at the pool block's depth;
the Conv2D as our other convolutions are (cycles.op_cycles on a one-operation program), its
weights moved under the transpose (regor's buffered weights, weight_staging.buffered_cycles:
the transfer less the transpose's cycles plus its own estimate with its maps off-chip; u65-256
sum_hw 834, sum_wc 822 against Vela's 839 and 828).
Our lowering (backends/npu/legalize.py) sums every axis in one convolution, transposing first
where the window would pass 64; its transposes and reshapes cost nothing here (Vela's are
charged with the convolution). A SUM over C alone with a zero point (sum_in_graph's) is
Vela's Conv2D as we lower it: charged as before.
"""

from __future__ import annotations

import numpy as np

from .blocks import Query, find_block, mac_cycles
from .config import NPUConfig
from .program import NPUOp, Program, TensorDesc
from .vela_access import SRAM_BURST_BYTES, bandwidth, map_transfer, memory_latency
from .vela_layout import hardware_transpose_cycles, source_operator

SOURCES = ("SUM",)
MAC_PASS = 32  # input channels the MAC array sums per pass (blocks._dpu_block_cycles)
# our lowering's transposes (legalize._sum_transpose) -> the summed axes of the NHWC map
TRANSPOSED_AXES = {
    (0, 2, 3, 1): (1,),
    (0, 1, 3, 2): (2,),
    (0, 3, 1, 2): (1, 2),
    (0, 3, 2, 1): (1, 2),
}


def _producer(program: Program, t: int) -> NPUOp | None:
    return next((p for p in program.ops if p.output == t), None)


def _summed(op: NPUOp, program: Program) -> tuple[int, tuple, tuple[int, ...]] | None:
    """(the map the SUM reads, its NHWC shape, the summed axes) for a SUM's convolution, or None
    if ``op`` is not one or the lowering is not recognised."""
    t, perm = op.inputs[0], None
    while (p := _producer(program, t)) is not None and _lowered_move(p):
        if p.params["op"] == "transpose":
            perm = tuple(int(a) for a in p.params["attrs"]["axes"])
        t = p.inputs[0]
    shape = tuple(int(d) for d in program.tensors[t].shape)
    if len(shape) != 4 or shape[0] != 1:
        return None
    if perm is not None:
        return (t, shape, TRANSPOSED_AXES[perm]) if perm in TRANSPOSED_AXES else None
    ofm = program.tensors[op.output].shape
    if len(ofm) != 4:
        return None
    h, w, c = shape[1:]
    axes = [a for a, n, o in ((1, h, ofm[1]), (2, w, ofm[2])) if n > 1 and o == 1]
    if op.kind == "CONV" and c > 1 and ofm[3] == 1:
        axes.append(3)
    return (t, shape, tuple(axes)) if axes else None


def _lowered_move(op: NPUOp) -> bool:
    """A transpose or reshape of our SUM lowering (legalize.py)."""
    return (
        op.kind == "UNIT"
        and op.params.get("op") in ("transpose", "reshape")
        and source_operator(op) in SOURCES
    )


def transpose_cycles(
    config: NPUConfig, ifm: tuple, ofm: tuple, src: str, item: int, bound: bool = True
) -> float:
    """Vela's NHCW transpose of a SUM's view into SRAM: vela_layout's hardware transpose; but
    reading off-chip a map deeper than the transpose's block, the read moves in runs of one
    SRAM burst (32 bytes), not a block depth (sum_hw_tall's 1x80x160 view in 2x4x128 blocks
    from the U65's DRAM: 4,766 cycles, 500 + 12,800 x 4 / 12; n30l's rule gave 1,632; one
    model, fitted: on-chip reads and maps within one block are unchanged)."""
    cycles = hardware_transpose_cycles(config, ifm, ofm, (src, "sram"), item, bound)
    block = find_block(config, Query("pool", ifm, ifm)).ofm
    if src == "sram" or block[2] >= ifm[2]:
        return cycles
    burst = config.offchip_burst_bytes
    nbytes = int(np.prod(ifm)) * item * burst / min(burst, SRAM_BURST_BYTES)
    return max(cycles, nbytes / bandwidth(config, src) + memory_latency(config, src, False))


def reduce_sum_cycles(config: NPUConfig, ifm: tuple, io, dtype: str = "int8") -> float:
    """Vela's ReduceSum of the channels of an (h, w, c) map to (h, w, 1) (module docstring);
    ``io``: the memories of its input and output."""
    ofm = (*ifm[:2], 1)
    pool = find_block(config, Query("pool", ifm, ofm))
    block = pool._replace(ifm=(*pool.ifm[:2], min(ifm[2], MAC_PASS)))
    maps = TensorDesc((1, *ifm), dtype, io[0]), TensorDesc((1, *ofm), dtype, io[1])
    transfer = map_transfer(config, *maps, io)

    def read_as_pool(ifm_block, ofm_block) -> float:  # Vela's ifm block is the pool's
        return transfer(pool.ifm, ofm_block)

    q = Query("conv", ifm, ofm)
    return mac_cycles(config, q, config.conv_output_cycles, read_as_pool, True, block=block)[0]


def sum_as_vela(config: NPUConfig, op: NPUOp, program: Program, io, slack, charge) -> float | None:
    """Cycles of ``op`` as Vela's operations for the SUM it was lowered from (module
    docstring), or None where this module does not apply; ``io``: the memories of the map the
    operation reads and of its output as cycles.op_cycles decides them; ``slack``: the previous
    operation's cycles (weight_staging's); ``charge``: cycles.op_cycles, for the Conv2D."""
    if _lowered_move(op):
        return 0.0  # Vela's transpose is charged with the summing operation below
    if op.kind not in ("CONV", "DWCONV") or source_operator(op) not in SOURCES:
        return None
    found = _summed(op, program)
    if found is None:
        return None
    t, shape, axes = found
    src = program.tensors[t].memory if t in program.inputs else "sram"
    dims = list(shape[1:])
    first = min(axes)
    zero_point = int(op.params.get("in_zp", 0))
    if first == 3 and zero_point:
        return None  # Vela's Conv2D is our lowering (sum_in_graph): the usual charge
    cycles = estimate = 0.0  # the transpose's cycles; its estimate: the Conv2D's slack
    if first == 3:
        reduced = tuple(dims)
    else:
        i = first - 1
        outer, n, inner = int(np.prod(dims[:i])), dims[i], int(np.prod(dims[i + 1 :]))
        item = np.dtype(program.tensors[t].dtype).itemsize
        ifm, reduced = (outer, n, inner), (outer, inner, n)
        cycles += transpose_cycles(config, ifm, reduced, src, item)
        estimate = transpose_cycles(config, ifm, reduced, src, item, bound=False)
        src = "sram"
    if not zero_point:
        return cycles + reduce_sum_cycles(config, reduced, (src, io[1]), op.params["out_dtype"])
    # a 1x1 Conv2D to one channel, all-ones weights, on a one-operation program
    ofm = (*reduced[:2], 1)
    arrays = {**op.arrays, "weights": np.ones((1, 1, 1, reduced[2]), np.int8)}
    conv = NPUOp("CONV", "npu.conv2d (Conv2D)", [0], 1, dict(op.params), arrays)
    maps = [TensorDesc((1, *reduced), "int8", src), TensorDesc((1, *ofm), "int8", io[1])]
    one = Program(program.config, maps, [conv], [0], [1])
    # the transpose's estimate (its NPU cycles, without the access bound: sum_wc's 92 of 120
    # op cycles): regor's slack for the weights' DMA
    exposed = estimate or None
    return cycles + charge(conv, one, config, slack=estimate or slack, exposed=exposed)["cycles"]
