"""Partitioning throughput: ``partition_for`` on synthetic int8 graphs of 1k, 10k and 100k nodes
with hundreds of regions, and on the MobileNetV2 int8 models when tests/models has them.

    python benchmarks/partition.py [--sizes 1000 10000 100000] [--regions 300] [--repeat 1]

Two series. The residual int8 network is what a frontend produces: most nodes are constants
(weights, scales, zero points). The op-only chain makes every node an op, the worst case per node.

The graph is a chain of residual stages (conv + bias + requantize + clip twice, then qnn.add
with the stage's input); every so often a stage runs an op the benchmark backend does not take
(qnn.sigmoid), which cuts the accelerator region, and its residual add reaches across the cut so
that MergeCompilerRegions must refuse merges that would make a cycle. Columns: nodes, regions,
the median, best and worst wall time of ``--repeat`` runs (each on a fresh graph), time per
node in microseconds (of the median), the ratio of that to the smallest graph's (flat means
linear), then the CPU time of each pass and of the whole pipeline (``cpu``: on a machine
other processes share, wall time counts their turns too). On the smallest graph the interpreter
checks that the partitioned module computes the same bits. (Relay's PartitionGraph took 187 s
on a 2,400-op chain with 80 regions.)
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

# This tree's partita, not whichever one is installed: run from benchmarks/, Python puts this
# folder first on the path, and an editable install of another checkout would be measured.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from partita.backends import Backend, Verdict, register_backend  # noqa: E402
from partita.partition import partition_pipeline, placement_report  # noqa: E402
from partita.patterns import constants, is_constant, is_op, wildcard  # noqa: E402

import partita as P  # noqa: E402
from partita.ir import post_order  # noqa: E402
from partita.ops import get_op  # noqa: E402
from partita.passes.infra import PassContext, PassInstrument  # noqa: E402

SHAPE = (1, 4, 4, 8)
RNG = np.random.default_rng(0)
MODELS = Path(__file__).resolve().parents[1] / "tests" / "models" / "tflite"
MOBILENETS = [
    MODELS / "nets" / "mobilenet_v2_035_96.tflite",
    MODELS / "large" / "mobilenet_v2_100_224.tflite",
]


def _stride_ok(root) -> Verdict:
    conv = root
    while conv.op_name != "qnn.conv2d":
        conv = conv.args[0]
    return Verdict(conv.attrs.strides == (1, 1), f"got {conv.attrs.strides}")


def _table():
    conv = is_op("qnn.conv2d")(wildcard(), is_constant(), *constants(4))
    conv = conv.optional(lambda c: is_op("nn.bias_add")(c, is_constant()))
    conv = is_op("qnn.requantize")(conv, *constants(4)).optional(lambda r: is_op("clip")(r))
    add = is_op("qnn.add")(wildcard(), wildcard(), *constants(6))
    return [("conv2d", conv, _stride_ok), ("add", add)]


BACKEND = Backend(
    "bench", patterns=_table, ops={"nn.max_pool2d": True, "add": True, "nn.relu": True}
)


def _q(scale, zp):
    return P.const(np.float32(scale)), P.const(np.int32(zp))


def _conv(x):
    w = P.const(RNG.integers(-8, 8, (3, 3, 8, 8), dtype=np.int8))
    zero = P.const(np.int32(0))
    y = get_op("qnn.conv2d")(
        x,
        w,
        zero,
        zero,
        P.const(np.float32(0.05)),
        P.const(np.float32(0.02)),
        padding=(1, 1),
        data_layout="NHWC",
        kernel_layout="HWIO",
    )
    y = get_op("nn.bias_add")(y, P.const(RNG.integers(-50, 50, (8,), dtype=np.int32)), axis=3)
    y = get_op("qnn.requantize")(y, *_q(0.001, 0), *_q(0.05, 0), out_dtype="int8")
    return get_op("clip")(y, a_min=-128.0, a_max=127.0)


def _stage(x, cut: bool):
    y = _conv(x)
    if cut:
        y = get_op("qnn.sigmoid")(y, *_q(0.05, 0), *_q(1 / 256, -128))
    y = _conv(y)
    return get_op("qnn.add")(x, y, *_q(0.05, 0), *_q(0.05, 0), *_q(0.05, 0))


def _chain(stages: int, regions: int) -> P.IRModule:
    every = max(1, stages // max(1, regions))
    x = P.var("x", SHAPE, "int8")
    y = x
    for i in range(stages):
        y = _stage(y, cut=(i % every == every - 1))
    return P.IRModule.from_expr(y)


def synthetic(nodes: int, regions: int) -> P.IRModule:
    """A residual int8 chain of about ``nodes`` nodes, cut into about ``regions`` regions."""
    probe = 100
    per_stage = len(post_order(_chain(probe, 3)["main"])) / probe
    return _chain(max(1, round(nodes / per_stage)), regions)


def op_chain(ops: int, regions: int) -> P.IRModule:
    """Every node an op (no constants): relu / add-the-input, cut by a tanh ``regions`` times."""
    every = max(2, ops // max(1, regions))
    x = P.var("x", (4,))
    y = x
    for i in range(ops):
        if i % every == every - 1:
            y = get_op("tanh")(y)
        else:
            y = get_op("add")(y, x) if i % 2 else get_op("nn.relu")(y)
    return P.IRModule.from_expr(y)


class _CpuTiming(PassInstrument):
    """The process's CPU time per pass (on a shared machine wall time counts others' turns)."""

    def __init__(self):
        self.timings: list[tuple[int, str, float]] = []
        self._stack: list[tuple[int, float]] = []

    def run_before_pass(self, p, mod):
        self._stack.append((len(self.timings), time.process_time()))
        self.timings.append((len(self._stack) - 1, p.name, 0.0))

    def run_after_pass(self, p, mod):
        index, start = self._stack.pop()
        depth, name, _ = self.timings[index]
        self.timings[index] = (depth, name, time.process_time() - start)


def _time(mod, target: str):
    """The partitioned module, the wall time, and each pass's CPU time (``cpu``: the whole
    pipeline's CPU time)."""
    pipeline = partition_pipeline(target)
    timing = _CpuTiming()
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    with PassContext(instruments=[timing]):
        out = pipeline(mod)
    total = time.perf_counter() - start
    passes = {name: t for depth, name, t in timing.timings if depth == 1}
    passes["cpu"] = time.process_time() - cpu
    return out, total, passes


