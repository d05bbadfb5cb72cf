"""BERT-base geometry (12 layers, hidden 768, 12 heads, FFN 3072; random weights, vocabulary
100) at sequence 128: partita's import and compile times, and its "llvm" latency next to ONNX
Runtime's at 1 and 2 threads (partita's ``-threads=2`` splits the large matrix products over a
second thread), in one process.

    python benchmarks/transformers.py [--seq 128] [--threads 1 2] [--repeat 10] [--block 5]
                                      [--tiny] [--layers N] [--dyn-int8]

The encoder is tools/gen_transformer_models.py's (BERT_BASE config; --tiny: the 2-layer test
geometry, 32 positions: its default --seq is 32), exported with torch.onnx.export (legacy
exporter, opset 17) to a temporary file.
Medians of --repeat runs after a warm-up; the ratio is partita's time over ONNX Runtime's (the
issue's goal: at most 1.5). Where the llvm backend cannot build the model yet, the line says
why, and the reference interpreter's time is printed instead, for scale only.

partita and ONNX Runtime run in one process, interleaved (``--block`` calls of each per round,
each call timed, ``--repeat`` rounds, after a warm-up block of each), so load from other
processes falls on both alike while each runtime is measured in its steady state, as
benchmarks/cpu.py does: a runtime's pool keeps spinning after its call (ONNX Runtime's for
~23 ms of CPU), which costs the next runtime's first call of a block a core at two threads,
and with ``--block 1`` every call (until session 21 this script averaged whole blocks with
``--block 1``: every partita call right after an ORT call). Each line gives the median wall
time and the median process CPU time per call (on a
shared machine the CPU time is the steadier figure; at 2 threads it counts both threads, and
also the other runtime's pool while it still spins from its last call), the calling thread's
CPU time, the load average before and after, and at 2 threads how many of partita's runs used
its worker (TwoModes' choice).

--dyn-int8 also times ONNX Runtime's dynamic-int8 form of the same encoder (quantize_dynamic:
DynamicQuantizeLinear + MatMulInteger, int8 weights, as tools/gen_transformer_models.py makes
bert_tiny.dyn_int8.onnx), imported with this CPU's ONNX Runtime semantics (on AVX2 without
VNNI: VPMADDUBSW's pair saturation), next to ORT running that file; --layers N keeps the first
N encoder layers (a shorter run with BERT-base's widths).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's partita

import numpy as np  # noqa: E402

import partita as P  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GAP = 0.05  # seconds idle before each block (interleaved; benchmarks/cpu.py --gap)
sys.path.insert(0, str(ROOT / "tools"))


def median_time(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def interleaved(fns, repeat: int, block: int = 5,
                gap: float = GAP) -> list[tuple[float, float, float]]:
    """(median wall seconds, median process CPU seconds, median CPU seconds of the calling
    thread) per call of each function, measured round-robin: ``block`` calls of each per round,
    each call timed on its own, ``repeat`` rounds, each function warmed up first by a block of
    its own (as benchmarks/cpu.py measures). The process's CPU time counts every thread of the
    process, a peer's pool still spinning from its last call included; the calling thread's
    is its own share. ``gap`` seconds idle before each block (as cpu.py --gap): the previous
    runtime's pool stops spinning, so no block starts on a core another runtime holds."""
    for fn in fns:
        for _ in range(max(block, 1)):
            fn()
    wall = [[] for _ in fns]
    cpu = [[] for _ in fns]
    own = [[] for _ in fns]
    for _ in range(repeat):
        for fn, w, c, o in zip(fns, wall, cpu, own):
            if gap > 0:
                time.sleep(gap)
            for _ in range(max(block, 1)):
                t, pt, tt = time.perf_counter(), time.process_time(), time.thread_time()
                fn()
                w.append(time.perf_counter() - t)
                c.append(time.process_time() - pt)
                o.append(time.thread_time() - tt)
    return [(statistics.median(w), statistics.median(c), statistics.median(o))
            for w, c, o in zip(wall, cpu, own)]


def load() -> str:
    try:
        return " ".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        return "unknown"


def export(path: Path, seq: int, tiny: bool, layers: int | None = None) -> None:
    import dataclasses

    from gen_transformer_models import BERT_BASE, Config, export_legacy, make_model

    config = Config() if tiny else BERT_BASE
    if seq > config.max_pos:  # the position embedding has max_pos rows
        raise SystemExit(f"--seq {seq}: this geometry has {config.max_pos} positions at most"
                         + (" (--tiny)" if tiny else ""))
    if layers:
        config = dataclasses.replace(config, layers=layers)
    export_legacy(make_model(c=config), path, seq=seq)


