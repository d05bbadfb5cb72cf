"""Test helpers for the pass tests: random small graphs (hypothesis) and a bit-exact oracle."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from same_bits import assert_same_outputs, same_bits  # noqa: F401  (re-exported)

import partita as P
from partita.ir import IRModule, Tuple, const, var
from partita.ops import get_op

SHAPE = (2, 3)
# Few distinct constant values, so that equal constants (CSE) and folding both happen often.
VALUES = (-1.5, 0.0, 0.5, 2.0)


def op(name):
    return get_op(name)


def _constant(draw):
    shape = draw(st.sampled_from([SHAPE, (3,), (), (1, 3)]))
    value = draw(st.sampled_from(VALUES))
    return const(np.full(shape, value, np.float32))


def _unary(draw, x):
    kind = draw(
        st.sampled_from(
            ["relu", "negative", "clip", "clip2", "cast", "qdq", "reshape", "transpose"]
        )
    )
    if kind == "relu":
        return op("nn.relu")(x)
    if kind == "negative":
        return op("negative")(x)
    if kind in ("clip", "clip2"):
        lo = draw(st.sampled_from([-2.0, -1.0, 0.0, float("-inf")]))
        hi = draw(st.sampled_from([0.5, 1.0, 6.0, float("inf")]))
        y = op("clip")(x, a_min=lo, a_max=hi)
        return op("clip")(y, a_min=-1.0, a_max=1.0) if kind == "clip2" else y
    if kind == "cast":
        return op("cast")(x, dtype="float32")
    if kind == "qdq":
        q = op("qnn.quantize")(x, const(0.25), const(3), out_dtype="int8")
        return op("qnn.dequantize")(q, const(0.25), const(3))
    t = x.checked_type if x.type_or_none is not None else P.infer_type(x)
    if kind == "reshape":
        inner = op("reshape")(x, newshape=tuple(reversed(t.shape)) or ())
        return op("reshape")(inner, newshape=t.shape)
    if t.ndim < 2:
        return x
    perm = tuple(reversed(range(t.ndim)))
    return op("transpose")(op("transpose")(x, axes=perm), axes=perm)


@st.composite
def float_graphs(draw, max_steps: int = 10):
    """A random float32 graph over %x: (2, 3), with shared sub-expressions, duplicated (equal but
    distinct) calls and constants, and sub-graphs made of constants only."""
    x = var("x", SHAPE, "float32")
    pool = [x, _constant(draw)]
    for _ in range(draw(st.integers(1, max_steps))):
        kind = draw(st.sampled_from(["const", "unary", "binary", "binary", "dup"]))
        if kind == "const":
            pool.append(_constant(draw))
        elif kind == "unary":
            pool.append(_unary(draw, draw(st.sampled_from(pool))))
        elif kind == "binary":
            name = draw(st.sampled_from(["add", "subtract", "multiply", "maximum"]))
            a, b = draw(st.sampled_from(pool)), draw(st.sampled_from(pool))
            pool.append(op(name)(a, b))
        else:
            last = pool[-1]
            if isinstance(last, P.Call):
                pool.append(P.Call(last.op, last.args, last.attrs))
    picks = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3))
    body = Tuple([x, *picks]) if len(picks) > 1 else op("add")(picks[0], x)
    return IRModule.from_expr(body)


def float_inputs(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"x": rng.choice(np.array([-3, -1, -0.5, 0, 0.25, 1, 4], np.float32), SHAPE)}
