"""Every construct of the pattern language, positive and negative."""

from __future__ import annotations

import numpy as np
import pytest
from partita.patterns import (
    PatternError,
    constants,
    dominates,
    find,
    is_constant,
    is_expr,
    is_op,
    is_tuple,
    is_tuple_get_item,
    is_var,
    match,
    wildcard,
)

from partita.errors import AttrError, OpNotFoundError, PartitaError
from partita.ir import IRModule, Span, TensorType, Tuple, TupleGetItem, TupleType, const, var
from partita.ir.nodes import Call, Function
from partita.ops import get_op

add, sub, mul = get_op("add"), get_op("subtract"), get_op("multiply")
relu, clip, neg = get_op("nn.relu"), get_op("clip"), get_op("negative")


@pytest.fixture
def xy():
    return var("x", (1, 4), "float32"), var("y", (1, 4), "float32")


# ---- construction ----------------------------------------------------------------------------


def test_op_typo_fails_when_the_pattern_is_built():
    with pytest.raises(OpNotFoundError, match="did you mean qnn.conv2d"):
        is_op("qnn.conv2")


def test_wrong_arity_fails_when_the_pattern_is_built():
    with pytest.raises(PatternError, match="nn.relu takes 1 arguments .*gives 2"):
        is_op("nn.relu")(wildcard(), wildcard())


def test_unknown_attribute_fails_when_the_pattern_is_built():
    with pytest.raises(AttrError, match="no attribute 'stride'.*did you mean strides"):
        is_op("nn.conv2d")(wildcard(), wildcard()).has_attr({"stride": (1, 1)})


def test_bad_dtype_and_bad_arguments_fail_at_once():
    with pytest.raises(PartitaError, match="unsupported dtype 'in8'"):
        wildcard().has_dtype("in8")
    with pytest.raises(PatternError, match="must be a pattern"):
        is_op("add")(wildcard(), 3)
    with pytest.raises(PatternError, match="has_shape"):
        wildcard().has_shape("abc")
    with pytest.raises(PatternError, match="has_type"):
        wildcard().has_type("int8")


def test_patterns_are_immutable_and_named_returns_a_copy():
    w = wildcard()
    with pytest.raises(AttributeError):
        w.name = "x"
    n = w.named("x")
    assert n is not w and n.name == "x" and w.name is None


def test_pattern_text_reads_like_its_constructor():
    p = is_op("add")(wildcard("x"), is_constant())
    assert repr(p) == "is_op('add')(wildcard('x'), is_constant())"
    q = (is_op("add") | is_op("subtract"))(wildcard(), is_var("y")).named("s")
    assert repr(q) == "(is_op('add') | is_op('subtract'))(wildcard(), is_var('y')).named('s')"


# ---- leaves ----------------------------------------------------------------------------------


def test_wildcard_var_constant_expr(xy):
    x, y = xy
    c = const(np.ones((1, 4), np.float32))
    assert wildcard().match(x) and wildcard().match(add(x, y))
    assert is_var().match(x) and is_var("x").match(x)
    assert not is_var("y").match(x) and not is_var().match(c)
    assert is_constant().match(c) and not is_constant().match(x)
    e = relu(x)
    assert is_expr(e).match(e)
    assert is_expr(relu(x)).match(e)  # structurally equal
    assert not is_expr(relu(y)).match(e)
    assert is_expr(x).match(x) and not is_expr(var("x", (1, 4), "float32")).match(x)


def test_expressions_inside_calls_become_is_expr(xy):
    x, y = xy
    assert is_op("add")(x, wildcard()).match(add(x, y))
    assert not is_op("add")(x, wildcard()).match(add(relu(x), relu(y)))


# ---- calls, attributes, types ------------------------------------------------------------------


def test_call_checks_op_and_arguments(xy):
    x, y = xy
    assert is_op("subtract")(is_var("x"), is_var("y")).match(sub(x, y))
    assert not is_op("subtract")(is_var("y"), is_var("x")).match(sub(x, y))  # not commutative
    assert not is_op("add")(wildcard(), wildcard()).match(sub(x, y))
    assert not is_op("nn.relu")(wildcard()).match(x)


def test_op_alternatives(xy):
    x, y = xy
    p = (is_op("add") | is_op("subtract"))(wildcard(), wildcard())
    assert p.match(add(x, y)) and p.match(sub(x, y)) and not p.match(mul(x, y))


def test_has_attr_compares_values_with_lists_as_tuples(xy):
    x, _ = xy
    e = clip(x, a_min=0.0, a_max=6.0)
    assert is_op("clip")(wildcard()).has_attr({"a_min": 0, "a_max": 6.0}).match(e)
    assert not is_op("clip")(wildcard()).has_attr({"a_max": 1.0}).match(e)
    d = var("d", (1, 8, 8, 4), "float32")
    pool = get_op("nn.max_pool2d")(d, pool_size=(2, 2), strides=(2, 2), layout="NHWC")
    assert is_op("nn.max_pool2d")(wildcard()).has_attr({"strides": [2, 2]}).match(pool)
    assert not is_op("nn.max_pool2d")(wildcard()).has_attr({"strides": [1, 1]}).match(pool)


