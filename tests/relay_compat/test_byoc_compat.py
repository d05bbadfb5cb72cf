"""TVM's BYOC pass behaviours (MergeComposite, AnnotateTarget, MergeCompilerRegions,
PartitionGraph) through partita.relay; names mirror TVM's tests."""

from __future__ import annotations

import numpy as np
import pytest
from partita.backends import unregister_backend

from partita import relay
from partita.errors import PartitaError
from partita.relay import transform
from partita.relay.dataflow_pattern import is_constant, is_op, wildcard


@pytest.fixture
def targets():
    """Targets declared TVM's way; forgotten afterwards so other tests see a clean registry."""
    names = []

    def declare(name, ops):
        for op in ops:
            relay.register_op_attr(op, f"target.{name}", lambda expr: True)
        names.append(name)

    yield declare
    for n in names:
        unregister_backend(relay.target_name(n))


def _v(name, shape=(1, 4)):
    return relay.var(name, shape=shape, dtype="float32")


def _run(mod, **inputs):
    return relay.interpret(mod, inputs)


def _add_relu():
    return is_op("nn.relu")(is_op("add")(wildcard(), wildcard()))


def _composites(mod):
    return sorted(
        n.op.attrs["Composite"]
        for fn in mod.functions.values()
        for n in _calls(fn.body)
        if isinstance(n.op, relay.Function) and "Composite" in n.op.attrs
    )


def _calls(expr):
    from partita.ir import post_order

    return [n for n in post_order(expr) if isinstance(n, relay.Call)]


def _merge(mod, table):
    return transform.Sequential([transform.InferType(), transform.MergeComposite(table)])(mod)


def test_simple_merge():
    x, y = _v("x"), _v("y")
    mod = relay.IRModule.from_expr(relay.nn.relu(relay.add(x, y)))
    out = _merge(mod, [("test.add_relu", _add_relu())])
    assert _composites(out) == ["test.add_relu"]
    feed = {"x": np.ones((1, 4), "float32"), "y": -np.ones((1, 4), "float32") * 2}
    np.testing.assert_array_equal(_run(out, **feed), _run(mod, **feed))


def test_branch_merge():
    x, y = _v("x"), _v("y")
    a = relay.nn.relu(relay.add(x, y))
    b = relay.nn.relu(relay.add(a, y))
    out = _merge(relay.IRModule.from_expr(relay.multiply(a, b)), [("test.add_relu", _add_relu())])
    assert _composites(out) == ["test.add_relu", "test.add_relu"]


def test_multiple_patterns_and_merge_order():
    x, y = _v("x"), _v("y")
    mod = relay.IRModule.from_expr(relay.nn.relu(relay.add(x, y)))
    add = is_op("add")(wildcard(), wildcard())
    # first entry wins: the bigger pattern listed first claims both ops
    out = _merge(mod, [("test.add_relu", _add_relu()), ("test.add", add)])
    assert _composites(out) == ["test.add_relu"]
    out = _merge(mod, [("test.add", add), ("test.add_relu", _add_relu())])
    assert _composites(out) == ["test.add"]


def test_optional_pattern():
    x, y = _v("x"), _v("y")
    pat = is_op("add")(wildcard(), wildcard()).optional(lambda p: is_op("nn.relu")(p))
    with_relu = relay.IRModule.from_expr(relay.nn.relu(relay.add(x, y)))
    without = relay.IRModule.from_expr(relay.add(x, y))
    assert _composites(_merge(with_relu, [("test.opt", pat)])) == ["test.opt"]
    assert _composites(_merge(without, [("test.opt", pat)])) == ["test.opt"]


def test_pattern_with_check():
    x = _v("x")
    mod = relay.IRModule.from_expr(relay.nn.relu(relay.add(x, relay.const(1.0))))
    pat = is_op("nn.relu")(is_op("add")(wildcard(), is_constant()))
    assert _composites(_merge(mod, [("test.p", pat, lambda call: False)])) == []
    assert _composites(_merge(mod, [("test.p", pat, lambda call: True)])) == ["test.p"]


def test_diamond_not_merge():
    x = _v("x")
    r = relay.nn.relu(x)
    expr = relay.add(relay.tanh(r), r)  # relu's value leaves through tanh too
    pat = is_op("add")(is_op("nn.relu")(wildcard()), wildcard())
    out = _merge(relay.IRModule.from_expr(expr), [("test.diamond", pat)])
    assert _composites(out) == []


def _add_sub_mul():
    a, b = wildcard(), wildcard()  # one wildcard object used twice binds one node
    return is_op("multiply")(is_op("add")(a, b), is_op("subtract")(a, b))


def test_reuse_call_merge():
    x, y = _v("x"), _v("y")
    s = relay.subtract(x, y)
    expr = relay.add(relay.add(s, y), s)  # s is used twice inside the match
    a, b = wildcard(), wildcard()
    sub = is_op("subtract")(a, b)
    pat = is_op("add")(is_op("add")(sub, b), sub)
    out = _merge(relay.IRModule.from_expr(expr), [("test.reuse", pat)])
    assert _composites(out) == ["test.reuse"]
    assert len(out["main"].params) == 2 and len(out["main"].body.args) == 2


