"""The cases tools/llvm_op_survey.py runs: small graphs for every registered op.

``cases(op_name, seed)`` lists Case rows (label, parameters, body, how to draw the inputs) over
the dtypes, modes and quantization parameters the op's registration names; the mode attributes
(semantics, accumulate, rounding, ...) are read from the registry's ``choice`` metadata, so a
new choice is surveyed without touching this table. The type relation sorts out the invalid
combinations (the survey drops them before counting).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np

from partita.errors import PartitaError
from partita.ir import Expr, TensorType, Tuple, Var, const
from partita.ops import get_op

ALL = ("int8", "uint8", "int16", "int32", "int64", "float16", "float32", "bool")
FLOATS, Q8, QD = ("float16", "float32"), ("int8", "uint8"), ("int8", "uint8", "int16")
F32, I32 = np.float32, np.int32
SHAPES = [(7,), (2, 3, 5)]
BSHAPES = [((2, 3, 5), (2, 3, 5)), ((2, 3, 5), (5,)), ((1, 3, 1), (2, 1, 5)), ((), (3, 2))]
# attributes whose choices are semantics, not dtypes or layouts: every value is surveyed
MODE_ATTRS = ("semantics", "accumulate", "method", "coordinate_transformation_mode",
              "rounding_method", "mode", "pad_mode", "slice_mode", "approximate")  # fmt: skip
# ops that never reach a host function: PartitionGraph strips the region markers
SKIPPED = {
    "annotation.compiler_begin": "a region marker: PartitionGraph removes it before any backend",
    "annotation.compiler_end": "a region marker: PartitionGraph removes it before any backend",
}


@dataclass
class Case:
    """One graph: ``label`` names what varies; ``feeds`` maps a parameter to how its data is
    drawn ("pos": positive floats, (lo, hi): integers in that range)."""

    op: str
    label: dict
    params: list[Var]
    body: Expr | str  # a string: the reason the op rejected the attributes
    feeds: dict = field(default_factory=dict)


def modes(op: str, **fixed) -> list[dict]:
    """Every combination of ``op``'s mode-attribute choices (``fixed`` ones held)."""
    names, values = [], []
    for f in dataclasses.fields(get_op(op).attrs_type):
        if f.name in MODE_ATTRS and f.name not in fixed and "choices" in f.metadata:
            names.append(f.name)
            values.append(f.metadata["choices"])
    return [dict(zip(names, combo), **fixed) for combo in itertools.product(*values)]


def var(name: str, shape, dtype: str) -> Var:
    return Var(name, TensorType(tuple(shape), dtype))


def weight(rng, shape, dtype: str) -> np.ndarray:
    """A constant operand: normal floats, small integers (bool: random)."""
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in FLOATS:
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -20), min(info.max, 20) + 1, shape).astype(dtype)


def qzp(dtype: str, offset: int = 0) -> np.int32:
    """A zero point near the middle of ``dtype``'s range (0 for int16: TFLite's symmetric)."""
    base = {"uint8": 128, "int16": 0}.get(dtype, 0)
    return I32(base + (0 if dtype == "int16" else offset))


def call(op: str, *args, **attrs) -> Expr | str:
    """The call, or the reason its attributes are rejected (an invalid case)."""
    try:
        return get_op(op)(*args, **attrs)
    except PartitaError as e:
        return str(e)


# ---- tensor ops ---------------------------------------------------------------------------


def unary(op, dtypes=ALL, attrs=({},), feeds=None) -> Iterator[Case]:
    for dt, shape, extra, m in itertools.product(dtypes, SHAPES, attrs, modes(op)):
        x = var("x", shape, dt)
        yield Case(op, {"dtype": dt, "shape": shape, **extra, **m}, [x], call(op, x, **extra, **m),
                   {"x": feeds} if feeds else {})  # fmt: skip


def binary(op) -> Iterator[Case]:
    for dt, (sa, sb) in itertools.product(ALL, BSHAPES):
        x, y = var("x", sa, dt), var("y", sb, dt)
        yield Case(op, {"dtype": dt, "shapes": (sa, sb)}, [x, y], call(op, x, y))


