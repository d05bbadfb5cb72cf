"""TVM's If and Let behaviours through partita.relay: the patterns (is_if, is_let), the nodes'
typing, interpretation and text form, and AnnotateTarget / MergeCompilerRegions /
PartitionGraph around them (names mirror TVM v0.16's tests)."""

from __future__ import annotations

import numpy as np
import pytest

import partita as P
from partita import relay
from partita.relay import transform
from partita.relay.dataflow_pattern import (
    IfPattern,
    LetPattern,
    is_if,
    is_let,
    is_op,
    is_var,
    wildcard,
)
from partita.relay.op.annotation import compiler_begin as cb
from partita.relay.op.annotation import compiler_end as ce

K_BROADCAST = 1


def _v(name, shape=(), dtype="float32"):
    return relay.var(name, shape=shape, dtype=dtype)


def test_IfPattern():  # noqa: N802 (TVM's name)
    x, y = is_var("x"), is_var("y")
    cond = is_op("less")(x, y)
    pat = is_if(cond, x, y)
    assert isinstance(pat, IfPattern)
    assert (pat.cond, pat.true_branch, pat.false_branch) == (cond, x, y)


def test_LetPattern():  # noqa: N802 (TVM's name)
    x, y, let_var = is_var("x"), is_var("y"), is_var("let")
    value = is_op("less")(x, y)
    pat = is_let(let_var, value, let_var)
    assert isinstance(pat, LetPattern)
    assert (pat.var, pat.value, pat.body) == (let_var, value, let_var)


def _if_let_patterns():
    x, y, let_var = is_var("x"), is_var("y"), is_var("let")
    return is_if(is_op("less")(x, y), x, y), is_let(let_var, is_op("less")(x, y), let_var)


def test_match_if():
    pat = _if_let_patterns()[0]
    x, y = _v("x"), _v("y")
    assert pat.match(relay.If(relay.less(x, y), x, y))


def test_no_match_if():
    pat = _if_let_patterns()[0]
    x, y = _v("x"), _v("y")
    assert not pat.match(relay.If(relay.greater(x, y), x, y))
    assert not pat.match(relay.If(relay.less(x, y), y, x))


def test_match_let():
    pat = _if_let_patterns()[1]
    x, y, lv = _v("x"), _v("y"), relay.var("let")
    assert pat.match(relay.Let(lv, relay.less(x, y), lv))


def test_no_match_let():
    pat = _if_let_patterns()[1]
    x, y, lv = _v("x"), _v("y"), relay.var("let")
    assert not pat.match(relay.Let(lv, relay.greater(x, y), lv))
    assert not pat.match(relay.Let(lv, relay.less(x, y), relay.multiply(lv, x)))


def test_no_match_op_attr():
    """The Let case of TVM's test: an add pattern does not match a Let whose value is an add."""
    add = is_op("add").has_attr({"TOpPattern": K_BROADCAST})(wildcard(), wildcard())
    x, y, z = _v("x", (2,)), _v("y", (2,)), relay.var("z")
    assert not add.match(relay.Let(z, relay.add(x, y), z))
    assert add.match(relay.add(x, y))


def _if_let_module():
    x, y = _v("x", (4,)), _v("y", (4,))
    e1, e2 = _v("e1"), _v("e2")
    lv = relay.var("lv")  # typed from its value
    branch = relay.If(relay.less(e1, e2), relay.tanh(x), relay.sigmoid(y))
    body = relay.Let(lv, relay.add(x, y), relay.multiply(lv, branch))
    return relay.IRModule.from_expr(relay.Function([x, y, e1, e2], body))


def test_if_and_let_type_interpret_and_print():
    mod = transform.InferType()(_if_let_module())
    assert mod["main"].body.checked_type == relay.TensorType((4,), "float32")
    x = np.linspace(-1, 1, 4, dtype="float32")
    y = np.linspace(2, 3, 4, dtype="float32")
    for e1, e2, branch in ((1.0, 2.0, np.tanh(x)), (2.0, 1.0, 1 / (1 + np.exp(-y)))):
        got = P.interpret(mod, [x, y, np.float32(e1), np.float32(e2)])[0]
        np.testing.assert_allclose(got, (x + y) * branch, rtol=1e-6)
    text = str(mod)
    assert "let %lv = %0;" in text and "if (%1) { %2 } else { %3 }" in text
    assert relay.structural_equal(P.parse(text), mod)


def test_if_type_errors_name_the_problem():
    x = _v("x", (4,))
    with pytest.raises(P.TypeInferenceError, match="condition must be a scalar bool"):
        transform.InferType()(relay.IRModule.from_expr(relay.If(x, x, x)))
    bad = relay.If(relay.less(_v("a"), _v("b")), x, _v("y", (3,)))
    with pytest.raises(P.TypeInferenceError, match="branches differ in type"):
        transform.InferType()(relay.IRModule.from_expr(bad))


