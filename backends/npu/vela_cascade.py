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


def _cascadable(op: NPUOp, program: Program) -> bool:
    return streams(op) and len(program.tensors[op.output].shape) == 4


def _min_stripe(program: Program, index: int) -> int:
    """The minimal schedule's stripe of op ``index``: the next operation's vertical stride."""
    if index + 1 < len(program.ops):
        return _window(program.ops[index + 1])[1]
    return 1


def _stripes(program: Program, ops: list[int], last: int) -> list[int]:
    """Each cascaded operation's stripe, from the last one's (ProposeScheduleStriping)."""
    out = [last]
    for i in reversed(ops[1:]):
        out.append(out[-1] * _window(program.ops[i])[1])
    return out[::-1]


def _memory(program: Program, ops: list[int], stripes: list[int]) -> int:
    total = sum(_weight_buffer(program.ops[i]) for i in ops)
    for k in range(1, len(ops)):
        p, c = program.ops[ops[k - 1]], program.ops[ops[k]]
        total += _rolling(program, p, c, stripes[k - 1], stripes[k])
    return total


def _build(program: Program, limit: int) -> list[list[int]]:
    """The cascade builder in its spilling mode, on the minimal schedule's stripes."""
    readers: dict[int, list[int]] = {}
    for i, op in enumerate(program.ops):
        for t in set(op.inputs):
            readers.setdefault(t, []).append(i)
    cascades, i = [], 0
    while i < len(program.ops):
        op = program.ops[i]
        height = program.tensors[op.output].shape[1] if _cascadable(op, program) else 0
        if height <= _min_stripe(program, i):
            i += 1
            continue
        chain, buffers = [i], _weight_buffer(op)
        while True:
            p = chain[-1]
            producer, j = program.ops[p], p + 1
            if j >= len(program.ops) or readers.get(producer.output) != [j]:
                break
            if producer.output in program.outputs:
                break
            current = program.ops[j]
            if not _cascadable(current, program) or current.inputs[0] != producer.output:
                break
            if program.tensors[current.output].shape[1] <= _min_stripe(program, j):
                break
            buffers += _weight_buffer(current) + _rolling(
                program, producer, current, _min_stripe(program, p), _min_stripe(program, j)
            )
            whole = _stored(program, current.inputs[0]) + _stored(program, current.output)
            if whole < limit or buffers > limit:
                break
            chain.append(j)
        if len(chain) > 1:
            cascades.append(chain)
        i = chain[-1] + 1
    return cascades


def cascade_stripes(program: Program, config: NPUConfig) -> dict[int, int]:
    """{op index: output stripe height} for the operations Vela 5.2 cascades (empty on the
    U55 presets, where no feature map spills)."""
    if config.spill_memory == "none":
        return {}
    limit = config.sram_bytes
    out: dict[int, int] = {}
    for chain in _build(program, limit):
        end = chain[-1]  # the minimal schedule's stripes stay if no taller one fits
        height = program.tensors[program.ops[end].output].shape[1]
        best = _stripes(program, chain, _min_stripe(program, end))
        for h in range(_min_stripe(program, end) + 1, (height + 1) // 2 + 1):
            stripes = _stripes(program, chain, h)
            if _memory(program, chain, stripes) > limit:
                break
            best = stripes
        out.update(zip(chain, best))
    return out
