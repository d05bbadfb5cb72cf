"""Pattern rewriting throughput: a 20-pattern NPU-style table over graphs of 1k, 10k, 100k nodes.

    python benchmarks/patterns.py [--sizes 1000 10000 100000] [--repeat 3]

The table has the shapes of a real NPU pattern table (pad + conv + bias + requantize + clip,
depthwise conv, fully connected, binary ops, pools, LUT activations, data movement). Two figures:
``RewriteTable`` (each match fused into a composite call, run to a fixed point and re-typed) and
``partition_table`` (MergeComposite's engine, one pass). The time per node should stay flat as
the graph grows; the last column is the ratio to the smallest graph. On the smallest graph the
interpreter checks that both results compute the same bits as the original.
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np
from partita.patterns import (
    RewriteTable,
    constants,
    is_constant,
    is_op,
    is_tuple,
    partition_table,
    wildcard,
)

import partita as P
from partita.ir import Call, Constant, Function, IRModule, Tuple, Var, const, post_order, var
from partita.ops import get_op

SHAPE = (1, 4, 4, 8)
RNG = np.random.default_rng(0)


# ---- the table --------------------------------------------------------------------------------


def _conv(data, depthwise=None):
    conv = is_op("qnn.conv2d")(data, is_constant(), *constants(4))
    if depthwise is not None:
        conv = conv.where(lambda c: (c.attrs.groups > 1) == depthwise, "depthwise")
    conv = conv.optional(lambda c: is_op("nn.bias_add")(c, is_constant()))
    out = is_op("qnn.requantize")(conv, *constants(4))
    return out.optional(lambda r: is_op("clip")(r))


def _binary(name):
    out = is_op(name)(wildcard("x"), wildcard("y"), *constants(6))
    return out.optional(lambda r: is_op("clip")(r))


def _unary(name, n_params=4):
    return is_op(name)(wildcard("x"), *constants(n_params))


def npu_table() -> list:
    """(name, pattern): fused patterns before their parts, as a backend's table."""
    dense = is_op("qnn.dense")(wildcard("x"), is_constant(), *constants(4))
    dense = dense.optional(lambda d: is_op("nn.bias_add")(d, is_constant()))
    return [
        ("pad_conv2d", _conv(is_op("nn.pad")(wildcard("x"), is_constant()))),
        ("depthwise_conv2d", _conv(wildcard("x"), depthwise=True)),
        ("conv2d", _conv(wildcard("x"), depthwise=False)),
        ("fully_connected", is_op("qnn.requantize")(dense, *constants(4))),
        ("add", _binary("qnn.add")),
        ("mul", _binary("qnn.mul")),
        ("sub", _binary("qnn.subtract")),
        ("max_pool2d", is_op("nn.max_pool2d")(wildcard("x"))),
        ("avg_pool2d", _unary("qnn.avg_pool2d")),
        ("mean", _unary("qnn.mean")),
        ("sigmoid", _unary("qnn.sigmoid")),
        ("tanh", _unary("qnn.tanh")),
        ("hardswish", _unary("qnn.hardswish")),
        ("leaky_relu", _unary("qnn.leaky_relu")),
        ("softmax", _unary("qnn.softmax")),
        ("requantize", _unary("qnn.requantize")),
        ("relu", is_op("clip")(wildcard("x").has_dtype("int8"))),
        ("concatenate", is_op("concatenate")(is_tuple([wildcard("x"), wildcard("y")]))),
        ("reshape", is_op("reshape")(wildcard("x"))),
        ("resize2d", is_op("image.resize2d")(wildcard("x"))),
    ]


def fuse(name: str):
    """A table function: the matched region (root down to the captured inputs) as a composite."""

    def rule(root, x, y=None):
        inputs = [v for v in (x, y) if v is not None]
        params = [Var(f"p{i}", v.checked_type) for i, v in enumerate(inputs)]
        body = _copy_region(root, {id(v): p for v, p in zip(inputs, params)})
        fn = Function(params, body, attrs={"Composite": f"npu.{name}"})
        return Call(fn, inputs, span=root.span)

    rule.__name__ = name
    return rule