def test_parallel_merge():
    x, y = _v("x"), _v("y")

    def branch():
        return relay.multiply(relay.add(x, y), relay.subtract(x, y))

    mod = relay.IRModule.from_expr(relay.multiply(branch(), branch()))
    out = _merge(mod, [("test.asm", _add_sub_mul())])
    assert _composites(out) == ["test.asm", "test.asm"]
    feed = {"x": np.arange(4, dtype="float32")[None], "y": np.ones((1, 4), "float32")}
    np.testing.assert_array_equal(_run(out, **feed), _run(mod, **feed))


def test_multiple_input_subgraphs():
    x, y, z = _v("x"), _v("y"), _v("z")
    first = relay.multiply(relay.add(x, y), relay.subtract(x, y))
    second = relay.multiply(relay.add(first, z), relay.subtract(first, z))
    out = _merge(relay.IRModule.from_expr(second), [("test.asm", _add_sub_mul())])
    assert _composites(out) == ["test.asm", "test.asm"]


def test_type_check():
    x = _v("x", shape=(1, 4, 4, 2))
    w = relay.const(np.ones((1, 1, 2, 2), "float32"))
    conv = relay.nn.conv2d(x, w, data_layout="NHWC", kernel_layout="HWIO")
    mod = relay.IRModule.from_expr(relay.nn.relu(conv))
    pat = is_op("nn.relu")(is_op("nn.conv2d")(wildcard(), is_constant()))

    def channels_at_least(n):
        return lambda call: call.args[0].checked_type.shape[-1] >= n

    assert _composites(_merge(mod, [("test.c", pat, channels_at_least(2))])) == ["test.c"]
    assert _composites(_merge(mod, [("test.c", pat, channels_at_least(8))])) == []


def _partition(mod, names):
    return transform.Sequential(
        [
            transform.InferType(),
            transform.AnnotateTarget(names),
            transform.MergeCompilerRegions(),
            transform.PartitionGraph(),
        ]
    )(mod)


def _compilers(mod):
    return sorted(fn.attrs["Compiler"] for fn in mod.functions.values() if "Compiler" in fn.attrs)


def test_different_targets(targets):
    targets("acc_a", ["add"])
    targets("acc_b", ["multiply"])
    x, y = _v("x"), _v("y")
    mod = relay.IRModule.from_expr(relay.multiply(relay.add(x, y), y))
    out = _partition(mod, ["acc_a", "acc_b"])
    assert _compilers(out) == ["acc_a", "acc_b"]
    feed = {"x": np.arange(4, dtype="float32")[None], "y": np.ones((1, 4), "float32")}
    np.testing.assert_array_equal(_run(out, **feed), _run(mod, **feed))


def test_composite_function(targets):
    targets("acc_c", [])
    x, y = _v("x"), _v("y")
    mod = relay.IRModule.from_expr(relay.nn.relu(relay.add(x, y)))
    seq = transform.Sequential(
        [
            transform.InferType(),
            transform.MergeComposite([("acc_c.add_relu", _add_relu())]),
            transform.AnnotateTarget(["acc_c"]),
            transform.MergeCompilerRegions(),
            transform.PartitionGraph(),
        ]
    )
    out = seq(mod)
    assert _compilers(out) == ["acc_c"] and _composites(out) == ["acc_c.add_relu"]


def test_diamond_graph_fanouts(targets):
    targets("acc_d", ["nn.relu", "tanh", "add"])
    x = _v("x")
    r = relay.nn.relu(x)
    mod = relay.IRModule.from_expr(relay.add(relay.tanh(r), relay.sigmoid(r)))
    out = _partition(mod, ["acc_d"])
    # sigmoid stays on the host, so relu/tanh and add cannot merge without a cycle
    assert _compilers(out) == ["acc_d", "acc_d"]
    feed = {"x": np.linspace(-1, 1, 4, dtype="float32")[None]}
    np.testing.assert_array_equal(_run(out, **feed), _run(mod, **feed))


def test_multiple_outputs(targets):
    targets("acc_m", ["nn.relu", "tanh"])
    x = _v("x")
    r = relay.nn.relu(x)
    mod = relay.IRModule.from_expr(relay.add(relay.tanh(r), relay.sigmoid(r)))
    out = _partition(mod, ["acc_m"])
    feed = {"x": np.linspace(-1, 1, 4, dtype="float32")[None]}
    np.testing.assert_array_equal(_run(out, **feed), _run(mod, **feed))


def test_double_target(targets):
    targets("double.A", ["add"])  # TVM allows dots; partita's backend is "double_A"
    x, y = _v("x"), _v("y")
    out = _partition(relay.IRModule.from_expr(relay.add(x, y)), ["double.A"])
    assert _compilers(out) == ["double_A"]


def test_not_bind_constant_is_refused():
    with pytest.raises(PartitaError, match="bind_constants"):
        transform.PartitionGraph(bind_constants=False)


def test_multiple_runs(targets):
    targets("acc_r1", ["add"])
    targets("acc_r2", ["add", "multiply"])
    x, y = _v("x"), _v("y")
    mod = transform.InferType()(relay.IRModule.from_expr(relay.multiply(relay.add(x, y), y)))
    once = transform.AnnotateTarget(["acc_r1", "acc_r2"])(mod)
    twice = transform.AnnotateTarget("acc_r2")(transform.AnnotateTarget("acc_r1")(mod))
    relay.assert_structural_equal(twice, once)
    assert 'Compiler="acc_r1"' in str(twice) and 'Compiler="acc_r2"' in str(twice)
