"""nn.dense, nn.batch_matmul, nn.bias_add, activations, nn.softmax and nn.pad: values against
hand-computed or independently derived results, and precise failures for bad attributes and
shapes. Convolutions: test_nn_conv_ops.py; pooling and resize: test_nn_pool_image_ops.py."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from op_helpers import attr_error, op, run, small_ints, type_error, type_of

import partita as P
from partita import const, var

RNG = np.random.default_rng(0)
ints = small_ints(RNG)


# ---- dense, batch_matmul, bias_add ---------------------------------------------------------------


def test_dense():
    x, w = ints((2, 3, 5)), ints((4, 5))
    expected = [
        [[sum(x[a, b, k] * w[u, k] for k in range(5)) for u in range(4)] for b in range(3)]
        for a in range(2)
    ]
    got = run("nn.dense", x, w, units=4)
    assert got.shape == (2, 3, 4) and got.dtype == np.float32
    np.testing.assert_array_equal(got, expected)
    xi = RNG.integers(-128, 128, (3, 7)).astype(np.int8)
    wi = RNG.integers(-128, 128, (2, 7)).astype(np.int8)
    got = run("nn.dense", xi, wi, out_dtype="int32")
    assert got.dtype == np.int32
    np.testing.assert_array_equal(
        got,
        [
            [sum(int(xi[i, k]) * int(wi[u, k]) for k in range(7)) for u in range(2)]
            for i in range(3)
        ],
    )


def test_dense_failures():
    with type_error("nn.dense", "data \\(2, 5\\) has 5 features, but weight \\(4, 6\\) expects 6"):
        type_of("nn.dense", ((2, 5), "float32"), ((4, 6), "float32"))
    with type_error("nn.dense", "units=3 but weight \\(4, 5\\) has 4 rows"):
        type_of("nn.dense", ((2, 5), "float32"), ((4, 5), "float32"), units=3)
    with type_error("nn.dense", "weight must be 2-D"):
        type_of("nn.dense", ((2, 5), "float32"), ((1, 4, 5), "float32"))
    with attr_error("nn.dense.*units.*must be an int"):
        op("nn.dense", var("x", (2, 5)), var("w", (4, 5)), units="4")


@pytest.mark.parametrize("ta,tb", list(itertools.product((False, True), repeat=2)))
@pytest.mark.parametrize("bx,by", [(3, 3), (1, 3), (3, 1)])
def test_batch_matmul(ta, tb, bx, by):
    a = ints((bx, 4, 2) if ta else (bx, 2, 4))  # logical [b, M=2, K=4]
    b = ints((by, 3, 4) if tb else (by, 4, 3))  # logical [b, K=4, N=3]
    la = a.transpose(0, 2, 1) if ta else a
    lb = b.transpose(0, 2, 1) if tb else b
    expected = [
        [
            [sum(la[i % bx, m, k] * lb[i % by, k, n] for k in range(4)) for n in range(3)]
            for m in range(2)
        ]
        for i in range(max(bx, by))
    ]
    got = run("nn.batch_matmul", a, b, transpose_a=ta, transpose_b=tb)
    np.testing.assert_array_equal(got, expected)


def test_batch_matmul_failures():
    with type_error(
        "nn.batch_matmul",
        "x \\(2, 3, 4\\) \\(transpose_a=False\\) has 4 columns",
        "y \\(2, 5, 3\\) \\(transpose_b=True\\) has 3 rows",
    ):
        type_of("nn.batch_matmul", ((2, 3, 4), "float32"), ((2, 5, 3), "float32"))
    with type_error("nn.batch_matmul", "batch sizes 2", "and 3"):
        type_of("nn.batch_matmul", ((2, 3, 4), "float32"), ((3, 5, 4), "float32"))
    with type_error("nn.batch_matmul", "3-D"):
        type_of("nn.batch_matmul", ((3, 4), "float32"), ((5, 4), "float32"))
    t = type_of("nn.batch_matmul", ((1, 3, 4), "int8"), ((6, 5, 4), "int8"), out_dtype="int32")
    assert (t.shape, t.dtype) == ((6, 3, 5), "int32")


def test_bias_add():
    x = np.zeros((2, 3, 2, 2), np.float32)
    got = run("nn.bias_add", x, np.array([1, 2, 3], np.float32))
    np.testing.assert_array_equal(got[1, :, 1, 0], [1, 2, 3])
    got = run("nn.bias_add", x, np.array([5, 6], np.float32), axis=-1)
    np.testing.assert_array_equal(got[0, 2, 0], [5, 6])
    xi = np.array([[2**31 - 1, 0]], np.int32)
    np.testing.assert_array_equal(
        run("nn.bias_add", xi, np.array([1, 2], np.int32), axis=1), [[-(2**31), 2]]
    )
    with type_error(
        "nn.bias_add", "bias must have shape \\(3,\\)", "\\(2, 3, 2, 2\\)", "got \\(4,\\)"
    ):
        type_of("nn.bias_add", ((2, 3, 2, 2), "float32"), ((4,), "float32"))
    with type_error("nn.bias_add", "axis 4 is out of range"):
        type_of("nn.bias_add", ((2, 3, 2, 2), "float32"), ((3,), "float32"), axis=4)
    with type_error("nn.bias_add", "bias dtype int32 differs from data dtype float32"):
        type_of("nn.bias_add", ((2, 3), "float32"), ((3,), "int32"))


# ---- activations and softmax ---------------------------------------------------------------------


def test_activations_hand_computed():
    x = np.array([-4, -3, -1, 0, 1, 3, 4], np.float32)
    np.testing.assert_array_equal(run("nn.relu", x), [0, 0, 0, 0, 1, 3, 4])
    np.testing.assert_allclose(run("nn.hardswish", x), [0, 0, -1 / 3, 0, 2 / 3, 3, 4], rtol=1e-7)
    np.testing.assert_allclose(run("nn.leaky_relu", x, alpha=0.5), [-2, -1.5, -0.5, 0, 1, 3, 4])
    assert run("nn.leaky_relu", x)[0] == np.float32(-4) * np.float32(0.01)
    assert run("nn.hardswish", x.astype(np.float16)).dtype == np.float16
    np.testing.assert_array_equal(run("nn.relu", np.array([-5, 5], np.int8)), [0, 5])
    for name in ("nn.hardswish", "nn.leaky_relu"):
        with type_error(name, "float16 or float32, got int8"):
            type_of(name, ((3,), "int8"))
    with attr_error("nn.leaky_relu.*alpha.*must be a number"):
        op("nn.leaky_relu", var("x", (3,)), alpha="big")


def test_softmax():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    for axis in (-1, 1, 0):
        e = np.exp(x.astype(np.float64))
        expected = e / e.sum(axis=axis, keepdims=True)
        got = run("nn.softmax", x, axis=axis)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    # Huge logits neither overflow nor give nan.
    got = run("nn.softmax", np.array([1000, 1000, -1000], np.float32))
    np.testing.assert_array_equal(got, [0.5, 0.5, 0])
    with type_error("nn.softmax", "axis 3 is out of range for a tensor of rank 3"):
        type_of("nn.softmax", ((2, 3, 4), "float32"), axis=3)
    with type_error("nn.softmax", "float16 or float32, got int8"):
        type_of("nn.softmax", ((2, 3), "int8"))


# ---- nn.pad --------------------------------------------------------------------------------------


def test_pad_modes():
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    got = run("nn.pad", x, np.array(9, np.float32), pad_width=((1, 0), (0, 2)))
    np.testing.assert_array_equal(got, [[9, 9, 9, 9, 9], [1, 2, 3, 9, 9], [4, 5, 6, 9, 9]])
    got = run("nn.pad", x, np.array(0, np.float32), pad_width=((0, 1), (2, 1)), pad_mode="edge")
    np.testing.assert_array_equal(got, [[1, 1, 1, 2, 3, 3], [4, 4, 4, 5, 6, 6], [4, 4, 4, 5, 6, 6]])
    got = run("nn.pad", x, np.array(0, np.float32), pad_width=((1, 1), (2, 2)), pad_mode="reflect")
    np.testing.assert_array_equal(
        got,
        [
            [6, 5, 4, 5, 6, 5, 4],
            [3, 2, 1, 2, 3, 2, 1],
            [6, 5, 4, 5, 6, 5, 4],
            [3, 2, 1, 2, 3, 2, 1],
        ],
    )
    # An int32 zero point pads int8 data (converted to int8).
    xi = np.array([1, 2], np.int8)
    got = run("nn.pad", xi, np.array(-128, np.int32), pad_width=((1, 1),))
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, [-128, 1, 2, -128])


def test_pad_failures():
    x = var("x", (2, 3))
    with type_error("nn.pad", "pad_width has 1 pairs but data \\(2, 3\\) has rank 2"):
        P.infer_type(op("nn.pad", x, const(0.0), pad_width=((1, 1),)))
    with type_error("nn.pad", "pad_value must be a scalar, got shape \\(1,\\)"):
        P.infer_type(op("nn.pad", x, const(np.zeros(1, np.float32)), pad_width=((1, 1),) * 2))
    with type_error("nn.pad", "reflect padding \\(0, 3\\) of axis 1 needs at most size - 1 = 2"):
        P.infer_type(op("nn.pad", x, const(0.0), pad_width=((0, 0), (0, 3)), pad_mode="reflect"))
    with attr_error("nn.pad.*pad_width must be non-negative"):
        op("nn.pad", x, const(0.0), pad_width=((0, -1), (0, 0)))
    with attr_error("nn.pad.*pairs"):
        op("nn.pad", x, const(0.0), pad_width=((0, 1, 2), (0, 0)))
    with attr_error("nn.pad.*pad_mode.*must be one of"):
        op("nn.pad", x, const(0.0), pad_width=((0, 0), (0, 0)), pad_mode="wrap")
    with pytest.raises(P.InterpreterError, match="pad_value 300 is not representable in int8"):
        run("nn.pad", np.array([1], np.int8), np.array(300, np.int32), pad_width=((1, 1),))