def where(op) -> Iterator[Case]:
    for dt, (sa, sb) in itertools.product(ALL, BSHAPES[:3]):
        c, x, y = var("c", sb, "bool"), var("x", sa, dt), var("y", sb, dt)
        yield Case(op, {"dtype": dt, "shapes": (sb, sa, sb)}, [c, x, y], call(op, c, x, y))


REDUCE_AXES = [{"axis": None}, {"axis": (1,), "keepdims": True}, {"axis": (0, 2)},
               {"axis": (-1,), "exclude": True}, {"axis": ()}]  # fmt: skip


def reduce(op) -> Iterator[Case]:
    extra = [{}, {"select_last_index": True}] if op == "argmax" else [{}]
    for dt, shape, ax, ex in itertools.product(ALL, [(2, 3, 5), (7,)], REDUCE_AXES, extra):
        if len(shape) == 1 and ax["axis"] not in (None, (-1,)):
            continue
        x = var("x", shape, dt)
        yield Case(op, {"dtype": dt, "shape": shape, **ax, **ex}, [x], call(op, x, **ax, **ex))


def shaped(op, shape, variants, dtypes=ALL) -> Iterator[Case]:
    """One data input of ``shape``, each dict of attributes in ``variants``."""
    for dt, attrs in itertools.product(dtypes, variants):
        x = var("x", shape, dt)
        yield Case(op, {"dtype": dt, "shape": shape, **attrs}, [x], call(op, x, **attrs))


def concatenate(op, rng) -> Iterator[Case]:
    for dt, (shapes, axis), fixed in itertools.product(
        ALL, [([(2, 3, 5), (2, 4, 5)], 1), ([(2, 3), (2, 1), (2, 5)], -1)], (False, True)
    ):
        xs = [var(f"x{i}", s, dt) for i, s in enumerate(shapes)]
        fields = [*xs[:-1], const(weight(rng, shapes[-1], dt))] if fixed else xs
        yield Case(op, {"dtype": dt, "shapes": shapes, "axis": axis, "const_field": fixed},
                   xs[:-1] if fixed else xs, call(op, Tuple(fields), axis=axis))  # fmt: skip


def take(op) -> Iterator[Case]:
    for dt, idt, (ishape, axis), m in itertools.product(
        ALL, ("int32", "int64"), [((3,), 0), ((2, 2), 1), ((4,), -1)], modes(op)
    ):
        x, i, n = var("x", (4, 5, 3), dt), var("i", ishape, idt), (4, 5, 3)[axis]
        span = (-n, n - 1) if m["mode"] == "fast" else (-2 * n, 2 * n)  # "fast": in range
        yield Case(op, {"dtype": dt, "indices": idt, "ishape": ishape, "axis": axis, **m},
                   [x, i], call(op, x, i, axis=axis, **m), {"i": span})  # fmt: skip


def pad(op) -> Iterator[Case]:
    for dt, m, width in itertools.product(ALL, modes(op), [((0, 0), (1, 2), (2, 1)), ((1, 0),)]):
        shape = (2, 3, 4)[: len(width)] if len(width) > 1 else (5,)
        x = var("x", shape, dt)
        yield Case(op, {"dtype": dt, "shape": shape, "pad_width": width, **m}, [x],
                   call(op, x, np.asarray(1).astype(dt), pad_width=width, **m))  # fmt: skip


def filled(op) -> Iterator[Case]:
    dtypes = dataclasses.fields(get_op(op).attrs_type)[1].metadata["choices"]
    for dt, shape in itertools.product(dtypes, [(2, 3), (7,)]):
        yield Case(op, {"dtype": dt, "shape": shape}, [], call(op, shape=shape, dtype=dt))


# ---- nn ops -------------------------------------------------------------------------------


def norm(op, rng) -> Iterator[Case]:
    for dt, axis, runtime in itertools.product(FLOATS, (1, -1), (False, True)):
        x, n = var("x", (2, 3, 4), dt), (2, 3, 4)[axis]
        count = 4 if op == "nn.batch_norm" else 2
        ps = [var(f"p{i}", (n,), dt) for i in range(count)]
        consts = [weight(rng, (n,), dt) for _ in range(count)]
        if op == "nn.batch_norm":
            consts[3] = np.abs(consts[3]) + np.asarray(0.5, dt)
        args = ps if runtime else consts
        yield Case(op, {"dtype": dt, "axis": axis, "runtime_params": runtime},
                   [x, *ps] if runtime else [x], call(op, x, *args, axis=axis),
                   {"p3": "pos"} if runtime else {})  # fmt: skip


