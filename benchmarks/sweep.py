"""Sweep throughput: points per second on 1 worker, on every core, and on a local Ray instance.

    python benchmarks/sweep.py [--target "npu -config={u55-128,u65-256} -sram={256k,1m}, llvm"]

The same grid runs on each engine in one process; the records must agree (times aside). The
default target is the NPU grid when the npu backend is present, else a "ref" sweep over the test
models (which measures the machinery, not the NPU).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from partita.backends import find_backend

from partita.scale import expand_target, get_engine, sweep

NETS = Path(__file__).resolve().parents[1] / "tests" / "models" / "tflite" / "nets"
MODELS = ["mobilenet_v1_025_128.tflite", "mobilenet_v2_035_96.tflite", "resnet_mini_64.tflite"]
GRID = "npu -config={u55-128,u55-256,u65-256} -sram={256k,512k,1m}, ref"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default=None)
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args(argv)
    target = args.target or (GRID if find_backend("npu") is not None else "ref")
    models = [NETS / m for m in MODELS]
    points = len(expand_target(target)) * len(models)
    cores = os.cpu_count() or 1
    engines = [("1 worker", "local:1"), (f"local pool ({cores} workers)", f"local:{cores}")]
    if not args.no_ray:
        engines.append((f"ray (local, {cores} CPUs)", "ray"))
    print(f"target: {target!r}; {points} points ({len(models)} models)")
    print(f"{'engine':28} {'seconds':>9} {'points/s':>9} {'speed-up':>9}")
    base, reference = None, None
    for name, spec in engines:
        engine = get_engine(spec, workers=cores if spec == "ray" else None)
        start = time.perf_counter()
        records = sweep(models, target, engine=engine)
        seconds = time.perf_counter() - start
        stable = [
            {k: v for k, v in r.items() if k not in ("compile_s", "cpu_time_s")} for r in records
        ]
        reference = reference or stable
        assert stable == reference, f"{name} gave different records"
        base = base or seconds
        print(f"{name:28} {seconds:9.2f} {points / seconds:9.2f} {base / seconds:8.2f}x")
    if not args.no_ray:
        import ray

        ray.shutdown()


if __name__ == "__main__":
    main()
