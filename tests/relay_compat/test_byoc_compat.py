"""TVM's BYOC pass behaviours (MergeComposite, AnnotateTarget, MergeCompilerRegions,
PartitionGraph) through partita.relay; names mirror TVM's tests."""

from __future__ import annotations

import numpy as np
import pytest

from partita import relay
from partita.relay import transform
from partita.relay.dataflow_pattern import (
    TuplePattern,
    is_constant,
    is_op,
    is_tuple_get_item,
    wildcard,
)


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


def test_tuple_get_item_merge():
    """A composite from a pattern holding a tuple item (batch_norm's first result, then relu),
    written as TVM's expected graph."""
    bn = is_op("nn.batch_norm")(*(wildcard() for _ in range(5)))
    table = [("bn_relu", is_op("nn.relu")(is_tuple_get_item(bn, 0)))]

    def inputs():
        return [_v("x", (1, 8))] + [_v(n, (8,)) for n in ("gamma", "beta", "mean", "var")]

    def bn_relu(args):
        return relay.nn.relu(relay.TupleGetItem(relay.nn.batch_norm(*args).astuple(), 0))

    params = inputs()
    before = relay.IRModule.from_expr(relay.Function(params, bn_relu(params)))
    inner = inputs()
    composite = relay.Function(inner, bn_relu(inner)).with_attr("Composite", "bn_relu")
    composite = composite.with_attr(
        "PartitionedFromPattern", "nn.batch_norm_TupleGetItem0_nn.relu_"
    )
    params = inputs()
    expected = relay.Function(params, relay.Call(composite, params))
    out = _merge(before, table)
    relay.assert_structural_equal(out, transform.InferType()(relay.IRModule.from_expr(expected)))


def test_einsum_reshape_pattern():
    """MergeComposite with an einsum over a tuple of optionally reshaped inputs."""
    x, y = wildcard(), wildcard()
    x = is_op("reshape")(x) | x
    y = is_op("reshape")(y) | y
    z = is_op("einsum")(TuplePattern([x, y]))
    table = [("einsum_reshape", is_op("reshape")(z) | z)]

    def body(a, b):
        return relay.einsum(
            [relay.reshape(a, [20, 5]), relay.reshape(b, [20, 5])], "...ab,...cb->...ac"
        )

    a, b = _v("a", (10, 10)), _v("b", (10, 10))
    before = relay.IRModule.from_expr(relay.Function([a, b], body(a, b)))
    a, b = _v("a", (10, 10)), _v("b", (10, 10))
    fn = relay.Function([a, b], body(a, b)).with_attr("Composite", "einsum_reshape")
    fn = fn.with_attr("PartitionedFromPattern", "reshape_reshape_Tuple_einsum_")
    a, b = _v("a", (10, 10)), _v("b", (10, 10))
    expected = relay.IRModule.from_expr(relay.Function([a, b], relay.Call(fn, [a, b])))
    relay.assert_structural_equal(_merge(before, table), transform.InferType()(expected))


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
    """A dotted target: the partition's Compiler keeps TVM's name, its symbol is sanitised
    (partita's backend is "double_A"); annotating twice changes nothing (TVM's test)."""
    targets("double.A", ["add"])
    x, y = _v("x"), _v("y")
    mod = relay.IRModule.from_expr(relay.add(x, y))
    out = _partition(mod, ["double.A"])
    assert _compilers(out) == ["double.A"]
    assert "tvmgen_default_double_A_main_0" in out.functions
    for non_call_ops in (True, False):
        once = transform.AnnotateTarget("double.A", non_call_ops)(mod)
        assert 'compiler="double.A"' in str(once)
        twice = transform.AnnotateTarget("double.A", non_call_ops)(once)
        relay.assert_structural_equal(twice, once)


@pytest.mark.parametrize("bind", [True, False])
def test_not_bind_constant(targets, bind):
    """TVM's bind_constants: True keeps a partition's constants inside it; False makes them
    parameters that main passes (TVM's test counts them on its DNNL partitions); same bits."""
    targets("acc_nb", ["nn.conv2d", "nn.relu"])
    x = _v("x", (1, 2, 6, 6))
    w = relay.const(np.random.default_rng(0).standard_normal((4, 2, 3, 3)).astype(np.float32))
    mod = relay.IRModule.from_expr(relay.Function([x], relay.nn.relu(relay.nn.conv2d(x, w))))
    seq = transform.Sequential(
        [
            transform.InferType(),
            transform.AnnotateTarget("acc_nb"),
            transform.MergeCompilerRegions(),
            transform.PartitionGraph(bind_constants=bind),
        ]
    )
    out = seq(mod)
    (part,) = [f for f in out.functions.values() if "Compiler" in f.attrs]
    assert len(part.params) == (1 if bind else 2)
    (call,) = _calls(out["main"].body)
    assert [type(a).__name__ for a in call.args] == (["Var"] if bind else ["Var", "Constant"])
    feed = {"x": np.random.default_rng(1).standard_normal((1, 2, 6, 6)).astype(np.float32)}
    np.testing.assert_array_equal(_run(out, **feed)[0], _run(mod, **feed)[0])