def _check_bits(mod, out) -> None:
    t = mod["main"].params[0].type_annotation
    x = (
        RNG.integers(-128, 128, t.shape, dtype=np.int8)
        if t.dtype == "int8"
        else RNG.standard_normal(t.shape).astype(t.dtype)
    )
    before, after = P.interpret(mod, [x]), P.interpret(out, [x])
    assert all(np.array_equal(a, b) for a, b in zip(before, after)), "partitioning changed bits"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--regions", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    register_backend(BACKEND, override=True)
    for title, build in (("residual int8 network", synthetic), ("op-only chain", op_chain)):
        print(f"{title}:")
        _series(build, args)
    for path in MOBILENETS:
        if not path.exists():
            continue
        from partita.frontends import from_tflite

        mod = from_tflite(str(path))
        out, total, passes = _time(mod, "bench, llvm")
        print(
            f"{path.stem} int8: {len(post_order(mod['main']))} nodes, {total * 1e3:.1f} ms; "
            f"{placement_report(out).summary_line()}"
        )


def _series(build, args) -> None:
    _time(build(200, 10), "bench, llvm")  # warm up (imports, caches) before the first figure
    base = None
    print(
        f"{'nodes':>8} {'regions':>8} {'median s':>9} {'best':>7} {'worst':>7} {'us/node':>8} "
        f"{'ratio':>6}  per pass (s, the median run)"
    )
    for size in args.sizes:
        runs = []
        for _ in range(args.repeat):
            # a fresh graph every time: a second run on the same module would find its types
            # already inferred and time less than a user's first (and only) partitioning
            mod = build(size, args.regions)
            out, total, passes = _time(mod, "bench, llvm")
            runs.append((total, passes, out, mod))
        runs.sort(key=lambda r: r[0])
        total, passes, out, mod = runs[(len(runs) - 1) // 2]  # the median (the lower one)
        n = len(post_order(mod["main"]))
        if size == min(args.sizes):
            _check_bits(mod, out)
        per_node = total / n * 1e6
        base = base or per_node
        parts = "  ".join(f"{k} {v:.3f}" for k, v in passes.items())
        print(
            f"{n:>8} {len(out.functions) - 1:>8} {total:>9.3f} {runs[0][0]:>7.3f} "
            f"{runs[-1][0]:>7.3f} {per_node:>8.2f} {per_node / base:>6.2f}  {parts}"
        )


if __name__ == "__main__":
    main()
