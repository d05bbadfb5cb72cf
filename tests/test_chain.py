"""A 100,000-node chain goes through every stage without RecursionError."""

import sys

import numpy as np
import pytest

import partita as P
from partita.ir import ExprMutator, IRModule, var
from partita.ops import get_op

N = 100_000


def chain(n: int) -> IRModule:
    x = var("x", (4,), "float32")
    relu, add, sub = get_op("nn.relu"), get_op("add"), get_op("subtract")
    one = P.const(np.float32(1.0))
    e = x
    for i in range(n):
        e = (relu(e), add(e, one), sub(e, one))[i % 3]
    return IRModule.from_expr(e)


@pytest.fixture(scope="module")
def big():
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)  # the default: nothing may depend on a raised limit
    try:
        yield chain(N)
    finally:
        sys.setrecursionlimit(limit)


@pytest.mark.slow
def test_infer_type_and_interpret(big):
    P.InferType()(big)
    out = P.interpret(big, [np.array([-5, 0, 1, 2], np.float32)])[0]
    # Each group of three is relu, +1, -1: the net effect is relu once the first group ran.
    assert np.array_equal(out, np.array([0, 0, 1, 2], np.float32))


@pytest.mark.slow
def test_rewrite(big):
    class SubToAdd(ExprMutator):
        def rewrite_call(self, call, op, args):
            if call.op.name == "subtract":
                return get_op("add")(args[0], P.const(np.float32(-1.0)))
            return super().rewrite_call(call, op, args)

    out = SubToAdd().visit(big["main"])
    assert out.body.op.name == "nn.relu" and out.body.args[0].op.name == "add"


@pytest.mark.slow
def test_print_and_parse(big):
    text, constants = P.astext(big)
    assert text.count("\n") >= N
    again = P.parse(text, constants)
    P.assert_structural_equal(again, big)
