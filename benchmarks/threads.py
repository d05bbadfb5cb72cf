"""One thread against two, alone and on a busy machine: partita ``llvm`` and ``llvm -threads=2``
on one model, run back to back in one process (blocks of 20 runs, interleaved, which goes
first alternating from round to round), with ``--busy N``
processes spinning on the cores meanwhile (issue 12: two cores must never be slower than one).
Prints the ratio of the two medians over all runs and, paired, the median (and quartiles) of
each round's ratio of block medians: a round's two blocks meet the same load.

    python benchmarks/threads.py [--model PATH.tflite|PATH.onnx] [--busy 0 1 2] [--rounds 10]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "tests" / "models" / "tflite" / "large" / "mobilenet_v2_100_224.tflite"


def _spin(stop) -> None:
    while not stop.is_set():
        pass


def _load(path: Path):
    if path.suffix == ".onnx":
        from partita.frontends import from_onnx

        return from_onnx(path)
    from partita.frontends import from_tflite

    return from_tflite(path)


def measure(exes: dict, x, rounds: int, block: int = 20) -> tuple[dict, list]:
    """Medians over all runs (ms) per executable, and each round's ratio of the second
    executable's block median to the first's (a paired measure: a round's two blocks meet
    the same load)."""
    times = {name: [] for name in exes}
    for exe in exes.values():
        for _ in range(block):
            exe.run(x)
    ratios = []
    names = list(exes)
    for round_ in range(rounds):
        medians = {}
        for name in names if round_ % 2 == 0 else names[::-1]:  # either goes first as often
            block_times = []
            for _ in range(block):
                start = time.perf_counter()
                exes[name].run(x)
                block_times.append(time.perf_counter() - start)
            times[name] += block_times
            medians[name] = np.median(block_times)
        ratios.append(float(medians[names[1]] / medians[names[0]]))
    return {name: float(np.median(t)) * 1e3 for name, t in times.items()}, ratios


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=MODEL)
    parser.add_argument("--busy", type=int, nargs="+", default=[0, 1, 2],
                        help="numbers of spinning processes to measure next to")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args(argv)
    import partita as P

    mod = _load(args.model)
    exes = {t: P.build(mod, t) for t in ("llvm", "llvm -threads=2")}
    ty = exes["llvm"].input_types[0]
    rng = np.random.default_rng(0)
    if np.issubdtype(np.dtype(ty.dtype), np.integer):
        info = np.iinfo(ty.dtype)
        x = rng.integers(info.min, info.max, ty.shape, dtype=ty.dtype, endpoint=True)
    else:
        x = rng.standard_normal(ty.shape).astype(ty.dtype)
    print(f"model: {args.model.name}")
    print(f"{'busy processes':>15} {'1 thread ms':>12} {'2 threads ms':>13} {'2 / 1':>7} "
          f"{'per round: median':>18} {'quartiles':>14}")
    for busy in args.busy:
        stop = multiprocessing.Event()
        spinners = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
                    for _ in range(busy)]
        for s in spinners:
            s.start()
        try:
            got, ratios = measure(exes, x, args.rounds)
        finally:
            stop.set()
            for s in spinners:
                s.join()
        one, two = got["llvm"], got["llvm -threads=2"]
        q1, mid, q3 = np.percentile(ratios, [25, 50, 75])
        print(f"{busy:>15} {one:>12.3f} {two:>13.3f} {two / one:>7.3f} {mid:>18.3f} "
              f"{q1:>6.3f}-{q3:.3f}")


if __name__ == "__main__":
    sys.exit(main())
