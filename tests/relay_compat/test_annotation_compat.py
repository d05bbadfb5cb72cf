"""TVM's compiler_begin/compiler_end behaviours through partita.relay: AnnotateTarget and
MergeCompilerRegions print them, MergeCompilerRegions and PartitionGraph read hand-annotated
graphs. Names mirror TVM v0.16's tests; expected graphs are written the way TVM's are."""

from __future__ import annotations

import numpy as np
import pytest
from relay_helpers import AllowedListAnnotator
from relay_helpers import module as _module
from relay_helpers import set_func_attr as _set_func_attr

from partita import relay
from partita.errors import PartitaError
from partita.relay import transform
from partita.relay.op.annotation import compiler_begin, compiler_end

cb, ce = compiler_begin, compiler_end


def _mod(body, params=None):
    fn = relay.Function(params, body) if params is not None else body
    return relay.IRModule.from_expr(fn)


def _typed(mod):
    return transform.InferType()(mod)


def _v(name, shape=(10, 10), dtype="float32"):
    return relay.var(name, shape=shape, dtype=dtype)


def test_multiple_ends(targets):
    targets("test", ["nn.relu"])
    x = _v("x")
    r = relay.nn.relu(x)
    before = _mod(relay.add(relay.abs(r), relay.abs(r)), [x])

    x = _v("x")
    r = relay.nn.relu(cb(x, "test"))
    a_1 = relay.abs(cb(ce(r, "test"), "default"))
    a_2 = relay.abs(cb(ce(r, "test"), "default"))
    out = relay.add(cb(ce(a_1, "default"), "default"), cb(ce(a_2, "default"), "default"))
    after = _mod(ce(out, "default"), [x])

    for non_call_ops in (False, True):
        result = transform.AnnotateTarget("test", non_call_ops)(before)
        relay.assert_structural_equal(result, _typed(after))


def test_type_propagation(targets):
    seen = []

    def relu(expr):
        seen.append(expr.args[0].checked_type.dtype)
        return expr.args[0].checked_type.dtype == "float32"

    targets("test_type_propagation", ["nn.relu"], relu)
    x = _v("x")
    before = _mod(relay.nn.relu(relay.nn.relu(x)), [x])
    for non_call_ops in (False, True):
        assert transform.AnnotateTarget("test_type_propagation", non_call_ops)(before)
    assert seen and set(seen) == {"float32"}


def test_tuple(targets):
    t = "test_tuple"
    targets(t, ["nn.relu", "concatenate"])
    x, y = _v("x", (10, 5)), _v("y", (10, 5))
    before = _mod(relay.concatenate((relay.nn.relu(x), relay.nn.relu(y)), axis=1), [x, y])

    def after(non_call_ops):
        x, y = _v("x", (10, 5)), _v("y", (10, 5))
        e_1 = ce(relay.nn.relu(cb(x, t)), t)
        e_2 = ce(relay.nn.relu(cb(y, t)), t)
        tup = relay.Tuple([e_1, e_2])
        if non_call_ops:
            tup = ce(relay.Tuple([cb(e_1, t), cb(e_2, t)]), t)
        return _mod(ce(relay.concatenate(cb(tup, t), axis=1), t), [x, y])

    for non_call_ops in (False, True):
        result = transform.AnnotateTarget(t, non_call_ops)(before)
        relay.assert_structural_equal(result, _typed(after(non_call_ops)))


def _add_relu_composite():
    in_1, in_2 = _v("in_1"), _v("in_2")
    fn = relay.Function([in_1, in_2], relay.nn.relu(relay.add(in_1, in_2)))
    return fn.with_attr("Composite", "test.add_relu")


def test_composite_function(targets):
    targets("test", [])
    a, b = _v("a"), _v("b")
    before = _mod(relay.Call(_add_relu_composite(), [a, b]), [a, b])
    a, b = _v("a"), _v("b")
    r = relay.Call(_add_relu_composite(), [cb(a, "test"), cb(b, "test")])
    after = _mod(ce(r, "test"), [a, b])
    relay.assert_structural_equal(transform.AnnotateTarget("test")(before), _typed(after))


@pytest.mark.parametrize("get_item", [True, False])
@pytest.mark.parametrize("non_call_ops", [False, True])
def test_ends_with_tuple(targets, get_item, non_call_ops):
    t = "clip"
    targets(t, ["clip"])

    def model(expected):
        a_ = _v("a", (1, 16, 16, 4), "uint8")
        a = cb(a_, t) if expected else a_
        z = relay.clip(a, a_min=0, a_max=255)

        def branch(lo, hi):
            src = cb(ce(z, t), t) if expected else z
            out = relay.clip(src, a_min=lo, a_max=hi)
            if expected:
                out = ce(out, t)
                out = cb(out, t) if non_call_ops else out
            return out

        b = branch(0, 15)
        c = branch(16, 31)
        tup = relay.Tuple((c, b))
        if expected and non_call_ops:
            tup = ce(tup, t)
        if not get_item:
            return _mod(tup, [a_])
        src = cb(tup, t) if expected and non_call_ops else tup
        item = relay.TupleGetItem(src, 1)
        return _mod(ce(item, t) if expected and non_call_ops else item, [a_])

    result = transform.AnnotateTarget(t, non_call_ops)(model(False))
    relay.assert_structural_equal(result, _typed(model(True)))


