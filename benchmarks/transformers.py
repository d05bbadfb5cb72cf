"""BERT-base geometry (12 layers, hidden 768, 12 heads, FFN 3072; random weights, vocabulary
100) at sequence 128: partita's import and compile times, and its "llvm" latency next to ONNX
Runtime's at 1 and 2 threads (partita's ``-threads=2`` splits the large matrix products over a
second thread), in one process.

    python benchmarks/transformers.py [--seq 128] [--threads 1 2] [--repeat 10] [--tiny]
                                      [--layers N] [--dyn-int8]

The encoder is tools/gen_transformer_models.py's (BERT_BASE config; --tiny: the 2-layer test
geometry), exported with torch.onnx.export (legacy exporter, opset 17) to a temporary file.
Medians of --repeat runs after a warm-up; the ratio is partita's time over ONNX Runtime's (the
issue's goal: at most 1.5). Where the llvm backend cannot build the model yet, the line says
why, and the reference interpreter's time is printed instead, for scale only.

--dyn-int8 also times ONNX Runtime's dynamic-int8 form of the same encoder (quantize_dynamic:
DynamicQuantizeLinear + MatMulInteger, int8 weights, as tools/gen_transformer_models.py makes
bert_tiny.dyn_int8.onnx), imported with this CPU's ONNX Runtime semantics (on AVX2 without
VNNI: VPMADDUBSW's pair saturation), next to ORT running that file; --layers N keeps the first
N encoder layers (a shorter run with BERT-base's widths).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's partita

import numpy as np  # noqa: E402

import partita as P  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))


def median_time(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def export(path: Path, seq: int, tiny: bool, layers: int | None = None) -> None:
    import dataclasses

    from gen_transformer_models import BERT_BASE, Config, export_legacy, make_model

    config = Config() if tiny else BERT_BASE
    if layers:
        config = dataclasses.replace(config, layers=layers)
    export_legacy(make_model(c=config), path, seq=seq)


def ort_latency(path: Path, feed: dict, threads: int, repeat: int) -> float:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return median_time(lambda: sess.run(None, feed), repeat)


def partita_latency(mod, feed: dict, repeat: int, threads: int = 1) -> tuple[str, float, float]:
    """(what ran, compile seconds, median run seconds): "llvm" (``-threads=2``: the large
    matrix products split over a second thread), or the interpreter when the llvm build fails
    (the reason goes in ``what``)."""
    t = time.perf_counter()
    try:
        exe = P.build(mod, f"llvm -threads={threads}")
    except P.PartitaError as e:
        reason = str(e).splitlines()[0][:120]
        return f"ref (llvm: {reason})", 0.0, median_time(lambda: P.interpret(mod, feed), 1)
    compile_s = time.perf_counter() - t
    return "llvm", compile_s, median_time(lambda: exe.run(**feed), repeat)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--tiny", action="store_true", help="the 2-layer test geometry")
    ap.add_argument("--layers", type=int, help="keep the first N encoder layers")
    ap.add_argument("--dyn-int8", action="store_true",
                    help="also ONNX Runtime's dynamic-int8 form (quantize_dynamic)")
    args = ap.parse_args(argv)
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
                what, compile_s, ours = partita_latency(mod, feed, args.repeat, n)
                peer = ort_latency(file, feed, n, args.repeat)
                print(
                    f"{form}, {n} thread(s): partita {what} {ours * 1e3:.1f} ms (compile "
                    f"{compile_s:.2f} s), ONNX Runtime {peer * 1e3:.1f} ms; partita / ORT = "
                    f"{ours / peer:.2f}", flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
