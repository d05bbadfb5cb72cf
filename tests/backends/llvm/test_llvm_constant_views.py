"""A view (transpose, reshape) or mean of a constant, left unfolded, is lowered by the llvm
host: its operand is copied in by a CONST kernel. Before session 17 the lowering took the
call's first non-constant operand and raised IndexError on a graph with none (found through
the fuzzer's mutated BERT, then on this valid graph)."""

from __future__ import annotations

import numpy as np
import pytest

import partita as P
from partita.ops import get_op


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_views_of_a_constant_equal_the_interpreter(dtype):
    rng = np.random.default_rng(0)
    c = P.const(rng.integers(-100, 100, (2, 3)).astype(dtype))
    x = P.var("x", (3, 2), dtype)
    y = get_op("add")(x, get_op("transpose")(c, axes=(1, 0)))
    y = get_op("add")(y, get_op("reshape")(c, newshape=(3, 2)))
    mod = P.IRModule.from_expr(y)
    a = rng.integers(-10, 10, (3, 2)).astype(dtype)
    got = P.build(mod, "llvm").run(a)[0]
    want = P.interpret(mod, [a])[0]
    assert got.dtype == want.dtype and np.array_equal(got, want)
