"""Tensor reductions (sum, mean, max, argmax): values against hand-computed results, inferred
types, and precise failures for bad attributes, shapes and dtypes."""

from __future__ import annotations

import numpy as np
import pytest
from op_helpers import assert_same, attr_error, f32, i8, op, run_const, type_error, type_of

from partita import TensorType, var

NAN = np.nan


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
    assert_same(run_const("sum", np.array([2048, 1, 1], np.float16))[0], np.array(2050, np.float16))


def test_mean():
    data = f32(1, 2, 3, 5).reshape(2, 2)
    assert_same(run_const("mean", data, axis=(1,))[0], f32(1.5, 4))
    assert_same(run_const("mean", data)[0], np.array(2.75, np.float32))
    out, t = run_const("mean", data, axis=(0,), keepdims=True)
    assert t == TensorType((1, 2), "float32")
    assert_same(out, f32(2, 3.5).reshape(1, 2))
    needs = r"mean.*needs float16, float32, int32 or int64 data, got int8.*Tensor\[\(4,\), int8\]"
    with type_error(needs):
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