def test_let_variables_are_bound_not_free():
    lv = relay.var("lv")
    x = _v("x", (2,))
    mod = relay.IRModule.from_expr(relay.Let(lv, relay.abs(x), relay.add(lv, lv)))
    assert [p.name_hint for p in mod["main"].params] == ["x"]
    out = P.interpret(mod, [np.array([-1.0, 2.0], "float32")])[0]
    np.testing.assert_array_equal(out, [2.0, 4.0])


def _if_else_graph():
    data = _v("data", (1, 32))
    e1, e2 = _v("e1"), _v("e2")
    return data, e1, e2


def test_annotate_if_else(targets):
    """TVM's test_if_else: the If stays bare, its condition and branches end their regions,
    the erf after it begins one."""
    t = "test_if_else"
    targets(t, ["equal", "tanh", "sigmoid", "erf"])
    data, e1, e2 = _if_else_graph()
    ife = relay.If(relay.equal(e1, e2), relay.tanh(data), relay.sigmoid(data))
    before = relay.IRModule.from_expr(relay.Function([data, e1, e2], relay.erf(ife)))
    data, e1, e2 = _if_else_graph()
    cond = ce(relay.equal(cb(e1, t), cb(e2, t)), t)
    ife = relay.If(cond, ce(relay.tanh(cb(data, t)), t), ce(relay.sigmoid(cb(data, t)), t))
    after = relay.Function([data, e1, e2], ce(relay.erf(cb(ife, t)), t))
    expected = transform.InferType()(relay.IRModule.from_expr(after))
    for non_call_ops in (True, False):
        result = transform.AnnotateTarget(t, non_call_ops)(before)
        relay.assert_structural_equal(result, expected)


def test_if_free_vars(targets):
    """A zeros() branch (no inputs) stays bare next to annotated ones."""
    t = "test_if_free_vars"
    targets(t, ["equal", "sigmoid", "erf"])
    data, e1, e2 = _if_else_graph()
    zeros = relay.zeros(shape=(1, 32), dtype="float32")
    ife = relay.If(relay.equal(e1, e2), zeros, relay.sigmoid(data))
    before = relay.IRModule.from_expr(relay.Function([data, e1, e2], relay.erf(ife)))
    data, e1, e2 = _if_else_graph()
    cond = ce(relay.equal(cb(e1, t), cb(e2, t)), t)
    zeros = relay.zeros(shape=(1, 32), dtype="float32")
    ife = relay.If(cond, zeros, ce(relay.sigmoid(cb(data, t)), t))
    after = relay.Function([data, e1, e2], ce(relay.erf(cb(ife, t)), t))
    expected = transform.InferType()(relay.IRModule.from_expr(after))
    for non_call_ops in (True, False):
        result = transform.AnnotateTarget(t, non_call_ops)(before)
        relay.assert_structural_equal(result, expected)


def test_merge_if_else(targets):
    """TVM's merge test_if_else: AnnotateTarget, MergeCompilerRegions and PartitionGraph go
    through a graph with an If (TVM checks only that; here the bits are checked too)."""
    t = "test_if_else_merge"
    targets(t, ["sigmoid", "erf", "add"])
    data = _v("data", (1, 32))
    add0 = relay.add(data, data)
    sub0 = relay.subtract(add0, data)
    eq = relay.equal(relay.sum(add0), relay.sum(sub0))
    ife = relay.If(eq, relay.sigmoid(add0), relay.sigmoid(sub0))
    mod = relay.IRModule.from_expr(relay.Function([data], relay.add(add0, relay.erf(ife))))
    feed = {"data": np.linspace(-1, 1, 32, dtype="float32").reshape(1, 32)}
    want = relay.interpret(mod, feed)
    for non_call_ops in (True, False):
        annotated = transform.AnnotateTarget(t, non_call_ops)(mod)
        merged = transform.MergeCompilerRegions()(annotated)
        part = transform.PartitionGraph()(merged)
        assert any("Compiler" in f.attrs for f in part.functions.values())
        np.testing.assert_array_equal(relay.interpret(part, feed), want)


def test_if_and_let_parse_with_bindings_inside_branches():
    text = """#[version = "0.0.5"]
def @main(%x: Tensor[(2), float32], %c: bool) {
  %0 = if (%c) {
    %1 = nn.relu(%x);
    %1
  } else {
    %x
  };
  let %v = %0;
  add(%v, %x)
}"""
    mod = P.parse(text)
    x = np.array([-1.0, 2.0], "float32")
    np.testing.assert_array_equal(P.interpret(mod, [x, np.bool_(True)])[0], [-1.0, 4.0])
    np.testing.assert_array_equal(P.interpret(mod, [x, np.bool_(False)])[0], [-2.0, 4.0])
    assert isinstance(mod["main"].body, relay.Let)
