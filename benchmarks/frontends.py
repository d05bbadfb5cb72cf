"""Frontend import time: from_tflite on the full-size MobileNetV2 1.0 224 int8 model and on the
ResNet-style test network, next to TFLite's own model loading in the same run.

    python benchmarks/frontends.py [--repeat 7] [MODEL.tflite ...]
    python benchmarks/frontends.py --exactness 5 [MODEL.tflite ...]

For each model: the median wall time of from_tflite (flatbuffer parsing, weight binding, one
converter per operator, type inference), the median of LiteRT's Interpreter construction plus
allocate_tensors (the peer; skipped without ai_edge_litert), and their ratio.
With --exactness N: partita's interpreter (semantics "tflite" and "tflite_builtin") against each
of TFLite's three kernel sets on N random inputs, as a markdown table (docs/tflite.md): the max
difference in output LSB (absolute for float outputs) and the fraction of outputs that differ.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

from partita.frontends import from_tflite

from partita.ir import post_order

MODELS = Path(__file__).resolve().parents[1] / "tests" / "models" / "tflite"
DEFAULT = [MODELS / "large" / "mobilenet_v2_100_224.tflite",
           MODELS / "nets" / "resnet_mini_64.tflite"]


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def litert_load(path: Path):
    """The peer: LiteRT's interpreter on the same file (reference kernels, one thread)."""
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        return None

    def load():
        it = Interpreter(model_path=str(path), num_threads=1,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        it.allocate_tensors()

    return load


def measure(path: Path, repeat: int) -> dict:
    data = path.read_bytes()
    mod = from_tflite(data)
    row = {"model": path.stem, "MB": len(data) / 1e6,
           "nodes": len(post_order(mod["main"])),
           "partita_ms": 1e3 * median_time(lambda: from_tflite(data), repeat)}
    peer = litert_load(path)
    row["litert_ms"] = 1e3 * median_time(peer, repeat) if peer else float("nan")
    return row


KERNELS = {"reference": "BUILTIN_REF", "builtin": "BUILTIN_WITHOUT_DEFAULT_DELEGATES",
           "XNNPACK": "AUTO"}


def exactness(path: Path, n: int) -> list[str]:
    """Markdown rows: per partita semantics, per kernel set, max |diff| and differing fraction."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    from partita import interpret

    runs = {}
    for name, resolver in KERNELS.items():
        it = Interpreter(model_path=str(path), num_threads=1,
                         experimental_op_resolver_type=getattr(OpResolverType, resolver))
        it.allocate_tensors()
        runs[name] = it
    rng = np.random.default_rng(0)
    details = runs["reference"].get_input_details()
    inputs = [[_random(d, rng) for d in details] for _ in range(n)]
    lsb = _output_lsb(path)
    rows = []
    for semantics in ("tflite", "tflite_builtin"):
        mod = from_tflite(path, semantics=semantics)
        ours = [interpret(mod, x) for x in inputs]
        cells = []
        for it in runs.values():
            worst, differ, total = 0.0, 0, 0
            for x, got in zip(inputs, ours):
                for d, v in zip(it.get_input_details(), x):
                    it.set_tensor(d["index"], v)
                it.invoke()
                for d, g, unit in zip(it.get_output_details(), got, lsb):
                    delta = np.abs(it.get_tensor(d["index"]).astype(float) - g.astype(float))
                    delta = delta / unit
                    worst, differ = max(worst, float(delta.max())), differ + int((delta > 0).sum())
                    total += delta.size
            cells.append(f"{worst:g} / {100 * differ / total:.1f}%")
        rows.append(f"| {path.stem} | {semantics} | " + " | ".join(cells) + " |")
    return rows


def _output_lsb(path: Path) -> list[float]:
    """Per output, the value of one LSB: 1 for integer outputs, the input scale of the final
    DEQUANTIZE for float outputs of quantized models (1.0 if there is none)."""
    from partita.frontends.tflite.reader import read_model

    m = read_model(path.read_bytes())
    producer = {o: op for op in m.operators for o in op.outputs}
    units = []
    for i in m.outputs:
        op = producer.get(i)
        src = m.tensors[op.inputs[0]] if op is not None and op.name == "DEQUANTIZE" else None
        units.append(float(src.scale[0]) if src is not None and src.quantized else 1.0)
    return units


def _random(detail, rng):
    import numpy as np

    if detail["dtype"] == np.float32:
        return rng.uniform(-1, 1, detail["shape"]).astype(np.float32)
    info = np.iinfo(detail["dtype"])
    return rng.integers(info.min, info.max + 1, detail["shape"]).astype(detail["dtype"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path, default=DEFAULT)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--exactness", type=int, metavar="N", default=0,
                    help="compare outputs with TFLite's kernel sets on N random inputs")
    args = ap.parse_args(argv)
    missing = [p for p in args.models if not p.exists()]
    if missing:
        print(f"missing models (run tools/gen_tflite_models.py): {missing}", file=sys.stderr)
        return 1
    if args.exactness:
        print("| model | partita semantics | vs " + " | vs ".join(KERNELS) + " |")
        print("|---|---|" + "---|" * len(KERNELS))
        for path in args.models:
            print("\n".join(exactness(path, args.exactness)))
        return 0
    print(f"{'model':24} {'MB':>6} {'nodes':>6} {'from_tflite ms':>15} {'LiteRT load ms':>15} "
          f"{'ratio':>6}")
    for path in args.models:
        r = measure(path, args.repeat)
        print(f"{r['model']:24} {r['MB']:6.2f} {r['nodes']:6d} {r['partita_ms']:15.1f} "
              f"{r['litert_ms']:15.1f} {r['partita_ms'] / r['litert_ms']:6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
