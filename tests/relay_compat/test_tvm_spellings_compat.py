"""Relay spellings partita.relay gives as TVM does (issue 27): each test pins one name or
behaviour TVM's own tests and BYOC modules use, with partita's stricter form beside it where
partita.patterns keeps one."""

from __future__ import annotations

import numpy as np
import partita.patterns as pp
import pytest
from partita.patterns.pattern import PatternError

from partita import relay
from partita.relay import analysis, transform
from partita.relay.dataflow_pattern import is_op, is_tuple, is_var, wildcard


def _v(name, shape=(2, 2), dtype="float32"):
    return relay.var(name, shape=shape, dtype=dtype)


def test_op_namespaces_as_tvm_spells_them():
    x = _v("x")
    assert relay.op.nn is relay.nn and relay.op.image is relay.image
    assert relay.structural_equal(relay.op.nn.relu(x), relay.nn.relu(x))
    t = relay.Tuple([x, x])
    assert relay.structural_equal(relay.op._make.concatenate(t, 0), relay.concatenate(t, 0))
    assert isinstance(relay.nn.relu(x).op, relay.op.Op)  # tvm.ir.Op
    assert relay.nn.relu(x).type_args == ()
    # Relay's Call(op, args, attrs, type_args)
    call = relay.clip(x, 0.0, 1.0)
    again = relay.Call(call.op, call.args, call.attrs, call.type_args)
    assert relay.structural_equal(call, again)


def test_analysis_vars():
    x, y = _v("x"), _v("y")
    p = relay.var("p", shape=(2, 2))
    inner = relay.Function([p], relay.nn.relu(p))
    body = relay.add(inner(x), y)
    assert analysis.free_vars(body) == [x, y]
    assert analysis.bound_vars(body) == [p]
    assert set(map(id, analysis.all_vars(body))) == {id(x), id(y), id(p)}
    assert analysis.free_type_vars(body) == []


def test_expression_operators_build_relay_ops():
    x, y = _v("x"), _v("y")
    assert (x < y).op.name == "less" and (x > y).op.name == "greater"
    assert (-x).op.name == "negative"
    assert (2.0 * x).op.name == "multiply" and (1.0 + x).op.name == "add"
    a = np.array([[1, 5], [3, 2]], "float32")
    b = np.array([[2, 2], [2, 2]], "float32")
    mod = relay.IRModule.from_expr(relay.Tuple([x < y, x > y, -x]))
    lt, gt, neg = relay.interpret(mod, [a, b])
    np.testing.assert_array_equal(lt, a < b)
    np.testing.assert_array_equal(gt, a > b)
    np.testing.assert_array_equal(neg, -a)


def test_tuple_holds_an_op_and_indexes_like_relay():
    x, y = relay.var("x"), relay.var("y")
    add = relay.op.op.get("add")
    tup = relay.expr.Tuple((x, y, add))
    assert len(tup) == 3 and tup[2] is add and list(tup) == [x, y, add]
    assert bool(relay.Tuple([]))  # a node is true even when empty
    assert is_tuple((is_var("x"), wildcard(), is_op("add"))).match(tup)


def test_is_var_name_is_the_variable_name():
    assert is_var("x").name == "x"
    assert pp.is_var("x").name is None and pp.is_var("x").var_name == "x"  # partita's capture slot
    assert is_var("x").match(relay.var("x")) and not is_var("x").match(relay.var("y"))


def test_relay_is_op_never_matches_where_partita_refuses():
    x = _v("x")
    clip = relay.clip(x, 0.0, 6.0)
    with pytest.raises(PatternError, match="clip takes 1 arguments"):
        pp.is_op("clip")(pp.wildcard(), pp.wildcard(), pp.wildcard())
    assert not is_op("clip")(wildcard(), wildcard(), wildcard()).match(clip)
    assert is_op("clip")(wildcard()).match(clip)
    with pytest.raises(Exception, match="nn.conv2d_backward_weight"):
        pp.is_op("nn.conv2d_backward_weight")  # an op partita lacks (TVM training ops)
    either = is_op("nn.conv2d_backward_weight")(wildcard(), wildcard()) | is_op("clip")(wildcard())
    assert either.match(clip)  # one unknown op does not stop the alternation
    assert not is_op("clip")(wildcard()).has_attr({"no_such_attr": 1}).match(clip)