def test_diamond_graph_fanouts():
    """Three supported ops around an unsupported one: merging all three would make the two
    regions depend on each other."""
    data = _v("data")
    o_1 = relay.abs(cb(data, "test"))
    o_2 = relay.nn.relu(cb(ce(o_1, "test"), "test"))
    x = relay.tanh(cb(ce(o_1, "test"), "default"))
    o_3 = relay.add(cb(ce(o_2, "test"), "test"), cb(ce(x, "default"), "test"))
    before = _mod(ce(o_3, "test"), [data])

    data = _v("data")
    o_1 = relay.abs(cb(data, "test"))
    o_2 = relay.nn.relu(o_1)
    x = relay.tanh(cb(ce(o_1, "test"), "default"))
    o_3 = relay.add(cb(ce(o_2, "test"), "test"), cb(ce(x, "default"), "test"))
    expected = _mod(ce(o_3, "test"), [data])

    result = transform.MergeCompilerRegions()(_typed(before))
    relay.assert_structural_equal(result, _typed(expected))
    feed = {"data": np.linspace(-2, 2, 100, dtype="float32").reshape(10, 10)}
    np.testing.assert_array_equal(relay.interpret(result, feed), relay.interpret(before, feed))


def test_merge_annotates_the_rest_default():
    """What no region holds becomes a "default" region (TVM's MergeCompilerRegions)."""
    data = _v("data")
    o_1 = relay.abs(cb(data, "test"))
    before = _mod(relay.tanh(ce(o_1, "test")), [data])
    data = _v("data")
    o_1 = relay.abs(cb(data, "test"))
    expected = _mod(ce(relay.tanh(cb(ce(o_1, "test"), "default")), "default"), [data])
    relay.assert_structural_equal(transform.MergeCompilerRegions()(before), _typed(expected))


def test_example_graph():
    """The RFC's example: adds on "test", subtracts on "default"; regions merge as far as no
    cycle forms, default ones included."""
    ins = [_v(f"in_{k}") for k in range(1, 11)]
    i = dict(zip(range(1, 11), ins))
    node0 = relay.add(cb(i[1], "test"), cb(i[2], "test"))
    node1 = relay.add(cb(i[3], "test"), cb(i[4], "test"))
    node2 = relay.add(cb(ce(node0, "test"), "test"), cb(ce(node1, "test"), "test"))
    node3 = relay.subtract(cb(i[5], "default"), cb(i[6], "default"))
    node4 = relay.subtract(cb(i[7], "default"), cb(ce(node3, "default"), "default"))
    node5 = relay.add(cb(ce(node2, "test"), "test"), cb(ce(node4, "default"), "test"))
    node6 = relay.subtract(cb(i[8], "default"), cb(ce(node5, "test"), "default"))
    node7 = relay.add(cb(i[9], "test"), cb(ce(node5, "test"), "test"))
    node8 = relay.add(cb(ce(node6, "default"), "test"), cb(ce(node7, "test"), "test"))
    node9 = relay.add(cb(i[10], "test"), cb(ce(node8, "test"), "test"))
    annotated = _mod(ce(node9, "test"), ins)

    ins = [_v(f"in_{k}") for k in range(1, 11)]
    i = dict(zip(range(1, 11), ins))
    node0 = relay.add(cb(i[1], "test"), cb(i[2], "test"))
    node1 = relay.add(cb(i[3], "test"), cb(i[4], "test"))
    node2 = relay.add(node0, node1)
    node3 = relay.subtract(cb(i[5], "default"), cb(i[6], "default"))
    node4 = relay.subtract(cb(i[7], "default"), node3)
    node5 = relay.add(node2, cb(ce(node4, "default"), "test"))
    node6 = relay.subtract(cb(i[8], "default"), cb(ce(node5, "test"), "default"))
    node7 = relay.add(cb(i[9], "test"), node5)
    node8 = relay.add(cb(ce(node6, "default"), "test"), cb(ce(node7, "test"), "test"))
    node9 = relay.add(cb(i[10], "test"), node8)
    expected = _mod(ce(node9, "test"), ins)

    result = transform.MergeCompilerRegions()(annotated)
    relay.assert_structural_equal(result, _typed(expected))


