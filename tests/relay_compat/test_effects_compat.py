"""TVM's reference test through partita.relay: ref, ref_read and ref_write stay on the host
("default" regions) and the op between them goes to its target; the partitioned program
reads and writes its cell as before."""

from __future__ import annotations

import numpy as np
import pytest

from partita import relay
from partita.ir import iter_calls
from partita.relay import transform

cb, ce = relay.annotation.compiler_begin, relay.annotation.compiler_end


def _before():
    ref = relay.expr.RefCreate(relay.const(1.0))
    return relay.IRModule.from_expr(
        relay.expr.RefWrite(ref, relay.nn.relu(relay.expr.RefRead(ref)))
    )


def _after(non_call_ops):
    """TVM's expected graph: each use of the cell leaves its "default" region and enters the
    reader's; the constant enters ref's region."""
    c = relay.const(1.0)
    ref = relay.expr.RefCreate(cb(c, "default") if non_call_ops else c)
    for_write = cb(ce(ref, "default"), "default") if non_call_ops else ref
    for_read = cb(ce(ref, "default"), "default") if non_call_ops else ref
    read = relay.expr.RefRead(for_read)
    relu = ce(relay.nn.relu(cb(ce(read, "default") if non_call_ops else read, "relu")), "relu")
    write = relay.expr.RefWrite(for_write, cb(relu, "default") if non_call_ops else relu)
    return relay.IRModule.from_expr(ce(write, "default") if non_call_ops else write)


@pytest.mark.parametrize("non_call_ops", [True, False, True])
def test_ref_create_read_write(targets, non_call_ops):
    targets("relu", ["nn.relu"])
    result = transform.AnnotateTarget("relu", non_call_ops)(_before())
    relay.assert_structural_equal(result, transform.InferType()(_after(non_call_ops)))


def test_partitioned_references_keep_their_order(targets):
    targets("acc_ref", ["nn.relu", "negative"])
    x = relay.var("x", shape=(4,))
    ref = relay.expr.RefCreate(x)
    write = relay.expr.RefWrite(ref, relay.nn.relu(relay.negative(relay.expr.RefRead(ref))))
    mod = relay.IRModule.from_expr(
        relay.Function([x], relay.Tuple([relay.expr.RefRead(ref), write, relay.expr.RefRead(ref)]))
    )
    out = transform.Sequential(
        [
            transform.AnnotateTarget("acc_ref"),
            transform.MergeCompilerRegions(),
            transform.PartitionGraph(),
        ]
    )(mod)
    (part,) = [f for f in out.functions.values() if "Compiler" in f.attrs]
    assert [c.op.name for c in iter_calls(part)] == ["negative", "nn.relu"]
    feed = {"x": np.array([1.0, -2.0, 3.0, -4.0], "float32")}
    got, want = relay.interpret(out, feed), relay.interpret(mod, feed)
    np.testing.assert_array_equal(want[1], [0.0, 2.0, 0.0, 4.0])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_expr_mutator_reaches_into_references():
    """TVM's visit_ref_create / visit_ref_read / visit_ref_write: a mutator that turns relu
    into abs rewrites the value written, and a visitor sees the three nodes."""

    class ReluToAbs(relay.ExprMutator):
        def visit_call(self, call):
            new = super().visit_call(call)
            return relay.abs(new.args[0]) if call.op.name == "nn.relu" else new

    class Count(relay.ExprVisitor):
        def __init__(self):
            super().__init__()
            self.seen = []

        def visit_ref_create(self, node):
            self.seen.append("ref")
            super().visit_ref_create(node)

        def visit_ref_read(self, node):
            self.seen.append("read")
            super().visit_ref_read(node)

        def visit_ref_write(self, node):
            self.seen.append("write")
            super().visit_ref_write(node)

    x = relay.var("x", shape=(3,))
    ref = relay.expr.RefCreate(x)
    write = relay.expr.RefWrite(ref, relay.nn.relu(relay.expr.RefRead(ref)))
    fn = relay.Function([x], relay.Tuple([write, relay.expr.RefRead(ref)]))
    out = ReluToAbs().visit(fn)
    assert out.body.fields[0].value.op is relay.op.get("abs")
    counter = Count()
    counter.visit(fn)
    assert sorted(counter.seen) == ["read", "read", "ref", "write"]
    feed = {"x": np.array([-1.0, 0.5, -2.0], "float32")}
    np.testing.assert_array_equal(relay.interpret(out, feed)[0], np.abs(feed["x"]))
