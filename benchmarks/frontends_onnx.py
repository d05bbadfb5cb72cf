"""ONNX frontend import time, next to ONNX Runtime's session creation in the same run; and the
bit-exactness table of docs/onnx.md.

    python benchmarks/frontends_onnx.py [--repeat 7] [MODEL.onnx ...]
    python benchmarks/frontends_onnx.py --exactness 8 [--smooth] [MODEL.onnx ...]

Default models: the committed MobileNetV2 0.35 96x96 QDQ (S8S8 per-channel) and QOperator
models. For each: the median wall time of from_onnx (protobuf parsing, one converter per node,
constant folding, QDQ -> QNN rewrites, type inference), the median of
onnxruntime.InferenceSession creation at its default level (the peer), and their ratio.
With --exactness N: partita's interpreter against ONNX Runtime at ORT_DISABLE_ALL and at its
default level (ORT_ENABLE_ALL) on N random inputs, as a markdown table: the max difference in
output quanta (LSB of the last DequantizeLinear's scale) and the fraction of outputs that differ,
for the default import (match="ort") and for match="ort_disable_all". ONNX Runtime and the
emulated MLAS work split both use the default thread count (the physical cores). Inputs are
uniform in [-1, 1], or with --smooth the smooth random images the torch_* networks are made for
(tests/frontends/onnx/onnx_cases.smooth_image).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from pathlib import Path

import numpy as np
import onnx
from partita.frontends import from_onnx

import partita as P

MODELS = Path(__file__).resolve().parents[1] / "tests" / "models" / "onnx" / "nets"
DEFAULT = [MODELS / "mobilenet_v2_035_96.qdq_s8s8_pc.onnx",
           MODELS / "mobilenet_v2_035_96.qop_u8s8_pc.onnx"]


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def session(path: Path, level: str = "enable_all"):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_DISABLE_ALL
                                   if level == "disable_all"
                                   else ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def import_times(paths, repeat: int) -> None:
    print("| model | nodes | from_onnx | ORT session | ratio |")
    print("|---|---|---|---|---|")
    for path in paths:
        nodes = len(onnx.load(path).graph.node)
        ours = timed(lambda p=path: from_onnx(p), repeat)
        try:
            peer = timed(lambda p=path: session(p), repeat)
            peer_text, ratio = f"{peer * 1e3:.1f} ms", f"{ours / peer:.2f}"
        except ImportError:
            peer_text, ratio = "-", "-"
        print(f"| {path.name} | {nodes} | {ours * 1e3:.1f} ms | {peer_text} | {ratio} |")


def last_dequantize_scale(path: Path) -> float | None:
    m = onnx.load(path)
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in m.graph.initializer}
    dqs = [n for n in m.graph.node if n.op_type == "DequantizeLinear"]
    return float(inits[dqs[-1].input[1]]) if dqs else None


def inputs(shape, n: int, smooth: bool) -> list[np.ndarray]:
    if smooth:
        import sys

        sys.path.insert(0, str(MODELS.parents[2] / "frontends" / "onnx"))
        from onnx_cases import smooth_image

        return [smooth_image(shape, seed) for seed in range(n)]
    rng = np.random.default_rng(1)
    return [rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(n)]


def exactness(paths, n: int, smooth: bool = False) -> None:
    print("| model | match | vs DISABLE_ALL: max LSB, differing | vs ENABLE_ALL: max LSB, "
          "differing |")
    print("|---|---|---|---|")
    for path in paths:
        want = {}
        for match in ("ort", "ort_disable_all"):
            mod = from_onnx(path, match=match)
            (param,) = mod["main"].params
            xs = inputs(param.type_annotation.shape, n, smooth)
            got = np.stack([P.interpret(mod, {param.name_hint: x})[0] for x in xs])
            scale = last_dequantize_scale(path) or 1.0
            cells = []
            for level in ("disable_all", "enable_all"):
                if level not in want:
                    sess = session(path, level)
                    want[level] = np.stack([sess.run(None, {param.name_hint: x})[0]
                                            for x in xs])
                d = np.rint(np.abs(want[level].astype(np.float64) - got) / scale)
                cells.append(f"{int(d.max())}, {np.mean(d > 0):.1%}")
            print(f"| {path.name} | {match} | {cells[0]} | {cells[1]} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--exactness", type=int, default=0, metavar="N")
    ap.add_argument("--smooth", action="store_true", help="smooth random images as inputs")
    args = ap.parse_args()
    paths = args.models or DEFAULT
    if args.exactness:
        exactness(paths, args.exactness, args.smooth)
    else:
        import_times(paths, args.repeat)


if __name__ == "__main__":
    main()
