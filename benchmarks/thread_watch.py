"""Two threads over time: where a two-thread run's time goes, block by block, while the machine's
speed moves.

    python benchmarks/thread_watch.py [--model tflite|qop|qdq|PATH] [--seconds 60] [--block 20]
        [--every 5] [--options=-isa=vnni]

Builds the model for ``llvm -threads=1`` and for ``-threads=2`` with runtime/threads.py's
TRACE (the worker forced on every run), and for ``--seconds`` runs rounds of a block of each,
back to back as a user's loop does. Every two-thread run's hand-off time stamps are read after
the run and summed over its split kernels: the driver's parts, the worker's parts, the
worker's claims after each publication, the driver's waits for the worker at the kernels'
ends, the gaps between split kernels (the driver's one-thread kernels and calls), and the run's
time outside its split kernels (Python, the driver's entry and exit).

Prints a line per ``--every`` seconds (both builds' medians and their ratio), then the blocks
split into fast and slow ones (a slow block's median over ``--threshold`` times the fastest
tenth's) with each sum's median in both, and the one-thread build's in the same rounds: which
part grows when two threads slow down. Session 29 (AMD EPYC Zen 5, KVM) found its slow phase
this way: both threads' parts 25-45% longer together while one thread alone kept its time,
the hand-offs unchanged; docs/performance.md.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from thread_profile import load, regions  # noqa: E402  (puts this checkout on the path)

import partita as P  # noqa: E402

SUMS = ("wall", "jobs", "driver parts", "worker parts", "claims", "end waits", "gaps",
        "outside", "late")


def traces(exe) -> list:
    """(trace array, ticks per second) of each region with threads.TRACE's buffer."""
    from partita.backends.llvm.region import _tsc_hz
    from partita.backends.llvm.runtime.threads import TRACE_FIELDS, TRACE_SLOTS

    out = []
    for step in exe.steps:
        loaded = getattr(step.region, "_loaded", None)
        address = loaded.engine.get_global_value_address("partita_pool_trace") if loaded else 0
        if address:
            buf = (ctypes.c_int64 * (TRACE_SLOTS * len(TRACE_FIELDS))).from_address(address)
            out.append((np.frombuffer(buf, np.int64).reshape(TRACE_SLOTS, -1), _tsc_hz(loaded)))
    return out