def _copy_region(root, mapping: dict):
    """Copy the nodes between ``root`` and the inputs in ``mapping`` (iteratively)."""
    done = dict(mapping)
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in done:
            continue
        if isinstance(node, Constant):
            done[id(node)] = node
        elif not expanded:
            stack.append((node, True))
            kids = node.fields if isinstance(node, Tuple) else node.args
            stack.extend((k, False) for k in kids)
        elif isinstance(node, Tuple):
            done[id(node)] = Tuple([done[id(f)] for f in node.fields], node.span)
        else:
            done[id(node)] = Call(node.op, [done[id(a)] for a in node.args], node.attrs, node.span)
    return done[id(root)]


def rewrite_table() -> RewriteTable:
    """The table as rewrite rules that fuse each match into a composite call."""
    return RewriteTable(
        [(p.named("root"), fuse(n), n) for n, p in npu_table()], require_type=True, name="npu"
    )


def composite_entries() -> list:
    """The table as partition entries (what MergeComposite passes to partition_table)."""
    return [(p, {"Composite": f"npu.{n}"}, None) for n, p in npu_table()]


# ---- the graphs -------------------------------------------------------------------------------


def _q(scale, zp):
    return const(np.float32(scale)), const(np.int32(zp))


def _conv_block(x, pad=False, depthwise=False, cin=8):
    if pad:
        x = get_op("nn.pad")(x, const(np.int8(0)), pad_width=((0, 0), (1, 1), (1, 1), (0, 0)))
    shape = (3, 3, 1, 8) if depthwise else (3, 3, cin, 8)
    w = const(RNG.integers(-8, 8, shape, dtype=np.int8))
    zero = const(np.int32(0))
    y = get_op("qnn.conv2d")(
        x,
        w,
        zero,
        zero,
        const(np.float32(0.05)),
        const(np.float32(0.02)),
        padding=(0, 0) if pad else (1, 1),
        groups=8 if depthwise else 1,
        data_layout="NHWC",
        kernel_layout="HWIO",
    )
    y = get_op("nn.bias_add")(y, const(RNG.integers(-50, 50, (8,), dtype=np.int32)), axis=3)
    y = get_op("qnn.requantize")(y, *_q(0.001, 0), *_q(0.05, 0), out_dtype="int8")
    return get_op("clip")(y, a_min=-128.0, a_max=127.0)


def _lut(name, x, **attrs):
    out = _q(1 / 256, -128) if name in ("qnn.sigmoid", "qnn.softmax") else _q(0.05, 0)
    return get_op(name)(x, *_q(0.05, 0), *out, **attrs)


def _binary_block(name, x, y):
    return get_op(name)(x, y, *_q(0.05, 0), *_q(0.05, 0), *_q(0.05, 0))


def _dense_block(x):
    flat = get_op("reshape")(x, newshape=(16, 8))
    w = const(RNG.integers(-8, 8, (8, 8), dtype=np.int8))
    d = get_op("qnn.dense")(
        flat,
        w,
        const(np.int32(0)),
        const(np.int32(0)),
        const(np.float32(0.05)),
        const(np.float32(0.02)),
    )
    d = get_op("nn.bias_add")(d, const(RNG.integers(-50, 50, (8,), dtype=np.int32)), axis=1)
    d = get_op("qnn.requantize")(d, *_q(0.001, 0), *_q(0.05, 0), out_dtype="int8")
    return get_op("reshape")(d, newshape=SHAPE)


