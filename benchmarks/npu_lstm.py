"""The integer LSTM models against Vela 5.2 with three columns per preset: partita's own
program (its NPU partition's cycles), Vela's program in partita's cycle model
(backends/npu/vela_lstm.py for each UNIDIRECTIONAL_SEQUENCE_LSTM, partita's cycles for the
model's other operators) and Vela's total.

    python benchmarks/npu_lstm.py [--presets u55-256 u65-256] [--names lstm ...] [--markdown]
    python benchmarks/npu_lstm.py --kinds [--record]   # per op kind against Vela's report

``--kinds`` compares the LSTM's rows of Vela's per-layer report (``--verbose-performance``) with
vela_lstm.py's operations, per kind of operation: count and cycles. ``--record`` takes Vela's
figures from tests/backends/npu/data (vela_cycles.json, vela_lstm_layers.json) where recorded
for the same file and records the ones Vela computes.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's partita

from npu import ROOT, _digest, vela_layers, vela_or_recorded  # noqa: E402
from partita.frontends import from_tflite  # noqa: E402

import partita as P  # noqa: E402

LSTM_DIR = ROOT / "tests" / "models" / "tflite" / "lstm"
# the models tools/gen_tflite_lstm_models.py made, in its order (its manifest also lists what the
# converter refused, without a file)
NAMES = tuple(
    name
    for name, entry in json.loads((LSTM_DIR / "manifest.json").read_text()).items()
    if "file" in entry
)
LAYERS = ROOT / "tests" / "backends" / "npu" / "data" / "vela_lstm_layers.json"
LSTM_OP = "UNIDIRECTIONAL_SEQUENCE_LSTM"
VELA_LSTM_OP = "UnidirectionalSequenceLstm"


def lstm_shapes(model: Path):
    """vela_lstm.LSTMShape of each UNIDIRECTIONAL_SEQUENCE_LSTM of ``model``, in order."""
    from partita.backends.npu.vela_lstm import LSTMShape
    from partita.frontends.tflite.reader import read_model

    m = read_model(model.read_bytes())
    return [LSTMShape.from_tflite(m, op) for op in m.operators if op.name == LSTM_OP]


def vela_program_rows(model: Path, preset: str) -> list[tuple[str, int]]:
    """(Vela's kind, partita's cycles) of every LSTM operation Vela runs for ``model``."""
    from partita.backends.npu.config import get_config
    from partita.backends.npu.vela_lstm import vela_cycles

    config = get_config(preset)
    return [row for shape in lstm_shapes(model) for row in vela_cycles(shape, config)]


def columns(model: Path, preset: str) -> dict:
    """partita's program, Vela's program in partita's model (its LSTMs from vela_lstm.py, the
    other operators as partita costs them) and the LSTM rows apart."""
    exe = P.build(from_tflite(str(model)), f"npu -config={preset}, ref")
    regions = [s.region for s in exe.steps if s.target == "npu"]
    ops = [(op, c["cycles"]) for r in regions for op, c in zip(r.program.ops, r.cycles)]
    ours = sum(c for _, c in ops)
    others = sum(c for op, c in ops if LSTM_OP not in op.name)
    rows = vela_program_rows(model, preset)
    lstm = sum(c for _, c in rows)
    return {"ours": ours, "vela_in_ours": lstm + others, "lstm_rows": rows, "others": others}


def kinds(rows) -> dict[str, list[int]]:
    """{kind: [count, cycles]} of (kind, cycles) rows."""
    n, c = Counter(), Counter()
    for kind, cycles in rows:
        n[kind] += 1
        c[kind] += cycles
    return {k: [n[k], c[k]] for k in n}


def vela_kinds(model: Path, preset: str, use_record: bool) -> dict | None:
    """Vela's LSTM rows per kind ({kind: [count, cycles]}) and its other rows' cycles, from its
    per-layer report (recorded in vela_lstm_layers.json when ``use_record``)."""
    key = f"{model.resolve().relative_to(ROOT).with_suffix('').as_posix()}/{preset}"
    data = json.loads(LAYERS.read_text()) if LAYERS.exists() else {"vela": "5.2.0", "rows": {}}
    row = data["rows"].get(key)
    if use_record and row and row["sha256"] == _digest(model):
        return row
    layers = vela_layers(model, preset)
    if layers is None:
        return None
    lstm = [(r["vela_operator"], r["op_cycles"]) for r in layers if r["operator"] == VELA_LSTM_OP]
    other = sum(r["op_cycles"] for r in layers if r["operator"] != VELA_LSTM_OP)
    row = {"sha256": _digest(model), "lstm": kinds(lstm), "other_cycles": other}
    if use_record:
        data["rows"][key] = row
        data["rows"] = dict(sorted(data["rows"].items()))
        LAYERS.write_text(json.dumps(data, indent=1) + "\n")
    return row


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", nargs="+", default=["u55-256", "u65-256"])
    parser.add_argument("--names", nargs="+", default=list(NAMES))
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--kinds", action="store_true", help="per op kind against Vela's report")
    parser.add_argument("--record", action="store_true", help="use and extend the records")
    args = parser.parse_args(argv)
    if args.markdown and not args.kinds:
        print("| model | preset | partita's program | Vela's in partita's model | Vela | ratios |")
        print("|---|---|---|---|---|---|")
    for name in args.names:
        model = LSTM_DIR / f"{name}.tflite"
        for preset in args.presets:
            col = columns(model, preset)
            v = vela_or_recorded(model, preset, args.record)
            if args.kinds:
                vk = vela_kinds(model, preset, args.record)
                ok = kinds(col["lstm_rows"])
                print(
                    f"{name} {preset}: LSTM rows ours/Vela, other operators "
                    f"{col['others']:,} / {vk['other_cycles']:,}"
                )
                for kind, (n, c) in vk["lstm"].items():
                    on, oc = ok.get(kind, [0, 0])
                    ratio = f"{oc / c:.2f}" if c else "-"
                    print(f"    {kind:15} {on:4} / {n:4} ops {oc:9,} / {c:9,} cycles {ratio}")
                continue
            vc = v["cycles"] if v else None
            r1 = f"{col['ours'] / vc:.2f}" if vc else "-"
            r2 = f"{col['vela_in_ours'] / vc:.3f}" if vc else "-"
            cells = (
                name,
                preset,
                f"{col['ours']:,}",
                f"{col['vela_in_ours']:,}",
                f"{vc:,.0f}" if vc else "-",
                f"{r1} / {r2}",
            )
            if args.markdown:
                print("| " + " | ".join(cells) + " |", flush=True)
            else:
                print(" ".join(f"{c:>14}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
