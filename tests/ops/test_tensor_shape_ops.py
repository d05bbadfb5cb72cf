"""Shape tensor ops (reshape, transpose, squeeze, expand_dims, concatenate, split,
strided_slice): values against hand-computed or independently derived results, inferred types, and
precise failures for bad attributes, shapes and dtypes."""

from __future__ import annotations

import itertools
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
from partita import TensorType, Tuple, TupleGetItem, TupleType, const, var

# ---- reshape, transpose, squeeze, expand_dims --------------------------------------------------


@pytest.mark.parametrize(
    "newshape,expected",
    [
        ((0, -1), (2, 12)),
        ((-1,), (24,)),
        ((4, 0, -1), (4, 3, 2)),
        ((0, 0, 4), (2, 3, 4)),
        ((1, 24, 1), (1, 24, 1)),
        ((2, -1, 2), (2, 6, 2)),
    ],
)
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


@pytest.mark.parametrize(
    "axis,expected",
    [
        (None, (3, 2)),
        ((0,), (3, 1, 2)),
        ((-2,), (1, 3, 2)),
        ((), (1, 3, 1, 2)),
        ((2, 0), (3, 2)),
    ],
)
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


@pytest.mark.parametrize(
    "axis,num,expected",
    [
        (0, 1, (1, 2, 3)),
        (-1, 1, (2, 3, 1)),
        (1, 2, (2, 1, 1, 3)),
        (2, 1, (2, 3, 1)),
        (-3, 1, (1, 2, 3)),
        (1, 0, (2, 3)),
    ],
)
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
    assert_same(run_expr(back, arr), arr)


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
    return run_expr(call), P.infer_type(call)


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
    assert_same(run_expr(out, f32(1, 2, 10, 20)), f32(11, 22))


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


@pytest.mark.parametrize(
    "data,attrs,expected",
    [
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
    ],
)
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
@given(
    dim=st.integers(0, 6),
    b=st.integers(-9, 9),
    e=st.integers(-9, 9),
    s=st.integers(-3, 3).filter(bool),
)
def test_strided_slice_matches_python_slicing(dim, b, e, s):
    expected = list(range(dim))[b:e:s]  # Python's own slice semantics, not numpy's
    out, t = run_const(
        "strided_slice", np.arange(dim, dtype=np.int32), begin=(b,), end=(e,), strides=(s,)
    )
    assert t.shape == (len(expected),)
    assert out.tolist() == expected
