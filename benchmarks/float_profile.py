"""Where a float ONNX model's time goes, per kernel, in partita ``llvm`` and in ONNX Runtime's
own profile (``SessionOptions.enable_profiling``), 1 thread (``--threads 2``: two), in one
process:

    python benchmarks/float_profile.py [--model resnet50|bert|bert-dyn|PATH.onnx] [--runs 5]
                                       [--layers N] [--isa auto] [--latency 1 2] [--repeat 6]

Each kernel's (each ORT node's) figure is its **minimum** over ``--runs`` profiled runs: on a
shared machine the minimum is the least disturbed run of each kernel (medians move with the
load). Two tables: time per kernel kind (partita's FDENSE, EWISE, ...) next to time per ORT
operator type (Conv, MatMul, ...), and the products grouped by their multiply-add count (MACs:
a convolution shape or a matrix product's M x K x N), partita's time next to ORT's for the same
group, with GMAC/s and partita / ORT. ``resnet50`` is tools/gen_resnet50_v2.py's float
ResNet-50 v2 (as benchmarks/cpu.py), ``bert`` benchmarks/transformers.py's BERT-base export at
sequence 128 (``--layers N``: the first N layers), ``bert-dyn`` its ORT dynamic-int8 form.

``--latency 1 2`` times the whole model instead, at those thread counts: partita's ``llvm``
(``-threads=N``) and ONNX Runtime (``intra_op_num_threads=N``) alternating call by call in one
process, ``--repeat`` calls each after a warm-up call, the median wall time and the median
process CPU time per call (both threads' CPU at 2 threads), with the load average before and
after: on a shared machine the CPU time is the steadier figure.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's partita
sys.path.insert(0, str(ROOT / "tools"))

import numpy as np  # noqa: E402

import partita as P  # noqa: E402

PRODUCTS = {"Conv", "Gemm", "MatMul", "FusedMatMul", "MatMulInteger", "FusedConv", "NhwcConv",
            "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QLinearConv", "ConvInteger",
            "QLinearMatMul"}
_WEIGHT_AT = {"Conv": 1, "FusedConv": 1, "NhwcConv": 1, "ConvInteger": 1, "QLinearConv": 3}


def node_macs(op: str, args: dict, weight_shapes: dict | None = None, name: str = "") -> int | None:
    """Multiply-adds of an ORT product node from its profiled shapes. ORT leaves a prepacked
    weight out of the shapes it profiles (QLinearConv's, prepacked at session start): then the
    weight's shape comes from ``weight_shapes`` (node name -> the model's weight shape)."""
    try:
        ins = [next(iter(s.values()), None) for s in args["input_type_shape"]]
        out = next(iter(args["output_type_shape"][0].values()))
    except (KeyError, IndexError, StopIteration):
        return None
    if op in _WEIGHT_AT:  # QLinearConv's weight follows x, x_scale, x_zero_point
        at = _WEIGHT_AT[op]
        w = ins[at] if len(ins) > at and ins[at] is not None and len(ins[at]) >= 3 else None
        if w is None:
            w = (weight_shapes or {}).get(name)
        if w is None:
            return None
        return int(np.prod(out)) * int(np.prod(w)) // int(w[0])
    if op == "Gemm":
        return int(np.prod(out)) * int(ins[0][0] if args.get("transA") else ins[0][-1])
    return int(np.prod(out)) * int(ins[0][-1])  # MatMul-like: A's last dimension is K


def conv_weight_shapes(path: Path) -> dict:
    """Node name -> weight shape for the model's convolutions whose weight is an initializer."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    dims = {t.name: list(t.dims) for t in model.graph.initializer}
    out = {}
    for node in model.graph.node:
        at = _WEIGHT_AT.get(node.op_type)
        if at is not None and len(node.input) > at and node.input[at] in dims:
            out[node.name] = dims[node.input[at]]
    return out


def profiles(path: Path, feed: dict, runs: int, isa: str, threads: int = 1):
    """({(kernel name, kind, macs): minimum seconds} of partita's profile, {ORT node name:
    (op type, macs or None, minimum seconds)} of ORT's own profile), the two runtimes'
    profiled runs alternating (so the machine's load falls on both alike). ``threads`` 2:
    partita's ``-threads=2`` build (its profile always runs the two-thread driver) and ORT's
    ``intra_op_num_threads=2``."""
    import onnxruntime as ort
    from partita.frontends import from_onnx

    mod = from_onnx(path, {k: v.shape for k, v in feed.items()})
    exe = P.build(mod, f"llvm -isa={isa} -threads={threads}")
    exe.run(**feed)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    so.enable_profiling = True
    ours: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        so.profile_file_prefix = str(Path(tmp) / "ort")
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        sess.run(None, feed)  # warm-up, left out below
        for _ in range(runs):
            for step in exe.profile(**feed).steps:
                for op in step.ops:
                    key = (op.name, op.metrics.get("kernel", op.kind), op.metrics.get("macs"))
                    ours[key] = min(ours.get(key, float("inf")), op.time_s)
            sess.run(None, feed)
        events = json.loads(Path(sess.end_profiling()).read_text())
    theirs: dict = {}
    weights = conv_weight_shapes(path)
    seen = collections.Counter()
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        seen[e["name"]] += 1
        if seen[e["name"]] == 1:  # the warm-up run
            continue
        op = e["args"].get("op_name", "?")
        name = e["name"].removesuffix("_kernel_time")
        macs = node_macs(op, e["args"], weights, name) if op in PRODUCTS else None
        old = theirs.get(e["name"], (op, macs, float("inf")))
        theirs[e["name"]] = (op, macs, min(old[2], e["dur"] / 1e6))
    return ours, theirs


