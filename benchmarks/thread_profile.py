"""One thread against two, kernel by kernel: where the second thread works and where it waits.

    python benchmarks/thread_profile.py [--model tflite|qop|qdq|bert|bert-int8|PATH] [--runs 9]
        [--top 8] [--options=-isa=amx] [--each] [--handoff]

``bert-int8`` is ONNX Runtime's dynamic-int8 form of the ``bert`` encoder (quantize_dynamic, as
``transformers.py --dyn-int8``), imported with this CPU's ONNX Runtime semantics.

Builds the model for ``llvm -threads=1`` and ``llvm -threads=2`` (host ISA) and, interleaved:
- runs: wall and process CPU per run of the one-thread build, of the two-thread build as it
  runs (TwoModes decides), and of the two-thread build with the worker forced; for the forced
  runs, each thread's CPU time and run-queue wait per run (/proc/self/task/*/schedstat) — the
  second thread's share is what it does;
- the timed drivers (``Executable.profile``): per kernel, the minimum time over rounds (a
  kernel the OS preempted is not the kernel's time) with one thread and with two (the worker
  forced), summed per kernel kind and per "split" (a kernel with a one-thread form
  ``{name}_whole``: its work is shared) or "one thread" (the worker idles); with ``--each``,
  every split kernel in order with both minima and their ratio.
With ``--handoff`` (builds with runtime/threads.py TRACE, compiled in this process): per split
kernel, from time stamps in the forced build's profile runs, the worker's claim after the
driver published the job (median and minimum), each thread's part, the driver's wait for the
worker at the kernel's end (the imbalance), how often the driver ran the worker's part itself
("late"), and the kernel's chunks (count x units).
Bits: every run's output equals the one-thread build's. Quote ``uptime`` with the figures.
The two two-thread builds share the process, and each one's worker spins a while after its
calls, so one build's figure can carry the other's spinning (session 26: TwoModes 1.80 against
forced 1.56 ms here once, 1.49 against 1.43 in the next run; separate processes gave 1.45-1.47
against 1.50-1.51). An idle gap before each block does not cure it: on a KVM guest the idle
core's wake-up made both two-thread builds run at 0.95 of one thread. For TwoModes against the
forced worker, time separate processes.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from statistics import median

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's partita

import partita as P  # noqa: E402

MODELS = {
    "tflite": ROOT / "tests" / "models" / "tflite" / "large" / "mobilenet_v2_100_224.tflite",
    "qop": ROOT / "tests" / "models" / "onnx" / "large" / "mobilenet_v2_100_224.qop_u8s8_pc.onnx",
    "qdq": "onnx/mobilenet_v2_100_224.qdq_s8s8_pc",
}


def load(name: str, tmp: Path, layers: int, seq: int):
    """(module, feed dict or input list)."""
    if name in ("bert", "bert-int8"):
        sys.path.insert(0, str(ROOT / "benchmarks"))
        sys.path.insert(0, str(ROOT / "tools"))
        from partita.frontends.onnx import from_onnx
        from transformers import export

        path = tmp / "bert.onnx"
        export(path, seq, False, layers)
        if name == "bert-int8":
            from gen_transformer_models import quantize_dynamic_int8

            quantize_dynamic_int8(path, tmp / "bert.dyn_int8.onnx")
            path = tmp / "bert.dyn_int8.onnx"
        rng = np.random.default_rng(0)
        feed = {"input_ids": rng.integers(1, 100, (1, seq)),
                "attention_mask": np.ones((1, seq), np.int64)}
        return from_onnx(path, {k: v.shape for k, v in feed.items()}), feed
    path = MODELS.get(name, name)
    if not Path(path).exists():
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from models import get_model

        path = get_model(str(path))
    path = Path(path)
    if path.suffix == ".onnx":
        from partita.frontends import from_onnx

        mod = from_onnx(path)
    else:
        from partita.frontends import from_tflite

        mod = from_tflite(str(path))
    return mod, None


def regions(exe) -> list:
    return [s.region for s in exe.steps if getattr(s.region, "modes", None) is not None]


def split_names(exe) -> set:
    """The kernel labels whose function has a one-thread form (split over two threads)."""
    out = set()
    for step in exe.steps:
        r = step.region
        loaded, calls = getattr(r, "_loaded", None), getattr(r, "calls", None)
        if loaded is None or calls is None:
            continue
        for label, (fn, _) in zip(r.kernels, calls):
            if loaded.engine.get_function_address(f"{fn}_whole"):
                out.add(label.split(" ", 1)[1])
    return out


def tasks() -> dict:
    """{tid: (ns on CPU, ns waiting on the run queue)} of this process's threads."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                run, wait, _ = (int(v) for v in f.read().split())
            out[tid] = (run, wait)
        except (OSError, ValueError):
            pass
    return out