def test_multiple_outputs():
    """A hand-annotated region with three outputs (relu and two of batch_norm's results)."""
    shapes = {
        "data": (1, 3, 224, 224),
        "weight": (16, 3, 3, 3),
        "bn_gamma": (16,),
        "bn_beta": (16,),
        "bn_mean": (16,),
        "bn_var": (16,),
    }

    def conv_bn(args):
        conv = relay.nn.conv2d(args[0], args[1], padding=(1, 1))
        bn = relay.nn.batch_norm(conv, *args[2:]).astuple()
        return relay.nn.relu(relay.TupleGetItem(bn, 0)), bn

    params = [_v(n, s) for n, s in shapes.items()]
    relu, bn = conv_bn([cb(p, "test_target") for p in params])
    mean = relay.abs(ce(relay.TupleGetItem(bn, 1), "test_target"))
    var = relay.abs(ce(relay.TupleGetItem(bn, 2), "test_target"))
    mod = _mod(relay.Tuple((ce(relu, "test_target"), mean, var)), params)

    inner = [_v(f"test_target_0_i{k}", s) for k, s in enumerate(shapes.values())]
    relu0, bn0 = conv_bn(inner)
    body0 = relay.Tuple((relu0, relay.TupleGetItem(bn0, 1), relay.TupleGetItem(bn0, 2)))
    name = "tvmgen_default_test_target_main_0"
    fn0 = _set_func_attr(relay.Function(inner, body0), "test_target", name)
    params = [_v(n, s) for n, s in shapes.items()]
    out = relay.Call(relay.GlobalVar(name), params)
    items = [relay.TupleGetItem(out, k) for k in range(3)]
    main = relay.Function(params, relay.Tuple((items[0], relay.abs(items[1]), relay.abs(items[2]))))
    expected = _module({"main": main, name: fn0})

    relay.assert_structural_equal(transform.PartitionGraph()(mod), expected)


def test_mixed_single_multiple_outputs():
    data = _v("data")
    o_1 = relay.abs(cb(data, "test_target"))
    o_2 = relay.nn.relu(o_1)
    x = relay.tanh(ce(o_1, "test_target"))
    o_3 = relay.add(cb(ce(o_2, "test_target"), "test_target"), cb(x, "test_target"))
    mod = _typed(_mod(ce(o_3, "test_target"), [data]))

    p = _v("test_target_0_i0")
    f1_o_1 = relay.abs(p)
    name1 = "tvmgen_default_test_target_main_0"
    fn1 = _set_func_attr(
        relay.Function([p], relay.Tuple((relay.nn.relu(f1_o_1), f1_o_1))), "test_target", name1
    )
    p3, p4 = _v("test_target_1_i0"), _v("test_target_1_i1")
    name0 = "tvmgen_default_test_target_main_1"
    fn0 = _set_func_attr(relay.Function([p3, p4], relay.add(p3, p4)), "test_target", name0)
    data = _v("data")
    both = relay.Call(relay.GlobalVar(name1), [data])
    x = relay.tanh(relay.TupleGetItem(both, 1))
    last = relay.Call(relay.GlobalVar(name0), [relay.TupleGetItem(both, 0), x])
    main = relay.Function([data], last)
    expected = _module({"main": main, name1: fn1, name0: fn0})

    relay.assert_structural_equal(transform.PartitionGraph()(mod), expected)


def test_constant_propagation():
    ones = np.ones((8, 8), "float32")
    x, y = _v("x", (8, 8)), _v("y", (8, 8))
    fn = relay.Function([x, y], relay.log(relay.add(x, y)))
    fn = relay.build_module.bind_params_by_name(fn, {"x": ones})
    mod = _mod(AllowedListAnnotator(["add"], "ccompiler").visit(fn))
    out = transform.PartitionGraph()(mod)

    y0 = _v("y0", (8, 8))
    name = "tvmgen_default_ccompiler_main_0"
    part = _set_func_attr(relay.Function([y0], relay.add(relay.const(ones), y0)), "ccompiler", name)
    y = _v("y", (8, 8))
    main = relay.Function([y], relay.log(relay.Call(relay.GlobalVar(name), [y])))
    relay.assert_structural_equal(out, _module({"main": main, name: part}))
    feed = {"y": np.random.default_rng(0).random((8, 8)).astype("float32")}
    np.testing.assert_array_equal(relay.interpret(out, feed), relay.interpret(mod, feed))


