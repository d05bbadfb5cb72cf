"""Vela 5.2's cascades on the U65 (Dedicated_Sram, feature maps spilled to DRAM) and the stripe
each cascaded operation runs in, after regor's scheduler (read in its source: the cascade
builder's spilling mode, Scheduler::ProposeMinimalSchedule, ProposeScheduleStriping and
OptimizeSubSchedule; checked against ``vela --verbose-schedule`` on MobileNetV2 224).

    cascades  starting at a streaming operation, the next operation joins while it is the
              only reader of the previous one's output, streams too, and cannot hold its whole
              input and output in SRAM (each intermediate map counted as Vela stores it,
              NHCWB16: the depth rounded up to 16) while the cascade's buffers still fit
    stripes   the last operation's stripe is the tallest of 1 + its minimum (the next
              operation's vertical stride; 1 for the last), 2 + ... up to half its height whose
              cascade still fits the SRAM; each earlier operation's stripe is its consumer's
              times the consumer's vertical stride. A cascade's memory is its rolling buffers
              (between producer and consumer: the producer's stripe plus the rows the consumer
              reads per stripe, rounded up to a multiple of the latter, over the map's width
              and its depth rounded up to 16) and its weight buffers
    blocks    an operation in a cascade chooses its block for its stripe (regor's
              FindBlockConfig on the output stripe and the input rows it reads): MobileNetV2
              224's first convolution runs 6x20x16 blocks in its 6-row stripes where on its own
              it runs 6x16x32, and reads its DRAM input once per 16 output channels

Only the U65's spilling mode is modelled (the U55's Shared_Sram mode builds cascades by a
different rule, not read here); weight buffers are counted as the raw weights plus Vela's
10-byte scale record per output channel (its encoded weights are not modelled).
"""

from __future__ import annotations

from .config import NPUConfig
from .memory import streams
from .program import NPUOp, Program

SCALE_RECORD_BYTES = 10
BRICK_DEPTH = 16  # NHCWB16


def _window(op: NPUOp) -> tuple[int, int]:
    """(vertical kernel extent, vertical stride) of a streaming operation."""
    if op.kind in ("CONV", "DWCONV"):
        kh = op.arrays["weights"].shape[1]
        return (kh - 1) * op.params["dilation"][0] + 1, op.params["strides"][0]
    if op.kind == "UNIT" and op.params.get("op") in ("nn.max_pool2d", "qnn.avg_pool2d"):
        a = op.params["attrs"]
        return (a["pool_size"][0] - 1) * a.get("dilation", (1, 1))[0] + 1, a["strides"][0]
    return 1, 1


def input_rows(op: NPUOp, stripe: int, height: int) -> int:
    """Input rows one output stripe of ``op`` reads (at most the input's ``height``)."""
    extent, stride = _window(op)
    return min(height, (stripe - 1) * stride + extent)


