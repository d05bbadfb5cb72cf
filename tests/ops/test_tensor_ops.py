"""Plain tensor ops: values against hand-computed or independently derived results, inferred
types, and precise failures for bad attributes, shapes and dtypes."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import partita as P
from partita import IRModule, TensorType, Tuple, TupleGetItem, TupleType, const, get_op, var

F32, NAN, INF = np.float32, np.nan, np.inf


def op(name, *args, **attrs):
    return get_op(name)(*args, **attrs)


def run(expr, *inputs):
    """Interpret ``expr`` with its free variables bound (in use order) to ``inputs``."""
    out = P.interpret(IRModule.from_expr(expr), list(inputs))
    return out[0] if len(out) == 1 else out


def run_const(name, *arrays, **attrs):
    """Apply op ``name`` to constants and return (result, inferred type)."""
    call = op(name, *[const(np.asarray(a)) for a in arrays], **attrs)
    return run(call), P.infer_type(call)


def type_of(name, *types, **attrs):
    args = [var(f"a{i}", *t) if isinstance(t, tuple) else t for i, t in enumerate(types)]
    return P.infer_type(op(name, *args, **attrs))


def assert_same(actual, expected):
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_array_equal(actual, expected)


def type_error(pattern):
    return pytest.raises(P.TypeInferenceError, match="(?s)" + pattern)


def attr_error(pattern):
    return pytest.raises(P.AttrError, match="(?s)" + pattern)


i8 = lambda *v: np.array(v, np.int8)  # noqa: E731
f32 = lambda *v: np.array(v, np.float32)  # noqa: E731


# ---- registration ------------------------------------------------------------------------------

KINDS = {
    "broadcast": ["add", "subtract", "multiply", "divide", "maximum", "minimum", "where"],
    "elemwise": ["clip", "cast", "exp", "sqrt", "rsqrt", "tanh", "sigmoid", "floor", "round",
                 "negative", "abs"],
    "injective": ["reshape", "transpose", "squeeze", "expand_dims", "concatenate", "split",
                  "strided_slice"],
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
    assert_same(run_const("divide", np.uint8([200, 7, 9]), np.uint8([3, 0, 9]))[0],
                np.uint8([66, 0, 1]))
    lo = np.iinfo(np.int64).min
    assert_same(run_const("divide", np.int64([lo, lo, -9]), np.int64([-1, 2, 4]))[0],
                np.int64([lo, lo // 2, -2]))


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
    assert_same(run_const("maximum", np.array([True, False]), np.array([False, False]))[0],
                np.array([True, False]))


def test_broadcast_type_and_scalar_operands():
    assert type_of("add", ((2, 1, 3), "int8"), ((4, 1), "int8")) == TensorType((2, 4, 3), "int8")
    x = var("x", (2,), "float32")
    assert_same(run(x * 2.0 + 1.0, f32(1, -2)), f32(3, -3))


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
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=3),
       name=st.sampled_from(sorted(WRAP)), seed=st.integers(0, 2**16))
def test_binary_broadcasting_matches_exact_integer_arithmetic(shapes, name, seed):
    rng = np.random.default_rng(seed)
    a, b = (rng.integers(-128, 128, s).astype(np.int8) for s in shapes.input_shapes)
    x, y = var("x", a.shape, "int8"), var("y", b.shape, "int8")
    call = op(name, x, y)
    assert P.infer_type(call) == TensorType(shapes.result_shape, "int8")
    # Independent route: exact int64 arithmetic on explicitly broadcast copies, reduced mod 256.
    ea, eb = (np.broadcast_to(v, shapes.result_shape).astype(np.int64) for v in (a, b))
    expected = ((WRAP[name](ea, eb) + 128) % 256 - 128).astype(np.int8)
    assert_same(run(call, a, b), expected)


# ---- clip and cast -----------------------------------------------------------------------------


def test_clip_float_and_int():
    out, t = run_const("clip", f32(-2.5, 0.5, 7, NAN), a_min=0, a_max=6)
    assert t == TensorType((4,), "float32")
    assert_same(out, f32(0, 0.5, 6, NAN))
    # integer data: the bounds are ceil(a_min) and floor(a_max)
    assert_same(run_const("clip", i8(-5, -1, 0, 2, 3), a_min=-1.5, a_max=2.7)[0],
                i8(-1, -1, 0, 2, 2))
    # bounds beyond the dtype saturate; infinite bounds are allowed
    assert_same(run_const("clip", np.uint8([0, 255]), a_min=-10, a_max=300)[0],
                np.uint8([0, 255]))
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
    assert_same(run_const("cast", data, dtype="int8")[0],
                i8(1, -1, 0, 0, 127, -128, 127, 44, 0, 0, 0))
    assert_same(run_const("cast", f32(-1.5, 256.7, 3.99), dtype="uint8")[0],
                np.uint8([255, 0, 3]))
    assert_same(run_const("cast", f32(3e9, -2.5e9), dtype="int32")[0],
                np.int32([3_000_000_000 - 2**32, 2**32 - 2_500_000_000]))
    assert_same(run_const("cast", np.float64([2.0**63, -(2.0**63), 2.0**64 + 2**12]),
                          dtype="int64")[0],
                np.int64([-(2**63), -(2**63), 2**12]))


def test_cast_other_conversions():
    assert_same(run_const("cast", np.int32([300, -129, 5]), dtype="int8")[0], i8(44, 127, 5))
    assert_same(run_const("cast", f32(0, 2, -0.0, NAN), dtype="bool")[0],
                np.array([False, True, False, True]))
    assert_same(run_const("cast", np.array([True, False]), dtype="float32")[0], f32(1, 0))
    assert_same(run_const("cast", f32(0.5, 65504, 65520, 1e6), dtype="float16")[0],
                np.array([0.5, 65504, INF, INF], np.float16))
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
    assert_same(run_const("round", np.array([2.5, -0.5], np.float16))[0],
                np.array([3, -1], np.float16))


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


# ---- reshape, transpose, squeeze, expand_dims --------------------------------------------------


@pytest.mark.parametrize("newshape,expected", [
    ((0, -1), (2, 12)), ((-1,), (24,)), ((4, 0, -1), (4, 3, 2)), ((0, 0, 4), (2, 3, 4)),
    ((1, 24, 1), (1, 24, 1)), ((2, -1, 2), (2, 6, 2)),
])
def test_reshape(newshape, expected):
    data = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    out, t = run_const("reshape", data, newshape=newshape)
    assert t == TensorType(expected, "int16")
    assert out.shape == expected
    assert list(out.flat) == list(range(24))  # row-major order is kept


def test_reshape_scalars_and_empty():
    assert type_of("reshape", ((), "int8"), newshape=(1, 1)) == TensorType((1, 1), "int8")
    assert type_of("reshape", ((1,), "int8"), newshape=()) == TensorType((), "int8")
    assert type_of("reshape", ((0, 3), "int8"), newshape=(3, -1)) == TensorType((3, 0), "int8")
    assert type_of("reshape", ((0, 3), "int8"), newshape=(0, 3, 1)) == TensorType((0, 3, 1), "int8")


def test_reshape_failures():
    with type_error(r"reshape.*cannot reshape \(2, 3, 4\) \(24 elements\) to \(5, -1\)"):
        type_of("reshape", ((2, 3, 4), "int8"), newshape=(5, -1))
    with type_error(r"reshape.*\(2, 3, 4\) \(24 elements\) to \(5, 5\) \(25 elements\)"):
        type_of("reshape", ((2, 3, 4), "int8"), newshape=(5, 5))
    with type_error(r"reshape.*0 at position 1.*input \(6,\) has no dimension 1"):
        type_of("reshape", ((6,), "int8"), newshape=(6, 0))
    with type_error(r"reshape.*cannot reshape \(0, 3\) to \(0, -1\).*-1 is ambiguous"):
        type_of("reshape", ((0, 3), "int8"), newshape=(0, -1))
    x = var("x", (4,), "int8")
    with attr_error(r"reshape: newshape \(-1, -1\) has more than one -1"):
        op("reshape", x, newshape=(-1, -1))
    with attr_error("reshape: newshape .*-2 is not a dimension"):
        op("reshape", x, newshape=(-2, 2))
    with attr_error("reshape: missing required attribute 'newshape'"):
        op("reshape", x)


def test_transpose():
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for axes in [(1, 0, 2), (-1, 0, 1), None, ()]:
        out, t = run_const("transpose", data, axes=axes)
        perm = (2, 1, 0) if not axes else tuple(a % 3 for a in axes)
        assert t == TensorType(tuple(data.shape[p] for p in perm), "float32")
        for idx in itertools.product(*map(range, data.shape)):
            assert out[tuple(idx[p] for p in perm)] == data[idx]


def test_transpose_failures():
    with type_error(r"transpose.*axes \(0, 0, 1\) names an axis twice"):
        type_of("transpose", ((2, 3, 4), "int8"), axes=(0, 0, 1))
    with type_error(r"transpose.*axes \(0, 1\) must list each of the 3 axes"):
        type_of("transpose", ((2, 3, 4), "int8"), axes=(0, 1))
    with type_error("transpose.*axes 3 is out of range for a tensor of rank 3"):
        type_of("transpose", ((2, 3, 4), "int8"), axes=(0, 1, 3))


@pytest.mark.parametrize("axis,expected", [
    (None, (3, 2)), ((0,), (3, 1, 2)), ((-2,), (1, 3, 2)), ((), (1, 3, 1, 2)), ((2, 0), (3, 2)),
])
def test_squeeze(axis, expected):
    data = np.arange(6, dtype=np.int32).reshape(1, 3, 1, 2)
    out, t = run_const("squeeze", data, axis=axis)
    assert t == TensorType(expected, "int32")
    assert_same(out, np.arange(6, dtype=np.int32).reshape(expected))


def test_squeeze_failures():
    with type_error(r"squeeze.*cannot squeeze axis 1 of shape \(1, 3, 1\): its size is 3"):
        type_of("squeeze", ((1, 3, 1), "int8"), axis=(1,))
    with type_error("squeeze.*axis 3 is out of range for a tensor of rank 3"):
        type_of("squeeze", ((1, 3, 1), "int8"), axis=(3,))


@pytest.mark.parametrize("axis,num,expected", [
    (0, 1, (1, 2, 3)), (-1, 1, (2, 3, 1)), (1, 2, (2, 1, 1, 3)), (2, 1, (2, 3, 1)),
    (-3, 1, (1, 2, 3)), (1, 0, (2, 3)),
])
def test_expand_dims(axis, num, expected):
    data = np.arange(6, dtype=np.uint8).reshape(2, 3)
    out, t = run_const("expand_dims", data, axis=axis, num_newaxis=num)
    assert t == TensorType(expected, "uint8")
    assert_same(out, np.arange(6, dtype=np.uint8).reshape(expected))


def test_expand_dims_failures():
    for axis in (3, -4):
        with type_error(rf"expand_dims.*axis {axis} is out of range \[-3, 2\].*rank 2"):
            type_of("expand_dims", ((2, 3), "int8"), axis=axis)
    x = var("x", (2,), "int8")
    with attr_error("expand_dims: num_newaxis must be >= 0, got -1"):
        op("expand_dims", x, axis=0, num_newaxis=-1)
    with attr_error("expand_dims: missing required attribute 'axis'"):
        op("expand_dims", x)


@settings(max_examples=30, deadline=None)
@given(shape=hnp.array_shapes(min_dims=0, max_dims=4, max_side=4), data=st.data())
def test_transpose_and_reshape_round_trip(shape, data):
    perm = data.draw(st.permutations(range(len(shape))))
    inverse = tuple(int(i) for i in np.argsort(perm))
    arr = np.arange(math.prod(shape), dtype=np.int32).reshape(shape)
    x = var("x", shape, "int32")
    t = op("transpose", x, axes=tuple(perm))
    flat = op("reshape", t, newshape=(-1,))
    back = op("transpose", op("reshape", flat, newshape=[shape[p] for p in perm]), axes=inverse)
    assert P.infer_type(back) == TensorType(shape, "int32")
    assert P.infer_type(flat) == TensorType((arr.size,), "int32")
    assert_same(run(back, arr), arr)


# ---- concatenate and split ---------------------------------------------------------------------


def test_concatenate():
    a, b = f32(1, 2).reshape(2, 1), f32(3, 4, 5, 6).reshape(2, 2)
    for axis in (1, -1):
        out, t = run_const_tuple("concatenate", [a, b], axis=axis)
        assert t == TensorType((2, 3), "float32")
        assert_same(out, f32(1, 3, 4, 2, 5, 6).reshape(2, 3))
    rows = [f32(1, 2).reshape(1, 2), f32(3, 4, 5, 6).reshape(2, 2)]
    out, _ = run_const_tuple("concatenate", rows)
    assert_same(out, f32(1, 2, 3, 4, 5, 6).reshape(3, 2))
    assert_same(run_const_tuple("concatenate", [i8(7)])[0], i8(7))


def run_const_tuple(name, arrays, **attrs):
    call = op(name, Tuple([const(a) for a in arrays]), **attrs)
    return run(call), P.infer_type(call)


def test_concatenate_from_a_tuple_typed_variable():
    t = P.Var("t", TupleType([TensorType((1, 2), "int8"), TensorType((3, 2), "int8")]))
    assert P.infer_type(op("concatenate", t)) == TensorType((4, 2), "int8")


def test_concatenate_failures():
    def tup(*types):
        return Tuple([var(f"v{i}", *t) for i, t in enumerate(types)])

    with type_error("concatenate.*share one dtype, got float32, int8"):
        P.infer_type(op("concatenate", tup(((2,), "int8"), ((2,), "float32"))))
    with type_error(r"concatenate.*shapes \(2, 3\), \(3, 3\) differ outside axis 1"):
        P.infer_type(op("concatenate", tup(((2, 3), "int8"), ((3, 3), "int8")), axis=1))
    with type_error(r"concatenate.*one rank, got shapes \(2, 3\), \(3,\)"):
        P.infer_type(op("concatenate", tup(((2, 3), "int8"), ((3,), "int8"))))
    with type_error("concatenate.*axis 2 is out of range for a tensor of rank 2"):
        P.infer_type(op("concatenate", tup(((2, 3), "int8"), ((2, 3), "int8")), axis=2))
    with type_error("concatenate.*data must be a tuple of tensors"):
        type_of("concatenate", ((2, 3), "int8"))
    with type_error("concatenate.*at least one tensor"):
        P.infer_type(op("concatenate", Tuple([])))


def test_split_into_sections_and_at_indices():
    data = np.arange(12, dtype=np.int8).reshape(6, 2)
    outs, t = run_const("split", data, indices_or_sections=3)
    assert t == TupleType([TensorType((2, 2), "int8")] * 3)
    for k, out in enumerate(outs):
        assert_same(out, np.arange(4 * k, 4 * k + 4, dtype=np.int8).reshape(2, 2))
    data = np.arange(12, dtype=np.float32).reshape(2, 6)
    outs, t = run_const("split", data, indices_or_sections=(1, 4), axis=-1)
    assert [f.shape for f in t.fields] == [(2, 1), (2, 3), (2, 2)]
    assert_same(outs[0], f32(0, 6).reshape(2, 1))
    assert_same(outs[1], f32(1, 2, 3, 7, 8, 9).reshape(2, 3))
    assert_same(outs[2], f32(4, 5, 10, 11).reshape(2, 2))
    one = op("split", var("x", (4,), "int8"), indices_or_sections=())
    assert P.infer_type(one) == TupleType([TensorType((4,), "int8")])


def test_split_item_feeds_other_ops():
    x = var("x", (4,), "float32")
    parts = op("split", x, indices_or_sections=2)
    out = op("add", TupleGetItem(parts, 0), TupleGetItem(parts, 1))
    assert_same(run(out, f32(1, 2, 10, 20)), f32(11, 22))


def test_split_failures():
    with type_error(r"split.*cannot split axis 0 of shape \(6, 2\) into 4 equal sections"):
        type_of("split", ((6, 2), "int8"), indices_or_sections=4)
    with type_error(r"split.*indices \(2, 6\) must be below 6, the size of axis 0"):
        type_of("split", ((6, 2), "int8"), indices_or_sections=(2, 6))
    with type_error("split.*axis 2 is out of range for a tensor of rank 2"):
        type_of("split", ((6, 2), "int8"), indices_or_sections=2, axis=2)
    x = var("x", (6,), "int8")
    for bad in ((3, 2), (0, 2), (2, 2)):
        with attr_error("split: split indices .* must be positive and strictly ascending"):
            op("split", x, indices_or_sections=bad)
    with attr_error("split: indices_or_sections must be >= 1 sections, got 0"):
        op("split", x, indices_or_sections=0)
    with attr_error("split: attribute 'indices_or_sections'"):
        op("split", x, indices_or_sections="two")


# ---- strided_slice -----------------------------------------------------------------------------

X234 = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
R5 = np.arange(5, dtype=np.int32)


@pytest.mark.parametrize("data,attrs,expected", [
    (X234, dict(begin=(0, 1), end=(2, 3)), X234[0:2, 1:3]),
    (X234, dict(begin=(1, 0, 3), end=(2, 3, 0), strides=(1, 2, -1)), X234[1:2, 0:3:2, 3:0:-1]),
    (R5, dict(begin=(-1,), end=(-3,), strides=(-1,)), [4, 3]),
    (R5, dict(begin=(-1,), end=(-6,), strides=(-1,)), [4, 3, 2, 1, 0]),
    (R5, dict(begin=(-1,), end=(-(2**31),), strides=(-1,)), [4, 3, 2, 1, 0]),
    (R5, dict(begin=(-100,), end=(100,)), [0, 1, 2, 3, 4]),
    (R5, dict(begin=(0,), end=(2**63 - 1,), strides=(2,)), [0, 2, 4]),
    (R5, dict(begin=(4,), end=(-100,), strides=(-2,)), [4, 2, 0]),
    (R5, dict(begin=(10,), end=(20,)), []),
    (R5, dict(begin=(3,), end=(1,)), []),
    (R5, dict(begin=(0,), end=(5,), strides=(-1,)), []),
    (X234, dict(begin=(1,), end=(3,), axes=(2,)), X234[:, :, 1:3]),
    (X234, dict(begin=(2, 1), end=(0, 2), strides=(-1, 1), axes=(-1, 0)), X234[1:2, :, 2:0:-1]),
    (X234, dict(begin=(0, 1), end=(2, 4), strides=(2,)), X234[0:2:2, 1:4]),
    (X234, dict(begin=(1, 0), end=(1, -1), slice_mode="size"), X234[1:2, 0:3]),
    (X234, dict(begin=(-1, 1), end=(5, 1), slice_mode="size"), X234[1:2, 1:2]),
])
def test_strided_slice(data, attrs, expected):
    out, t = run_const("strided_slice", data, **attrs)
    expected = np.asarray(expected, np.int32)
    assert t == TensorType(expected.shape, "int32")
    assert_same(out, expected)


def test_strided_slice_failures():
    x = var("x", (2, 3), "int8")
    with attr_error(r"strided_slice: strides \(0,\) contain 0"):
        op("strided_slice", x, begin=(0,), end=(1,), strides=(0,))
    with attr_error(r"strided_slice: begin \(0, 0\) and end \(1,\) differ in length"):
        op("strided_slice", x, begin=(0, 0), end=(1,))
    with attr_error("strided_slice: slice_mode 'size' takes unit strides"):
        op("strided_slice", x, begin=(0,), end=(1,), strides=(2,), slice_mode="size")
    with attr_error("strided_slice: begin and end need one entry per axis in axes"):
        op("strided_slice", x, begin=(0, 0), end=(1, 1), axes=(1,))
    with attr_error("strided_slice: attribute 'slice_mode' must be one of 'end', 'size'"):
        op("strided_slice", x, begin=(0,), end=(1,), slice_mode="stop")
    with type_error(r"strided_slice.*slice 3 axes of shape \(2, 3\)"):
        type_of("strided_slice", ((2, 3), "int8"), begin=(0, 0, 0), end=(1, 1, 1))
    with type_error("strided_slice.*axes 2 is out of range for a tensor of rank 2"):
        type_of("strided_slice", ((2, 3), "int8"), begin=(0,), end=(1,), axes=(2,))
    with type_error(r"strided_slice.*axes \(1, -1\) names an axis twice"):
        type_of("strided_slice", ((2, 3), "int8"), begin=(0, 0), end=(1, 1), axes=(1, -1))


@settings(max_examples=60, deadline=None)
@given(dim=st.integers(0, 6), b=st.integers(-9, 9), e=st.integers(-9, 9),
       s=st.integers(-3, 3).filter(bool))
def test_strided_slice_matches_python_slicing(dim, b, e, s):
    expected = list(range(dim))[b:e:s]  # Python's own slice semantics, not numpy's
    out, t = run_const("strided_slice", np.arange(dim, dtype=np.int32), begin=(b,), end=(e,),
                       strides=(s,))
    assert t.shape == (len(expected),)
    assert out.tolist() == expected


# ---- reductions --------------------------------------------------------------------------------


def test_sum_wraps_for_integers():
    data = i8(100, 100, 27, 1).reshape(2, 2)
    assert_same(run_const("sum", data, axis=(0,))[0], i8(127, 101))
    assert_same(run_const("sum", data, axis=1)[0], i8(-56, 28))
    assert_same(run_const("sum", data)[0], np.array(-28, np.int8))
    out, t = run_const("sum", data, keepdims=True)
    assert t == TensorType((1, 1), "int8")
    assert_same(out, i8(-28).reshape(1, 1))


def test_sum_exclude_and_empty_axis_tuple():
    data = np.ones((2, 3, 4), np.float32)
    out, t = run_const("sum", data, axis=(1,), exclude=True)
    assert t == TensorType((3,), "float32")
    assert_same(out, f32(8, 8, 8))
    assert_same(run_const("sum", data, axis=())[0], np.array(24, np.float32))  # Relay: all axes
    assert_same(run_const("sum", np.zeros((2, 0), np.int32), axis=(1,))[0], np.int32([0, 0]))


def test_sum_float16_accumulates_wide():
    # Summing in float16 would drop both 1s (2048 + 1 rounds back to 2048).
    assert_same(run_const("sum", np.array([2048, 1, 1], np.float16))[0],
                np.array(2050, np.float16))


def test_mean():
    data = f32(1, 2, 3, 5).reshape(2, 2)
    assert_same(run_const("mean", data, axis=(1,))[0], f32(1.5, 4))
    assert_same(run_const("mean", data)[0], np.array(2.75, np.float32))
    out, t = run_const("mean", data, axis=(0,), keepdims=True)
    assert t == TensorType((1, 2), "float32")
    assert_same(out, f32(2, 3.5).reshape(1, 2))
    with type_error(r"mean.*needs float16 or float32 data, got int8.*Tensor\[\(4,\), int8\]"):
        type_of("mean", ((4,), "int8"))


def test_max():
    data = i8(1, -5, 7, 3).reshape(2, 2)
    assert_same(run_const("max", data, axis=(1,))[0], i8(1, 7))
    assert_same(run_const("max", data, axis=(1,), exclude=True)[0], i8(7, 3))
    assert_same(run_const("max", np.array([False, True]))[0], np.array(True))
    assert np.isnan(run_const("max", f32(1, NAN, 3))[0])
    assert type_of("max", ((0, 3), "int8"), axis=(1,)) == TensorType((0,), "int8")


def test_argmax():
    data = np.array([[1, 9, 9], [4, 2, 4]], np.float32)
    out, t = run_const("argmax", data, axis=(1,))
    assert t == TensorType((2,), "int32")
    assert_same(out, np.int32([1, 0]))
    assert_same(run_const("argmax", data, axis=(1,), select_last_index=True)[0], np.int32([2, 2]))
    assert_same(run_const("argmax", data)[0], np.array(1, np.int32))
    assert_same(run_const("argmax", data, select_last_index=True)[0], np.array(2, np.int32))
    assert_same(run_const("argmax", data, axis=0, keepdims=True)[0], np.int32([[1, 0, 0]]))
    assert_same(run_const("argmax", f32(1, NAN, 5, NAN))[0], np.array(1, np.int32))
    assert_same(run_const("argmax", np.array(3.0, np.float32))[0], np.array(0, np.int32))


def test_argmax_over_several_axes_is_row_major_in_the_reduced_axes():
    data = np.random.default_rng(1).permutation(12).reshape(2, 2, 3).astype(np.int16)
    out = run_const("argmax", data, axis=(0, 2))[0]
    for j in range(2):
        cells = [(i, k) for i in range(2) for k in range(3)]
        best = max(cells, key=lambda c: data[c[0], j, c[1]])
        assert out[j] == best[0] * 3 + best[1]


@pytest.mark.parametrize("name", ["sum", "mean", "max", "argmax"])
def test_reduce_failures(name):
    with type_error(rf"{name}.*axis \(0, -2\) names an axis twice"):
        type_of(name, ((2, 3), "float32"), axis=(0, -2))
    with type_error(f"{name}.*axis 2 is out of range for a tensor of rank 2"):
        type_of(name, ((2, 3), "float32"), axis=(2,))
    with attr_error(f"{name}: attribute 'keepdims' must be a bool"):
        op(name, var("x", (2,), "float32"), keepdims="yes")


def test_max_and_argmax_of_an_empty_axis_fail():
    for name in ("max", "argmax"):
        with type_error(rf"{name}.*{name} over an empty axis of shape \(3, 0\)"):
            type_of(name, ((3, 0), "float32"), axis=(1,))
    with type_error("sum.*numeric.*got bool"):
        type_of("sum", ((2,), "bool"))
