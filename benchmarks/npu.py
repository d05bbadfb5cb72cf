"""The NPU against its anchor, Arm's Vela: cycles per model and preset, ops on the NPU, and the
simulator's speed against TFLite's own CPU time with XNNPACK.

    python benchmarks/npu.py [--presets u55-256 u65-256] [--models PATH ...] [--no-speed]

Vela (ethos-u-vela) runs in this process with its default system config and memory mode for
each accelerator (what the issue's figures use); partita builds the same .tflite for
"npu -config=<preset>, ref". Columns: total cycles (ours, Vela's, ratio), NPU-only cycles
(Vela's cycles_npu: the MAC/elementwise work without memory stalls), ops on the NPU (ours,
Vela's), the share of MACs on the NPU and the number of NPU partitions.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import os
import statistics
import tempfile
import time
from pathlib import Path

# one BLAS thread, as TFLite gets one thread: on a shared machine OpenBLAS's spinning workers
# make the simulator's small GEMMs 10-100x slower
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import sys  # noqa: E402

# this checkout's partita, not an installed one (`python benchmarks/npu.py` puts benchmarks/ first)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from partita.frontends import from_tflite  # noqa: E402

import partita as P  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODELS = [
    *sorted((ROOT / "tests" / "models" / "tflite" / "nets").glob("*.tflite")),
    ROOT / "partita" / "data" / "digits_mobilenetv2.tflite",
    ROOT / "tests" / "models" / "tflite" / "large" / "mobilenet_v2_100_224.tflite",
]
VELA_NAMES = {
    "u55-128": "ethos-u55-128",
    "u55-256": "ethos-u55-256",
    "u65-256": "ethos-u65-256",
    "u65-512": "ethos-u65-512",
}


RECORD = ROOT / "tests" / "backends" / "npu" / "data" / "vela_cycles.json"


def _digest(model: Path) -> str:
    import hashlib

    return hashlib.sha256(model.read_bytes()).hexdigest()[:16]


def record_key(model: Path, preset: str) -> str:
    """A model's key in the record: its path under the checkout (or its name if outside)."""
    model = Path(model).resolve()
    try:
        name = model.relative_to(ROOT).with_suffix("").as_posix()
    except ValueError:
        name = model.stem
    return f"{name}/{preset}"


def recorded(model: Path, preset: str, path: Path = RECORD) -> dict | None:
    """Vela's figures for ``model`` on ``preset`` as recorded by ``--record`` (None when absent
    or recorded for a different file)."""
    import json

    if not path.exists():
        return None
    row = json.loads(path.read_text()).get(record_key(model, preset))
    return row if row and row.get("sha256") == _digest(model) else None


def record(rows: dict, path: Path = RECORD) -> None:
    """Merge ``rows`` ({"model/preset": vela figures}) into the recorded Vela figures."""
    import json

    data = json.loads(path.read_text()) if path.exists() else {}
    data.update(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(sorted(data.items())), indent=1) + "\n")


def vela_or_recorded(model: Path, preset: str, use_record: bool) -> dict | None:
    """Vela's figures, from the record when asked and present, else by running Vela (and
    recording the result when ``use_record``)."""
    if use_record and (row := recorded(model, preset)):
        return row
    row = vela(model, preset)
    if row is not None and use_record:
        record({record_key(model, preset): {**row, "sha256": _digest(model)}})
    return row


def _run_vela(model: Path, preset: str, *extra: str, read=None):
    """Vela 5.2 on ``model`` for ``preset`` (its stdout captured): (what it printed, ``read`` of
    its output folder), or None when Vela is not installed."""
    try:
        from ethosu.vela import vela as vela_main
    except ImportError:
        return None
    with tempfile.TemporaryDirectory() as out:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
            vela_main.main(
                [str(model), "--accelerator-config", VELA_NAMES[preset], "--output-dir", out,
                 *extra]
            )
        return printed.getvalue(), read(Path(out)) if read is not None else None


def _summary_row(out: Path) -> dict:
    (summary,) = out.glob("*_summary_*.csv")
    return next(csv.DictReader(summary.open()))


def vela(model: Path, preset: str) -> dict | None:
    """Vela's estimate: total and NPU cycles, and its NPU/CPU operator counts."""
    ran = _run_vela(model, preset, read=_summary_row)
    if ran is None:
        return None
    text, row = ran
    npu_ops = int(text.split("NPU operators = ")[1].split()[0]) if "NPU operators" in text else 0
    cpu_ops = int(text.split("CPU operators = ")[1].split()[0]) if "CPU operators" in text else 0
    return {
        "cycles": float(row["cycles_total"]),
        "npu_cycles": float(row["cycles_npu"]),
        "npu_ops": npu_ops,
        "cpu_ops": cpu_ops,
    }


