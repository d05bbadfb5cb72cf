"""Buffer planning for a host segment: every intermediate buffer gets an offset in one arena,
reused by liveness (a buffer's bytes are free after the last kernel that reads it).

    plan_arena(plan) -> (offsets, size)   offsets[i] is None for the segment's inputs

The arena is allocated once per thread that runs the region and reused by every later run, so an
inference touches no fresh pages; outputs are copied out of it.
"""

from __future__ import annotations

import numpy as np

ALIGN = 64


def _nbytes(shape, dtype) -> int:
    return max(1, int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize)


def plan_arena(plan) -> tuple[list[int | None], int]:
    """First-fit offsets by liveness: buffer i lives from the kernel that writes it to the last
    kernel that reads it (outputs to the end; scratch inputs only during their kernel)."""
    n, last = len(plan.buffers), len(plan.kernels)
    start, end = [0] * n, [-1] * n
    for step, k in enumerate(plan.kernels):
        start[k.output], end[k.output] = step, max(end[k.output], step)
        for i in k.inputs:
            end[i] = max(end[i], step)
    scratch = {i for k in plan.kernels for i in k.inputs}
    scratch -= {k.output for k in plan.kernels} | set(plan.inputs)
    for step, k in enumerate(plan.kernels):
        for i in set(k.inputs) & scratch:
            start[i] = step
    for i in plan.outputs:
        end[i] = last
    offsets: list[int | None] = [None] * n
    placed: list[tuple[int, int, int, int]] = []  # (offset, size, start, end)
    size = 0
    for i in sorted(range(n), key=lambda j: -_nbytes(*plan.buffers[j])):
        if i in plan.inputs:
            continue
        need = -(-_nbytes(*plan.buffers[i]) // ALIGN) * ALIGN
        busy = sorted((o, s) for o, s, a, b in placed if not (b < start[i] or end[i] < a))
        at = 0
        for o, s in busy:
            if at + need <= o:
                break
            at = max(at, o + s)
        offsets[i] = at
        placed.append((at, need, start[i], end[i]))
        size = max(size, at + need)
    return offsets, size