def test_structural_equal_as_tvm_compares():
    assert relay.structural_equal((1, 8, 8), [1, 8, 8]) and not relay.structural_equal((1,), (2,))
    x = _v("x", (1, 2, 2, 2))
    args = [relay.var(n, shape=(2,)) for n in ("g", "b", "m", "v")]
    a = relay.nn.batch_norm(x, *args, epsilon=float(np.float32(1e-5)))[0]
    b = relay.nn.batch_norm(x, *args, epsilon=1e-5)[0]
    assert relay.structural_equal(a, b)  # float attributes within TVM's 1e-9
    c = relay.nn.batch_norm(x, *args, epsilon=2e-5)[0]
    assert not relay.structural_equal(a, c)


def test_tuple_wrapper_of_multi_output_ops():
    x = _v("x", (4, 2))
    parts = relay.split(x, 2)
    assert isinstance(parts, relay.TupleWrapper) and len(parts) == 2
    first, second = parts
    assert first.index == 0 and second.index == 1 and parts[-1].index == 1
    with pytest.raises(IndexError):
        parts[2]
    cat = relay.concatenate(parts, 0)  # TVM lists the items
    assert [f.index for f in cat.args[0].fields] == [0, 1]
    data = np.arange(8, dtype="float32").reshape(4, 2)
    out = relay.interpret(relay.IRModule.from_expr(cat), [data])[0]
    np.testing.assert_array_equal(out, data)
    bn = relay.nn.batch_norm(_v("d", (1, 2)), *[relay.var(n, shape=(2,)) for n in "gbmv"])
    assert len(bn) == 3 and bn.astuple().op.name == "nn.batch_norm"


def test_constant_data_numpy_and_attrs_as_a_dict():
    c = relay.const(np.array([1, 2], "int8"))
    assert isinstance(c.data.numpy(), np.ndarray) and type(c.data.numpy()) is np.ndarray
    np.testing.assert_array_equal(c.data.asnumpy(), [1, 2])
    assert type(c.data + 1) is np.ndarray  # arithmetic gives plain numpy
    call = relay.nn.pad(_v("x", (1, 2)), relay.const(0.0), pad_width=((0, 0), (1, 1)))
    assert call.attrs["pad_width"] == ((0, 0), (1, 1))
    assert dict(call.attrs) == {"pad_width": ((0, 0), (1, 1)), "pad_mode": "constant"}
    assert call.attrs.get("nope", 3) == 3
    with pytest.raises(KeyError, match="nope"):
        call.attrs["nope"]


def test_infer_type_types_and_annotates_untyped_composite_params():
    x = _v("x")
    p = relay.var("p")  # no type: Relay infers it from the call
    fn = relay.Function([p], relay.nn.relu(p)).with_attr("Composite", "c")
    mod = transform.InferType()(relay.IRModule.from_expr(relay.Function([x], fn(x))))
    inner = mod["main"].body.op
    assert inner.params[0].type_annotation == relay.TensorType((2, 2), "float32")
    assert mod["main"].body.checked_type == relay.TensorType((2, 2), "float32")
    assert transform.InferTypeLocal(relay.nn.relu(x)) == relay.TensorType((2, 2), "float32")


def test_parse_types_the_module():
    mod = relay.parse(
        """
        #[version = "0.0.5"]
        def @main(%x: Tensor[(2, 2), float32]) {
          %0 = fn (%p) { nn.relu(%p) };
          %0(%x)
        }
        """
    )
    assert mod["main"].body.op.params[0].type_annotation == relay.TensorType((2, 2), "float32")


