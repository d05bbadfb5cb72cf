"""Gaps the LLVM op survey (tools/llvm_op_survey.py) found, now compiled: elementwise ops of bool
data (nn.relu crashed), nn.batch_norm with parameters computed at run time (BNORM reads their
buffers), max / argmax of bool data, float64 zeros / ones, float nn.batch_matmul with a constant
operand, and int16 qnn.leaky_relu ("tflite", an EWISE tree of requantize steps). Integers and
bools bit for bit against the interpreter under hypothesis; float results as stated per test."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from partita.backends.llvm.lower.context import LLVMError
from test_llvm_ops_more import run_llvm

import partita as P
from partita.ir import Function, IRModule, TensorType, Tuple, TupleGetItem, Var, const
from partita.ops import get_op

F32, I32 = np.float32, np.int32
SHAPES = st.lists(st.integers(1, 5), min_size=1, max_size=4).map(tuple)


def draw(rng, shape, dtype, p_true=0.5):
    """Random data: bools true with ``p_true``, normal floats (a -0.0 among them), integers
    over the dtype's range."""
    if dtype == "bool":
        return np.asarray(rng.random(shape) < p_true)
    if dtype.startswith("float"):
        x = np.asarray(rng.standard_normal(shape) * 3).astype(dtype)
        x.reshape(-1)[:1] = -0.0
        return x
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=np.int64, endpoint=True).astype(dtype)


def build_run(params, out, feeds=None, seed=0, kinds=None, p_true=0.5):
    """Build for llvm (one region, with ``kinds`` among its kernels), run; (got, want) lists."""
    return run_llvm(params, out, kinds, seed, feeds,
                    lambda rng, shape, dtype: draw(rng, shape, dtype, p_true))


def assert_bits(got, want):
    for g, w in zip(got, want):
        w = np.ascontiguousarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.array_equal(g.view(np.uint8), w.view(np.uint8))


def ulps(g, w) -> int:
    """The largest distance in units of the last place (float32 / float16; -0.0 is 0.0)."""
    ints = {2: np.int16, 4: np.int32}[g.itemsize]
    a, b = (np.asarray(v).view(ints).astype(np.int64) for v in (g, w))
    sign = 1 << (8 * g.itemsize - 1)
    a, b = (np.where(v < 0, -(v & (sign - 1)), v) for v in (a, b))
    return int(np.abs(a - b).max(initial=0))


# ---- 1. elementwise ops of bool data ----------------------------------------------------------


def _bool_graph(name, x, y):
    op = get_op(name)
    if name in ("nn.relu", "logical_not"):
        return op(x)
    if name == "where":
        return op(x, get_op("nn.relu")(y), x)
    if name == "cast":
        return op(get_op("cast")(x, dtype="int32"), dtype="bool")
    if name in ("zeros_like", "ones_like"):
        return get_op("maximum")(op(x), y)
    return op(x, y)


@settings(max_examples=25, deadline=None)
@given(shape=SHAPES, seed=st.integers(0, 99), name=st.sampled_from([
    "nn.relu", "maximum", "minimum", "equal", "greater", "less", "logical_not", "where", "cast",
    "zeros_like", "ones_like"]))  # fmt: skip
def test_elementwise_ops_of_bool_data(shape, seed, name):
    """max(x, False) is x (nn.relu crashed on the i1 / i64 select); the other elementwise ops
    that take bools, alone and fused with relu, the interpreter's bytes."""
    x, y = Var("x", TensorType(shape, "bool")), Var("y", TensorType(shape, "bool"))
    out = _bool_graph(name, x, y)
    params = [x, y] if name not in ("nn.relu", "logical_not") else [x]
    assert_bits(*build_run(params, out, seed=seed, kinds={"EWISE"}))


def test_relu_of_bool_data_alone():
    x = Var("x", TensorType((7,), "bool"))
    assert_bits(*build_run([x], get_op("nn.relu")(x), kinds={"EWISE"}))


# ---- 2. nn.batch_norm with run-time parameters ------------------------------------------------