POOLS = [{"pool_size": (2, 2), "strides": (2, 2)},
         {"pool_size": (3, 3), "padding": (1, 1, 1, 1), "count_include_pad": True},
         {"pool_size": (3, 2), "strides": (2, 1), "ceil_mode": True,
          "dilation": (1, 2)}]  # fmt: skip


def pool(op, dtypes=ALL, q=False) -> Iterator[Case]:
    for dt, layout, attrs, m in itertools.product(dtypes, ("NCHW", "NHWC"), POOLS, modes(op)):
        if "max" in op:
            attrs = {k: v for k, v in attrs.items() if k != "count_include_pad"}
        shape = (1, 3, 7, 6) if layout == "NCHW" else (1, 7, 6, 3)
        x = var("x", shape, dt)
        qp = qparams(dt, same=attrs.get("ceil_mode", False)) if q else ()
        yield Case(op, {"dtype": dt, "layout": layout, **attrs, **m}, [x],
                   call(op, x, *qp, layout=layout, **attrs, **m))  # fmt: skip


def global_pool(op) -> Iterator[Case]:
    for dt, layout, m in itertools.product(ALL, ("NCHW", "NHWC"), modes(op)):
        shape = (2, 3, 5, 7) if layout == "NCHW" else (2, 5, 7, 3)
        x = var("x", shape, dt)
        yield Case(op, {"dtype": dt, "layout": layout, **m}, [x], call(op, x, layout=layout, **m))


CONVS = [  # data shape (NCHW), kernel (OIHW), attributes
    ((1, 3, 7, 6), (4, 3, 3, 3), {"padding": (1, 1, 1, 1)}),
    ((2, 4, 5, 5), (5, 4, 1, 1), {}),
    ((1, 3, 7, 7), (6, 1, 3, 3), {"groups": 3, "strides": (2, 2), "padding": (0, 1, 1, 0)}),
]
NHWC = {"data_layout": "NHWC", "kernel_layout": "HWIO"}
TO_NHWC, TO_HWIO = itemgetter(0, 2, 3, 1), itemgetter(2, 3, 1, 0)


def conv(op, rng, q=False) -> Iterator[Case]:
    pairs = [("int8", "int8"), ("uint8", "int8"), ("int16", "int8")] if q else [
        (d, d) for d in ("float32", "float16", "int8", "int32")]  # fmt: skip
    for (dt, wt), (ds, ws, attrs), nhwc, m, extra in itertools.product(
        pairs, CONVS, (False, True), modes(op), ({}, {"runtime_weight": True})
    ):
        ds, ws = (TO_NHWC(ds), TO_HWIO(ws)) if nhwc else (ds, ws)
        x, w, o = var("x", ds, dt), var("w", ws, wt), ws[3 if nhwc else 0]
        lay = NHWC if nhwc else {}
        more = {"out_dtype": "int64"} if dt == "int16" else {}
        if q:
            kzp = rng.integers(-3, 4, o).astype(I32) if extra else I32(2)
            qp = (qzp(dt, 3), kzp, F32(0.05), F32(0.01))
            args = (x, weight(rng, ws, wt), *qp)
            extra = {"per_channel_kernel_zp": True} if extra else {}
        else:
            args = (x, w) if extra else (x, weight(rng, ws, wt))
        params = [x, w] if extra.get("runtime_weight") else [x]
        yield Case(op, {"dtype": dt, "data": ds, "kernel": ws, **attrs, **lay, **m, **extra},
                   params, call(op, *args, **attrs, **lay, **more, **m))  # fmt: skip


