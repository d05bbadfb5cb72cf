"""Plain elementwise and broadcasting tensor ops (registration, arithmetic, clip, cast, unary
math, where): values against hand-computed or independently derived results, inferred types, and
precise failures for bad attributes, shapes and dtypes. Shape ops: test_tensor_shape_ops.py;
reductions: test_tensor_reduce_ops.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from op_helpers import (
    assert_same,
    attr_error,
    f32,
    i8,
    op,
    run_const,
    run_expr,
    type_error,
    type_of,
)

import partita as P
from partita import TensorType, Tuple, get_op, var

F32, NAN, INF = np.float32, np.nan, np.inf


# ---- registration ------------------------------------------------------------------------------

KINDS = {
    "broadcast": ["add", "subtract", "multiply", "divide", "maximum", "minimum", "where"],
    "elemwise": [
        "clip",
        "cast",
        "exp",
        "sqrt",
        "rsqrt",
        "tanh",
        "sigmoid",
        "floor",
        "round",
        "negative",
        "abs",
    ],
    "injective": [
        "reshape",
        "transpose",
        "squeeze",
        "expand_dims",
        "concatenate",
        "split",
        "strided_slice",
    ],
    "reduce": ["sum", "mean", "max", "argmax"],
}


@pytest.mark.parametrize("kind,name", [(k, n) for k, ns in KINDS.items() for n in ns])
def test_registration(kind, name):
    o = get_op(name)
    assert o.kind == kind
    assert o.commutative == (name in ("add", "multiply", "maximum", "minimum"))
    assert len(o.doc) > 20


# ---- binary arithmetic -------------------------------------------------------------------------


def test_integer_arithmetic_wraps_in_the_input_dtype():
    assert_same(run_const("add", i8(100, -100, 5), i8(100, -100, 6))[0], i8(-56, 56, 11))
    assert_same(run_const("subtract", np.uint8([0, 9]), np.uint8([1, 4]))[0], np.uint8([255, 5]))
    assert_same(run_const("multiply", i8(16, -128, -3), i8(16, -1, 5))[0], i8(0, -128, -15))


def test_integer_division_truncates_and_defines_division_by_zero():
    a = i8(7, -7, 7, -7, 6, -128, 0, 5, -5)
    b = i8(2, 2, -2, -2, 3, -1, 3, 0, 0)
    assert_same(run_const("divide", a, b)[0], i8(3, -3, -3, 3, 2, -128, 0, 0, 0))
    assert_same(
        run_const("divide", np.uint8([200, 7, 9]), np.uint8([3, 0, 9]))[0], np.uint8([66, 0, 1])
    )
    lo = np.iinfo(np.int64).min
    assert_same(
        run_const("divide", np.int64([lo, lo, -9]), np.int64([-1, 2, 4]))[0],
        np.int64([lo, lo // 2, -2]),
    )


def test_float_division_is_ieee():
    out, t = run_const("divide", f32(1, -1, 0, 1), f32(0, 0, 0, 3))
    assert t == TensorType((4,), "float32")
    assert_same(out, f32(INF, -INF, NAN, 1 / 3))


def test_maximum_minimum_broadcast():
    a = f32(1, 5).reshape(2, 1)
    b = f32(0, 3, 7)
    assert_same(run_const("maximum", a, b)[0], f32(1, 3, 7, 5, 5, 7).reshape(2, 3))
    assert_same(run_const("minimum", a, b)[0], f32(0, 1, 1, 0, 3, 5).reshape(2, 3))
    assert np.isnan(run_const("maximum", f32(NAN), f32(1))[0][0])
    assert_same(
        run_const("maximum", np.array([True, False]), np.array([False, False]))[0],
        np.array([True, False]),
    )


def test_broadcast_type_and_scalar_operands():
    assert type_of("add", ((2, 1, 3), "int8"), ((4, 1), "int8")) == TensorType((2, 4, 3), "int8")
    x = var("x", (2,), "float32")
    assert_same(run_expr(x * 2.0 + 1.0, f32(1, -2)), f32(3, -3))


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "maximum", "minimum"])
def test_binary_failures(name):
    with type_error(rf"{name}.*\(2, 3\) and \(4,\) do not broadcast"):
        type_of(name, ((2, 3), "float32"), ((4,), "float32"))
    with type_error(rf"{name}.*one dtype, got float32, int8"):
        type_of(name, ((2,), "float32"), ((2,), "int8"))
    with type_error(f"{name}.*rhs must be a tensor"):
        type_of(name, ((2,), "float32"), Tuple([var("t", (2,), "float32")]))
    with attr_error(f"{name}: unknown attribute 'axis'"):
        op(name, var("a", (2,)), var("b", (2,)), axis=1)


def test_arithmetic_rejects_bool_but_maximum_accepts_it():
    with type_error("add.*numeric.*got bool"):
        type_of("add", ((2,), "bool"), ((2,), "bool"))
    assert type_of("maximum", ((2,), "bool"), ((2,), "bool")).dtype == "bool"


WRAP = {"add": lambda a, b: a + b, "subtract": lambda a, b: a - b, "multiply": lambda a, b: a * b}


@settings(max_examples=40, deadline=None)
@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=3),
    name=st.sampled_from(sorted(WRAP)),
    seed=st.integers(0, 2**16),
)
def test_binary_broadcasting_matches_exact_integer_arithmetic(shapes, name, seed):
    rng = np.random.default_rng(seed)
    a, b = (rng.integers(-128, 128, s).astype(np.int8) for s in shapes.input_shapes)
    x, y = var("x", a.shape, "int8"), var("y", b.shape, "int8")
    call = op(name, x, y)
    assert P.infer_type(call) == TensorType(shapes.result_shape, "int8")
    # Independent route: exact int64 arithmetic on explicitly broadcast copies, reduced mod 256.
    ea, eb = (np.broadcast_to(v, shapes.result_shape).astype(np.int64) for v in (a, b))
    expected = ((WRAP[name](ea, eb) + 128) % 256 - 128).astype(np.int8)
    assert_same(run_expr(call, a, b), expected)


# ---- clip and cast -----------------------------------------------------------------------------


def test_clip_float_and_int():
    out, t = run_const("clip", f32(-2.5, 0.5, 7, NAN), a_min=0, a_max=6)
    assert t == TensorType((4,), "float32")
    assert_same(out, f32(0, 0.5, 6, NAN))
    # integer data: the bounds are ceil(a_min) and floor(a_max)
    assert_same(
        run_const("clip", i8(-5, -1, 0, 2, 3), a_min=-1.5, a_max=2.7)[0], i8(-1, -1, 0, 2, 2)
    )
    # bounds beyond the dtype saturate; infinite bounds are allowed
    assert_same(run_const("clip", np.uint8([0, 255]), a_min=-10, a_max=300)[0], np.uint8([0, 255]))
    assert_same(run_const("clip", i8(-128, 127), a_min=-INF, a_max=INF)[0], i8(-128, 127))
    assert_same(run_const("clip", i8(-128, 127), a_min=200, a_max=INF)[0], i8(127, 127))


def test_clip_failures():
    x = var("x", (2,), "float32")
    with attr_error("clip: a_min .* must not exceed a_max"):
        op("clip", x, a_min=2, a_max=1)
    with attr_error("clip: missing required attribute 'a_max'"):
        op("clip", x, a_min=0)
    with attr_error("clip: attribute 'a_min' must be a number"):
        op("clip", x, a_min="low", a_max=1)
    with attr_error("clip: a_min .* must not exceed"):
        op("clip", x, a_min=NAN, a_max=1)
    with type_error(r"clip.*no integer lies in \[a_min, a_max\] = \[0.2, 0.8\]"):
        type_of("clip", ((2,), "int8"), a_min=0.2, a_max=0.8)
    with type_error("clip.*numeric.*got bool"):
        type_of("clip", ((2,), "bool"), a_min=0, a_max=1)


def test_cast_float_to_int_truncates_and_wraps():
    data = f32(1.9, -1.9, 0.5, -0.5, 127.9, 128, -129, 300, NAN, INF, -INF)
    assert_same(
        run_const("cast", data, dtype="int8")[0], i8(1, -1, 0, 0, 127, -128, 127, 44, 0, 0, 0)
    )
    assert_same(run_const("cast", f32(-1.5, 256.7, 3.99), dtype="uint8")[0], np.uint8([255, 0, 3]))
    assert_same(
        run_const("cast", f32(3e9, -2.5e9), dtype="int32")[0],
        np.int32([3_000_000_000 - 2**32, 2**32 - 2_500_000_000]),
    )
    assert_same(
        run_const("cast", np.float64([2.0**63, -(2.0**63), 2.0**64 + 2**12]), dtype="int64")[0],
        np.int64([-(2**63), -(2**63), 2**12]),
    )


def test_cast_other_conversions():
    assert_same(run_const("cast", np.int32([300, -129, 5]), dtype="int8")[0], i8(44, 127, 5))
    assert_same(
        run_const("cast", f32(0, 2, -0.0, NAN), dtype="bool")[0],
        np.array([False, True, False, True]),
    )
    assert_same(run_const("cast", np.array([True, False]), dtype="float32")[0], f32(1, 0))
    assert_same(
        run_const("cast", f32(0.5, 65504, 65520, 1e6), dtype="float16")[0],
        np.array([0.5, 65504, INF, INF], np.float16),
    )
    assert_same(run_const("cast", np.int64([2**24 + 1]), dtype="float32")[0], f32(16777216))
    assert type_of("cast", ((2, 3), "int8"), dtype="int16") == TensorType((2, 3), "int16")


def test_cast_failures():
    x = var("x", (2,), "float32")
    with attr_error("cast: missing required attribute 'dtype'"):
        op("cast", x)
    for bad in ("int4", "float64", "complex64"):
        with attr_error(f"cast: attribute 'dtype' must be one of .*got '{bad}'"):
            op("cast", x, dtype=bad)


# ---- unary math --------------------------------------------------------------------------------


def test_unary_float_values():
    assert_same(run_const("exp", f32(0, -INF))[0], f32(1, 0))
    np.testing.assert_allclose(run_const("exp", f32(1, -2))[0], [math.e, math.exp(-2)], rtol=1e-6)
    assert_same(run_const("sqrt", f32(4, 2.25, 0))[0], f32(2, 1.5, 0))
    assert np.isnan(run_const("sqrt", f32(-1))[0][0])
    assert_same(run_const("rsqrt", f32(4, 0.25, 0))[0], f32(0.5, 2, INF))
    assert_same(run_const("tanh", f32(0, 20, -20))[0], f32(0, 1, -1))
    np.testing.assert_allclose(run_const("tanh", f32(0.5))[0], [math.tanh(0.5)], rtol=1e-6)
    assert_same(run_const("floor", f32(1.5, -1.5, 2, -0.25))[0], f32(1, -2, 2, -1))


def test_sigmoid_is_stable_at_the_extremes():
    data = f32(0, 100, -100, -1000, 1000, 2)
    expected = [1 / (1 + math.exp(-v)) if v > -700 else 0.0 for v in data.astype(float)]
    with np.errstate(over="raise", invalid="raise"):  # no overflow inside the reference
        out = get_op("sigmoid").impl(data, get_op("sigmoid").make_attrs(None))
    np.testing.assert_allclose(out, np.array(expected, np.float32), rtol=1e-6, atol=1e-45)
    assert out.dtype == np.float32


def test_round_is_half_away_from_zero():
    below_half = np.nextafter(F32(0.5), F32(0))
    data = f32(0.5, 1.5, 2.5, -0.5, -2.5, below_half, -1.4, 2**23 + 1, NAN)
    assert_same(run_const("round", data)[0], f32(1, 2, 3, -1, -3, 0, -1, 2**23 + 1, NAN))


def test_float16_computes_in_float32():
    out, t = run_const("exp", np.array([1, 0], np.float16))
    assert t.dtype == "float16"
    assert_same(out, np.array([2.71875, 1], np.float16))  # float16 nearest to e
    assert_same(
        run_const("round", np.array([2.5, -0.5], np.float16))[0], np.array([3, -1], np.float16)
    )


def test_negative_and_abs_wrap_for_integers():
    assert_same(run_const("negative", i8(-128, -1, 0, 5))[0], i8(-128, 1, 0, -5))
    assert_same(run_const("abs", i8(-128, -1, 0, 5))[0], i8(-128, 1, 0, 5))
    assert_same(run_const("negative", np.uint8([1, 0]))[0], np.uint8([255, 0]))
    assert_same(run_const("abs", f32(-0.0, -2.5))[0], f32(0, 2.5))


@pytest.mark.parametrize("name", ["exp", "sqrt", "rsqrt", "tanh", "sigmoid", "floor", "round"])
def test_float_ops_reject_integers(name):
    with type_error(rf"{name}.*float16 or float32, got int8.*Tensor\[\(3,\), int8\]"):
        type_of(name, ((3,), "int8"))
    assert type_of(name, ((1, 3), "float16")) == TensorType((1, 3), "float16")


@pytest.mark.parametrize("name", ["negative", "abs"])
def test_numeric_ops_reject_bool(name):
    with type_error(f"{name}.*numeric.*got bool"):
        type_of(name, ((3,), "bool"))


# ---- where -------------------------------------------------------------------------------------


def test_where_broadcasts_all_three():
    cond = np.array([[True], [False]])
    x = f32(1, 2, 3)
    out, t = run_const("where", cond, x, F32(-1))
    assert t == TensorType((2, 3), "float32")
    assert_same(out, f32(1, 2, 3, -1, -1, -1).reshape(2, 3))


def test_where_failures():
    with type_error("where.*condition must be bool, got int8"):
        type_of("where", ((2,), "int8"), ((2,), "float32"), ((2,), "float32"))
    with type_error("where.*x and y must share one dtype, got float32 and int8"):
        type_of("where", ((2,), "bool"), ((2,), "float32"), ((2,), "int8"))
    with type_error(r"where.*condition \(3,\), x \(2,\) and y \(2,\) do not broadcast"):
        type_of("where", ((3,), "bool"), ((2,), "float32"), ((2,), "float32"))
