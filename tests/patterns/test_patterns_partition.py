"""pattern.partition / partition_table: functions around matches, as Relay's partition."""

from __future__ import annotations

import numpy as np
import pytest
from partita.patterns import (
    PatternError,
    constants,
    dominates,
    is_constant,
    is_op,
    is_tuple,
    partition,
    partition_table,
    wildcard,
)
from pattern_graphs import assert_same_outputs, conv_block, int8_input, module, op, random_int8

from partita.ir import Function, IRModule, TensorType, const, post_order, var
from partita.ir.nodes import Call, Constant, Var

relu, neg, add = op("nn.relu"), op("negative"), op("add")


def composite_calls(expr):
    return [
        n
        for n in post_order(expr, enter_functions=False)
        if isinstance(n, Call) and isinstance(n.op, Function)
    ]


def conv_pattern():
    """[nn.pad] -> qnn.conv2d -> [nn.bias_add] -> qnn.requantize -> [clip]"""
    data = is_op("nn.pad")(wildcard(), is_constant()) | wildcard()
    conv = is_op("qnn.conv2d")(data, is_constant(), *constants(4))
    conv = conv.optional(lambda c: is_op("nn.bias_add")(c, is_constant()))
    out = is_op("qnn.requantize")(conv, *constants(4))
    return out.optional(lambda r: is_op("clip")(r))


def test_partition_wraps_a_match_like_relay():
    x, y = var("x", (1, 4), "float32"), var("y", (1, 4), "float32")
    e = add(relu(x), y)
    out = is_op("add")(is_op("nn.relu")(wildcard()), wildcard()).partition(e, {"Composite": "c"})
    fn = out.op
    assert isinstance(fn, Function) and out.args == (x, y)
    assert dict(fn.attrs) == {"PartitionedFromPattern": "nn.relu_add_", "Composite": "c"}
    assert [p.name_hint for p in fn.params] == ["FunctionVar_0_0", "FunctionVar_0_1"]
    assert all(p.type_annotation == TensorType((1, 4), "float32") for p in fn.params)
    assert out.checked_type == TensorType((1, 4), "float32")


def test_is_constant_weights_stay_inside_wildcard_constants_become_params():
    x = int8_input()
    y = conv_block(x, 4, 8, 1)
    out = partition(conv_pattern(), y, {"Composite": "npu.conv"})
    fn = out.op
    assert fn.attrs["PartitionedFromPattern"] == "qnn.conv2d_nn.bias_add_qnn.requantize_clip_"
    assert out.args == (x,) and len(fn.params) == 1
    inner = [n for n in post_order(fn.body) if isinstance(n, Constant)]
    assert len(inner) == 10  # weight, bias and the eight quantization parameters
    w = const(np.ones((1, 4), np.float32))
    e = add(var("a", (1, 4), "float32"), w)
    wrapped = is_op("add")(wildcard(), wildcard()).partition(e)
    assert wrapped.args[1] is w and len(wrapped.op.params) == 2


def test_constants_no_leaf_pattern_binds_stay_inside():
    """The fields of an is_tuple(None) tuple are bound by no pattern: a constant among them
    stays inside the function (like is_constant()), a variable becomes a parameter."""
    from partita.ir import Tuple

    a, b = var("a", (1, 2), "float32"), var("b", (1, 3), "float32")
    c = const(np.ones((1, 4), np.float32))
    e = op("concatenate")(Tuple([a, c, b]), axis=1)
    out = is_op("concatenate")(is_tuple(None)).partition(e)
    assert out.args == (a, b) and len(out.op.params) == 2
    assert any(n is c for n in post_order(out.op.body))
    assert_same_outputs(
        module(e),
        module(out),
        {"a": np.ones((1, 2), np.float32), "b": np.zeros((1, 3), np.float32)},
    )


def test_partition_keeps_the_bits_and_the_spans():
    x = int8_input()
    mod = module(conv_block(conv_block(x, 4, 8, 1, pad=True), 8, 4, 2))
    out = partition(conv_pattern(), mod, {"Composite": "npu.conv"})
    calls = composite_calls(out["main"].body)
    assert len(calls) == 2
    assert [c.span.index for c in calls] == [1, 2]
    assert calls[0].args == (x,) and calls[1].args == (calls[0],)
    assert calls[0].op.attrs["PartitionedFromPattern"].startswith("nn.pad_qnn.conv2d_")
    for _ in range(2):
        assert_same_outputs(mod, out, {"x": random_int8((1, 6, 6, 4))})