def test_has_attr_on_functions_and_ops(xy):
    x, _ = xy
    p = var("p", (1, 4), "float32")
    fn = Function([p], relu(p), attrs={"Composite": "npu.relu"})
    call = Call(fn, [x])
    assert wildcard().has_attr({"Composite": "npu.relu"})(wildcard()).match(call)
    assert not wildcard().has_attr({"Composite": "npu.conv"})(wildcard()).match(call)
    elemwise_call = wildcard().has_attr({"kind": "elemwise"})(wildcard())
    assert elemwise_call.match(relu(x))
    assert not elemwise_call.match(get_op("nn.softmax")(x))


def test_is_op_matches_only_op_calls_not_composites(xy):
    x, _ = xy
    p = var("p", (1, 4), "float32")
    call = Call(Function([p], relu(p), attrs={"Composite": "npu.relu"}), [x])
    assert not is_op("nn.relu")(wildcard()).match(call)
    assert wildcard()(wildcard()).match(call)


def test_dtype_shape_and_type(xy):
    x, y = xy
    q = var("q", (1, 224, 224, 3), "int8")
    e = relu(q)
    assert wildcard().has_dtype("int8").match(e)
    assert not wildcard().has_dtype("uint8").match(e)
    assert wildcard().has_shape((1, 224, 224, 3)).match(e)
    assert not wildcard().has_shape((1, 224, 224, 4)).match(e)
    assert wildcard().has_type(TensorType((1, 224, 224, 3), "int8")).match(e)
    assert not wildcard().has_type(TensorType((1, 224, 224, 3), "uint8")).match(e)
    untyped = relu(var("u"))
    assert not wildcard().has_dtype("float32").match(untyped)


def test_where_predicate(xy):
    x, y = xy
    big = wildcard().where(lambda e: e.checked_type.shape[-1] == 4)
    assert big.match(x)
    assert not wildcard().where(lambda e: False).match(x)
    with pytest.raises(PatternError, match="where.*raised on"):
        wildcard().where(lambda e: e.attrs.missing).match(x)


# ---- alternation and optional --------------------------------------------------------------------


def test_alternation_inside_a_call_backtracks(xy):
    x, y = xy
    # The first alternative matches arg 0 but makes arg 1 inconsistent; the second works.
    a = wildcard()
    p = is_op("subtract")(is_op("nn.relu")(a) | is_op("negative")(a), a)
    assert p.match(sub(neg(x), x))
    assert not p.match(sub(neg(x), y))


def test_optional_matches_with_and_without_the_option(xy):
    x, _ = xy
    core = is_op("nn.relu")(wildcard())
    p = core.optional(lambda c: is_op("clip")(c))
    assert p.match(relu(x)) and p.match(clip(relu(x), a_min=0.0, a_max=6.0))
    assert not p.match(neg(x))
    assert not p.match(clip(neg(x), a_min=0.0, a_max=6.0))


# ---- consistency and captures ------------------------------------------------------------------


def test_a_shared_sub_pattern_matches_one_node(xy):
    x, y = xy
    w = wildcard()
    p = is_op("subtract")(w, w)
    assert p.match(sub(x, x)) and not p.match(sub(x, y))


def test_equal_capture_names_must_bind_one_node(xy):
    x, y = xy
    p = is_op("subtract")(wildcard("a"), wildcard("a"))
    assert p.match(sub(x, x)) and not p.match(sub(x, y))


def test_captures(xy):
    x, y = xy
    conv = is_op("nn.relu")(wildcard("x")).named("r")
    m = match(is_op("add")(conv, wildcard("y")), add(relu(x), y))
    assert m["x"] is x and m["y"] is y and m["r"].op.name == "nn.relu"
    assert set(m.captures) == {"x", "y", "r"}
    with pytest.raises(PatternError, match="no capture 'z'"):
        m["z"]


# ---- commutativity -------------------------------------------------------------------------------


def test_commutative_ops_match_either_order(xy):
    x, y = xy
    p = is_op("add")(is_op("nn.relu")(wildcard("a")), wildcard("b"))
    m = match(p, add(y, relu(x)))
    assert m is not None and m["a"] is x and m["b"] is y
    for name in ("multiply", "maximum", "minimum"):
        e = get_op(name)(y, relu(x))
        assert is_op(name)(is_op("nn.relu")(wildcard()), wildcard()).match(e)
    assert not is_op("subtract")(is_op("nn.relu")(wildcard()), wildcard()).match(sub(y, relu(x)))


def _qnn_add(lhs, rhs, ls, lz, rs, rz):
    return get_op("qnn.add")(
        lhs, rhs, const(ls), const(lz), const(rs), const(rz), const(0.1), const(0)
    )


