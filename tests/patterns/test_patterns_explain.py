"""explain(): the deepest partial match, the failing sub-pattern, the node and the reason."""

from __future__ import annotations

import numpy as np
import pytest
from partita.patterns import (
    PatternError,
    constants,
    dominates,
    explain,
    is_constant,
    is_op,
    is_var,
    wildcard,
)
from pattern_graphs import conv_block, int8_input, op

from partita.ir import Span, const, var

relu, neg, add, sub = op("nn.relu"), op("negative"), op("add"), op("subtract")


def conv_pattern():
    conv = is_op("qnn.conv2d")(wildcard(), is_constant(), *constants(4))
    conv = is_op("nn.bias_add")(conv, is_constant())
    return is_op("qnn.requantize")(conv, *constants(4)).has_dtype("int8")


def test_a_match_says_so_with_its_captures():
    x = var("x", (1, 4), "float32")
    why = explain(is_op("nn.relu")(wildcard("v")), relu(x))
    assert why and why.captures == {"v": x}
    assert str(why) == "matches at a call to nn.relu with v=%x"


def test_op_differs_names_the_node_and_its_span():
    x = int8_input()
    y = conv_block(x, 4, 4, 7, clip_after=False)
    broken = is_op("qnn.requantize")(
        is_op("nn.conv2d")(wildcard(), wildcard()).optional(
            lambda c: is_op("nn.bias_add")(c, is_constant())
        ),
        *constants(4),
    )
    why = explain(broken, y)
    assert not why
    assert why.reason == "op differs: expected nn.conv2d, got qnn.conv2d"
    assert why.failed_node.op.name == "qnn.conv2d"
    text = str(why)
    assert "(CONV_2D #7 -> 'conv7')" in text
    assert "deepest partial match (2 sub-patterns matched)" in text  # requantize, bias_add
    assert "failed: is_op('nn.conv2d')(wildcard(), wildcard())" in text


def test_not_a_constant():
    x = int8_input()
    y = conv_block(x, 4, 4, 1, clip_after=False)
    why = explain(is_op("qnn.requantize")(is_constant(), *constants(4)), y)
    assert why.reason == "not a constant: got a call to nn.bias_add (CONV_2D #1 -> 'conv1')"
    pattern = is_op("qnn.requantize")(
        wildcard(), is_constant(), is_constant(), is_var(), is_constant()
    )
    why = explain(pattern, y)
    assert why.reason.startswith("not a variable: got Constant")
    assert isinstance(why.failed_pattern, type(is_var()))


def test_attribute_value_differs():
    x = var("x", (1, 4), "float32")
    e = op("clip")(x, a_min=0.0, a_max=6.0, span=Span(2, "RELU6"))
    why = explain(is_op("clip")(wildcard()).has_attr({"a_max": 1.0}), e)
    assert why.reason == "attribute a_max differs: expected 1.0, got 6.0"
    assert "RELU6 #2" in str(why)


def test_dtype_and_shape_differ():
    x = int8_input()
    y = conv_block(x, 4, 4, 1, clip_after=False)
    why = explain(conv_pattern().has_shape((1, 6, 6, 8)), y)
    assert why.reason == "shape differs: expected (1, 6, 6, 8), got (1, 6, 6, 4)"
    u = var("u", (1, 4), "uint8")
    why = explain(wildcard().has_dtype("int8"), relu(u))
    assert why.reason == "dtype differs: expected int8, got uint8"


def test_arity_differs_for_generic_calls():
    x, y = var("x", (1, 4), "float32"), var("y", (1, 4), "float32")
    why = explain(wildcard()(wildcard()), add(x, y))
    assert why.reason == "arity differs: the pattern has 1 arguments, add has 2"


def test_consistency_and_capture_conflicts_are_explained():
    x, y = var("x", (1, 4), "float32"), var("y", (1, 4), "float32")
    w = wildcard()
    why = explain(is_op("subtract")(w, w), sub(x, y))
    assert "already matched %x elsewhere" in why.reason
    why = explain(is_op("subtract")(wildcard("a"), wildcard("a")), sub(x, y))
    assert why.reason == "capture 'a' is already bound to %x"


def test_predicates_and_dominators_are_explained():
    x = var("x", (1, 4), "float32")
    why = explain(wildcard().where(lambda e: False, "never"), x)
    assert why.reason == "where(never) returned False"
    c = relu(x)
    out = add(neg(c), op("exp")(c))
    leak = op("multiply")(out, c)
    p = dominates(
        is_op("nn.relu")(wildcard()),
        is_op("negative")(wildcard()) | is_op("exp")(wildcard()),
        is_op("add")(wildcard(), wildcard()),
    )
    assert explain(p, out)
    why = explain(p, out, within=leak)
    assert "is not dominated: its value reaches a call to multiply" in why.reason


def test_deepest_failure_wins_over_earlier_shallow_ones():
    x = var("x", (1, 4), "float32")
    e = add(relu(neg(x)), const(np.ones((1, 4), np.float32)))
    p = is_op("add")(is_op("nn.relu")(is_op("negative")(is_var("y"))), is_constant())
    why = explain(p, e)
    assert why.reason == "variable name differs: expected %y, got %x"
    assert len(why.partial) == 3


def test_explain_accepts_modules_and_rejects_junk():
    from pattern_graphs import module

    x = var("x", (1, 4), "float32")
    mod = module(relu(x))
    assert explain(is_op("nn.relu")(wildcard()), mod)
    with pytest.raises(PatternError, match="takes a pattern"):
        explain("relu", mod)
