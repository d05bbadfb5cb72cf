"""A 100,000-node chain goes through every generic pass without RecursionError."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from partita.ir import Constant, IRModule, const, post_order, var
from partita.ops import get_op
from partita.passes.convert_layout import ConvertLayout
from partita.passes.cse import EliminateCommonSubexpr
from partita.passes.dce import DeadCodeElimination
from partita.passes.fold_constant import FoldConstant
from partita.passes.simplify_expr import SimplifyExpr

N = 100_000
relu, add, reshape, clip = (get_op(n) for n in ("nn.relu", "add", "reshape", "clip"))


def chain(n: int) -> IRModule:
    e = var("x", (4,), "float32")
    for _ in range(n // 5):
        one = const(np.float32(1))  # a fresh, equal constant each time: CSE merges them
        e = add(relu(e), one)
        e = reshape(e, newshape=(4,))  # identity: SimplifyExpr removes it
        e = clip(e, a_min=-1e6, a_max=1e6)
        e = add(e, add(const(np.float32(-1)), one))  # FoldConstant makes it add(e, 0)
    return IRModule.from_expr(e)


@pytest.fixture(scope="module")
def big():
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)  # the default: nothing may depend on a raised limit
    try:
        yield chain(N)
    finally:
        sys.setrecursionlimit(limit)


def count(mod, pred):
    return sum(1 for node in post_order(mod.main) if pred(node))


def calls_of(name):
    return lambda n: getattr(getattr(n, "op", None), "name", None) == name


@pytest.mark.slow
def test_fold_constant(big):
    out = FoldConstant()(big)
    assert count(out, calls_of("add")) == 2 * N // 5


@pytest.mark.slow
def test_dce(big):
    assert DeadCodeElimination()(big).main is big.main


@pytest.mark.slow
def test_cse(big):
    out = EliminateCommonSubexpr()(big)
    assert count(out, lambda n: isinstance(n, Constant)) == 2


@pytest.mark.slow
def test_simplify_expr(big):
    out = SimplifyExpr()(big)
    assert count(out, calls_of("reshape")) == 0 and count(out, calls_of("clip")) == N // 5


@pytest.mark.slow
def test_convert_layout(big):
    # No convolution: every node is visited and kept (propagation itself is tested on a
    # 5,000-node NHWC chain in test_convert_layout.py).
    assert ConvertLayout()(big).main is big.main