CHUNKS: dict = {}  # --handoff: kernel name -> [(units, units per chunk)] of its split_chunks
# (one per split: a DYNQ kernel or a convolution packing its input on both threads has two)


class Handoffs:
    """The worker's hand-offs in the forced build's profile runs (threads.TRACE): per split
    kernel, in ticks of the time stamp counter, the worker's claim after the driver published
    the job, the driver's own part, the worker's part, and the driver's wait for the worker at
    the kernel's end (0 when the worker was late and the driver ran its part too)."""

    def __init__(self, exe, split: set):
        from partita.backends.llvm.region import _tsc_hz
        from partita.backends.llvm.runtime.threads import TRACE_FIELDS, TRACE_SLOTS

        self.split, self.fields, self.steps = split, TRACE_FIELDS, {}
        self.hz, self.seen = None, {}
        self.rows: dict[str, list] = defaultdict(list)
        self.mismatched = 0
        self.function = {}  # kernel -> the function it calls (kernels alike share one)
        for si, step in enumerate(exe.steps):
            for label, (fn, _) in zip(getattr(step.region, "kernels", []),
                                      getattr(step.region, "calls", [])):
                self.function[label.split(" ", 1)[1]] = fn
            loaded = getattr(step.region, "_loaded", None)
            address = loaded.engine.get_global_value_address("partita_pool_trace") if loaded \
                else 0
            if address:
                import ctypes

                buf = (ctypes.c_int64 * (TRACE_SLOTS * len(TRACE_FIELDS))).from_address(address)
                self.steps[si] = np.frombuffer(buf, np.int64).reshape(TRACE_SLOTS, -1)
                self.seen[si] = 0
                self.hz = self.hz or _tsc_hz(loaded)

    def read(self, profile) -> None:
        f = {n: i for i, n in enumerate(self.fields)}
        occurrence: dict[str, int] = defaultdict(int)
        keys_of = {}  # step -> its split kernels' keys, as main's kernel times name them
        for si, step in enumerate(profile.steps):
            keys_of[si] = []
            for op in step.ops:
                occurrence[op.name] += 1
                if op.name in self.split:
                    kind = op.metrics.get("kernel", step.target)
                    splits = len(CHUNKS.get(self.function.get(op.name, op.name), [None]))
                    keys_of[si] += [f"{occurrence[op.name]}:{kind}:{op.name}"] * splits
        for si, trace in self.steps.items():
            jobs = trace[trace[:, f["job"]] > self.seen[si]]
            jobs = jobs[np.argsort(jobs[:, f["job"]])]
            keys = keys_of[si]
            if len(jobs):
                self.seen[si] = int(jobs[-1, f["job"]])
            if len(jobs) != len(keys):
                self.mismatched += 1
                continue
            merged: dict[str, tuple] = {}  # a kernel's splits: parts and waits summed
            for key, j in zip(keys, jobs):
                late = bool(j[f["late"]])
                row = (j[f["claim"]] - j[f["publish"]] if j[f["claim"]] else None,
                       j[f["own_done"]] - j[f["publish"]],
                       j[f["worker_done"]] - j[f["claim"]] if j[f["claim"]] else None,
                       0 if late else j[f["end"]] - j[f["own_done"]],
                       late)
                if key in merged:
                    old = merged[key]
                    row = (old[0] if old[0] is not None else row[0], old[1] + row[1],
                           None if None in (old[2], row[2]) else old[2] + row[2],
                           old[3] + row[3], old[4] or row[4])
                merged[key] = row
            for key, row in merged.items():
                self.rows[key].append(row)

    def report(self, rows, times) -> list[str]:
        us = 1e6 / self.hz

        def med(vals, how=median):
            vals = [v for v in vals if v is not None]
            return how(vals) * us if vals else float("nan")

        out = [f"  hand-offs (threads.TRACE, {len(next(iter(self.rows.values()), []))} forced "
               f"profile runs; us: claim and wait medians and minima, each part's minimum over "
               f"the runs the worker took its part; runs whose jobs did not match: "
               f"{self.mismatched}):",
               f"    {'kind':10s} {'1 thr':>7s} {'2 thr':>7s} {'ratio':>5s} {'claim':>6s} "
               f"{'(min)':>6s} {'own':>7s} {'worker':>7s} {'wait':>6s} {'(min)':>6s} "
               f"{'late':>5s} {'chunks':>8s}  kernel"]
        sums = defaultdict(float)
        for key in times["1"]:
            if key not in self.rows:
                continue
            vals = self.rows[key]
            t1, t2 = min(times["1"][key]), min(times["2"][key])
            claim = med(v[0] for v in vals)
            # each part's minimum over the runs where the worker took its part (a late run's
            # "own" is the whole kernel; a preempted one is not the part's time)
            own = med((v[1] for v in vals if not v[4]), min)
            worker, wait = med((v[2] for v in vals), min), med(v[3] for v in vals)
            claim_min = med((v[0] for v in vals), min)
            wait_min = med((v[3] for v in vals if not v[4]), min)
            late = sum(v[4] for v in vals) / len(vals)
            for name, v in (("claim", claim), ("claim_min", claim_min), ("wait", wait),
                            ("wait_min", wait_min), ("loss", (t2 - t1 / 2) * 1e6)):
                sums[name] += 0.0 if v != v else v  # nan: the worker never claimed it
            kind = next(r[2] for r in rows if key.endswith(":" + r[4]))
            name = key.split(":", 2)[2]
            plans = CHUNKS.get(self.function.get(name, name), [])
            chunks = "+".join(f"{-(-units // size)}x{size}" for units, size in plans) or "halves"
            out.append(f"    {kind:10s} {t1 * 1e6:7.1f} {t2 * 1e6:7.1f} {t2 / t1:5.2f} "
                       f"{claim:6.2f} {claim_min:6.2f} {own:7.1f} {worker:7.1f} {wait:6.2f} "
                       f"{wait_min:6.2f} {late:5.2f} {chunks:>8s}  {name[:40]}")
        out.append(f"    sums: claim latency {sums['claim']:.1f} us (minima "
                   f"{sums['claim_min']:.1f}), driver's wait at the ends {sums['wait']:.1f} us "
                   f"(minima "
                   f"{sums['wait_min']:.1f}), 2-thread minima over half the 1-thread ones "
                   f"{sums['loss']:.1f} us")
        return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tflite")
    ap.add_argument("--runs", type=int, default=9, help="interleaved rounds")
    ap.add_argument("--block", type=int, default=5, help="runs of each build per round")
    ap.add_argument("--top", type=int, default=8, help="one-thread kernels listed")
    ap.add_argument("--layers", type=int, default=2, help="bert: encoder layers kept")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--options", default="", help="more llvm options, e.g. -isa=vnni")
    ap.add_argument("--each", action="store_true", help="list every split kernel")
    ap.add_argument("--handoff", action="store_true",
                    help="builds with threads.TRACE: per split kernel, the worker's claim after "
                         "the job's publication, each thread's part, the driver's wait")
    args = ap.parse_args(argv)
    if args.handoff:
        from partita.backends.llvm.runtime import threads

        threads.TRACE = True  # an emission switch: fresh caches, so every build has it
        os.environ["PARTITA_REGION_CACHE"] = "0"
        os.environ["PARTITA_COMPILE_JOBS"] = "1"  # split_chunks' plans seen in this process
        real = threads.ThreadPool.split_chunks

        def split_chunks(self, k, b, pointers, total, size, emit, *args, **kwargs):
            CHUNKS.setdefault(k.name, []).append((total, size))
            return real(self, k, b, pointers, total, size, emit, *args, **kwargs)

        threads.ThreadPool.split_chunks = split_chunks
    with tempfile.TemporaryDirectory() as tmp:
        if args.handoff:
            os.environ["PARTITA_CACHE_DIR"] = str(Path(tmp) / "cache")
        os.environ.setdefault("PARTITA_CACHE_DIR", str(Path(tmp) / "cache"))
        mod, feed = load(args.model, Path(tmp), args.layers, args.seq)
        opts = f" {args.options}" if args.options else ""
        one = P.build(mod, f"llvm -threads=1{opts}")
        two = P.build(mod, f"llvm -threads=2{opts}")
        forced = P.build(mod, f"llvm -threads=2{opts}")
    for r in regions(forced):
        r.modes.choose = lambda: "pool"
    if feed is None:
        ty = one.input_types[0]
        rng = np.random.default_rng(0)
        x = (rng.standard_normal(ty.shape).astype(np.float32) if ty.dtype == "float32"
             else rng.integers(-128 if ty.dtype == "int8" else 0, 128, ty.shape, dtype=ty.dtype))
        call, prof = (lambda e: e.run(x)), (lambda e: e.profile(x))
    else:
        call, prof = (lambda e: e.run(**feed)), (lambda e: e.profile(**feed))
    want = call(one)[0]
    for e in (two, forced):
        assert call(e)[0].tobytes() == want.tobytes(), "two threads changed the bits"
    load0 = os.getloadavg()
    wall, cpu = defaultdict(list), defaultdict(list)
    threads_cpu: dict[str, list] = defaultdict(list)
    main_tid = str(__import__("threading").get_native_id())
    for _ in range(args.runs):
        builds = (("1 thread", one), ("2 threads (TwoModes)", two), ("2 threads forced", forced))
        for name, e in builds:
            before = tasks() if name == "2 threads forced" else None
            for _ in range(args.block):
                w, c = time.perf_counter(), time.process_time()
                out = call(e)[0]
                wall[name].append(time.perf_counter() - w)
                cpu[name].append(time.process_time() - c)
                assert out.tobytes() == want.tobytes()
            if before is not None:
                after = tasks()
                for tid, (run, wait) in after.items():
                    b = before.get(tid, (0, 0))
                    if run - b[0] > 0:
                        who = "driver" if tid == main_tid else f"thread {tid}"
                        threads_cpu[who].append(((run - b[0]) / args.block / 1e6,
                                                 (wait - b[1]) / args.block / 1e6))
    load1 = os.getloadavg()
    print(f"model {args.model} {args.options}; load average {load0[0]:.1f} -> {load1[0]:.1f}; "
          f"{args.runs} rounds x {args.block} runs, medians, bits equal to one thread's")
    base = median(wall["1 thread"])
    for name in wall:
        modes = ""
        if name.startswith("2 threads (") and regions(two):
            pooled = sum(r.modes.counts["pool"] for r in regions(two))
            total = sum(r.modes.counts["pool"] + r.modes.counts["alone"] for r in regions(two))
            modes = f"; with the worker {pooled} of {total} runs"
        print(f"  {name:22s} wall {median(wall[name]) * 1e3:8.2f} ms  CPU "
              f"{median(cpu[name]) * 1e3:8.2f} ms  wall / 1 thread "
              f"{median(wall[name]) / base:.3f}{modes}")
    for who, vals in sorted(threads_cpu.items()):
        on, wait = median(v[0] for v in vals), median(v[1] for v in vals)
        print(f"  forced, per run: {who:16s} on CPU {on:8.2f} ms, run-queue wait {wait:8.2f} ms")
    # kernel by kernel: timed drivers, interleaved
    split = split_names(two)
    times: dict[str, dict] = {"1": defaultdict(list), "2": defaultdict(list)}
    kinds: dict[str, str] = {}
    hand = Handoffs(forced, split) if args.handoff else None
    for _ in range(max(3, args.runs)):
        for tag, e in (("1", one), ("2", forced)):
            p = prof(e)
            # keyed by the kernel's name and its occurrence, not its step: the two builds may
            # cut the model into steps differently (a float ResNet's second thread)
            seen: dict[str, int] = defaultdict(int)
            for step in p.steps:
                for op in step.ops:
                    seen[op.name] += 1
                    key = f"{seen[op.name]}:{op.metrics.get('kernel', step.target)}:{op.name}"
                    times[tag][key].append(op.time_s)
                    kinds[key] = op.metrics.get("kernel", step.target)
            if hand is not None and tag == "2":
                hand.read(p)
    groups = defaultdict(lambda: [0.0, 0.0, 0])
    rows = []
    for key in times["1"]:
        # the minimum over rounds: a kernel the OS preempted is not the kernel's time
        t1, t2 = min(times["1"][key]), min(times["2"].get(key, [0.0]))
        name = key.split(":", 2)[2]
        how = "split" if name in split else "one thread"
        g = groups[(kinds[key], how)]
        g[0] += t1
        g[1] += t2
        g[2] += 1
        rows.append((t1, t2, kinds[key], how, name))
    tot1, tot2 = sum(r[0] for r in rows), sum(r[1] for r in rows)
    print(f"  kernels (timed drivers, minima): 1 thread {tot1 * 1e3:.2f} ms, 2 threads "
          f"(worker forced) {tot2 * 1e3:.2f} ms, ratio {tot2 / max(tot1, 1e-12):.3f}")
    print(f"  {'kind':12s} {'how':11s} {'n':>4s} {'1 thr ms':>9s} {'2 thr ms':>9s} "
          f"{'ratio':>6s} {'share of 2-thr':>14s}")
    for (kind, how), (t1, t2, n) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        print(f"  {kind:12s} {how:11s} {n:4d} {t1 * 1e3:9.3f} {t2 * 1e3:9.3f} "
              f"{t2 / max(t1, 1e-12):6.2f} {t2 / max(tot2, 1e-12):14.1%}")
    if args.each:
        print("  split kernels, in order (1 thr / 2 thr us, ratio):")
        for t1, t2, kind, how, name in rows:
            if how == "split":
                print(f"    {kind:10s} {t1 * 1e6:8.1f} {t2 * 1e6:8.1f} {t2 / max(t1, 1e-12):5.2f}  "
                      f"{name[:60]}")
    if hand is not None:
        for line in hand.report(rows, times):
            print(line)
    alone = sorted((r for r in rows if r[3] == "one thread"), reverse=True)[: args.top]
    if alone:
        print("  largest one-thread kernels (the worker idles):")
        for t1, t2, kind, _, name in alone:
            print(f"    {kind:10s} {t1 * 1e3:7.3f} / {t2 * 1e3:7.3f} ms  {name[:70]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
