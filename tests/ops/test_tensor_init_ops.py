"""zeros / ones / zeros_like / ones_like and einsum: values against numpy, inferred types, and
precise failures."""

from __future__ import annotations

import numpy as np
import pytest
from op_helpers import assert_same, attr_error, op, run_expr, type_error, type_of

import partita as P
from partita import TensorType, Tuple, const, var


@pytest.mark.parametrize("name, fill", [("zeros", 0), ("ones", 1)])
@pytest.mark.parametrize("dtype", ["float32", "int8", "uint8", "int32"])
def test_init_ops_fill_their_shape(name, fill, dtype):
    call = op(name, shape=(2, 3), dtype=dtype)
    assert P.infer_type(call) == TensorType((2, 3), dtype)
    assert_same(run_expr(call), np.full((2, 3), fill, dtype))


def test_an_empty_shape_and_a_scalar():
    assert_same(run_expr(op("zeros", shape=(0,))), np.zeros((0,), "float32"))
    assert_same(run_expr(op("ones", shape=(), dtype="int32")), np.ones((), "int32"))


@pytest.mark.parametrize("name, fill", [("zeros_like", 0), ("ones_like", 1)])
def test_like_ops_follow_their_input(name, fill):
    x = np.arange(6, dtype=np.int8).reshape(2, 3)
    assert_same(run_expr(op(name, const(x))), np.full((2, 3), fill, np.int8))


def test_init_attrs_are_checked():
    with attr_error("shape dimensions must be >= 0"):
        op("zeros", shape=(2, -1))
    with attr_error("dtype"):
        op("ones", shape=(2,), dtype="complex64")


EQUATIONS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("ii->i", [(3, 3)]),
    ("ij->ji", [(2, 5)]),
    ("i,i", [(4,), (4,)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ab,...cb->...ac", [(20, 5), (20, 5)]),
    ("...ij,...jk->...ik", [(5, 1, 2, 3), (4, 3, 2)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
]


@pytest.mark.parametrize("equation, shapes", EQUATIONS)
def test_einsum_equals_numpy(equation, shapes):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    call = op("einsum", Tuple([const(a) for a in arrays]), equation=equation)
    want = np.einsum(equation, *arrays).astype(np.float32)
    assert P.infer_type(call) == TensorType(want.shape, "float32")
    np.testing.assert_allclose(run_expr(call), want, rtol=1e-5, atol=1e-5)


def test_einsum_failures_name_the_problem():
    a, b = var("a", (2, 3)), var("b", (4, 5))
    with type_error("subscript 'j' has sizes 3 and 4"):
        type_of("einsum", Tuple([a, b]), equation="ij,jk->ik")
    with type_error("has 2 operands, data holds 1"):
        type_of("einsum", Tuple([a]), equation="ij,jk->ik")
    with type_error("do not fit an operand of shape"):
        type_of("einsum", Tuple([a]), equation="ijk->i")
    with type_error("output subscript 'z' is not in any operand"):
        type_of("einsum", Tuple([a]), equation="ij->z")
    with type_error("einsum takes float16 or float32"):
        type_of("einsum", Tuple([var("c", (2, 3), "int8")]), equation="ij->i")
    with attr_error("subscripts are letters"):
        op("einsum", Tuple([a]), equation="i1->i")
