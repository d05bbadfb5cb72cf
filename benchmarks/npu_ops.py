"""Per-operator cycles against Vela: every one-op and in-graph TFLite test model
(tests/models/tflite/ops) that partita's NPU takes, on the given presets.

    python benchmarks/npu_ops.py [--presets u55-256 u65-256] [--names exp prelu ...] [--markdown]
    python benchmarks/npu_ops.py --layers --names prelu   # Vela's per-layer report (JSON)

For each model: partita's total NPU cycles (the sum over its NPU partitions), Vela 5.2's total
cycles (its default system config for the accelerator, run in this process as benchmarks/npu.py
does), the ratio, and both tools' operator counts on the NPU (ours: source operators; Vela: its
operators after its own rewrites). Models partita leaves wholly on the CPU are listed with "-".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's partita

from npu import ROOT, ours, vela_layers, vela_or_recorded  # noqa: E402

OPS = ROOT / "tests" / "models" / "tflite" / "ops"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", nargs="+", default=["u55-256", "u65-256"])
    parser.add_argument("--names", nargs="+", help="model names (default: every ops model)")
    parser.add_argument(
        "--dir",
        type=Path,
        default=OPS,
        help="the models' folder (default: the ops models)",
    )
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument(
        "--record", action="store_true", help="use and extend the recorded Vela figures"
    )
    parser.add_argument(
        "--layers",
        action="store_true",
        help="print Vela's per-layer report of each model instead (JSON rows, Vela needed)",
    )
    args = parser.parse_args(argv)
    models = (
        [args.dir / f"{n}.tflite" for n in args.names]
        if args.names
        else sorted(args.dir.glob("*.tflite"))
    )
    if args.layers:
        import json

        for model in models:
            for preset in args.presets:
                rows = vela_layers(model, preset)
                print(json.dumps({"model": model.stem, "preset": preset, "layers": rows}))
        return
    if args.markdown:
        print("| model | preset | ours | Vela | ratio | our NPU ops | Vela NPU ops |")
        print("|---|---|---|---|---|---|---|")
    for model in models:
        for preset in args.presets:
            try:
                o = ours(model, preset)
            except Exception as e:  # a model our frontend cannot import (float16 weights)
                print(f"{model.stem}: {type(e).__name__}: {str(e)[:80]}", file=sys.stderr)
                continue
            v = vela_or_recorded(model, preset, args.record)
            ratio = f"{o['cycles'] / v['cycles']:.2f}" if v and v["cycles"] and o["cycles"] else "-"
            vops = f"{v['npu_ops']}/{v['npu_ops'] + v['cpu_ops']}" if v else "-"
            ocyc = f"{o['cycles']:,}" if o["cycles"] else "-"
            vcyc = f"{v['cycles']:,.0f}" if v else "-"
            row = (model.stem, preset, ocyc, vcyc, ratio, f"{o['npu_ops']}/{o['ops']}", vops)
            if args.markdown:
                print("| " + " | ".join(row) + " |", flush=True)
            else:
                print(" ".join(f"{c:>12}" for c in row), flush=True)


if __name__ == "__main__":
    main()