def latency(path: Path, feed: dict, threads: int, repeat: int, isa: str) -> str:
    """One line: partita and ORT at ``threads`` threads, alternating, medians."""
    import statistics
    import time

    import onnxruntime as ort
    from partita.frontends import from_onnx

    exe = P.build(from_onnx(path, {k: v.shape for k, v in feed.items()}),
                  f"llvm -isa={isa} -threads={threads}")
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    got, want = exe.run(**feed)[0], sess.run(None, feed)[0]
    scale = float(np.abs(want).max()) or 1.0
    fns = [lambda: exe.run(**feed), lambda: sess.run(None, feed)]
    samples = [([], []) for _ in fns]
    before = load_average()
    for _ in range(repeat):
        for fn, (wall, cpu) in zip(fns, samples):
            t, c = time.perf_counter(), time.process_time()
            fn()
            wall.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
    (pw, pc), (ow, oc) = [(statistics.median(w), statistics.median(c)) for w, c in samples]
    return (f"{threads} thread(s): partita {1e3 * pw:.1f} ms wall / {1e3 * pc:.1f} ms CPU, "
            f"ONNX Runtime {1e3 * ow:.1f} / {1e3 * oc:.1f}; partita / ORT {pw / ow:.2f}x wall, "
            f"{pc / oc:.2f}x CPU (within {float(np.abs(got - want).max()) / scale:.1e} of ORT's "
            f"scale; load average {before} -> {load_average()})")


def load_average() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def model_and_feed(args, tmp: Path):
    if args.model in ("bert", "bert-dyn"):
        from transformers import export  # benchmarks/transformers.py

        path = tmp / "bert.onnx"
        export(path, 128, False, args.layers)
        if args.model == "bert-dyn":
            from gen_transformer_models import quantize_dynamic_int8

            quantize_dynamic_int8(path, tmp / "bert.dyn_int8.onnx")
            path = tmp / "bert.dyn_int8.onnx"
        rng = np.random.default_rng(0)
        return path, {"input_ids": rng.integers(1, 100, (1, 128)),
                      "attention_mask": np.ones((1, 128), np.int64)}
    if args.model == "resnet50":
        from gen_resnet50_v2 import export

        path = export(tmp / "resnet50_v2.onnx")
    else:
        path = Path(args.model)
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    inits = {i.name for i in graph.initializer}
    inp = next(i for i in graph.input if i.name not in inits)
    shape = [d.dim_value or 1 for d in inp.type.tensor_type.shape.dim]
    return path, {inp.name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--layers", type=int, help="bert: keep the first N encoder layers")
    ap.add_argument("--isa", default="auto",
                    help="partita's -isa= (default: this CPU's best tier, as a user's build)")
    ap.add_argument("--threads", type=int, default=1, help="the profiles' threads (1 or 2)")
    ap.add_argument("--latency", type=int, nargs="*", help="thread counts: whole-model times")
    ap.add_argument("--repeat", type=int, default=6, help="--latency: calls of each runtime")
    args = ap.parse_args(argv)
    if args.isa == "auto":  # name the tier in the tables
        from partita.backends.llvm import resolve_isa

        args.isa = resolve_isa({})
    sys.path.insert(0, str(ROOT / "benchmarks"))
    with tempfile.TemporaryDirectory() as tmp:
        path, feed = model_and_feed(args, Path(tmp))
        if args.latency:
            for threads in args.latency:
                print(f"{path.name}, {latency(path, feed, threads, args.repeat, args.isa)}",
                      flush=True)
            return 0
        ours, theirs = profiles(path, feed, args.runs, args.isa, args.threads)
    load = load_average()
    print(f"{path.name}: {args.threads} thread(s), minimum of {args.runs} profiled runs per "
          f"kernel (alternating); load average {load}")
    kinds = collections.Counter()
    for (_, kind, _), t in ours.items():
        kinds[kind] += t
    ops = collections.Counter()
    for op, _, t in theirs.values():
        ops[op] += t
    print(f"\npartita -isa={args.isa}: {1e3 * sum(kinds.values()):.2f} ms in kernels")
    for kind, t in kinds.most_common():
        print(f"  {kind:14} {1e3 * t:9.2f} ms")
    print(f"ONNX Runtime: {1e3 * sum(ops.values()):.2f} ms in nodes")
    for op, t in ops.most_common():
        print(f"  {op:14} {1e3 * t:9.2f} ms")
    groups: dict = collections.defaultdict(lambda: [0, 0.0, 0, 0.0])
    for (_, _, macs), t in ours.items():
        if macs:
            g = groups[macs]
            g[0] += 1
            g[1] += t
    for _, macs, t in theirs.values():
        if macs:
            g = groups[macs]
            g[2] += 1
            g[3] += t
    print("\nproducts by MACs per kernel: partita (count, ms, GMAC/s) | ORT (count, ms, GMAC/s)"
          " | partita / ORT")
    for macs, (n, t, m, u) in sorted(groups.items(), key=lambda kv: -max(kv[1][1], kv[1][3])):
        mine = f"{n:3} {1e3 * t:8.2f} {macs * n / t / 1e9:6.1f}" if n else f"{'':3} {'-':>8} {'':6}"
        peer = f"{m:3} {1e3 * u:8.2f} {macs * m / u / 1e9:6.1f}" if m else f"{'':3} {'-':>8} {'':6}"
        ratio = f"{t / u:.2f}x" if n and m and n == m else ""
        print(f"  {macs:>11,} | {mine} | {peer} | {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