@settings(max_examples=20, deadline=None)
@given(shape=SHAPES, data=st.data(), scale=st.booleans(), center=st.booleans(),
       eps=st.sampled_from([1e-5, 1e-3, 0.1]), dtype=st.sampled_from(["float32", "float16"]),
       seed=st.integers(0, 99))  # fmt: skip
def test_batch_norm_with_run_time_parameters(shape, data, scale, center, eps, dtype, seed):
    """Any of gamma, beta, mean, variance computed at run time (the rest constant): float32
    the interpreter's bits (BNORM's float64 steps); float16 (widened) within one float16 step."""
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    runtime = data.draw(st.lists(st.booleans(), min_size=4, max_size=4))
    rng = np.random.default_rng(seed)
    c = shape[axis]
    x = Var("x", TensorType(shape, dtype))
    params, feeds, args = [x], [draw(rng, shape, dtype)], []
    for i, what in enumerate(("gamma", "beta", "mean", "var")):
        value = rng.uniform(0.01, 3.0, c) if what == "var" else rng.standard_normal(c)
        value = value.astype(dtype)
        if runtime[i]:
            v = Var(what, TensorType((c,), dtype))
            params.append(v)
            feeds.append(value)
            args.append(get_op("abs")(v) if what == "var" else v)  # computed at run time
        else:
            args.append(const(value))
    bn = get_op("nn.batch_norm")(x, *args, axis=axis, epsilon=eps, scale=scale, center=center)
    item = TupleGetItem(bn, 0)  # returned, and read by one more op
    out = Tuple([item, get_op("add")(item, x)])
    got, want = build_run(params, out, feeds, kinds={"BNORM"})
    if dtype == "float32":
        assert_bits(got, want)
    else:
        assert ulps(got[0], np.asarray(want[0])) <= 1


# ---- 3. max and argmax of bool data -----------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    shape=SHAPES,
    data=st.data(),
    keepdims=st.booleans(),
    exclude=st.booleans(),
    last=st.booleans(),
    p_true=st.sampled_from([0.0, 0.1, 0.5, 1.0]),
    seed=st.integers(0, 99),
)
def test_max_and_argmax_of_bool_data(shape, data, keepdims, exclude, last, p_true, seed):
    """Bools are bytes 0 / 1: reduced as uint8 (FREDUCE, ARGMAX), the interpreter's bits, with
    rows all False or all True (ties: the first index, or the last with select_last_index)."""
    axis = data.draw(
        st.none()
        | st.lists(
            st.integers(-len(shape), len(shape) - 1),
            min_size=1,
            max_size=len(shape),
            unique_by=lambda a: a % len(shape),
        )
    )
    x = Var("x", TensorType(shape, "bool"))
    common = {"axis": axis, "keepdims": keepdims, "exclude": exclude and axis is not None}
    mx = get_op("max")(x, **common)
    am = get_op("argmax")(x, **common, select_last_index=last)
    assert_bits(*build_run([x], mx, seed=seed, kinds={"FREDUCE"}, p_true=p_true))
    assert_bits(*build_run([x], am, seed=seed, kinds={"ARGMAX"}, p_true=p_true))


# ---- 4. float64 zeros and ones -----------------------------------------------------------------


@settings(max_examples=10, deadline=None)
@given(shape=st.lists(st.integers(0, 5), max_size=3).map(tuple), name=st.sampled_from(
    ["zeros", "ones", "zeros_like", "ones_like"]))  # fmt: skip
def test_float64_fills(shape, name):
    """A float64 buffer is only stored: EWISE fills it (1.0 is exact in every float)."""
    x = Var("x", TensorType(shape, "float64"))
    if name.endswith("_like"):
        params, out = [x], get_op(name)(x)
    else:
        params, out = [], get_op(name)(shape=shape, dtype="float64")
    feeds = [np.full(shape, np.nan)] if params else []
    assert_bits(*build_run(params, out, feeds, kinds={"EWISE"}))


# ---- 5. nn.batch_matmul with a constant operand -------------------------------------------------