def test_function_pass_and_module_pass_decorators():
    seen = []

    @transform.function_pass(opt_level=0)
    class Doubler:
        def __init__(self, factor):
            self.factor = factor

        def transform_function(self, func, mod, ctx):
            seen.append(func.attrs.get("Compiler"))
            return func.with_body(relay.multiply(func.body, relay.const(self.factor)))

    @transform.module_pass(opt_level=0)
    def drop_helpers(mod, ctx):
        return transform.RemoveUnusedFunctions()(mod)

    x = _v("x")
    mod = relay.IRModule.from_expr(relay.Function([x], relay.nn.relu(x)))
    out = Doubler(2.0)(mod)
    assert seen == [None] and out["main"].body.op.name == "multiply"
    assert out["main"].checked_type == relay.TensorType((2, 2), "float32")  # InferType ran
    helper = relay.Function([_v("y")], relay.nn.relu(_v("y")))
    assert list(drop_helpers(out.with_function("helper", helper)).functions) == ["main"]


def test_partition_graph_numbers_regions_without_default_ones(targets):
    targets("tvm_names", ["nn.relu"])
    x = _v("x")
    y = relay.nn.relu(relay.abs(x))  # abs stays on the host ("default" annotated)
    mod = transform.InferType()(relay.IRModule.from_expr(relay.Function([x], y)))
    mod = transform.MergeCompilerRegions()(transform.AnnotateTarget("tvm_names")(mod))
    out = transform.PartitionGraph()(mod)
    assert "tvmgen_default_tvm_names_main_0" in out.functions  # TVM's number: no default region
    data = np.array([[-1, 2], [3, -4]], "float32")
    np.testing.assert_array_equal(relay.interpret(out, [data]), relay.interpret(mod, [data]))


def test_get_pattern_table_by_tvm_name():
    from partita.relay.op.contrib import get_pattern_table, register_pattern_table

    @register_pattern_table("toy-table")
    def table():
        return [("toy-table.relu", is_op("nn.relu")(wildcard()))]

    try:
        rows = get_pattern_table("toy-table")
        assert [r[0] for r in rows] == ["toy-table.relu"]
        assert get_pattern_table("no-such-target") is None
    finally:
        from partita.backends import unregister_backend

        unregister_backend("toy_table")


def test_byoc_module_names():
    x = _v("x", (1, 4, 4, 2))
    resize = relay.image.resize2d(x, size=(8, 8), roi=(0, 0, 0, 0), layout="NHWC")
    assert resize.attrs.roi == (0.0, 0.0, 0.0, 0.0)
    with pytest.raises(Exception, match="roi must be four zeros"):
        relay.image.resize2d(x, size=(8, 8), roi=(0, 0, 1, 1), layout="NHWC")
    assert relay.expr.const(2, "int8").data.dtype == np.int8
    y = relay.var("y", shape=(1, 4, 4, 2))
    fn = relay.Function([x, y], relay.add(x, y))
    bound = relay.bind(fn, {y: relay.const(np.ones((1, 4, 4, 2), "float32"))})
    assert [p.name_hint for p in bound.params] == ["x"]
    assert analysis.analysis.free_vars is analysis.free_vars  # relay.analysis.analysis
    mod = relay.IRModule.from_expr(fn)
    assert [g.name_hint for g in mod.get_global_vars()] == ["main"]
    # TVM registers an attribute of any op name: one partita lacks is nothing to place
    lacking = "nn.conv2d_backward_weight"
    assert relay.register_op_attr(lacking, "target.toy_names", lambda e: True) is None


def test_composites_keep_tvms_names(targets):
    targets("name-check", [])

    x = _v("x")
    table = [("name-check.relu", is_op("nn.relu")(wildcard()))]
    mod = transform.InferType()(relay.IRModule.from_expr(relay.nn.relu(x)))
    merged = transform.MergeComposite(table)(mod)
    assert merged["main"].body.op.attrs["Composite"] == "name-check.relu"
    out = transform.PartitionGraph()(transform.AnnotateTarget("name-check")(merged))
    part = out["tvmgen_default_name_check_main_0"]
    assert part.attrs["Compiler"] == "name-check"
    assert part.body.op.attrs["Composite"] == "name-check.relu"


