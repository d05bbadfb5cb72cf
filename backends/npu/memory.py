"""Place a Program's feature maps in SRAM: first fit by liveness, cascading of streaming ops
(a consumer reads its producer's output a band of rows at a time, so no whole map needs to be
resident), and spills to the configured off-chip memory where the SRAM cannot hold a map. Where
no plan fits and there is nothing to spill to, SRAMError says so and the backend gives the
partition back to the CPU."""

from __future__ import annotations

from partita.backends.registry import BackendError

from .config import NPUConfig
from .program import NPUOp, Program


class SRAMError(BackendError):
    """The SRAM plan cannot hold a program's feature maps and there is no memory to spill to."""


STREAMING_UNIT_OPS = ("qnn.add", "qnn.subtract", "qnn.mul", "nn.max_pool2d", "qnn.avg_pool2d")


def streams(op: NPUOp) -> bool:
    """Whether ``op`` reads and writes its maps a band of rows at a time (so its producer or
    consumer may cascade into it): the MAC array's convolutions, tables, elementwise and pooling
    ops. FC, mean, concatenation, reshape and resize need their whole input."""
    if op.params.get("views"):
        return False  # reads at an offset: its input whole
    if op.kind in ("CONV", "DWCONV", "LUT"):
        return True
    return op.kind == "UNIT" and op.params.get("op") in STREAMING_UNIT_OPS


def _band_rows(op: NPUOp, height: int) -> int:
    """Input rows the consumer ``op`` needs resident to make progress, double-buffered: its
    kernel's extent plus one stride (Vela's cascade buffer: the rows one output stripe reads)."""
    extent, stride = 1, 1
    if op.kind in ("CONV", "DWCONV"):
        kh = op.arrays["weights"].shape[1]
        extent = (kh - 1) * op.params["dilation"][0] + 1
        stride = op.params["strides"][0]
    elif op.kind == "UNIT" and op.params.get("op") in ("nn.max_pool2d", "qnn.avg_pool2d"):
        attrs = op.params["attrs"]
        extent, stride = attrs["pool_size"][0], attrs["strides"][0]
    return min(height, 2 * (extent + stride))


def cascade_bytes(program: Program, t: int, consumer: NPUOp) -> int:
    """SRAM a cascaded map occupies: the rows its consumer needs, double-buffered."""
    desc = program.tensors[t]
    if len(desc.shape) != 4:
        return desc.nbytes
    rows = _band_rows(consumer, desc.shape[1])
    return desc.nbytes // desc.shape[1] * rows


def _greedy_by_size(sizes: dict[int, int], spans: dict[int, tuple[int, int]]) -> dict[int, int]:
    """Offsets for maps live over ``spans`` (first op, last op): the largest first, each at the
    lowest offset clear of every placed map whose lifetime overlaps (TFLite's greedy-by-size arena
    planner)."""
    placed: list[tuple[int, int, int, int]] = []  # (offset, end, first, last)
    offsets: dict[int, int] = {}
    for t in sorted(sizes, key=lambda t: (-sizes[t], spans[t][0], t)):
        first, last = spans[t]
        busy = sorted((o, e) for o, e, f, l in placed if f <= last and first <= l)
        offset = 0
        for o, e in busy:
            if offset + sizes[t] <= o:
                break
            offset = max(offset, e)
        offsets[t] = offset
        placed.append((offset, offset + sizes[t], first, last))
    return offsets


