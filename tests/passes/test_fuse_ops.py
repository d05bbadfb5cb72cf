"""FuseOps: Relay's fusion groups (conv + elementwise tails, diamonds, injective chains,
reductions, opaque ops alone), primitive functions and parameters; same bits before and after."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pass_graphs import assert_same_outputs, float_graphs, float_inputs
from same_bits import assert_same_bits

from partita.ir import (
    Call,
    Function,
    GlobalVar,
    IRModule,
    Tuple,
    TupleGetItem,
    const,
    iter_calls,
    var,
)
from partita.ops import get_op
from partita.passes import FuseOps, PassContext


def op(name, *args, **attrs):
    return get_op(name)(*args, **attrs)


def fuse(expr, params, level=2):
    before = IRModule.from_expr(Function(params, expr))
    after = FuseOps(fuse_opt_level=level)(before)
    assert_same_bits(before, after)
    return after


def groups(mod):
    """The op names of each primitive function main calls, in call order."""
    out = []
    for c in iter_calls(mod["main"]):
        if isinstance(c.op, Function) and int(c.op.attrs.get("Primitive", 0)):
            out.append([n.op.name for n in iter_calls(c.op.body)])
    return out


def test_conv_takes_its_elementwise_tail():
    x, w, b = var("x", (1, 3, 6, 6)), var("w", (4, 3, 3, 3)), var("b", (4,))
    y = op("nn.relu", op("nn.bias_add", op("nn.conv2d", x, w), b))
    w2 = var("w2", (4, 4, 1, 1))
    out = fuse(op("nn.conv2d", y, w2), [x, w, b, w2])
    assert groups(out) == [["nn.conv2d", "nn.bias_add", "nn.relu"], ["nn.conv2d"]]
    first = next(c for c in iter_calls(out["main"]) if isinstance(c.op, Function))
    assert [p.name_hint for p in first.op.params] == ["p0", "p1", "p2"]


def test_a_diamond_of_elementwise_ops_is_one_function():
    x = var("x", (2, 3))
    a = op("exp", x)
    out = fuse(op("add", op("log", a), op("sqrt", a)), [x])
    assert groups(out) == [["exp", "log", "sqrt", "add"]]


def test_injective_chains_and_tuples_join_their_consumer():
    x = var("x", (8, 8))
    concat = op("concatenate", Tuple([op("log", x), op("exp", x)]), axis=0)
    out = fuse(op("reshape", concat, newshape=(4, 32)), [x])
    assert groups(out) == [["log", "exp", "concatenate", "reshape"]]


def test_elementwise_ops_fuse_into_a_reduction_not_after_it():
    x = var("x", (4, 5))
    out = fuse(op("nn.relu", op("sum", op("exp", x), axis=(1,))), [x])
    assert groups(out) == [["exp", "sum"], ["nn.relu"]]


def test_opaque_ops_stay_alone_and_level_zero_fuses_nothing():
    x = var("x", (2, 4))
    expr = op("nn.relu", op("nn.softmax", op("exp", x)))
    assert groups(fuse(expr, [x])) == [["exp"], ["nn.softmax"], ["nn.relu"]]
    x = var("x", (2, 3))
    out = fuse(op("log", op("exp", x)), [x], level=0)
    assert groups(out) == [["exp"], ["log"]]
    with PassContext(opt_level=0):  # -1: the context's level
        mod = IRModule.from_expr(Function([x], op("log", op("exp", x))))
        assert groups(FuseOps()(mod)) == [["exp"], ["log"]]


def test_scalar_constants_fuse_and_tensor_constants_are_parameters():
    x = var("x", (2, 3))
    weights = const(np.arange(6, dtype="float32").reshape(2, 3))
    out = fuse(op("multiply", op("add", x, const(1.0)), weights), [x])
    (call,) = [c for c in iter_calls(out["main"]) if isinstance(c.op, Function)]
    assert len(call.op.params) == 2 and call.args[1] is weights
    inner_add = next(n for n in iter_calls(call.op.body) if n.op.name == "add")
    assert inner_add.args[1].data == 1.0


def test_reshape_only_functions_are_marked():
    x = var("x", (2, 3))
    out = fuse(op("nn.softmax", op("reshape", x, newshape=(3, 2))), [x])
    fns = [c.op for c in iter_calls(out["main"]) if isinstance(c.op, Function)]
    assert [dict(f.attrs) for f in fns] == [{"Primitive": 1, "ReshapeOnly": 1}, {"Primitive": 1}]


def test_tuple_items_of_an_opaque_op_and_partitions_are_left_alone():
    x = var("x", (1, 4, 2, 2))
    stats = [var(n, (4,)) for n in ("g", "b", "m", "v")]
    bn = op("nn.batch_norm", x, *stats)
    out = fuse(op("nn.relu", TupleGetItem(bn, 0)), [x, *stats])
    assert groups(out) == [["nn.batch_norm"], ["nn.relu"]]
    a = var("a", (2,))
    part = Function([a], op("exp", op("exp", a))).with_attr("Compiler", "acc")
    mod = IRModule({"main": Function([var("y", (2,))], op("abs", var("y", (2,)))),
                    "acc_main_0": part})
    assert FuseOps(fuse_opt_level=2)(mod)["acc_main_0"] is part


@pytest.mark.parametrize("level", [0, 1, 2])
def test_a_call_of_a_global_is_a_fusion_boundary(level):
    a = var("a", (2,))
    x = var("x", (2,))
    inner = op("log", Call(GlobalVar("g"), [op("exp", x)]))
    mod = IRModule({"main": Function([x], inner), "g": Function([a], op("abs", a))})
    out = FuseOps(fuse_opt_level=level)(mod)
    assert groups(out) == [["exp"], ["log"]]
    assert_same_bits(mod, out)


@settings(max_examples=60, deadline=None)
@given(float_graphs(), st.integers(0, 2**16), st.sampled_from([0, 1, 2]))
def test_random_graphs_compute_the_same_bits(mod, seed, level):
    """Shared values, chains, constants, tuples: every op ends up in exactly one primitive
    function and the interpreter gives the same bits."""
    out = FuseOps(fuse_opt_level=level)(mod)
    assert_same_outputs(mod, out, float_inputs(seed))
    assert not [c for c in iter_calls(out["main"]) if not isinstance(c.op, Function)
                and not any(c is n for f in _fused(out) for n in iter_calls(f.body))]


def _fused(mod):
    return [c.op for c in iter_calls(mod["main"]) if isinstance(c.op, Function)]