def run_sums(trace, hz: float, seen: int, wall: float) -> tuple[int, dict | None]:
    """The newest run's jobs (numbers above ``seen``) summed, in microseconds."""
    from partita.backends.llvm.runtime.threads import TRACE_FIELDS, TRACE_SLOTS

    f = {n: i for i, n in enumerate(TRACE_FIELDS)}
    jobs = trace[trace[:, f["job"]] > seen]
    if not len(jobs):
        return seen, None
    jobs = jobs[np.argsort(jobs[:, f["job"]])]
    seen = int(jobs[-1, f["job"]])
    if len(jobs) >= TRACE_SLOTS:  # the ring wrapped within the run: not all of it is there
        return seen, None
    us = 1e6 / hz
    claimed = jobs[:, f["claim"]] != 0
    late = jobs[:, f["late"]] != 0
    span = (jobs[-1, f["end"]] - jobs[0, f["publish"]]) * us
    return seen, {
        "wall": wall * 1e6,
        "jobs": float(len(jobs)),
        "driver parts": float((jobs[:, f["own_done"]] - jobs[:, f["publish"]]).sum() * us),
        "worker parts": float((jobs[claimed, f["worker_done"]]
                               - jobs[claimed, f["claim"]]).sum() * us),
        "claims": float((jobs[claimed, f["claim"]] - jobs[claimed, f["publish"]]).sum() * us),
        "end waits": float((jobs[~late, f["end"]] - jobs[~late, f["own_done"]]).sum() * us),
        "gaps": float((jobs[1:, f["publish"]] - jobs[:-1, f["end"]]).sum() * us),
        "outside": wall * 1e6 - span,
        "late": float(late.sum()),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tflite")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--block", type=int, default=20, help="runs of each build per round")
    ap.add_argument("--every", type=float, default=5.0, help="seconds per timeline line")
    ap.add_argument("--threshold", type=float, default=1.15,
                    help="a block is slow above this times the fastest tenth's median")
    ap.add_argument("--options", default="", help="more llvm options, e.g. -isa=vnni")
    args = ap.parse_args(argv)
    from partita.backends.llvm.runtime import threads

    threads.TRACE = True  # an emission switch: fresh caches, so the build has it
    os.environ["PARTITA_REGION_CACHE"] = "0"
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PARTITA_CACHE_DIR"] = str(Path(tmp) / "cache")
        mod, feed = load(args.model, Path(tmp), 2, 128)
        if feed is not None:
            ap.error("--model: an int8 MobileNet or a model file with one input")
        opts = f" {args.options}" if args.options else ""
        one = P.build(mod, f"llvm -threads=1{opts}")
        two = P.build(mod, f"llvm -threads=2{opts}")
    for r in regions(two):
        r.modes.choose = lambda: "pool"
    found = traces(two)
    if len(found) != 1:
        print(f"thread_watch: {len(found)} regions with split kernels; one is needed")
        return 2
    trace, hz = found[0]
    ty = one.input_types[0]
    x = np.random.default_rng(0).integers(-128 if ty.dtype == "int8" else 0, 128, ty.shape,
                                          dtype=ty.dtype)
    want = one.run(x)[0]
    assert two.run(x)[0].tobytes() == want.tobytes(), "two threads changed the bits"
    for _ in range(args.block):
        one.run(x), two.run(x)
    seen = int(trace[:, 0].max())
    blocks = []  # (time, one-thread median us, [per-run sums of the two-thread block])
    start = time.time()
    next_line, window = start + args.every, []
    print(f"model {args.model} {args.options}; blocks of {args.block}; us per run, medians")
    while time.time() - start < args.seconds:
        ones = []
        for _ in range(args.block):
            t = time.perf_counter()
            one.run(x)
            ones.append(time.perf_counter() - t)
        runs = []
        for _ in range(args.block):
            t = time.perf_counter()
            out = two.run(x)[0]
            wall = time.perf_counter() - t
            seen, sums = run_sums(trace, hz, seen, wall)
            if sums is not None:
                runs.append(sums)
        assert out.tobytes() == want.tobytes(), "two threads changed the bits"
        if runs:
            blocks.append((time.time() - start, median(ones) * 1e6, runs))
            window.append(blocks[-1])
        if time.time() >= next_line and window:
            t1 = median(b[1] for b in window)
            t2 = median(median(r["wall"] for r in b[2]) for b in window)
            print(f"  {time.time() - start:6.1f} s  1 thread {t1:7.1f}  2 threads {t2:7.1f}  "
                  f"ratio {t2 / t1:.3f}", flush=True)
            next_line, window = next_line + args.every, []
    walls = np.array([median(r["wall"] for r in b[2]) for b in blocks])
    floor = float(np.percentile(walls, 10))
    slow = walls > args.threshold * floor
    print(f"{len(blocks)} blocks; slow (> {args.threshold} x the fastest tenth's "
          f"{floor:.1f} us): {int(slow.sum())}")
    print(f"  {'per two-thread run':22s} {'fast blocks':>12s} {'slow blocks':>12s}")
    for key in SUMS:
        cells = []
        for sel in (~slow, slow):
            vals = [r[key] for b, s in zip(blocks, sel) if s for r in b[2]]
            cells.append(f"{median(vals):12.1f}" if vals else f"{'-':>12s}")
        print(f"  {key:22s} {cells[0]} {cells[1]}")
    cells = []
    for sel in (~slow, slow):
        vals = [b[1] for b, s in zip(blocks, sel) if s]
        cells.append(f"{median(vals):12.1f}" if vals else f"{'-':>12s}")
    print(f"  {'one thread, same rounds':22s} {cells[0]} {cells[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