def test_multiple_runs(targets):
    targets("acc_r1", ["add"])
    targets("acc_r2", ["add", "multiply"])
    x, y = _v("x"), _v("y")
    mod = transform.InferType()(relay.IRModule.from_expr(relay.multiply(relay.add(x, y), y)))
    once = transform.AnnotateTarget(["acc_r1", "acc_r2"])(mod)
    twice = transform.AnnotateTarget("acc_r2")(transform.AnnotateTarget("acc_r1")(mod))
    relay.assert_structural_equal(twice, once)
    assert 'compiler="acc_r1"' in str(twice) and 'compiler="acc_r2"' in str(twice)


def _mod_add_sub_log():
    """TVM's test_multiple_use_of_an_output graph: add feeds both log and subtract."""
    x, y, z = _v("x", (8, 8)), _v("y", (8, 8)), _v("z", (8, 8))
    add = relay.add(x, y)
    return relay.IRModule.from_expr(relay.multiply(relay.log(add), relay.subtract(add, z)))


def _partition_ops(mod):
    return sorted(
        tuple(sorted(c.op.name for c in _calls(fn.body)))
        for fn in mod.functions.values()
        if "Compiler" in fn.attrs
    )


@pytest.mark.parametrize(
    "ops, expected",
    [
        # test_same_output_region: log, subtract and multiply make one region reading (add, z)
        (["subtract", "log", "multiply"], [("log", "multiply", "subtract")]),
        # test_different_output_region: log and subtract apart, multiply on the host
        (["subtract", "log"], [("log",), ("subtract",)]),
    ],
)
def test_multiple_use_of_an_output(targets, ops, expected):
    name = f"acc_u{len(ops)}"
    targets(name, ops)
    mod = _mod_add_sub_log()
    out = _partition(mod, [name])
    assert _partition_ops(out) == expected
    main_ops = sorted(c.op.name for c in _calls(out["main"].body) if hasattr(c.op, "name"))
    assert main_ops == (["add"] if len(expected) == 1 else ["add", "multiply"])
    rng = np.random.default_rng(0)
    feed = {k: rng.uniform(0.5, 2, (8, 8)).astype("float32") for k in "xyz"}
    np.testing.assert_array_equal(_run(out, **feed), _run(mod, **feed))


def _region_outputs(mod):
    """The number of values each partition returns (a tuple's fields, else 1)."""
    return sorted(
        len(fn.body.fields) if isinstance(fn.body, relay.Tuple) else 1
        for fn in mod.functions.values()
        if "Compiler" in fn.attrs
    )


def test_duplicate_outputs(targets):
    """abs feeds three host ops: the partition returns it once, main reads it three times."""
    targets("acc_dup", ["abs"])
    data = _v("data", (10, 10))
    x = relay.abs(data)
    mod = relay.IRModule.from_expr(relay.Tuple([relay.nn.relu(x), relay.tanh(x), relay.log(x)]))
    out = _partition(mod, ["acc_dup"])
    assert _partition_ops(out) == [("abs",)] and _region_outputs(out) == [1]
    feed = {"data": np.linspace(-2, 2, 100, dtype="float32").reshape(10, 10)}
    for got, want in zip(_run(out, **feed), _run(mod, **feed)):
        np.testing.assert_array_equal(got, want)


