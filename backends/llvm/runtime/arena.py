"""Buffer planning for a host segment: every intermediate buffer gets an offset in one arena,
reused by liveness (a buffer's bytes are free after the last kernel that reads it).

    plan_arena(plan) -> (offsets, size)   offsets[i] is None for the segment's inputs

The arena is allocated once per thread that runs the region and reused by every later run, so an
inference touches no fresh pages; outputs are copied out of it.

    zeroed(nbytes) -> bytes on a cache line; from HUGE_MIN bytes on, in 2 MB pages
    packed(arrays) -> the region's constants copied into one such buffer
"""

from __future__ import annotations

import mmap

import numpy as np

ALIGN = 64
# a buffer of HUGE_MIN bytes or more (a region's constants together, its arena) is anonymous
# memory on a 2 MB boundary that Linux is asked to back with huge pages (MADV_HUGEPAGE, which
# transparent_hugepage "madvise" honours; numpy asks only for arrays of 4 MB and more). The
# kernels then walk a few page-table entries, not hundreds: AMX MobileNetV2 (3.5 MB of
# weights, a 1.5 MB arena) 0.89-0.97x back to back and its first call after a 50 ms pause
# 5.9-7.1 -> 3.9-4.0 ms, ResNet-50 v2 0.84-0.90x (session 26, separate processes
# alternating; docs/performance-history.md). Smaller buffers
# keep 4 KB pages: a huge page each would cost many small regions 2 MB of memory apiece.
HUGE_PAGE = 1 << 21
HUGE_MIN = 1 << 20


def zeroed(nbytes: int) -> np.ndarray:
    """``nbytes`` zero bytes (uint8) starting on a cache line; from HUGE_MIN bytes on, on a 2 MB
    boundary in memory advised for huge pages, where the OS has them (else as below)."""
    if nbytes >= HUGE_MIN and hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            m = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            m.madvise(mmap.MADV_HUGEPAGE)
        except (OSError, ValueError):
            pass
        else:  # the array keeps the mapping alive (its base); unmapped with the last view
            raw = np.frombuffer(m, np.uint8)
            start = -raw.ctypes.data % HUGE_PAGE
            return raw[start : start + nbytes]
    raw = np.zeros(nbytes + ALIGN, np.uint8)
    start = -raw.ctypes.data % ALIGN
    return raw[start : start + nbytes]


def packed(arrays) -> list[np.ndarray]:
    """``arrays`` copied into one ``zeroed`` buffer, each C-contiguous on a cache line of it,
    with its dtype, shape and values: the kernels' 64-byte weight vectors never straddle two
    lines (numpy's own arrays start 16 bytes into one as often as not; identical builds
    differed by up to 20% with the weights' address, session 22's fgemm22)."""
    arrays = [np.ascontiguousarray(a) for a in arrays]
    sizes = [-(-a.nbytes // ALIGN) * ALIGN for a in arrays]
    buffer = zeroed(max(1, sum(sizes)))
    out, at = [], 0
    for a, size in zip(arrays, sizes):
        view = buffer[at : at + a.nbytes].view(a.dtype).reshape(a.shape)
        view[...] = a
        out.append(view)
        at += size
    return out


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