def conv_transpose(op, rng) -> Iterator[Case]:
    for dt, (ds, ws, attrs) in itertools.product(("float32", "float16", "int8", "int32"), [
        ((1, 4, 5, 5), (4, 3, 3, 3), {"strides": (2, 2), "output_padding": (1, 1)}),
        ((1, 4, 3, 4), (4, 2, 2, 2), {"groups": 2, "padding": (1, 0, 0, 1)}),
    ]):  # fmt: skip
        x = var("x", ds, dt)
        yield Case(op, {"dtype": dt, "data": ds, "kernel": ws, **attrs}, [x],
                   call(op, x, weight(rng, ws, dt), **attrs))  # fmt: skip


def products(op, rng) -> Iterator[Case]:
    """nn.dense, nn.gemm, nn.batch_matmul: an odd size, a batch broadcast, run-time weights."""
    shapes = {
        "nn.dense": [((3, 10), (6, 10), {}), ((2, 1, 7), (5, 7), {})],
        "nn.gemm": [((3, 10), (6, 10), {}), ((1, 7), (7, 5), {"transpose_b": False})],
        "nn.batch_matmul": [((2, 3, 4), (2, 5, 4), {}), ((1, 4, 3), (2, 4, 5),
                            {"transpose_a": True, "transpose_b": False})],
    }[op]  # fmt: skip
    for dt, (xs, ws, attrs), m, runtime in itertools.product(
        ("float32", "float16", "int8", "int16", "int32", "int64"), shapes, modes(op), (0, 1)
    ):
        x, w = var("x", xs, dt), var("w", ws, dt)
        args = [x, w if runtime else weight(rng, ws, dt)]
        if op == "nn.gemm":
            units = ws[0] if attrs.get("transpose_b", True) else ws[1]
            args.append(weight(rng, (units,), dt))
        label = {"dtype": dt, "x": xs, "w": ws, **attrs, **m, "runtime_weight": bool(runtime)}
        yield Case(op, label, [x, w] if runtime else [x], call(op, *args, **attrs, **m))


def resize(op) -> Iterator[Case]:
    for dt, size, layout, m in itertools.product(
        ("float32", "float16", "int8", "uint8"), [(7, 3), (8, 10)], ("NCHW", "NHWC"), modes(op)
    ):
        x = var("x", (1, 2, 4, 5) if layout == "NCHW" else (1, 4, 5, 2), dt)
        yield Case(op, {"dtype": dt, "size": size, "layout": layout, **m}, [x],
                   call(op, x, size=size, layout=layout, **m))  # fmt: skip