def test_overlapping_matches_are_never_both_wrapped():
    x = var("x", (1, 4), "float32")
    e = relu(relu(relu(relu(relu(x)))))
    out = is_op("nn.relu")(is_op("nn.relu")(wildcard())).partition(e)
    calls = composite_calls(out)
    assert len(calls) == 2  # the two outermost pairs; the fifth relu stays alone
    assert out is calls[-1] and calls[0].args[0].op.name == "nn.relu"


def test_interior_values_used_outside_are_never_wrapped():
    x = var("x", (1, 4), "float32")
    r = relu(x)
    e = add(neg(r), r)
    out = is_op("negative")(is_op("nn.relu")(wildcard())).partition(e)
    assert composite_calls(out) == []
    both = is_op("add")(is_op("negative")(wildcard()), wildcard()).partition(e)
    assert len(composite_calls(both)) == 1  # r is an input of this one, which is fine


def test_check_refuses_and_frees_the_nodes():
    x = var("x", (1, 4), "float32")
    e = relu(neg(x))
    seen = []

    def refuse(root):
        seen.append(root)
        return False

    big = is_op("nn.relu")(is_op("negative")(wildcard()))
    small = is_op("negative")(wildcard())
    out = partition_table([(big, {"Composite": "big"}, refuse), (small, {"Composite": "small"})], e)
    assert seen == [e]
    assert out.op.name == "nn.relu" and out.args[0].op.attrs["Composite"] == "small"
    assert (
        partition(big, e, check=lambda root: True).op.attrs["PartitionedFromPattern"]
        == "negative_nn.relu_"
    )


def test_first_table_entry_wins():
    x = var("x", (1, 4), "float32")
    e = relu(x)
    p = is_op("nn.relu")(wildcard())
    out = partition_table([(p, {"Composite": "a"}), (p, {"Composite": "b"})], e)
    assert out.op.attrs["Composite"] == "a"


def test_partition_never_enters_composites():
    x = var("x", (1, 4), "float32")
    p = is_op("nn.relu")(wildcard())
    once = partition(p, relu(x), {"Composite": "a"})
    twice = partition(p, once, {"Composite": "b"})
    assert twice is once


def test_partition_of_a_module_types_every_function():
    x = var("x", (1, 4), "float32")
    mod = IRModule({"main": Function([x], relu(neg(x)))})
    out = partition(is_op("nn.relu")(wildcard()), mod, {"Composite": "r"})
    body = out["main"].body
    assert isinstance(body.op, Function) and body.checked_type == TensorType((1, 4), "float32")


def test_untyped_graphs_get_untyped_params():
    x = var("x")
    out = partition(is_op("nn.relu")(wildcard()), relu(x))
    assert out.op.params[0].type_annotation is None and isinstance(out.args[0], Var)


def test_bad_entries_fail_clearly():
    x = var("x", (1, 4), "float32")
    with pytest.raises(PatternError, match="needs a pattern"):
        partition_table([("relu", None, None)], relu(x))
    with pytest.raises(PatternError, match="check must be callable"):
        partition(is_op("nn.relu")(wildcard()), relu(x), check=3)

    def broken(root):
        raise KeyError("boom")

    with pytest.raises(PatternError, match="partition check broken raised"):
        partition(is_op("nn.relu")(wildcard()), relu(x), check=broken)


def test_a_diamond_is_wrapped_whole():
    x = var("x", (1, 4), "float32")
    c = relu(x)
    out = add(neg(c), op("exp")(c))
    unary = wildcard().has_attr({"kind": "elemwise"})(wildcard())
    p = dominates(is_op("nn.relu")(wildcard()), unary, is_op("add")(wildcard(), wildcard()))
    parted = p.partition(op("multiply")(out, out))
    fn = parted.args[0].op
    assert fn.attrs["PartitionedFromPattern"] == "nn.relu_negative_exp_add_"
    assert parted.args[0].args == (x,)


def test_a_function_pattern_matches_a_composite_by_its_body():
    """FunctionPattern as a callee: a call to a composite whose body is a relu of its parameter;
    the parameter pattern binds the same Var the body uses."""
    from partita.patterns import FunctionPattern

    x = var("x", (1, 4), "float32")
    e = relu(x)
    wrapped = is_op("nn.relu")(wildcard()).partition(e, {"Composite": "c"})
    p = wildcard()
    callee = FunctionPattern([p], is_op("nn.relu")(p))
    assert callee(wildcard()).match(wrapped)
    assert not FunctionPattern([p], is_op("negative")(p))(wildcard()).match(wrapped)
    assert not FunctionPattern([wildcard(), wildcard()], wildcard())(wildcard()).match(wrapped)
    assert "FunctionPattern([wildcard()], is_op('nn.relu')(wildcard()))" in repr(callee)
