"""Cost placement against the clock: does ``placement="cost"`` with this machine's measured host
run faster than all-on-the-accelerator, as its estimate says?

    python benchmarks/placement.py [--repeat 5] [--target "npu, llvm"] [--models PATH ...]

For each model, both placements are estimated with ``host_model="measured"`` (this CPU's
calibrated host model), built, checked bit for bit against the interpreter, and profiled
``--repeat`` times; the measured column (``partition.estimate.measured``: the NPU's simulated
cycles at the preset's clock plus the host kernels' measured time) is the fastest run's. The
last column says whether the measured times agree with the estimate's direction. This is a
speed, so it lives here and not in the tests: it depends on the CPU and its load (until
session 26 a test asserted it, and failed on an SSE-only host; docs/testing.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's partita
sys.path.insert(0, str(ROOT / "tests"))  # the tests' small graphs

import numpy as np  # noqa: E402
from partita.backends.cost import parse_host  # noqa: E402
from partita.partition import partition_for  # noqa: E402
from partita.partition.estimate import estimate, measured  # noqa: E402

import partita as P  # noqa: E402

NETS = ROOT / "tests" / "models" / "tflite" / "nets"
DEFAULT_MODELS = [
    "convnet",
    NETS / "mobilenet_v2_035_96.tflite",
    NETS / "mobilenet_v1_025_128.tflite",
]


def _model(spec):
    if spec == "convnet":  # the placement test's graph: a 1-op NPU island between host convs
        from common_graphs import int8_convnet

        return "int8_convnet (4,1,4)", int8_convnet(strides=((4, 4), (1, 1), (4, 4)))
    from partita.frontends import from_tflite

    return Path(spec).stem, from_tflite(str(spec))


def _input(mod, seed=0):
    t = mod["main"].params[0].type_annotation
    info = np.iinfo(t.dtype)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, t.shape, dtype=t.dtype)


def run(spec, target: str, repeat: int) -> dict:
    name, mod = _model(spec)
    host = parse_host("measured")
    x = _input(mod)
    want = P.interpret(mod, [x])
    row = {"model": name}
    for label, placement in (("all", "all"), ("cost", "cost")):
        part = partition_for(mod, target, placement=placement, host_model=host)
        est = estimate(part, target, host)
        exe = P.build(mod, target, placement=placement, config={"host_model": host})
        got = exe.run(x)
        assert all(np.array_equal(a, b) for a, b in zip(got, want)), f"{name} {label}: bits differ"
        best = min(
            (measured(est, exe, exe.profile(x)) for _ in range(repeat)),
            key=lambda m: m["total_s"],
        )
        row[f"est_{label}"], row[f"run_{label}"] = est.total_s, best["total_s"]
    row["agrees"] = (row["est_cost"] < row["est_all"]) == (row["run_cost"] < row["run_all"])
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--target", default="npu, llvm")
    ap.add_argument("--models", nargs="*", default=DEFAULT_MODELS)
    args = ap.parse_args(argv)
    from cpu import cpu_name  # benchmarks/cpu.py (this folder is first on the path)

    print(f"# {cpu_name()}, target {args.target!r}, best of {args.repeat}")
    print("| model | estimate all / cost, us | measured all / cost, us | measured agrees |")
    print("|---|---|---|---|")
    for spec in args.models:
        r = run(spec, args.target, args.repeat)
        print(
            f"| {r['model']} | {r['est_all'] * 1e6:.1f} / {r['est_cost'] * 1e6:.1f} "
            f"| {r['run_all'] * 1e6:.1f} / {r['run_cost'] * 1e6:.1f} "
            f"| {'yes' if r['agrees'] else 'no'} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