def plan_memory(program: Program, config: NPUConfig) -> None:
    """Place feature maps in SRAM by liveness; split operations whose working set exceeds half of
    SRAM into stripes of output rows.

    First fit in execution order is tried first (it keeps the plan, and so the cycle figures, of
    programs that fit). When a map does not fit: with off-chip memory (U65), it spills there.
    Without (U55), the maps are planned again over the whole program, largest first, and a map
    read only by the next operation, both streaming a band of rows at a time, is cascaded: only
    the rows its consumer needs stay resident (Vela's cascading), not the whole map. Operations
    are admitted by the partitioner only when their own maps fit (constraints.sram_fit), so when
    the plan still overflows it is the program's liveness; that is an error naming the map."""
    first_use = {t: 0 for t in program.inputs}
    last_use = {t: -1 for t in range(len(program.tensors))}
    for i, op in enumerate(program.ops):
        first_use.setdefault(op.output, i)
        for t in op.inputs:
            last_use[t] = i
    for t in program.outputs:
        last_use[t] = len(program.ops)
    for t, first in first_use.items():
        last_use[t] = max(last_use[t], first)
    io = {*program.inputs, *program.outputs}  # Vela's Dedicated_Sram keeps these off-chip
    offchip_io = config.io_memory != "sram"
    if not _first_fit(program, config, first_use, last_use, io):
        _plan_whole_program(program, config, first_use, last_use, io if offchip_io else set())
    for op in program.ops:
        working = sum(program.tensors[t].resident_bytes for t in (*op.inputs, op.output))
        out = program.tensors[op.output]
        rows = out.shape[1] if len(out.shape) == 4 else 1
        if op.kind in ("CONV", "DWCONV") and working > config.sram_bytes // 2:
            op.stripes = int(min(rows, -(-2 * working // config.sram_bytes)))


def _first_fit(program, config, first_use, last_use, io) -> bool:
    """Online first fit in execution order; False (nothing placed) when a map fits neither SRAM
    nor off-chip memory."""
    live: list[tuple[int, int, int]] = []  # (start, end, tensor)
    peak = 0
    placement: dict[int, tuple[str, int]] = {}
    for t in sorted(first_use, key=lambda t: (first_use[t], t not in program.inputs)):
        step = first_use[t]
        live[:] = [x for x in live if last_use[x[2]] >= step]
        size = program.tensors[t].nbytes
        start = 0
        for s, e, _ in sorted(live):
            if start + size <= s:
                break
            start = max(start, e)
        if config.io_memory != "sram" and t in io:
            placement[t] = (config.io_memory, 0)
        elif start + size <= config.sram_bytes:
            placement[t] = ("sram", start)
            live.append((start, start + size, t))
            peak = max(peak, start + size)
        elif config.spill_memory != "none":
            placement[t] = (config.spill_memory, 0)
        else:
            return False
    for t, (memory, address) in placement.items():
        program.tensors[t].memory, program.tensors[t].address = memory, address
    program.sram_peak = peak
    return True


def _plan_whole_program(program, config, first_use, last_use, offchip) -> None:
    """Greedy by size over the whole program, cascading what the plan cannot hold in full."""
    producer = {op.output: i for i, op in enumerate(program.ops)}
    readers: dict[int, list[int]] = {}
    for i, op in enumerate(program.ops):
        for t in op.inputs:
            readers.setdefault(t, []).append(i)
    sizes = {t: program.tensors[t].nbytes for t in first_use if t not in offchip}
    spans = {t: (first_use[t], last_use[t]) for t in sizes}
    cascaded: dict[int, int] = {}

    def cascadable(t: int) -> bool:
        i = producer.get(t)
        users = readers.get(t, [])
        return (
            i is not None
            and t not in program.outputs
            and users == [i + 1]
            and streams(program.ops[i])
            and streams(program.ops[i + 1])
            and len(program.tensors[t].shape) == 4
        )

    while True:
        offsets = _greedy_by_size(sizes, spans)
        peak = max((offsets[t] + sizes[t] for t in sizes), default=0)
        if peak <= config.sram_bytes:
            break
        over = [t for t in sizes if offsets[t] + sizes[t] > config.sram_bytes]
        # cascade the largest map alive while the plan overflows
        window = (min(spans[t][0] for t in over), max(spans[t][1] for t in over))
        candidates = [
            t
            for t in sizes
            if t not in cascaded
            and cascadable(t)
            and spans[t][0] <= window[1]
            and window[0] <= spans[t][1]
        ]
        if not candidates:
            t = max(over, key=lambda t: sizes[t])
            i = producer.get(t)
            where = program.ops[i].name if i is not None else "the region's input"
            raise SRAMError(
                f"npu: the {config.name} SRAM ({config.sram_bytes:,} bytes) cannot hold the "
                f"feature maps live at once around {where}: {peak:,} bytes even with "
                f"cascading, and this NPU has no off-chip memory for feature maps"
            )
        t = max(candidates, key=lambda t: sizes[t])
        cascaded[t] = cascade_bytes(program, t, program.ops[readers[t][0]])
        sizes[t] = cascaded[t]
    for t in range(len(program.tensors)):
        desc = program.tensors[t]
        if t in offchip:
            desc.memory, desc.address = config.io_memory, 0
        elif t in sizes:
            desc.memory, desc.address = "sram", offsets[t]
            if t in cascaded:
                desc.resident = cascaded[t]
    program.sram_peak = peak
