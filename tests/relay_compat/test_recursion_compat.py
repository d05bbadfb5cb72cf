"""TVM's while-loop test through partita.relay: a let-bound function that calls itself (the
loop) is typed, run and annotated — its body's ops go to the target, the calls of the loop
are "default" host calls (bare without include_non_call_ops), the If and the Let stay bare —
and partitioning keeps the loop's result."""

from __future__ import annotations

import numpy as np
import pytest

from partita import relay
from partita.relay import transform
from partita.relay.dataflow_pattern import DFPatternCallback, is_op, rewrite, wildcard
from partita.relay.op.annotation import compiler_begin, compiler_end

T = "test_while_let"


def _vars():
    return (
        relay.var("var1", shape=(2,)),
        relay.var("var2", shape=(), dtype="int32"),
        relay.var("var3", shape=(2,)),
        relay.var("while_loop"),
    )


def _int(v):
    return relay.const(v, dtype="int32")


def _before():
    """let %while_loop = fn (%var2, %var3) { if (%var2 < 10) { %while_loop(%var2 + 1,
    %var3 + %var1) } else { %var3 } }; %while_loop(0, zeros_like(%var1))"""
    var1, var2, var3, loop = _vars()
    body = relay.If(
        relay.less(var2, _int(10)), loop(relay.add(var2, _int(1)), relay.add(var3, var1)), var3
    )
    call = loop(_int(0), relay.zeros_like(var1))  # a Var is called as in Relay
    ret = relay.Let(loop, relay.Function([var2, var3], body), call)
    return relay.IRModule.from_expr(relay.Function([var1], ret))


def _after(non_call_ops):
    """TVM's expected graph."""
    var1, var2, var3, loop = _vars()

    def on(x):
        return compiler_begin(x, T)

    def host(x, end=False):
        if not non_call_ops:
            return x
        return compiler_end(x, "default") if end else compiler_begin(x, "default")

    cond = compiler_end(relay.less(on(var2), on(_int(10))), T)
    step = host(compiler_end(relay.add(on(var2), on(_int(1))), T))
    acc = host(compiler_end(relay.add(on(var3), on(var1)), T))
    again = host(loop(step, acc), end=True)
    start = host(compiler_end(relay.zeros_like(on(var1)), T))
    call = host(relay.Call(loop, [host(_int(0)), start]), end=True)
    ret = relay.Let(loop, relay.Function([var2, var3], relay.If(cond, again, var3)), call)
    return relay.IRModule.from_expr(relay.Function([var1], ret))


@pytest.mark.parametrize("non_call_ops", [False, True])
def test_while_let(targets, non_call_ops):
    targets(T, ["less", "add", "zeros_like"])
    result = transform.AnnotateTarget(T, non_call_ops)(_before())
    relay.assert_structural_equal(result, transform.InferType()(_after(non_call_ops)))


def test_while_let_runs_and_partitions(targets):
    targets(T, ["less", "add", "zeros_like"])
    mod = _before()
    feed = {"var1": np.array([1.5, -2.0], "float32")}
    (want,) = relay.interpret(mod, feed)
    np.testing.assert_array_equal(want, feed["var1"] * 10)  # ten turns of the loop
    out = transform.Sequential(
        [transform.AnnotateTarget(T), transform.MergeCompilerRegions(), transform.PartitionGraph()]
    )(mod)
    lifted = [f for f in out.functions.values() if "Compiler" in f.attrs]
    assert sorted(f.body.op.name for f in lifted) == ["add", "add", "less", "zeros_like"]
    # numbered across the whole function, as Relay numbers regions: the loop body's first
    number = {
        f.body.op.name: int(n.rsplit("_", 1)[1])
        for n, f in out.functions.items()
        if "Compiler" in f.attrs
    }
    assert number["zeros_like"] > max(number["less"], number["add"])
    np.testing.assert_array_equal(relay.interpret(out, feed)[0], want)
    relay.assert_structural_equal(relay.from_text(str(out)), out)  # the text form round-trips


def test_rewrite_reaches_into_the_loop_body():
    """TVM's rewrite visits let-bound functions: the float add inside the loop becomes a
    subtract, so the loop computes -10 * var1."""

    class AddToSubtract(DFPatternCallback):
        def __init__(self):
            super().__init__()
            self.pattern = is_op("add")(wildcard(), wildcard()).has_dtype("float32")

        def callback(self, pre, post, node_map):
            return relay.subtract(post.args[0], post.args[1])

    out = rewrite(AddToSubtract(), _before()["main"])
    step, acc = out.body.value.body.true_branch.args
    assert (step.op.name, acc.op.name) == ("add", "subtract")
    feed = {"var1": np.array([1.5, -2.0], "float32")}
    np.testing.assert_array_equal(relay.interpret(out, feed)[0], feed["var1"] * -10)
