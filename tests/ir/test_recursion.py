"""Let-bound functions that call themselves: typing (the result type from the non-recursive
branch), closures over free variables, lazy If in the interpreter, the text form, errors."""

from __future__ import annotations

import numpy as np
import pytest
from partita.partition import partition_for

from partita import interpret
from partita.errors import InterpreterError, PartitaError, TypeInferenceError
from partita.ir import (
    Call,
    Function,
    If,
    IRModule,
    Let,
    TensorType,
    Tuple,
    Var,
    assert_structural_equal,
    const,
    structural_equal,
    var,
)
from partita.ops import get_op
from partita.passes import InferType
from partita.text import parse


def op(name, *args, **attrs):
    return get_op(name)(*args, **attrs)


def _countdown(ret_type=None, base=None):
    """let %f = fn (%n, %acc) { if (%n > 0) { %f(%n - 1, %acc * %x) } else { %acc } };
    %f(%k, ones) -- x ** k."""
    x, k = var("x", (3,)), var("k", (), "int32")
    n, acc, f = var("n", (), "int32"), var("acc", (3,)), Var("f")
    again = Call(f, [op("subtract", n, const(1)), op("multiply", acc, x)])
    body = If(op("greater", n, const(0)), again, acc if base is None else base(acc, f))
    fn = Function([n, acc], body, ret_type)
    start = Call(f, [k, op("ones_like", x)])
    return IRModule.from_expr(Function([x, k], Let(f, fn, start)))


def test_the_result_type_comes_from_the_other_branch():
    mod = InferType()(_countdown())
    let = mod["main"].body
    assert let.type_or_none == TensorType((3,), "float32")
    inner = let.value.body.true_branch
    assert inner.type_or_none == TensorType((3,), "float32")  # the recursive call, typed after
    assert let.var.type_or_none == TensorType((3,), "float32")


def test_recursion_runs_only_the_branch_taken():
    feed = {"x": np.array([2.0, -1.0, 0.5], "float32"), "k": np.int32(5)}
    np.testing.assert_array_equal(interpret(_countdown(), feed)[0], feed["x"] ** 5)
    feed["k"] = np.int32(0)
    np.testing.assert_array_equal(interpret(_countdown(), feed)[0], np.ones(3, "float32"))


def test_every_path_recursive_needs_a_return_type():
    def loop_forever(acc, f):
        return Call(f, [const(1), acc])

    with pytest.raises(TypeInferenceError, match="recursive function %f: every path"):
        InferType()(_countdown(base=loop_forever))
    mod = InferType()(_countdown(TensorType((3,), "float32"), loop_forever))
    assert mod["main"].body.type_or_none == TensorType((3,), "float32")
    with pytest.raises(InterpreterError, match="recursed deeper"):
        interpret(mod, {"x": np.ones(3, "float32"), "k": np.int32(1)})


def test_calling_a_variable_that_is_no_function_names_it():
    x = var("x", (2,))
    with pytest.raises(TypeInferenceError, match="%x is not a function bound by a let"):
        InferType()(IRModule.from_expr(Function([x], Call(x, []))))
    with pytest.raises(PartitaError, match="takes no attributes"):
        Call(x, [], {"axis": 1})


def test_a_closure_sees_its_free_variables():
    x, y = var("x", (2,)), var("y", (2,))
    g = Var("g")
    add_x = Function([y], op("add", y, x))  # x is free: captured when the function is made
    body = Let(g, add_x, Tuple([Call(g, [x]), Call(g, [op("negative", x)])]))
    a, b = interpret(Function([x], body), {"x": np.array([1.0, 2.0], "float32")})
    np.testing.assert_array_equal(a, [2.0, 4.0])
    np.testing.assert_array_equal(b, [0.0, 0.0])


def test_text_round_trip_and_structural_equality():
    mod = InferType()(_countdown())
    text = str(mod)
    assert "let %f = fn (%n: int32, %acc: Tensor[(3), float32])" in text
    assert "%f(" in text
    assert_structural_equal(parse(text), mod)
    assert not structural_equal(_countdown(), _countdown(base=lambda acc, f: op("abs", acc)))


def test_build_refuses_let_bound_functions_by_name():
    with pytest.raises(PartitaError, match="%f: a call of a let-bound function runs only in"):
        partition_for(_countdown(), "ref")