EINSUMS = [("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
           ("ii->i", [(4, 4)]), ("i,j->ij", [(3,), (5,)]),
           ("...j,j", [(2, 3, 4), (4,)])]  # fmt: skip


def einsum(op) -> Iterator[Case]:
    for dt, (eq, shapes) in itertools.product(ALL, EINSUMS):
        xs = [var(f"x{i}", s, dt) for i, s in enumerate(shapes)]
        yield Case(op, {"dtype": dt, "equation": eq}, xs, call(op, Tuple(xs), equation=eq))


# ---- qnn ops ------------------------------------------------------------------------------


def qparams(dt: str, same=False, out=None) -> tuple:
    """(s_in, zp_in, s_out, zp_out): equal input and output parameters with ``same``; ``out``
    fixes (s_out, zp_out) (the LUT kernels' conventions)."""
    if same:
        return F32(0.05), qzp(dt, 3), F32(0.05), qzp(dt, 3)
    s_out, zp_out = out if out is not None else (F32(0.07), qzp(dt, -4))
    return F32(0.05), qzp(dt, 3), s_out, zp_out


def quantize(op, rng) -> Iterator[Case]:
    for out, axis, m in itertools.product(("int8", "uint8", "int16", "int32"), (None, 1, -1),
                                          modes(op)):  # fmt: skip
        x = var("x", (2, 3, 5), "float32")
        n = 1 if axis is None else (2, 3, 5)[axis]
        s = rng.uniform(0.01, 0.2, n).astype(F32)
        zp = rng.integers(-5, 6, n).astype(I32) + qzp(out)
        s, zp = (s[0], zp[0]) if axis is None else (s, zp)
        yield Case(op, {"out_dtype": out, "per_channel_axis": axis, **m}, [x],
                   call(op, x, s, zp, axis=axis or 0, out_dtype=out, **m))  # fmt: skip


def dequantize(op, rng) -> Iterator[Case]:
    for dt, axis, shape in itertools.product((*QD, "int32"), (None, 1), SHAPES):
        if axis and len(shape) == 1:
            continue
        x = var("x", shape, dt)
        n = 1 if axis is None else shape[axis]
        s, zp = rng.uniform(0.01, 0.2, n).astype(F32), np.full(n, qzp(dt, 2), I32)
        s, zp = (s[0], zp[0]) if axis is None else (s, zp)
        yield Case(op, {"dtype": dt, "shape": shape, "per_channel_axis": axis}, [x],
                   call(op, x, s, zp, axis=axis or 0))  # fmt: skip


def requantize(op, rng) -> Iterator[Case]:
    for dt, out, axis, s64, m in itertools.product(
        (*QD, "int32", "int64"), (*QD, "int32"), (None, 1), (False, True), modes(op)
    ):
        x = var("x", (2, 3, 5), dt)
        n = 1 if axis is None else 3
        s_in = rng.uniform(0.0005, 0.02, n).astype(np.float64 if s64 else F32)
        zp_in, s_out = np.full(n, qzp(dt, 1), I32), rng.uniform(0.01, 0.1, n).astype(F32)
        zp_out = np.full(n, qzp(out, -2), I32)
        args = [s_in, zp_in, s_out, zp_out]
        if axis is None:
            args = [a[0] for a in args]
        span = (-30000, 30000) if dt in ("int32", "int64") else None
        yield Case(op, {"dtype": dt, "out_dtype": out, "per_channel_axis": axis,
                        "float64_scale": s64, **m}, [x],
                   call(op, x, *args, axis=axis or 0, out_dtype=out, **m),
                   {"x": span} if span else {})  # fmt: skip


def qbinary(op, rng) -> Iterator[Case]:
    channel = [None] if op == "qnn.squared_difference" else [None, "lhs", "rhs"]
    for dt, (sa, sb), pc, m in itertools.product(QD, BSHAPES, channel, modes(op)):
        x, y = var("x", sa, dt), var("y", sb, dt)
        ps = [F32(0.05), qzp(dt, 3), F32(0.03), qzp(dt, -2)]
        attrs = dict(m)
        if pc and (sa if pc == "lhs" else sb):
            shape = sa if pc == "lhs" else sb
            i = 0 if pc == "lhs" else 2
            ps[i] = rng.uniform(0.01, 0.1, shape[-1]).astype(F32)
            ps[i + 1] = (np.full(shape[-1], qzp(dt, 1)) + rng.integers(0, 3, shape[-1])).astype(I32)
            attrs[f"{pc}_axis"] = -1
        elif pc:
            continue
        yield Case(op, {"dtype": dt, "shapes": (sa, sb), "per_channel": pc, **m}, [x, y],
                   call(op, x, y, *ps, F32(0.06), qzp(dt, 1), **attrs))  # fmt: skip


def qconcat(op) -> Iterator[Case]:
    for dt, axis, m in itertools.product(QD, (1, -1), modes(op)):
        shapes = [(2, 3, 5), (2, 3, 5)] if axis == -1 else [(2, 3, 5), (2, 4, 5)]
        xs = [var(f"x{i}", s, dt) for i, s in enumerate(shapes)]
        scales = Tuple([const(F32(0.05)), const(F32(0.08))])
        zps = Tuple([const(qzp(dt, 3)), const(qzp(dt, -6))])
        body = call(op, Tuple(xs), scales, zps, F32(0.05), qzp(dt, 3), axis=axis, **m)
        yield Case(op, {"dtype": dt, "axis": axis, **m}, xs, body)


def qproducts(op, rng) -> Iterator[Case]:
    shapes = [((3, 10), (6, 10), {}), ((2, 1, 7), (5, 7), {})] if op == "qnn.dense" else [
        ((2, 3, 4), (2, 5, 4), {}), ((1, 4, 3), (2, 4, 5), {"transpose_a": True,
                                                           "transpose_b": False})]  # fmt: skip
    pairs = [("int8", "int8"), ("uint8", "int8"), ("uint8", "uint8"), ("int16", "int8")]
    for (dt, wt), (xs, ws, attrs), pc, m in itertools.product(pairs, shapes, (0, 1), modes(op)):
        x = var("x", xs, dt)
        kzp = rng.integers(-3, 4, ws[0]).astype(I32) if pc else qzp(wt, 1)
        if op == "qnn.dense":
            args = (x, weight(rng, ws, wt), qzp(dt, 3), kzp, F32(0.05), F32(0.01))
        else:
            w = var("w", ws, wt)
            args = (x, w, qzp(dt, 3), qzp(wt, 1), F32(0.05), F32(0.01))
            if pc:
                continue
        more = {"out_dtype": "int64"} if dt == "int16" else {}
        yield Case(op, {"dtype": dt, "weight": wt, "x": xs, "w": ws, **attrs, **m,
                        "per_channel_kernel_zp": bool(pc)},
                   [x] if op == "qnn.dense" else [x, args[1]],
                   call(op, *args, **attrs, **more, **m))  # fmt: skip


def qmean(op) -> Iterator[Case]:
    axes = [{"axis": (1, 2), "keepdims": True}, {"axis": (1, 2)}, {"axis": (3,)},
            {"axis": (0, 1, 2, 3)}, {"axis": (2, 1), "keepdims": True}]  # fmt: skip
    for dt, ax, same, m in itertools.product((*Q8, "int16"), axes, (False, True), modes(op)):
        x = var("x", (2, 3, 4, 5), dt)
        yield Case(op, {"dtype": dt, **ax, "same_params": same, **m}, [x],
                   call(op, x, *qparams(dt, same=same), **ax, **m))  # fmt: skip


def lut_out(op: str, dt: str) -> tuple | None:
    """The output parameters TFLite's kernels require (softmax, sigmoid: 1/256, the low end)."""
    wide = F32(1 / 32768) if dt == "int16" else None
    if op in ("qnn.sigmoid", "qnn.softmax"):
        return wide or F32(1 / 256), I32(-128 if dt == "int8" else 0)
    return (wide or F32(1 / 128), qzp(dt)) if op == "qnn.tanh" else None


def qlut(op) -> Iterator[Case]:
    extra = {"qnn.leaky_relu": [{"alpha": 0.1}], "qnn.gelu": [{"approximate": False},
             {"approximate": True}], "qnn.softmax": [{"axis": -1}, {"axis": 0, "beta": 0.5}]
             }  # fmt: skip
    for dt, shape, attrs, m in itertools.product(QD, SHAPES, extra.get(op, [{}]), modes(op)):
        x = var("x", shape, dt)
        s_in, zp_in, s_out, zp_out = qparams(dt, out=lut_out(op, dt))
        if op == "qnn.rsqrt":
            zp_in, s_out = I32(-128 if dt == "int8" else 0), F32(0.02)
        if dt == "int16":
            zp_in, zp_out = I32(0), I32(0)
        yield Case(op, {"dtype": dt, "shape": shape, **attrs, **m}, [x],
                   call(op, x, s_in, zp_in, s_out, zp_out, **attrs, **m))  # fmt: skip


# ---- the table ----------------------------------------------------------------------------
# fmt: off
# (one row per op family reads as a table; the formatter would spread it over 150 lines)

GENERATORS: dict[str, Callable] = {
    **{op: binary for op in ("add", "subtract", "multiply", "divide", "maximum", "minimum",
                             "equal", "greater", "less")},  # fmt: skip
    **{op: unary for op in ("abs", "negative", "exp", "tanh", "sigmoid", "erf", "floor",
                            "round", "nn.relu", "nn.gelu", "nn.hardswish", "logical_not",
                            "ones_like", "zeros_like")},  # fmt: skip
    **{op: lambda op: unary(op, feeds="pos") for op in ("log", "sqrt", "rsqrt")},
    **{op: reduce for op in ("sum", "max", "mean", "argmax")},
    "where": where,
    "nn.leaky_relu": lambda op: unary(op, attrs=({"alpha": 0.1},)),
    "clip": lambda op: unary(op, attrs=({"a_min": -1.5, "a_max": 2.5},
                                        {"a_min": -100.0, "a_max": 1e9})),
    "cast": lambda op: unary(op, attrs=tuple({"dtype": d} for d in ALL)),
    "reshape": lambda op: shaped(op, (2, 3, 5), [{"newshape": (6, 5)}, {"newshape": (5, -1)},
                                                 {"newshape": (0, 15)}]),
    "transpose": lambda op: shaped(op, (2, 3, 5), [{"axes": None}, {"axes": (1, 0, 2)},
                                                   {"axes": (2, 0, 1)}]),
    "expand_dims": lambda op: shaped(op, (3, 5), [{"axis": 0}, {"axis": -1},
                                                  {"axis": 1, "num_newaxis": 2}]),
    "squeeze": lambda op: shaped(op, (1, 3, 1, 5), [{"axis": None}, {"axis": (0,)},
                                                    {"axis": (2,)}]),
    "broadcast_to": lambda op: shaped(op, (3, 1), [{"shape": (2, 3, 4)}, {"shape": (3, 7)}]),
    "strided_slice": lambda op: shaped(op, (4, 5, 6), [
        {"begin": (1, 0), "end": (3, 5)}, {"begin": (0, 4), "end": (4, 0), "strides": (2, -1)},
        {"begin": (1,), "end": (-1,), "axes": (2,)},
        {"begin": (1, 1), "end": (2, -1), "slice_mode": "size"}]),
    "split": lambda op: shaped(op, (2, 6, 5), [{"indices_or_sections": 3, "axis": 1},
                                               {"indices_or_sections": (1, 4), "axis": 1},
                                               {"indices_or_sections": 2, "axis": 0}]),
    "take": take,
    "nn.pad": pad,
    "zeros": filled,
    "ones": filled,
    "nn.bias_add": lambda op: (
        Case(op, {"dtype": dt, "axis": ax}, [x := var("x", (2, 3, 4, 5), dt),
             b := var("b", ((2, 3, 4, 5)[ax],), dt)], call(op, x, b, axis=ax))
        for dt, ax in itertools.product(ALL, (1, -1))),  # fmt: skip
    "nn.softmax": lambda op: shaped(op, (2, 3, 5), [{"axis": -1}, {"axis": 0}, {"axis": 1}],
                                    FLOATS),
    "nn.avg_pool2d": lambda op: pool(op, ("float32", "float16", "int8")),
    "nn.max_pool2d": pool,
    "nn.global_avg_pool2d": global_pool,
    "image.resize2d": resize,
    "einsum": einsum,
    "qnn.dynamic_quantize": lambda op: unary(op, FLOATS),
    "qnn.concatenate": qconcat,
    "qnn.mean": qmean,
    "qnn.avg_pool2d": lambda op: pool(op, (*Q8, "int16"), q=True),
    **{op: qlut for op in ("qnn.sigmoid", "qnn.tanh", "qnn.hardswish", "qnn.leaky_relu",
                           "qnn.gelu", "qnn.rsqrt", "qnn.softmax")},  # fmt: skip
}
WITH_RNG: dict[str, Callable] = {
    "concatenate": concatenate, "nn.batch_norm": norm, "nn.layer_norm": norm,
    "nn.conv2d": conv, "qnn.conv2d": lambda op, rng: conv(op, rng, q=True),
    "nn.conv2d_transpose": conv_transpose,
    **{op: products for op in ("nn.dense", "nn.gemm", "nn.batch_matmul")},
    "qnn.quantize": quantize, "qnn.dequantize": dequantize, "qnn.requantize": requantize,
    **{op: qbinary for op in ("qnn.add", "qnn.subtract", "qnn.mul", "qnn.squared_difference")},
    **{op: qproducts for op in ("qnn.dense", "qnn.batch_matmul")},
}
# fmt: on


def cases(op: str, seed: int = 0) -> list[Case]:
    """Every case of ``op`` (before the type relation sorts out the invalid ones); an op with
    no generator gets none (the survey reports it as uncovered)."""
    if op in WITH_RNG:
        return list(WITH_RNG[op](op, np.random.default_rng(seed)))
    if op in GENERATORS:
        return list(GENERATORS[op](op))
    return []
