"""CPU latency side by side, in one process: partita "llvm" against TFLite's interpreter with
XNNPACK (its default) and with its builtin kernels, ONNX Runtime for an .onnx model, and OpenVINO
(either file format) when the ``openvino`` package is installed.

    python benchmarks/cpu.py [--model PATH.tflite|PATH.onnx|resnet50|qdq|NAME] [--threads 1 2]
                             [--repeat 20]

A .tflite model runs against TFLite (XNNPACK and builtin kernels); a quantized .onnx model
(e.g. tests/models/onnx/large/mobilenet_v2_100_224.qop_u8s8_pc.onnx) against ONNX Runtime at
its default optimization level, whose output partita must equal bit for bit. ``--model resnet50``
generates the float ResNet50 v2 of tools/gen_resnet50_v2.py (the TVM tutorial's geometry, random
weights) into a temporary directory; float outputs are compared within float32 rounding.
``--model qdq`` is the QDQ s8s8 per-channel MobileNetV2 (``NAME`` any benchmarks/models.py name,
e.g. ``onnx/mobilenet_v1_100_224.qdq_s8s8_pc``), made into its cache folder on first use.

Medians of ``--repeat`` rounds after a warm-up; each round calls every runtime ``--block``
times in a row (20 by default), so load from other processes falls on all of them alike while
each runtime is measured in its steady state: a runtime's threads keep spinning after its
calls (ONNX Runtime's for 20-30 ms), which with ``--block 1`` costs every call of the next
runtime a core at two threads, and with blocks as long as that spin only the first calls of
the block after. The ratio column is each runtime's time over partita's one-thread
time. Also prints partita's compile time, cold (empty cache) and cached (median of three).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from partita.frontends import from_tflite

import partita as P

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "tests" / "models" / "tflite" / "large" / "mobilenet_v2_100_224.tflite"
QDQ = "onnx/mobilenet_v2_100_224.qdq_s8s8_pc"  # --model qdq (benchmarks/models.py makes it)


def tflite(model: Path, x, threads: int, resolver=None):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kwargs = {"num_threads": threads}
    if resolver:
        kwargs["experimental_op_resolver_type"] = getattr(OpResolverType, resolver)
    it = Interpreter(model_path=str(model), **kwargs)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    out = it.get_output_details()[0]["index"]

    def run():
        it.invoke()
        return it.get_tensor(out)

    return run


def onnxruntime(model: Path, x, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.log_severity_level = threads, 3
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: x}
    return lambda: sess.run(None, feed)[0]


def openvino(model: Path, x, threads: int):
    """OpenVINO's CPU plugin on the same file (it reads .tflite and .onnx); None (with the
    reason printed) when it is not installed or cannot compile the model."""
    try:
        import openvino as ov

        core = ov.Core()
        compiled = core.compile_model(str(model), "CPU", {"INFERENCE_NUM_THREADS": threads})
    except Exception as exc:  # an optional peer: say why it is missing, go on
        print(f"OpenVINO ({threads} thread(s)) skipped: {type(exc).__name__}: {exc}"[:200])
        return None
    request = compiled.create_infer_request()
    return lambda: request.infer({0: x})[compiled.output(0)]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=MODEL)
    parser.add_argument("--threads", type=int, nargs="+", default=[1])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--llvm-options", default="",
                        help="options for partita's llvm target, e.g. -isa=vnni (no AMX: what "
                             "a Zen 4 runs)")
    parser.add_argument("--block", type=int, default=20,
                        help="calls of each runtime in a row per round (the first call after "
                        "another runtime's pays for its leftover threads; all are timed)")
    args = parser.parse_args(argv)
    if str(args.model) == "qdq":
        args.model = Path(QDQ)
    if str(args.model) != "resnet50" and not args.model.exists():  # a benchmark model's name
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from models import get_model

        args.model = get_model(str(args.model))
    with tempfile.TemporaryDirectory() as tmp:
        if str(args.model) == "resnet50":
            sys.path.insert(0, str(ROOT / "tools"))
            from gen_resnet50_v2 import export

            args.model = export(Path(tmp) / "resnet50_v2.onnx")
        run_model(args)


def run_model(args) -> None:
    onnx = args.model.suffix == ".onnx"
    if onnx:
        from partita.frontends import from_onnx

        mod = from_onnx(args.model)
    else:
        mod = from_tflite(str(args.model))
    with tempfile.TemporaryDirectory() as cache:
        os.environ["PARTITA_CACHE_DIR"] = cache
        target = f"llvm {args.llvm_options}".strip()
        start = time.perf_counter()
        exe = P.build(mod, target)
        cold = time.perf_counter() - start
        again = []
        for _ in range(3):  # a second build, from the caches: the median of three
            start = time.perf_counter()
            P.build(mod, target)
            again.append(time.perf_counter() - start)
        cached = float(np.median(again))
        threaded = {t: P.build(mod, f"{target} -threads={t}") for t in args.threads if t > 1}
    ty = exe.input_types[0]
    rng = np.random.default_rng(0)
    if ty.dtype == "float32":
        x = rng.standard_normal(ty.shape).astype(np.float32)
    else:
        x = rng.integers(-128, 128, ty.shape, dtype=np.int8)
    same = agree(exe.run(x)[0], P.interpret(mod, [x])[0])
    runs = [(f"partita {target}", 1, lambda: exe.run(x))]
    runs += [(f"partita {target} -threads={t}", t, lambda e=e: e.run(x))
             for t, e in threaded.items()]
    if onnx:
        for threads in args.threads:
            runs.append(("ONNX Runtime", threads, onnxruntime(args.model, x, threads)))
        ort_run = next(fn for name, _, fn in runs if name == "ONNX Runtime")
        same = f"{same}, with ONNX Runtime: {agree(exe.run(x)[0], ort_run())}"
    for threads in args.threads if not onnx else []:
        runs.append(("TFLite + XNNPACK", threads, tflite(args.model, x, threads)))
        runs.append(
            (
                "TFLite builtin kernels",
                threads,
                tflite(args.model, x, threads, "BUILTIN_WITHOUT_DEFAULT_DELEGATES"),
            )
        )
    for threads in args.threads:
        fn = openvino(args.model, x, threads)
        if fn is not None:
            runs.append(("OpenVINO", threads, fn))
            print(f"OpenVINO ({threads} thread(s)) against partita: {agree(fn(), exe.run(x)[0])}")
    times = interleaved([fn for _, _, fn in runs], args.repeat, args.block)
    print(
        f"model: {args.model.name}; partita compile cold {cold:.2f} s, cached {cached:.2f} s; "
        f"agreement with the interpreter: {same}"
    )
    print(f"{'runtime':36} {'threads':>7} {'median ms':>10} {'vs partita':>11}")
    for (name, threads, _), t in zip(runs, times):
        print(f"{name:36} {threads:>7} {1e3 * t:10.2f} {t / times[0]:10.3f}x")


def agree(got, want) -> str:
    """"bit-exact", or for float outputs the largest difference relative to the output's scale."""
    got, want = np.asarray(got), np.asarray(want)
    if np.array_equal(got, want):
        return "bit-exact"
    if got.dtype.kind != "f":
        return f"NOT bit-exact (up to {np.abs(got.astype(np.int64) - want).max()} LSB)"
    scale = float(np.abs(want).max()) or 1.0
    return f"within {float(np.abs(got - want).max()) / scale:.1e} of the output scale"


def interleaved(fns, repeat: int, block: int = 1) -> list[float]:
    """Median time of each function, measured round-robin (``block`` calls of each per round)
    so that load from other processes falls on every runtime alike; each warmed up first by a
    block of calls of its own (before any other runtime's threads spin)."""
    for fn in fns:
        for _ in range(max(block, 1)):
            fn()
    samples = [[] for _ in fns]
    for _ in range(repeat):
        for fn, out in zip(fns, samples):
            for _ in range(block):
                start = time.perf_counter()
                fn()
                out.append(time.perf_counter() - start)
    return [statistics.median(s) for s in samples]


if __name__ == "__main__":
    main()
