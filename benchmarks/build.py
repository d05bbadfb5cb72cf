"""Build spine costs on MobileNetV2: import, build, save, load, and the run overhead of the
Executable over calling its compiled regions directly.

    python benchmarks/build.py [--target "npu, llvm"] [--model PATH] [--repeat 20]

The default target is the best one this checkout can build: "npu, llvm" when both backends
compile, else "npu, ref", else "ref". The overhead column is the executable's median run minus
the median of calling the same regions back to back on prepared inputs (slot bookkeeping, input
validation, output copies); medians of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from partita.backends import find_backend
from partita.frontends import from_tflite

import partita as P

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "tests" / "models" / "tflite" / "large" / "mobilenet_v2_100_224.tflite"


def default_target() -> str:
    def compiles(name):
        try:
            backend = find_backend(name)
        except P.PartitaError:
            return False
        return backend is not None and backend.can_compile

    npu = ["npu"] if compiles("npu") else []
    host = "llvm" if compiles("llvm") else "ref"
    return ", ".join([*npu, host])


def timed(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def direct_run(exe, x) -> None:
    """The same regions called back to back with their inputs already in hand."""
    slots: list = [None] * exe.n_slots
    for slot, array in exe.constants.items():
        slots[slot] = array
    slots[exe.inputs[0].slot] = x
    for step in exe.steps:
        for i, array in zip(step.outputs, step.region.run([slots[i] for i in step.inputs])):
            slots[i] = array


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default=None)
    parser.add_argument("--model", default=str(MODEL))
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    target = args.target or default_target()
    t_import, mod = timed(lambda: from_tflite(args.model), 3)
    t_build, exe = timed(lambda: P.build(mod, target), 3)
    x = np.random.default_rng(0).integers(-128, 128, exe.input_types[0].shape, dtype=np.int8)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.partita"
        t_save, _ = timed(lambda: exe.save(path), 3)
        size = path.stat().st_size
        t_load, loaded = timed(lambda: P.load(path), 3)
    assert np.array_equal(loaded.run(x)[0], exe.run(x)[0])
    repeat = args.repeat
    t_run, _ = timed(lambda: exe.run(x), repeat)
    t_direct, _ = timed(lambda: direct_run(exe, x), repeat)
    print(f"model: {Path(args.model).name}   target: {target!r}   steps: {len(exe.steps)}")
    print(f"{'stage':28} {'median':>12}")
    rows = [
        ("import (from_tflite)", t_import),
        ("build (partition+compile)", t_build),
        (f"save ({size / 1e6:.1f} MB)", t_save),
        ("load", t_load),
        ("run (Executable.run)", t_run),
        ("run (regions called directly)", t_direct),
    ]
    for name, t in rows:
        print(f"{name:28} {1e3 * t:9.3f} ms")
    print(
        f"{'executable overhead':28} {1e6 * (t_run - t_direct):9.1f} us per run "
        f"({100 * (t_run - t_direct) / t_direct:.2f}% of the run)"
    )


if __name__ == "__main__":
    main()