@pytest.mark.parametrize(
    "ops, partitions, merged_partitions",
    [
        (["subtract", "log", "multiply"], 3, 1),  # TVM's test_same_output_region
        (["subtract", "log"], 2, 2),  # test_different_output_region: siblings never merge
        (["add"], 1, 1),
    ],
)
def test_multiple_use_of_an_output(ops, partitions, merged_partitions):
    """add feeds both log and subtract; each listed op becomes its own partition (TVM's
    AllowedListAnnotator marks single ops, PartitionGraph does not merge); after
    MergeCompilerRegions, regions joined by an edge are one; bits kept."""
    x, y, z = _v("x", (8, 8)), _v("y", (8, 8)), _v("z", (8, 8))
    add = relay.add(x, y)
    fn = relay.Function([x, y, z], relay.multiply(relay.log(add), relay.subtract(add, z)))
    mod = _mod(AllowedListAnnotator(ops, "ccompiler").visit(fn))
    out = transform.PartitionGraph()(mod)
    assert sum("Compiler" in f.attrs for f in out.functions.values()) == partitions
    merged = transform.PartitionGraph()(transform.MergeCompilerRegions()(mod))
    assert sum("Compiler" in f.attrs for f in merged.functions.values()) == merged_partitions
    rng = np.random.default_rng(0)
    feed = {k: rng.uniform(0.5, 2, (8, 8)).astype("float32") for k in "xyz"}
    want = relay.interpret(_mod(fn), feed)
    np.testing.assert_array_equal(relay.interpret(out, feed), want)
    np.testing.assert_array_equal(relay.interpret(merged, feed), want)


def test_a_compiler_end_must_close_its_own_region():
    x = _v("x")
    bad = _mod(ce(relay.abs(cb(x, "a")), "b"), [x])
    with pytest.raises(PartitaError, match=r"compiler_end\('b'\) closes abs.*'a' region"):
        transform.PartitionGraph()(bad)


def test_a_node_cannot_join_two_targets():
    x = _v("x")
    bad = _mod(relay.add(cb(x, "a"), cb(x, "b")), [x])
    with pytest.raises(PartitaError, match="reads regions of two targets, 'a' and 'b'"):
        transform.PartitionGraph()(bad)


def test_free_vars_zeros():
    """A call with no inputs on the host is left bare."""
    before = _mod(relay.Function([], relay.zeros(shape=(0,), dtype="float32")))
    result = transform.AnnotateTarget("test_free_vars_zeros")(before)
    relay.assert_structural_equal(result, _typed(before))


@pytest.mark.parametrize("non_call_ops", [True, False])
def test_empty_tuple(non_call_ops):
    before = _mod(relay.Function([], relay.Tuple([])))
    result = transform.AnnotateTarget("test_empty_tuple", non_call_ops)(before)
    relay.assert_structural_equal(result, _typed(before))


def test_an_unsupported_call_without_inputs_feeds_a_region_bare(targets):
    """zeros() on the host feeding an accelerator op: the op's begin wraps it, no end."""
    targets("test_zeros_feed", ["add"])
    x = _v("x")
    before = _mod(relay.add(x, relay.zeros(shape=(10, 10), dtype="float32")), [x])
    x = _v("x")
    z = relay.zeros(shape=(10, 10), dtype="float32")
    after = _mod(
        ce(relay.add(cb(x, "test_zeros_feed"), cb(z, "test_zeros_feed")), "test_zeros_feed"), [x]
    )
    result = transform.AnnotateTarget("test_zeros_feed")(before)
    relay.assert_structural_equal(result, _typed(after))
    out = transform.PartitionGraph()(result)
    feed = {"x": np.ones((10, 10), "float32")}
    np.testing.assert_array_equal(relay.interpret(out, feed), relay.interpret(before, feed))


def test_extern_opt():
    """TVM's relay.ext.<target>.optimize hook runs on each partition of its target: here
    FoldConstant folds the partition's add of two bound constants into one constant."""

    def optimize(mod):
        return transform.FoldConstant()(mod)

    relay.register_func("relay.ext.test_target.optimize", optimize, override=True)
    try:
        x = _v("x", (2, 2))
        y0, y1 = _v("y0", (2, 2)), _v("y1", (2, 2))
        z = relay.add(cb(y0, "test_target"), cb(y1, "test_target"))
        fn = relay.Function([x, y0, y1], relay.multiply(ce(z, "test_target"), x))
        c = np.ones((2, 2), "float32")
        fn = relay.build_module.bind_params_by_name(fn, {"y0": c, "y1": c})
        out = transform.PartitionGraph()(_typed(_mod(fn)))
        body = out["tvmgen_default_test_target_main_0"].body
        assert isinstance(body, relay.Constant)
        np.testing.assert_allclose(np.asarray(body.data), np.full((2, 2), 2.0))
        feed = {"x": np.arange(4, dtype="float32").reshape(2, 2)}
        np.testing.assert_array_equal(relay.interpret(out, feed)[0], feed["x"] * 2)
    finally:
        from partita.relay.registry import remove_global_func

        remove_global_func("relay.ext.test_target.optimize")