def _stored(program: Program, t: int) -> int:
    """Bytes of a whole map as Vela stores it: NHWC for a region's input or output, NHCWB16
    (depth rounded up to 16) between two operations."""
    desc = program.tensors[t]
    if t in (*program.inputs, *program.outputs) or len(desc.shape) != 4:
        return desc.nbytes
    n, h, w, c = desc.shape
    return n * h * w * -(-c // BRICK_DEPTH) * BRICK_DEPTH * (desc.nbytes // (n * h * w * c))


def _weight_buffer(op: NPUOp) -> int:
    if "weights" not in op.arrays:
        return 0
    return op.arrays["weights"].nbytes + SCALE_RECORD_BYTES * op.arrays["weights"].shape[0]


def _rolling(program: Program, producer: NPUOp, consumer: NPUOp, s_prod: int, s_cons: int) -> int:
    """The rolling buffer between two cascaded operations (regor's RollingBufferShape)."""
    desc = program.tensors[producer.output]
    _, h, w, c = desc.shape
    rows = input_rows(consumer, s_cons, h)
    height = -(-(min(s_prod, h) + rows) // rows) * rows
    return height * w * -(-c // BRICK_DEPTH) * BRICK_DEPTH


def _cascadable(program: Program, i: int, stripe: int) -> bool:
    """regor's IsCascadable: a streaming operation whose stripe is shorter than its output."""
    op = program.ops[i]
    shape = program.tensors[op.output].shape
    return streams(op) and len(shape) == 4 and stripe < shape[1]


def _min_stripe(program: Program, index: int) -> int:
    """The minimal schedule's stripe of op ``index``: the next operation's vertical stride."""
    if index + 1 < len(program.ops):
        return _window(program.ops[index + 1])[1]
    return 1


def _stripes(program: Program, ops: list[int], last: int) -> dict[int, int]:
    """Each operation's stripe, from the last one's (ProposeScheduleStriping)."""
    out = {ops[-1]: last}
    for k in range(len(ops) - 1, 0, -1):
        out[ops[k - 1]] = out[ops[k]] * _window(program.ops[ops[k]])[1]
    return out


def _readers(program: Program) -> dict[int, list[int]]:
    readers: dict[int, list[int]] = {}
    for i, op in enumerate(program.ops):
        for t in set(op.inputs):
            readers.setdefault(t, []).append(i)
    return readers


def _build(program: Program, ops: list[int], stripes: dict[int, int], limit: int, weights: bool):
    """regor's cascade builder in its spilling mode over the consecutive operations ``ops`` with
    ``stripes``: [(cascade's operations, its buffers' bytes)]. ``weights``: count each
    operation's weight buffer (the striped proposals; the minimal schedule has none)."""
    readers = _readers(program)

    def weight(i: int) -> int:
        return _weight_buffer(program.ops[i]) if weights else 0

    cascades, k = [], 0
    while k < len(ops):
        i = ops[k]
        if not _cascadable(program, i, stripes[i]):
            k += 1
            continue
        chain, buffers, size = [i], weight(i), 0
        while chain[-1] != ops[-1]:
            p, j = chain[-1], chain[-1] + 1
            producer, current = program.ops[p], program.ops[j]
            if readers.get(producer.output) != [j] or producer.output in program.outputs:
                break
            if not _cascadable(program, j, stripes[j]) or current.inputs[0] != producer.output:
                break
            buffers += weight(j) + _rolling(program, producer, current, stripes[p], stripes[j])
            whole = _stored(program, current.inputs[0]) + _stored(program, current.output)
            if whole < limit or buffers > limit:
                break
            chain.append(j)
            size = buffers
        if len(chain) > 1:
            cascades.append((chain, size))
        k += len(chain)
    return cascades


def _usage(program: Program, ops: list[int], cascades) -> int:
    """A proposal's peak SRAM (EstimateScheduleMemoryUsage): a cascade's buffers, an operation
    outside one its whole maps and weights."""
    inside = {i: size for chain, size in cascades for i in chain}
    peak = 0
    for i in ops:
        op = program.ops[i]
        if i in inside:
            peak = max(peak, inside[i])
            continue
        maps = sum(_stored(program, t) for t in op.inputs[:2]) + _stored(program, op.output)
        peak = max(peak, maps + _weight_buffer(op))
    return peak


def _optimise(program: Program, chain: list[int], limit: int) -> dict[int, int]:
    """regor's OptimizeSubSchedule for one cascade of the minimal schedule: taller stripes for
    its last operation while the proposal fits and does not split into more cascades."""
    end = chain[-1]
    height = program.tensors[program.ops[end].output].shape[1]
    best, most = None, 0
    for h in range(_min_stripe(program, end) + 1, (height + 1) // 2 + 1):
        stripes = _stripes(program, chain, h)
        cascades = _build(program, chain, stripes, limit, weights=True)
        most = most or len(cascades)
        if _usage(program, chain, cascades) > limit or len(cascades) > most:
            break
        best = {i: stripes[i] for c, _ in cascades for i in c}
        if not cascades:
            break
    if best is None:  # the minimal schedule's cascade and stripes stay
        return {i: _min_stripe(program, i) for i in chain}
    return best


def cascade_stripes(program: Program, config: NPUConfig) -> dict[int, int]:
    """{op index: output stripe height} for the operations Vela 5.2 cascades (empty on the
    U55 presets, where no feature map spills)."""
    if config.spill_memory == "none":
        return {}
    limit = config.sram_bytes
    ops = list(range(len(program.ops)))
    minimal = {i: _min_stripe(program, i) for i in ops}
    out: dict[int, int] = {}
    for chain, _ in _build(program, ops, minimal, limit, weights=False):
        out.update(_optimise(program, chain, limit))
    return out


def cascaded_offchip(program: Program, config: NPUConfig) -> set[int]:
    """Maps spilled off-chip that Vela would cascade instead: written by a streaming op and read
    only by the next one, which streams too (Vela keeps their stripes in SRAM, so both ops move
    them at SRAM speed; our plan spills the whole map, memory.plan_memory)."""
    if config.spill_memory == "none":
        return set()
    io = {*program.inputs, *program.outputs}
    readers: dict[int, list[int]] = {}
    for i, op in enumerate(program.ops):
        for t in set(op.inputs):
            readers.setdefault(t, []).append(i)
    out = set()
    for i, op in enumerate(program.ops[:-1]):
        t = op.output
        desc = program.tensors[t]
        if desc.memory == "sram" or t in io or readers.get(t) != [i + 1]:
            continue
        if streams(op) and streams(program.ops[i + 1]):
            out.add(t)
    return out