def vela_layers(model: Path, preset: str) -> list[dict] | None:
    """Vela's per-layer report (``--verbose-performance``): per NPU operation after its
    rewrites, the source operator, its own operator, 'Op Cycles' and the 'NPU' column."""
    ran = _run_vela(model, preset, "--verbose-performance")
    if ran is None:
        return None
    lines = ran[0].split("Original Operator")[1].split("Network summary")[0]
    rows = []
    for line in lines.splitlines()[2:]:
        cells = line.split()
        if len(cells) > 7 and cells[2] == "NPU":
            rows.append(
                {
                    "operator": cells[0],
                    "vela_operator": cells[1],
                    "op_cycles": int(cells[5]),
                    "npu_cycles": int(cells[7]),
                }
            )
    return rows


def ours(model: Path, preset: str) -> dict:
    exe = P.build(from_tflite(str(model)), f"npu -config={preset}, ref")
    summary = exe.report.summary()
    regions = [s.region for s in exe.steps if s.target == "npu"]
    cycles = sum(c["cycles"] for r in regions for c in r.cycles)
    compute = sum(c["compute_cycles"] for r in regions for c in r.cycles)
    share = summary["macs_by_target"].get("npu", 0) / max(1, summary["macs"])
    return {
        "cycles": cycles,
        "compute": compute,
        "npu_ops": summary["ops_by_target"].get("npu", 0),
        "ops": summary["ops"],
        "macs_share": share,
        "partitions": summary["partitions"],
    }


def speed(model: Path, repeat: int = 9) -> dict:
    """Median seconds: partita's simulator (its compiled engine and numpy), TFLite with XNNPACK
    (1 thread), the NPU compile, and the compiled engine's first run (LLVM; cached on disk)."""
    from ai_edge_litert.interpreter import Interpreter

    mod = from_tflite(str(model))
    out = {}
    for engine in ("native", "numpy"):
        start = time.perf_counter()
        exe = P.build(mod, f"npu -sim={engine}, ref")
        out["compile"] = time.perf_counter() - start
        x = np.random.default_rng(0).integers(-128, 128, exe.input_types[0].shape, dtype=np.int8)
        start = time.perf_counter()
        exe.run(x)
        out[f"{engine}_first"] = time.perf_counter() - start
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            exe.run(x)
            times.append(time.perf_counter() - start)
        out[engine] = statistics.median(times)
    it = Interpreter(model_path=str(model), num_threads=1)
    it.allocate_tensors()
    index = it.get_input_details()[0]["index"]
    it.set_tensor(index, x)
    it.invoke()
    tfl = []
    for _ in range(max(repeat, 30)):
        start = time.perf_counter()
        it.invoke()
        tfl.append(time.perf_counter() - start)
    out["xnnpack"] = statistics.median(tfl)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", nargs="+", default=["u55-256", "u65-256"])
    parser.add_argument("--models", nargs="+", type=Path, default=MODELS)
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--speed-only", action="store_true", help="skip the Vela table")
    parser.add_argument(
        "--record",
        action="store_true",
        help=f"take Vela's figures from {RECORD.relative_to(ROOT)} where recorded for the same "
        "file, and record the ones Vela computes",
    )
    args = parser.parse_args(argv)
    print(
        f"{'model':32} {'preset':8} {'ours':>10} {'Vela':>10} {'ratio':>6} {'Vela NPU':>10} "
        f"{'our comp':>10} {'NPU ops':>9} {'Vela ops':>9} {'MACs':>6} {'parts':>5}"
    )
    for model in [] if args.speed_only else args.models:
        for preset in args.presets:
            o, v = ours(model, preset), vela_or_recorded(model, preset, args.record)
            vc = f"{v['cycles']:,.0f}" if v else "-"
            ratio = f"{o['cycles'] / v['cycles']:.2f}" if v else "-"
            vn = f"{v['npu_cycles']:,.0f}" if v else "-"
            vops = f"{v['npu_ops']}/{v['npu_ops'] + v['cpu_ops']}" if v else "-"
            print(
                f"{model.stem[:32]:32} {preset:8} {o['cycles']:>10,} {vc:>10} {ratio:>6} "
                f"{vn:>10} {o['compute']:>10,} {o['npu_ops']:>4}/{o['ops']:<4} {vops:>9} "
                f"{100 * o['macs_share']:5.1f}% {o['partitions']:>5}"
            )
    if not args.no_speed:
        big = ROOT / "tests" / "models" / "tflite" / "large" / "mobilenet_v2_100_224.tflite"
        t = speed(big)
        print(
            f"\nMobileNetV2 1.0 224, one thread each: simulation {1e3 * t['native']:.2f} ms "
            f"(compiled engine; numpy engine {1e3 * t['numpy']:.1f} ms), TFLite XNNPACK "
            f"{1e3 * t['xnnpack']:.2f} ms, ratio {t['native'] / t['xnnpack']:.2f}x "
            f"(numpy {t['numpy'] / t['xnnpack']:.1f}x); NPU compile {1e3 * t['compile']:.0f} ms, "
            f"the compiled engine's first run {1e3 * t['native_first']:.0f} ms"
        )


if __name__ == "__main__":
    main()