def test_bind_params_by_name_binds_as_tvm_does():
    from partita.relay.build_module import bind_params_by_name

    x, w = relay.var("x", shape=(2,)), relay.var("w")  # w untyped, as in TVM's tests
    fn = relay.Function([x, w], relay.add(x, w))
    out = bind_params_by_name(fn, {"w": np.ones(2, "float32"), "not_a_param": np.ones(1)})
    assert [p.name_hint for p in out.params] == ["x"]
    np.testing.assert_array_equal(out.body.args[1].data, np.ones(2, "float32"))
    twice = relay.Function([x, relay.var("x", shape=(2,))], x)
    with pytest.raises(Exception, match="two parameters are named 'x'"):
        bind_params_by_name(twice, {"x": np.ones(2, "float32")})


def test_nn_pad_takes_tvms_arguments():
    x = _v("x", (1, 2), "int8")
    tvm_style = relay.nn.pad(x, ((0, 0), (1, 1)), 0)
    own_style = relay.nn.pad(x, relay.const(0), pad_width=((0, 0), (1, 1)))
    assert relay.structural_equal(tvm_style, own_style)
    data = np.array([[3, -4]], "int8")
    out = relay.interpret(relay.IRModule.from_expr(relay.nn.pad(x, ((0, 0), (1, 2)))), [data])
    np.testing.assert_array_equal(out[0], [[0, 3, -4, 0, 0]])


@pytest.mark.parametrize("layout,axis", [("NCHW", 1), ("NHWC", 3), ("NHWC", -1)])
def test_canonicalize_ops_turns_bias_add_into_add(layout, axis):
    shape = (1, 3, 4, 5) if layout == "NCHW" else (1, 4, 5, 3)
    x = relay.var("x", shape=shape, dtype="int32")
    b = relay.const(np.array([7, -2, 100], "int32"))
    mod = relay.IRModule.from_expr(relay.Function([x], relay.nn.bias_add(x, b, axis=axis)))
    with transform.PassContext(opt_level=3):
        out = transform.CanonicalizeOps()(mod)
    text = str(out["main"])
    assert "nn.bias_add" not in text and "add(" in text
    assert ("expand_dims" in text) == (layout == "NCHW")
    data = np.arange(60, dtype="int32").reshape(shape)
    np.testing.assert_array_equal(relay.interpret(out, [data])[0], relay.interpret(mod, [data])[0])
    # at TVM's default opt_level 2 the pass (opt_level 3) does not run
    assert "nn.bias_add" in str(transform.CanonicalizeOps()(mod)["main"])


def test_module_type_definitions_are_empty():
    mod = relay.IRModule.from_expr(relay.Function([], relay.const(1)))
    assert mod.type_definitions == {}
    again = relay.IRModule(mod.functions, mod.type_definitions)  # as TVM code rebuilds modules
    assert list(again.functions) == ["main"]


def test_names_dnnl_py_reads():
    """dnnl.py's legalize_qnn_for_dnnl: node_map.get(p, default=...), Call with TVM's
    (op, args, attrs, type_args, span), qnn.conv2d's attrs.out_layout, concrete_shape."""
    x = _v("x", shape=(1, 4, 4, 3), dtype="int8")
    w = relay.const(np.ones((1, 1, 3, 2), "int8"))
    conv = relay.qnn.op.conv2d(
        x, w, relay.const(0), relay.const(0), relay.const(1.0), relay.const(1.0),
        kernel_size=(1, 1), channels=2, data_layout="NHWC", kernel_layout="HWIO",
    )  # fmt: skip
    assert conv.attrs.out_layout == "" and conv.type_args == ()
    again = relay.Call(conv.op, list(conv.args), conv.attrs, conv.type_args, conv.span)
    assert again.op is conv.op and again.attrs == conv.attrs
    assert transform.InferTypeLocal(conv).concrete_shape == (1, 4, 4, 2)
    seen = {}

    class Grab(relay.dataflow_pattern.DFPatternCallback):
        def __init__(self):
            super().__init__()
            self.other = wildcard()
            self.pattern = is_op("qnn.conv2d")(
                wildcard(), wildcard(), wildcard(), wildcard(), wildcard(), wildcard()
            )

        def callback(self, pre, post, node_map):
            seen["default"] = node_map.get(self.other, default=["absent"])[0]
            seen["root"] = node_map.get(self.pattern)[0]
            return post

    relay.dataflow_pattern.rewrite(Grab(), conv)
    assert seen["default"] == "absent" and seen["root"].op.name == "qnn.conv2d"
