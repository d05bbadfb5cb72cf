"""Core throughput: InferType, interpret, print and parse on graphs of 1k, 10k and 100k nodes.

    python benchmarks/core.py [--sizes 1000 10000 100000] [--repeat 3]

Prints the median time per node for each stage; the per-node figure should stay flat as the graph
grows (the last column is the ratio to the smallest graph).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import partita as P
from partita.ir import IRModule, post_order, var
from partita.ops import get_op


def qnn_graph(n_nodes: int) -> IRModule:
    """A chain of quantized blocks with a residual branch: dequantize -> relu -> add -> quantize."""
    deq, quant, relu, add = (
        get_op(n) for n in ("qnn.dequantize", "qnn.quantize", "nn.relu", "add")
    )
    x = var("x", (1, 4, 4, 8), "int8")
    e = x
    count = 1
    while count < n_nodes:
        f = deq(e, 0.05, -3)
        g = add(relu(f), f)
        e = quant(g, 0.1, 2, out_dtype="int8")
        count += 4 + 4  # four calls and four scalar constants
    return IRModule.from_expr(e)


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def median_infer_type(n: int, repeat: int) -> float:
    """InferType on a fresh, untyped graph each time (types are cached on nodes)."""
    times = []
    for _ in range(repeat):
        mod = qnn_graph(n)
        start = time.perf_counter()
        P.InferType()(mod)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(n: int, repeat: int) -> dict[str, float]:
    typed = P.InferType()(qnn_graph(n))
    nodes = len(post_order(typed["main"]))
    text, consts = P.astext(typed)
    x = np.random.default_rng(0).integers(-128, 128, (1, 4, 4, 8), dtype=np.int8)
    out = {"nodes": nodes, "InferType": median_infer_type(n, repeat) / nodes * 1e6}
    stages = {
        "interpret": lambda: P.interpret(typed, [x]),
        "print": lambda: P.astext(typed),
        "parse": lambda: P.parse(text, consts),
    }
    for name, fn in stages.items():
        out[name] = median_time(fn, repeat) / nodes * 1e6
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows = [measure(n, args.repeat) for n in args.sizes]
    stages = ["InferType", "interpret", "print", "parse"]
    print(f"{'nodes':>8} " + " ".join(f"{s + ' us/node':>18}" for s in stages))
    for r in rows:
        print(
            f"{r['nodes']:>8} "
            + " ".join(f"{r[s]:>10.2f} ({r[s] / rows[0][s]:4.2f}x)" for s in stages)
        )


if __name__ == "__main__":
    main()