def ort_session(path: Path, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def worker_runs(exe) -> tuple[int, int]:
    """(runs with the worker, runs) of ``exe``'s ``-threads=2`` regions so far (TwoModes'
    choice, counted by mode)."""
    counts = [step.region.modes.counts for step in exe.steps
              if getattr(getattr(step, "region", None), "_alone", None) is not None]
    return sum(c["pool"] for c in counts), sum(c["pool"] + c["alone"] for c in counts)


def crowded(exe) -> int:
    """Probe runs of ``exe``'s two-thread regions that judged nothing so far: a third thread
    of the process (ORT's pool still spinning) ran beside partita's two (TwoModes.crowded)."""
    return sum(step.region.modes.crowded for step in exe.steps
               if getattr(getattr(step, "region", None), "_alone", None) is not None)


def partita_build(mod, threads: int = 1):
    """(what runs, compile seconds, a function running it once): "llvm" (``-threads=2``: the
    large matrix products split over a second thread), or the interpreter when the llvm build
    fails (the reason goes in ``what``)."""
    t = time.perf_counter()
    try:
        exe = P.build(mod, f"llvm -threads={threads}")
    except P.PartitaError as e:
        reason = str(e).splitlines()[0][:120]
        return f"ref (llvm: {reason})", 0.0, None
    return "llvm", time.perf_counter() - t, exe


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, help="sequence length (default 128; --tiny: 32, its most)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=10, help="interleaved rounds")
    ap.add_argument("--block", type=int, default=5,
                    help="calls of each runtime per round (each timed; medians over all)")
    ap.add_argument("--gap", type=float, default=GAP,
                    help="seconds idle before each block (default %(default)s: ONNX Runtime's "
                    "pool spins ~20-30 ms after its calls; 0: none, as before session 23)")
    ap.add_argument("--tiny", action="store_true", help="the 2-layer test geometry")
    ap.add_argument("--layers", type=int, help="keep the first N encoder layers")
    ap.add_argument("--dyn-int8", action="store_true",
                    help="also ONNX Runtime's dynamic-int8 form (quantize_dynamic)")
    args = ap.parse_args(argv)
    if args.seq is None:
        args.seq = 32 if args.tiny else 128
    from partita.frontends.onnx import from_onnx

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bert.onnx"
        export(path, args.seq, args.tiny, args.layers)
        forms = [("fp32", path)]
        if args.dyn_int8:
            from gen_transformer_models import quantize_dynamic_int8

            quantize_dynamic_int8(path, Path(tmp) / "bert.dyn_int8.onnx")
            forms.append(("dynamic int8", Path(tmp) / "bert.dyn_int8.onnx"))
        rng = np.random.default_rng(0)
        feed = {
            "input_ids": rng.integers(1, 100, (1, args.seq)),
            "attention_mask": np.ones((1, args.seq), np.int64),
        }
        shapes = {k: v.shape for k, v in feed.items()}
        for form, file in forms:
            t = time.perf_counter()
            mod = from_onnx(file, shapes)
            print(f"{form}: import (from_onnx): {time.perf_counter() - t:.2f} s")
            for n in args.threads:
                what, compile_s, exe = partita_build(mod, n)
                sess = ort_session(file, n)
                if exe is None:  # for scale only: the interpreter once, ORT alone
                    ours = (median_time(lambda m=mod: P.interpret(m, feed), 1), float("nan"),
                            float("nan"))
                    peer = interleaved([lambda s=sess: s.run(None, feed)], args.repeat,
                                       args.block, args.gap)[0]
                else:
                    got, want = exe.run(**feed)[0], sess.run(None, feed)[0]
                    scale = float(np.abs(want).max()) or 1.0
                    what += f", within {float(np.abs(got - want).max()) / scale:.1e} of ORT's scale"
                    before = load()
                    pooled, runs = worker_runs(exe)
                    ours, peer = interleaved([lambda e=exe: e.run(**feed),
                                              lambda s=sess: s.run(None, feed)],
                                             args.repeat, args.block, args.gap)
                    what += f"; load average {before} -> {load()}"
                    if n > 1:
                        now = worker_runs(exe)
                        what += (f"; runs with the worker {now[0] - pooled} of {now[1] - runs}, "
                                 f"probes crowded by a third thread {crowded(exe)}")
                print(
                    f"{form}, {n} thread(s): partita {ours[0] * 1e3:.1f} ms wall / "
                    f"{ours[1] * 1e3:.1f} ms CPU ({ours[2] * 1e3:.1f} the caller's thread; compile "
                    f"{compile_s:.2f} s), ONNX Runtime {peer[0] * 1e3:.1f} ms wall / "
                    f"{peer[1] * 1e3:.1f} ms CPU ({peer[2] * 1e3:.1f}); partita / ORT = "
                    f"{ours[0] / peer[0]:.2f} wall, {ours[1] / peer[1]:.2f} CPU ({what})",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