def _stage(x, i: int):
    """One stage of the network; stages cycle through every pattern of the table."""
    k = i % 6
    if k == 0:
        y = _conv_block(x, pad=True)
        return _binary_block("qnn.add", x, y)
    if k == 1:
        y = _conv_block(x, depthwise=True)
        pooled = get_op("nn.max_pool2d")(y, pool_size=3, padding=1, layout="NHWC")
        return _lut("qnn.sigmoid", pooled)
    if k == 2:
        y = _conv_block(x)
        avg = get_op("qnn.avg_pool2d")(
            y, *_q(0.05, 0), *_q(0.05, 0), pool_size=3, padding=1, layout="NHWC"
        )
        return _binary_block("qnn.mul", _lut("qnn.tanh", avg), x)
    if k == 3:
        y = _lut("qnn.leaky_relu", _lut("qnn.hardswish", x), alpha=0.1)
        z = get_op("qnn.requantize")(y, *_q(0.05, 0), *_q(0.05, 1), out_dtype="int8")
        return _binary_block("qnn.subtract", get_op("clip")(z, a_min=0.0, a_max=127.0), x)
    if k == 4:
        both = get_op("concatenate")(Tuple([x, _dense_block(x)]), axis=3)
        half = _conv_block(both, cin=16)
        return get_op("image.resize2d")(half, size=(4, 4), layout="NHWC", method="nearest_neighbor")
    soft = _lut("qnn.softmax", x, axis=-1)
    mean = get_op("qnn.mean")(soft, *_q(0.05, 0), *_q(0.05, 0), axis=(3,), keepdims=True)
    return _binary_block("qnn.add", soft, mean)


def build_graph(n_nodes: int) -> tuple[IRModule, int]:
    """A network of stages with at least ``n_nodes`` nodes (calls, constants and the input)."""
    x = var("x", SHAPE, "int8")
    e, count, i = x, 1, 0
    while count < n_nodes:
        before = e
        e = _stage(e, i)
        i += 1
        count += _new_nodes(e, before)
    mod = IRModule.from_expr(e)
    return mod, count


def _new_nodes(e, stop) -> int:
    seen, stack, n = {id(stop)}, [e], 0
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        n += 1
        stack.extend(node.fields if isinstance(node, Tuple) else getattr(node, "args", ()))
    return n


# ---- measurement ------------------------------------------------------------------------------


def best_time(fn, repeat: int) -> float:
    """The best of ``repeat`` runs (the machine's noise only ever adds time)."""
    times = []
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def check_bits(mod: IRModule, table: RewriteTable, entries: list) -> None:
    """Both results compute the original's bits, with every op inside a composite."""
    inputs = {"x": RNG.integers(-128, 128, SHAPE, dtype=np.int8)}
    want = P.interpret(mod, inputs)[0]
    for name, out in (
        ("RewriteTable", table(mod)),
        ("partition_table", partition_table(entries, mod)),
    ):
        got = P.interpret(out, inputs)[0]
        if got.tobytes() != want.tobytes():
            raise SystemExit(f"{name} changed the output bits")
        left = sum(
            1
            for n in post_order(out["main"].body, enter_functions=False)
            if isinstance(n, Call) and not isinstance(n.op, Function)
        )
        if left:
            raise SystemExit(f"{name} left {left} ops outside composites")


def main() -> None:
    """Print the table of figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    table, entries = rewrite_table(), composite_entries()
    print(
        f"{len(table)} patterns; us/node = microseconds per graph node, ratio = to the first size"
    )
    print(
        f"{'nodes':>8} {'matches':>8} | {'RewriteTable us/node':>20} {'ratio':>6} {'s':>7} | "
        f"{'partition_table us/node':>23} {'ratio':>6} {'s':>7}"
    )
    base = None
    for i, size in enumerate(args.sizes):
        mod, n = build_graph(size)
        P.InferType()(mod)
        if i == 0:
            check_bits(mod, table, entries)
        t_rw = best_time(lambda m=mod: table(m), args.repeat)
        t_pt = best_time(lambda m=mod: partition_table(entries, m), args.repeat)
        matches = sum(
            1
            for c in post_order(table(mod)["main"].body, enter_functions=False)
            if isinstance(c, Call) and isinstance(c.op, Function)
        )
        per = (t_rw / n * 1e6, t_pt / n * 1e6)
        base = base or per
        print(
            f"{n:>8} {matches:>8} | {per[0]:>20.2f} {per[0] / base[0]:>6.2f} {t_rw:>7.3f} | "
            f"{per[1]:>23.2f} {per[1] / base[1]:>6.2f} {t_pt:>7.3f}"
        )


if __name__ == "__main__":
    main()