def test_qnn_add_swaps_operand_groups_consistently():
    a = var("a", (1, 4), "int8")
    b = var("b", (1, 4), "int8")
    e = _qnn_add(a, relu(b), 0.5, 1, 0.25, 2)
    p = is_op("qnn.add")(
        is_op("nn.relu")(wildcard("x")),
        wildcard("y"),
        wildcard("xs"),
        wildcard("xz"),
        wildcard("ys"),
        wildcard("yz"),
        is_constant(),
        is_constant(),
    )
    m = match(p, e)
    assert m is not None and m["x"] is b and m["y"] is a
    # The scale and zero point that travel with relu(b) are rhs's: 0.25 and 2.
    assert float(m["xs"].data) == 0.25 and int(m["xz"].data) == 2
    assert float(m["ys"].data) == 0.5 and int(m["yz"].data) == 1
    # A pattern that pins lhs's scale to relu's operand cannot match by swapping data alone.
    pinned = is_op("qnn.add")(
        is_op("nn.relu")(wildcard()),
        wildcard(),
        wildcard().where(lambda c: float(c.data) == 0.5),
        *constants(5),
    )
    assert not pinned.match(e)


# ---- tuples --------------------------------------------------------------------------------------


def test_tuples_and_items(xy):
    x, y = xy
    t = Tuple([relu(x), y])
    assert is_tuple([is_op("nn.relu")(wildcard()), is_var("y")]).match(t)
    assert not is_tuple([is_var("y"), wildcard()]).match(t)
    assert not is_tuple([wildcard()]).match(t)
    assert is_tuple().match(t) and not is_tuple().match(x)
    item = TupleGetItem(t, 1)
    assert is_tuple_get_item(is_tuple(), 1).match(item)
    assert is_tuple_get_item(wildcard()).match(item)
    assert not is_tuple_get_item(wildcard(), 0).match(item)
    assert not is_tuple_get_item(wildcard()).match(t)


def test_concatenate_of_a_tuple(xy):
    x, y = xy
    cat = get_op("concatenate")(Tuple([x, relu(y)]), axis=1)
    p = is_op("concatenate")(is_tuple([wildcard(), is_op("nn.relu")(wildcard())]))
    assert p.match(cat)


# ---- dominates ----------------------------------------------------------------------------------


def _diamond(x):
    c = relu(x)
    return c, add(neg(c), get_op("exp")(c))


def test_dominates_matches_a_diamond():
    x = var("x", (1, 4), "float32")
    parent, out = _diamond(x)
    unary = wildcard().has_attr({"kind": "elemwise"})(wildcard())
    p = dominates(is_op("nn.relu")(wildcard()), unary, is_op("add")(wildcard(), wildcard()))
    m = match(p, out)
    assert m is not None
    nodes = m.node_map[p.path]
    assert {n.op.name for n in nodes} == {"negative", "exp"}
    assert m.node_map[p.parent] == [parent]


def test_dominates_refuses_a_parent_used_outside():
    x = var("x", (1, 4), "float32")
    parent, out = _diamond(x)
    leak = mul(out, parent)  # the parent's value also leaves the diamond
    unary = wildcard().has_attr({"kind": "elemwise"})(wildcard())
    p = dominates(is_op("nn.relu")(wildcard()), unary, is_op("add")(wildcard(), wildcard()))
    assert match(p, out) is not None  # alone, out is a diamond
    found = find(p, leak)
    assert found == []


def test_dominates_refuses_a_non_path_node_in_between():
    x = var("x", (1, 4), "float32")
    c = relu(x)
    out = add(neg(c), clip(c, a_min=0.0, a_max=1.0))
    p = dominates(
        is_op("nn.relu")(wildcard()),
        is_op("negative")(wildcard()),
        is_op("add")(wildcard(), wildcard()),
    )
    assert match(p, out) is None
    ok = add(neg(c), neg(neg(c)))
    assert match(p, ok) is not None


# ---- find ----------------------------------------------------------------------------------------


def test_find_returns_every_match_with_captures(xy):
    x, y = xy
    e = add(relu(x), relu(relu(y)))
    found = find(is_op("nn.relu")(wildcard("v")), e)
    assert [m["v"] for m in found] == [x, y, found[1].root]
    assert len(find(is_op("nn.relu")(is_op("nn.relu")(wildcard())), e)) == 1
    mod = IRModule({"main": Function([x, y], e), "f": Function([x], relu(x))})
    assert [(m.function, m["v"]) for m in find(is_op("nn.relu")(is_var().named("v")), mod)] == [
        ("main", x),
        ("main", y),
        ("f", x),
    ]


def test_spans_are_available_on_matched_nodes():
    x = var("x", (1, 4), "float32")
    e = relu(x, span=Span(3, "RELU", "r"))
    m = match(is_op("nn.relu")(wildcard()).named("r"), e)
    assert m["r"].span == Span(3, "RELU", "r")


def test_tuple_type_patterns():
    x = var("x", (1, 4), "float32")
    t = Tuple([x, x])
    assert wildcard().has_type(TupleType([x.checked_type] * 2)).match(t)
    assert not wildcard().has_dtype("float32").match(t)