@settings(max_examples=20, deadline=None)
@given(b=st.integers(1, 3), m=st.integers(1, 6), k=st.integers(1, 20), n=st.integers(1, 33),
       ta=st.booleans(), tb=st.booleans(), which=st.sampled_from(["y", "x", "both"]),
       broadcast=st.sampled_from([None, "x", "y"]), dtype=st.sampled_from(["float32", "float16"]),
       seed=st.integers(0, 99))  # fmt: skip
def test_batch_matmul_with_a_constant_operand(b, m, k, n, ta, tb, which, broadcast, dtype, seed):
    """A constant operand is read as data (a CONST copy) by FBMM, as a run-time one: float64
    sums rounded once, or (N a multiple of 16, or transpose_b with K one) float32 FMA chains
    in k order, within K * 2**-24 * sum |x * y| of the reference's float64 matmul; float16
    (widened) then within one more float16 rounding."""
    rng = np.random.default_rng(seed)
    bx, by = (1 if broadcast == "x" else b), (1 if broadcast == "y" else b)
    xs, ys = (bx, k, m) if ta else (bx, m, k), (by, n, k) if tb else (by, k, n)
    xv, yv = draw(rng, xs, dtype), draw(rng, ys, dtype)
    x, y = Var("x", TensorType(xs, dtype)), Var("y", TensorType(ys, dtype))
    lhs = const(xv) if which in ("x", "both") else x
    rhs = const(yv) if which in ("y", "both") else y
    params = [v for v, c in ((x, lhs), (y, rhs)) if c is v]
    feeds = [xv] * (lhs is x) + [yv] * (rhs is y)
    out = get_op("nn.batch_matmul")(lhs, rhs, transpose_a=ta, transpose_b=tb)
    got, want = build_run(params, out, feeds, kinds={"FBMM"})
    want = np.asarray(want[0])
    assert got[0].dtype == want.dtype and got[0].shape == want.shape
    xa, ya = (np.abs(v.astype(np.float64)) for v in (xv, yv))
    xa, ya = xa.transpose(0, 2, 1) if ta else xa, ya.transpose(0, 2, 1) if tb else ya
    bound = k * 2.0**-24 * np.matmul(xa, ya) * 1.01
    if dtype == "float16":
        bound += 2.0**-10 * np.abs(want.astype(np.float64)) + 2.0**-24
    assert np.all(np.abs(got[0].astype(np.float64) - want) <= bound)


# ---- 6. int16 qnn.leaky_relu ("tflite") ---------------------------------------------------------


@settings(max_examples=20, deadline=None)
@given(s_in=st.floats(1e-4, 10.0), s_out=st.floats(1e-4, 10.0),
       alpha=st.sampled_from([0.1, 0.01, 0.2, 1.0, 1.7, -0.3, 1e-12, 300.0]),
       shape=st.sampled_from([(65536,), (256, 256), (2, 128, 256)]))  # fmt: skip
def test_int16_leaky_relu_over_every_value(s_in, s_out, alpha, shape):
    """Every int16 value at once, any scales and alpha (negative, tiny, large): the two
    requantize steps of EWISE give the reference's bits (its multipliers as it makes them)."""
    x = Var("x", TensorType(shape, "int16"))
    out = get_op("qnn.leaky_relu")(
        x, F32(s_in), I32(0), F32(s_out), I32(0), alpha=alpha, semantics="tflite"
    )
    every = np.arange(-(1 << 15), 1 << 15, dtype=np.int64).astype(np.int16).reshape(shape)
    assert_bits(*build_run([x], out, [every], kinds={"EWISE"}))


def test_int16_leaky_relu_with_zero_points_is_refused_with_the_reason():
    """The reference raises for int16 zero points other than 0 (as TFLite): so does the build."""
    x = Var("x", TensorType((7,), "int16"))
    out = get_op("qnn.leaky_relu")(
        x, F32(0.1), I32(3), F32(0.1), I32(0), alpha=0.1, semantics="tflite"
    )
    with pytest.raises(LLVMError, match=r"llvm cannot compile qnn\.leaky_relu.*zero points 0"):
        P.build(IRModule({"main": Function([x], out)}), "llvm")
