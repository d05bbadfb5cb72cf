"""SimplifyInference (batch_norm's inference form), Inline (globals marked Inline=1) and
AlterOpLayout (registered layout hooks), each checked against the interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from same_bits import assert_same_bits, assert_same_outputs

from partita import interpret
from partita.errors import PartitaError
from partita.ir import (
    Call,
    Function,
    GlobalVar,
    IRModule,
    TupleGetItem,
    assert_structural_equal,
    iter_calls,
    var,
)
from partita.ops import get_op
from partita.passes import (
    AlterOpLayout,
    Inline,
    PassContext,
    SimplifyInference,
    register_alter_op_layout,
)
from partita.passes.alter_op_layout import remove_alter_op_layout


def op(name, *args, **attrs):
    return get_op(name)(*args, **attrs)


def _bn_module(shape, axis, **attrs):
    x = var("x", shape)
    stats = [var(n, (shape[axis],)) for n in ("gamma", "beta", "mean", "var")]
    bn = op("nn.batch_norm", x, *stats, axis=axis, **attrs)
    return IRModule.from_expr(Function([x, *stats], op("nn.relu", TupleGetItem(bn, 0))))


def _ops(mod):
    return sorted({c.op.name for c in iter_calls(mod["main"]) if hasattr(c.op, "name")})


def _exact_inputs(shape, axis, seed=0):
    """Values whose every float32 step is exact: short dyadic data and statistics,
    power-of-four variances (their square roots are powers of two)."""
    rng = np.random.default_rng(seed)
    c = shape[axis]
    return {
        "x": (rng.integers(-64, 64, shape) / 8).astype("float32"),
        "gamma": (rng.integers(-8, 8, c) / 4).astype("float32"),
        "beta": (rng.integers(-8, 8, c) / 4).astype("float32"),
        "mean": (rng.integers(-8, 8, c) / 2).astype("float32"),
        "var": (4.0 ** rng.integers(-2, 3, c)).astype("float32"),
    }


@pytest.mark.parametrize("shape, axis", [((1, 4, 3, 3), 1), ((1, 3, 3, 4), 3), ((2, 4), 1)])
def test_batch_norm_becomes_scale_and_shift(shape, axis):
    before = _bn_module(shape, axis, epsilon=0.0)
    after = SimplifyInference()(before)
    assert _ops(after) == sorted(
        ["add", "divide", "multiply", "negative", "nn.relu", "sqrt"]
        + (["expand_dims"] if axis < len(shape) - 1 else [])
    )
    assert_same_outputs(before, after, _exact_inputs(shape, axis))


def test_batch_norm_with_epsilon_is_within_float32_rounding():
    before = _bn_module((1, 8, 4, 4), 1)  # epsilon 1e-5: not exact, a few ULP apart
    after = SimplifyInference()(before)
    feed = _exact_inputs((1, 8, 4, 4), 1, seed=1)
    got, want = interpret(after, feed)[0], interpret(before, feed)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_center_and_scale_off_drop_beta_and_gamma():
    before = _bn_module((1, 4, 2, 2), 1, epsilon=0.0, center=False, scale=False)
    after = SimplifyInference()(before)
    body = after["main"].body.args[0]  # relu(add(multiply(x, scale), shift))
    shift = body.args[1].args[0]
    assert shift.op.name == "multiply"  # -mean * scale, no beta
    assert body.args[0].args[1].args[0].op.name == "divide"  # 1 / sqrt(var), no gamma
    assert_same_outputs(before, after, _exact_inputs((1, 4, 2, 2), 1))


def test_whole_tuple_and_partitions_are_left_alone():
    x = var("x", (1, 4, 2, 2))
    stats = [var(n, (4,)) for n in ("gamma", "beta", "mean", "var")]
    whole = IRModule.from_expr(Function([x, *stats], op("nn.batch_norm", x, *stats)))
    assert_structural_equal(SimplifyInference()(whole), whole)
    inner = _bn_module((1, 4, 2, 2), 1)["main"].with_attr("Compiler", "acc")
    mod = IRModule({"main": whole["main"], "acc_main_0": inner})
    assert SimplifyInference()(mod)["acc_main_0"] is inner


def test_inline_substitutes_plain_functions_and_calls_partitions():
    a, b = var("a", (2, 3)), var("b", (2, 3))
    helper = Function([a], op("nn.relu", op("add", a, a))).with_attr("Inline", 1)
    part = Function([b], op("abs", b)).with_attr("Inline", 1).with_attr("Compiler", "acc")
    x = var("x", (2, 3))
    main = Function([x], Call(GlobalVar("part"), [Call(GlobalVar("helper"), [x])]))
    before = IRModule({"main": main, "helper": helper, "part": part})
    after = Inline()(before)
    assert list(after.functions) == ["main"]
    outer = after["main"].body
    assert isinstance(outer.op, Function) and outer.op.attrs["Compiler"] == "acc"
    assert outer.args[0].op.name == "nn.relu"  # helper's body, with %a bound to %x
    assert_same_bits(before, after)


def test_inline_keeps_unmarked_recursive_and_uninlinable_callers():
    a = var("a", (2,))
    leaf = Function([a], op("nn.relu", a))  # not marked: stays a global
    c = var("c", (2,))
    mid = Function([c], Call(GlobalVar("leaf"), [c])).with_attr("Inline", 1)
    x = var("x", (2,))
    main = Function([x], Call(GlobalVar("mid"), [x]))
    before = IRModule({"main": main, "mid": mid, "leaf": leaf})
    after = Inline()(before)
    assert sorted(after.functions) == ["leaf", "main", "mid"]  # mid still calls a global
    assert after["main"].body.op == GlobalVar("mid")
    assert_same_bits(before, after)


def test_inline_inlines_callees_first():
    a, c = var("a", (2,)), var("c", (2,))
    leaf = Function([a], op("nn.relu", a)).with_attr("Inline", 1)
    mid = Function([c], op("abs", Call(GlobalVar("leaf"), [c]))).with_attr("Inline", 1)
    x = var("x", (2,))
    before = IRModule({"main": Function([x], Call(GlobalVar("mid"), [x])), "mid": mid,
                       "leaf": leaf})
    after = Inline()(before)
    assert list(after.functions) == ["main"]
    assert [c.op.name for c in iter_calls(after["main"])] == ["nn.relu", "abs"]
    assert_same_bits(before, after)


def test_alter_op_layout_is_the_identity_without_hooks():
    mod = _bn_module((1, 4, 2, 2), 1)
    with PassContext(opt_level=3):
        assert AlterOpLayout()(mod) is mod


def test_alter_op_layout_applies_a_hook_and_checks_its_type():
    x = var("x", (1, 4, 3, 3))
    w = var("w", (5, 4, 1, 1))
    before = IRModule.from_expr(Function([x, w], op("nn.relu", op("nn.conv2d", x, w))))

    def to_nhwc(attrs, inputs, types, out_type):
        data = op("transpose", inputs[0], axes=(0, 2, 3, 1))
        weight = op("transpose", inputs[1], axes=(2, 3, 1, 0))
        conv = op("nn.conv2d", data, weight, data_layout="NHWC", kernel_layout="HWIO")
        return op("transpose", conv, axes=(0, 3, 1, 2))

    register_alter_op_layout("nn.conv2d", to_nhwc)
    try:
        with PassContext(opt_level=3):
            after = AlterOpLayout()(before)
        convs = [c for c in iter_calls(after["main"]) if c.op.name == "nn.conv2d"]
        assert [c.attrs.data_layout for c in convs] == ["NHWC"]
        feed = {"x": (np.arange(36).reshape(1, 4, 3, 3) / 4).astype("float32"),
                "w": (np.arange(20).reshape(5, 4, 1, 1) / 8).astype("float32")}
        assert_same_outputs(before, after, feed)
        wrong = lambda *a: op("transpose", a[1][0], axes=(0, 2, 1, 3))  # noqa: E731
        register_alter_op_layout("nn.conv2d", wrong)
        with PassContext(opt_level=3), pytest.raises(PartitaError, match="nn.conv2d hook changed"):
            AlterOpLayout()(before)
    finally:
        remove_alter_op_layout("nn.conv2d")
    with pytest.raises(PartitaError, match="nn.conv9"):
        register_alter_op_layout("nn.conv9", to_nhwc)
