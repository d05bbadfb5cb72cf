"""CPU latency side by side, in one process: partita "llvm" against TFLite's interpreter with
XNNPACK (its default) and with its builtin kernels, ONNX Runtime for an .onnx model, and OpenVINO
(either file format) when the ``openvino`` package is installed.

    python benchmarks/cpu.py [--model PATH.tflite|PATH.onnx|resnet50|qdq|NAME] [--threads 1 2]
                             [--repeat 20] [--tiers auto|plain,avx2,...]

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

``--semantics tflite_builtin`` (TFLite models) adds, per tier, partita's one-thread build of the
model imported with that ``from_tflite`` semantics (bit-exact with TFLite's builtin kernels
instead of its reference ones), in the same rounds: its ratio to the default import's time is
the issue's "every ``semantics=`` within 1.15x of the default's time".

Every CPU tier: partita runs once per ``-isa=`` tier this CPU can execute (``--tiers auto``:
plain, and avx2 / avxvnni / vnni / amx where the CPU has them; an AMX machine runs all five),
all measured in the same interleaved rounds as the peers, and prints one table per tier naming
the CPU, then the tier's product kernels against its peak (backends/llvm/peak.py: the tier's
multiply-adds per cycle at the measured clock, one core): int8 convolutions and dense layers
with K >= 64 (goal: 60% of peak) and float GEMMs / convolutions (goal: 75%), from the median of
``--profile-runs`` one-thread profiles. So each tier can be judged on any machine that has it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's partita

import numpy as np  # noqa: E402
from partita.frontends import from_tflite  # noqa: E402

import partita as P  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "tests" / "models" / "tflite" / "large" / "mobilenet_v2_100_224.tflite"
QDQ = "onnx/mobilenet_v2_100_224.qdq_s8s8_pc"  # --model qdq (benchmarks/models.py makes it)
GAP = 0.05  # --gap: seconds idle before each block (interleaved)


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
    fn = lambda: request.infer({0: x})[compiled.output(0)]  # noqa: E731
    try:  # its default on CPUs with AMX or AVX-512 BF16 is bfloat16: say so beside the figure
        fn.precision = str(compiled.get_property("INFERENCE_PRECISION_HINT")).split("'")[1]
    except Exception:  # an older OpenVINO without the property
        fn.precision = "unknown"
    return fn


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=MODEL)
    parser.add_argument("--threads", type=int, nargs="+", default=[1])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--llvm-options", default="",
                        help="options for partita's llvm target, e.g. -isa=vnni (no AMX: what "
                             "a Zen 4 runs)")
    parser.add_argument("--tiers", default="auto",
                        help="-isa= tiers to run, comma-separated (auto: every tier this CPU "
                        "can execute)")
    parser.add_argument("--profile-runs", type=int, default=5,
                        help="one-thread profiles per tier for the fraction-of-peak summary")
    parser.add_argument("--semantics", nargs="*", default=[],
                        help="TFLite models: also time partita's build of the model imported "
                        "with these from_tflite semantics (e.g. tflite_builtin), one thread, "
                        "every tier, against the default's time (the issue's 1.15x goal)")
    parser.add_argument("--block", type=int, default=20,
                        help="calls of each runtime in a row per round (the first call after "
                        "another runtime's pays for its leftover threads; all are timed)")
    parser.add_argument("--gap", type=float, default=GAP,
                        help="seconds idle before each block (default %(default)s: longer than "
                        "ONNX Runtime's pool spins after its calls, so every runtime starts its "
                        "block on quiet cores; 0: none, as before session 23)")
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


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), else the platform's word for it."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def tiers_of(spec: str) -> list[str]:
    """The -isa= tiers to run: ``auto`` is every tier this CPU can execute, plain first."""
    from partita.backends.llvm.runtime.jit import amx_permitted, runs_isa

    if spec != "auto":
        return [t.strip() for t in spec.split(",") if t.strip()]
    out = ["plain"]
    for tier in ("avx2", "avxvnni", "vnni", "amx"):
        if runs_isa(tier) and (tier != "amx" or amx_permitted()):
            out.append(tier)
    return out


def run_model(args) -> None:
    onnx = args.model.suffix == ".onnx"
    if onnx:
        from partita.frontends import from_onnx

        mod = from_onnx(args.model)
    else:
        mod = from_tflite(str(args.model))
    tiers = tiers_of(args.tiers)
    builds = {}  # tier -> {threads: executable}
    variants = {} if onnx else {sem: from_tflite(str(args.model), semantics=sem)
                                for sem in args.semantics}
    others = {}  # (tier, semantics) -> one-thread executable of that import
    with tempfile.TemporaryDirectory() as cache:
        os.environ["PARTITA_CACHE_DIR"] = cache
        compile_note = ""
        for tier in tiers:
            target = f"llvm -isa={tier} {args.llvm_options}".strip()
            start = time.perf_counter()
            exe = P.build(mod, target)
            cold = time.perf_counter() - start
            if not compile_note:
                again = []
                for _ in range(3):  # a second build, from the caches: the median of three
                    start = time.perf_counter()
                    P.build(mod, target)
                    again.append(time.perf_counter() - start)
                compile_note = (f"partita compile ({tier}) cold {cold:.2f} s, cached "
                                f"{float(np.median(again)):.2f} s")
            builds[tier] = {1: exe, **{t: P.build(mod, f"{target} -threads={t}")
                                       for t in args.threads if t > 1}}
            for sem, vmod in variants.items():
                others[tier, sem] = P.build(vmod, target)
    first = builds[tiers[0]][1]
    ty = first.input_types[0]
    rng = np.random.default_rng(0)
    if ty.dtype == "float32":
        x = rng.standard_normal(ty.shape).astype(np.float32)
    else:
        x = rng.integers(-128, 128, ty.shape, dtype=np.int8)
    want = P.interpret(mod, [x])[0]
    same = {tier: agree(b[1].run(x)[0], want) for tier, b in builds.items()}
    runs = [(tier, f"partita -isa={tier}" + (f" -threads={t}" if t > 1 else ""), t,
             lambda e=e: e.run(x))
            for tier, b in builds.items() for t, e in sorted(b.items())]
    for (tier, sem), exe in others.items():
        runs.append((tier, f"partita -isa={tier} semantics={sem}", 1, lambda e=exe: e.run(x)))
        check = agree(exe.run(x)[0], P.interpret(variants[sem], [x])[0])
        print(f"semantics={sem}, -isa={tier}: agreement with the interpreter: {check}")
    peers = []
    if onnx:
        for threads in args.threads:
            peers.append(("ONNX Runtime", threads, onnxruntime(args.model, x, threads)))
        ort_run = peers[0][2]
        same = {tier: f"{v}, with ONNX Runtime: {agree(builds[tier][1].run(x)[0], ort_run())}"
                for tier, v in same.items()}
    for threads in args.threads if not onnx else []:
        peers.append(("TFLite + XNNPACK", threads, tflite(args.model, x, threads)))
        peers.append(
            (
                "TFLite builtin kernels",
                threads,
                tflite(args.model, x, threads, "BUILTIN_WITHOUT_DEFAULT_DELEGATES"),
            )
        )
    builtin = next((fn for n, t, fn in peers if n == "TFLite builtin kernels" and t == 1), None)
    for (tier, sem), exe in others.items():
        if sem == "tflite_builtin" and builtin is not None:
            print(f"semantics={sem}, -isa={tier}: agreement with TFLite's builtin kernels: "
                  f"{agree(exe.run(x)[0], builtin())}")
    for threads in args.threads:
        fn = openvino(args.model, x, threads)
        if fn is not None:
            peers.append(("OpenVINO", threads, fn))
            print(f"OpenVINO ({threads} thread(s), default options: float inference precision "
                  f"{fn.precision}) against partita: {agree(fn(), first.run(x)[0])}")
    fns = [r[3] for r in runs] + [p[2] for p in peers]
    times = interleaved(fns, args.repeat, args.block, args.gap)
    ours, theirs = times[: len(runs)], times[len(runs):]
    print(f"model: {args.model.name}; CPU: {cpu_name()} ({os.cpu_count()} logical CPUs); "
          f"{compile_note}")
    for tier in tiers:
        rows = [(name, t, ti) for (tr, name, t, _), ti in zip(runs, ours) if tr == tier]
        base = rows[0][2]
        print(f"\n-isa={tier} on {cpu_name()}: agreement with the interpreter: {same[tier]}")
        print(f"{'runtime':46} {'threads':>7} {'median ms':>10} {'vs partita':>11}")
        for name, t, ti in rows + [(n, t, ti) for (n, t, _), ti in zip(peers, theirs)]:
            print(f"{name:46} {t:>7} {1e3 * ti:10.2f} {ti / base:10.3f}x")
        for t, exe in sorted(builds[tier].items()):
            modes = [s.region.modes for s in exe.steps
                     if getattr(getattr(s, "region", None), "_alone", None) is not None]
            if t > 1 and modes:
                print(f"  -threads={t}: runs with the worker "
                      f"{sum(m.counts['pool'] for m in modes)} of "
                      f"{sum(m.counts['pool'] + m.counts['alone'] for m in modes)} (TwoModes' "
                      f"choice; probe runs crowded by a third thread, judging nothing: "
                      f"{sum(m.crowded for m in modes)})")
        for line in peak_summary(builds[tier][1], x, args.profile_runs, tier):
            print(line)
    for line in goal_summary(runs, ours, peers, theirs, quantized=not onnx or _quantized(
            args.model)):
        print(line)


INT8_GOAL, FLOAT_GOAL = 0.60, 0.75  # the kernel goals, fractions of the tier's peak
# issue 28's model goals: partita / peer at most this (int8 models: XNNPACK and ONNX Runtime
# 0.8x, OpenVINO 1.0x; float models: ONNX Runtime 1.0x), two threads at most TWO_THREADS of one,
# -isa=plain within PLAIN of the best tier
PEER_GOALS = {True: {"TFLite + XNNPACK": 0.8, "OpenVINO": 1.0, "ONNX Runtime": 0.8},
              False: {"ONNX Runtime": 1.0}}
TWO_THREADS, PLAIN = 0.6, 2.5


def _quantized(model: Path) -> bool:
    """Whether an ONNX model is statically quantized (QOperator or QDQ nodes): the issue's int8
    goals; a float or dynamic-int8 model (BERT's) has ONNX Runtime's 1.0x."""
    import onnx

    ops = {n.op_type for n in onnx.load(str(model), load_external_data=False).graph.node}
    return bool(ops & {"QuantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger"})


def goal_summary(runs, ours, peers, theirs, quantized: bool) -> list[str]:
    """The run's figures against issue 28's goals, one line each: the best tier and every
    tier's two threads over one, plain against the best tier, the best tier against each peer
    at each thread count. Ratios of medians from these interleaved rounds (a quiet machine's
    figures: on a busy one they say little)."""
    mine = {(tier, t): ti for (tier, name, t, _), ti in zip(runs, ours) if "semantics" not in name}
    tiers = sorted({tier for tier, _ in mine}, key=lambda tr: mine[tr, 1] if (tr, 1) in mine
                   else float("inf"))
    if not tiers or (tiers[0], 1) not in mine:
        return []
    best = tiers[0]

    def verdict(value, goal):
        return f"{value:.2f} ({'met' if value <= goal else 'not met'}: <= {goal})"

    out = [f"\ngoals (issue 28) in this run; best tier {best} (the fastest one thread):"]
    pairs = [f"{tr} {verdict(mine[tr, 2] / mine[tr, 1], TWO_THREADS)}" for tr in tiers
             if (tr, 2) in mine and (tr, 1) in mine]
    if pairs:
        out.append("  two threads / one: " + "; ".join(pairs))
    if "plain" in tiers and best != "plain":
        out.append("  -isa=plain / " + best + ": " + "; ".join(
            f"{t} thread(s) {mine['plain', t] / mine[best, t]:.2f}x "
            f"({'met' if mine['plain', t] / mine[best, t] <= PLAIN else 'not met'}: <= {PLAIN}x)"
            for t in (1, 2) if ("plain", t) in mine and (best, t) in mine))
    goals = PEER_GOALS[quantized]
    for (name, t, _), ti in zip(peers, theirs):
        if name in goals and (best, t) in mine:
            out.append(f"  {best} against {name}, {t} thread(s): "
                       f"{verdict(mine[best, t] / ti, goals[name])}")
    return out


def peak_summary(exe, x, runs: int, tier: str = "") -> list[str]:
    """The tier's product kernels against its peak, from the median time of each kernel over
    ``runs`` one-thread profiles: int8 kernels with K >= 64, and float products. Then the clock
    under the tier's vector load (peak.vector_clock_hz) where it is not the measured one: the
    fractions at that clock, what the tier can reach while it runs."""
    per_kernel: dict[str, list] = {}
    for _ in range(max(runs, 1)):
        for step in exe.profile(x).steps:
            for op in step.ops:
                if "gmac_s" in op.metrics:
                    per_kernel.setdefault(op.name, []).append((op.time_s, op.metrics))
    groups = {"int8": [], "float": []}
    for name, samples in per_kernel.items():
        t = statistics.median(s[0] for s in samples)
        m = samples[0][1]
        cls = "float" if "gflop_s" in m else "int8"
        if cls == "int8" and m.get("k", 0) < 64:
            continue
        groups[cls].append((name, m["kernel"], m["macs"], t, m["peak_gmac_s"],
                            m.get("achievable_gmac_s")))
    lines = []
    for cls, goal, what in (("int8", INT8_GOAL, "int8 conv/dense kernels with K >= 64"),
                            ("float", FLOAT_GOAL, "float GEMM/conv kernels")):
        rows = groups[cls]
        if not rows:
            continue
        macs, secs, peak = sum(r[2] for r in rows), sum(r[3] for r in rows), rows[0][4]
        reach = rows[0][5]  # avx2 int8: the int32-sum rate, the goal's reference (peak.py)
        fractions = [r[2] / r[3] / 1e9 / (r[5] or r[4]) for r in rows]
        met = sum(f >= goal for f in fractions)
        if reach:
            lines.append(
                f"  {what}: {100 * macs / secs / 1e9 / reach:.0f}% of the {reach:.1f} GMAC/s "
                f"reachable into int32 sums (per-kernel figures below are against it)")
        lines.append(
            f"  {what}: {len(rows)}, {1e3 * secs:.2f} ms, {macs / secs / 1e9:.1f} GMAC/s = "
            f"{100 * macs / secs / 1e9 / peak:.0f}% of the tier's peak ({peak:.1f} GMAC/s per "
            f"core); per kernel median {100 * statistics.median(fractions):.0f}%, best "
            f"{100 * max(fractions):.0f}%; {met} of {len(rows)} at the goal "
            f"({100 * goal:.0f}%)"
        )
    lines += product_rate_lines(tier, [cls for cls in ("int8", "float") if groups[cls]])
    register = {"vnni": "zmm", "amx": "zmm", "avxvnni": "ymm", "avx2": "ymm"}.get(tier)
    if lines and register:
        from partita.backends.llvm.peak import measured_clock_hz, vector_clock_hz

        scalar, vector = measured_clock_hz(), vector_clock_hz(register)
        if abs(vector / scalar - 1) <= 0.03:
            lines.append(f"  clock under {register} multiply-adds {vector / 1e9:.2f} GHz: the "
                         f"measured clock's ({scalar / 1e9:.2f}) within 3%")
        else:
            lines.append(f"  clock under {register} multiply-adds {vector / 1e9:.2f} GHz, not "
                         f"{scalar / 1e9:.2f}: the fractions above x {scalar / vector:.2f} "
                         f"at the clock the tier runs at")
    return lines or ["  (no product kernels with a known size)"]


def product_rate_lines(tier: str, classes) -> list[str]:
    """Per kernel class: the rate this core runs the tier's product instruction at
    (peak.tier_rate), said where it falls short of the rate the fractions are against (a CPU
    with one 512-bit multiply port runs VPDPBUSD zmm at 64 a cycle, not PEAK's 128): the
    fractions above are then of a rate this core cannot reach."""
    from partita.backends.llvm.peak import ACHIEVABLE_INT8, peak_per_cycle, tier_rate

    lines = []
    for cls in classes:
        found = tier_rate(tier, cls)
        if found is None:
            continue
        name, rate = found
        assumed = ACHIEVABLE_INT8.get(tier, 0) if cls == "int8" else 0
        assumed = assumed or peak_per_cycle(tier, cls)
        if rate >= 0.9 * assumed:
            lines.append(f"  {name}: {rate:.1f} multiply-adds a cycle on this core (the "
                         f"{cls} fractions are against {assumed})")
        else:
            lines.append(f"  {name}: {rate:.1f} multiply-adds a cycle on this core, not "
                         f"{assumed}: the {cls} fractions above x {assumed / rate:.2f} against "
                         f"the rate it runs")
    return lines


def agree(got, want) -> str:
    """"bit-exact", or for float outputs the largest difference relative to the output's scale."""
    got, want = np.asarray(got), np.asarray(want)
    if np.array_equal(got, want):
        return "bit-exact"
    if got.dtype.kind != "f":
        return f"NOT bit-exact (up to {np.abs(got.astype(np.int64) - want).max()} LSB)"
    scale = float(np.abs(want).max()) or 1.0
    return f"within {float(np.abs(got - want).max()) / scale:.1e} of the output scale"


def interleaved(fns, repeat: int, block: int = 1, gap: float = 0.0) -> list[float]:
    """Median time of each function, measured round-robin (``block`` calls of each per round)
    so that load from other processes falls on every runtime alike; each warmed up first by a
    block of calls of its own (before any other runtime's threads spin). ``gap`` seconds idle
    before each block: the previous runtime's threads stop spinning (ONNX Runtime's pool spins
    20-30 ms after a call; OpenVINO's too), so no block starts on a core another runtime holds,
    as no user's run does (they run one runtime)."""
    for fn in fns:
        for _ in range(max(block, 1)):
            fn()
    samples = [[] for _ in fns]
    for _ in range(repeat):
        for fn, out in zip(fns, samples):
            if gap > 0:
                time.sleep(gap)
            for _ in range(block):
                start = time.perf_counter()
                fn()
                out.append(time.perf_counter() - start)
    return [statistics.median(s) for s in samples]


if __name__ == "__main__":
    main()