def test_duplicate_merge_and_tuplegetitem(targets):
    """batch_norm and relu in one region; its outputs are relu and batch_norm's mean once each,
    although the mean feeds two host ops."""
    targets("acc_bn", ["nn.batch_norm", "nn.relu"])
    data = _v("data", (10, 10))
    params = [_v(n, (10,)) for n in ("bn_gamma", "bn_beta", "bn_mean", "bn_var")]
    bn = relay.nn.batch_norm(data, *params).astuple()
    mean = relay.TupleGetItem(bn, 1)
    body = relay.Tuple(
        [relay.nn.relu(relay.TupleGetItem(bn, 0)), relay.tanh(mean), relay.log(mean)]
    )
    mod = relay.IRModule.from_expr(relay.Function([data, *params], body))
    out = _partition(mod, ["acc_bn"])
    assert _partition_ops(out) == [("nn.batch_norm", "nn.relu")]
    assert _region_outputs(out) == [2]
    rng = np.random.default_rng(1)
    feed = {
        "data": rng.standard_normal((10, 10)).astype("float32"),
        "bn_gamma": rng.uniform(0.5, 1.5, 10).astype("float32"),
        "bn_beta": rng.standard_normal(10).astype("float32"),
        "bn_mean": rng.uniform(0.5, 1.5, 10).astype("float32"),
        "bn_var": rng.uniform(0.5, 1.5, 10).astype("float32"),
    }
    for got, want in zip(_run(out, **feed), _run(mod, **feed)):
        np.testing.assert_array_equal(got, want)


def test_flatten_tuple_output(targets):
    """split and abs in one region: the split's fields and abs leave it as one flat tuple; the
    host concatenates the fields and applies relu. (TVM's ``relay.concatenate(split, 0)`` reads
    the TupleWrapper's items, so the graph is written with them.)"""
    targets("acc_flat", ["split", "abs"])
    a = relay.var("a", shape=(10, 10), dtype="float32")
    parts = relay.split(a, indices_or_sections=2).astuple()
    first = relay.abs(relay.TupleGetItem(parts, 0))
    items = [relay.TupleGetItem(parts, k) for k in range(2)]
    body = relay.Tuple([relay.concatenate(items, axis=0), relay.nn.relu(first)])
    mod = relay.IRModule.from_expr(relay.Function([a], body))
    out = _partition(mod, ["acc_flat"])
    assert _partition_ops(out) == [("abs", "split")] and _region_outputs(out) == [3]
    feed = {"a": np.linspace(-3, 3, 100, dtype="float32").reshape(10, 10)}
    for got, want in zip(_run(out, **feed), _run(mod, **feed)):
        np.testing.assert_array_equal(got, want)


def test_constant_tuples(targets):
    """qnn.concatenate on the target: its scale and zero-point tuples of constants stay inside
    the partition as tuples, and the output parameters as constants."""
    targets("const_tuples", ["qnn.concatenate"])
    a = relay.var("a", shape=(10, 10), dtype="uint8")
    b = relay.var("b", shape=(10, 10), dtype="uint8")
    one, zero = relay.const(np.int32(1)), relay.const(np.float32(0.5))
    con = relay.qnn.concatenate(
        relay.Tuple([relay.abs(a), b]),
        relay.Tuple([zero, zero]),
        relay.Tuple([one, one]),
        zero,
        one,
        axis=1,
    )
    mod = relay.IRModule.from_expr(relay.Function([a, b], con))
    out = _partition(mod, ["const_tuples"])
    (fn,) = [f for f in out.functions.values() if "Compiler" in f.attrs]
    concat = fn.body
    assert concat.op.name == "qnn.concatenate"
    assert [type(x).__name__ for x in concat.args[1:]] == ["Tuple", "Tuple", "Constant", "Constant"]
    rng = np.random.default_rng(3)
    feed = {k: rng.integers(0, 256, (10, 10), dtype=np.uint8) for k in "ab"}
    np.testing.assert_array_equal(_run(out, **feed), _run(mod, **feed))


def test_constant_propagation(targets):
    """A constant bound into main stays inside the partition that reads it: the partition
    takes only y (TVM's test annotates by hand with its AllowedListAnnotator)."""
    targets("acc_cp", ["add"])
    ones = np.ones((8, 8), "float32")
    y = _v("y", (8, 8))
    mod = relay.IRModule.from_expr(relay.Function([y], relay.log(relay.add(relay.const(ones), y))))
    out = _partition(mod, ["acc_cp"])
    (fn,) = [f for f in out.functions.values() if "Compiler" in f.attrs]
    assert len(fn.params) == 1 and isinstance(fn.body.args[0], relay.Constant)
    feed = {"y": np.random.default_rng(0).random((8, 8)).astype("float32")}
    np.testing.assert_array_equal(_run(out, **feed), _run(mod, **feed))
    np.testing.assert_allclose(_run(out, **feed)[0], np.log(ones + feed["y"]), rtol=1e-6)
