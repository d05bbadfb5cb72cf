"""The matcher against a deliberately naive reference: random small graphs, random patterns.

The reference enumerates every consistent assignment by plain recursion over the pattern, copying
the bindings at each step, in the documented order (left alternative first, written operand order
before the swapped one, arguments left to right). The matcher must find a match exactly when the
reference does, and the same first one.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from partita.patterns import (
    AltPattern,
    AttrPattern,
    CallPattern,
    ConstantPattern,
    DataTypePattern,
    OpPattern,
    PredicatePattern,
    TupleGetItemPattern,
    TuplePattern,
    VarPattern,
    WildcardPattern,
    is_constant,
    is_op,
    is_tuple,
    is_tuple_get_item,
    is_var,
    match,
    wildcard,
)

from partita.ir import Call, Constant, Tuple, TupleGetItem, Var, const, var
from partita.ops import get_op
from partita.passes import infer_type

BINARY = ("add", "subtract", "multiply")
UNARY = ("nn.relu", "negative")


# ---- the reference ---------------------------------------------------------------------------


def ref_matches(p, e, b):
    """Every extension of bindings ``b`` (dict: id(pattern) or name -> node) matching p at e."""
    if id(p) in b:
        if b[id(p)] is e:
            yield b
        return
    if p.name is not None and p.name in b and b[p.name] is not e:
        return
    b = {**b, id(p): e}
    if p.name is not None:
        b[p.name] = e
    yield from _ref_kind(p, e, b)


def _ref_kind(p, e, b):
    if isinstance(p, WildcardPattern):
        yield b
    elif isinstance(p, OpPattern):
        if e is p.op:
            yield b
    elif isinstance(p, VarPattern):
        if isinstance(e, Var) and (p.var_name is None or e.name_hint == p.var_name):
            yield b
    elif isinstance(p, ConstantPattern):
        if isinstance(e, Constant):
            yield b
    elif isinstance(p, AltPattern):
        yield from ref_matches(p.left, e, b)
        yield from ref_matches(p.right, e, b)
    elif isinstance(p, AttrPattern):
        if isinstance(e, Call) and all(getattr(e.attrs, k, None) == v for k, v in p.attrs.items()):
            yield from ref_matches(p.pattern, e, b)
    elif isinstance(p, DataTypePattern):
        if getattr(e.checked_type, "dtype", None) == p.dtype:
            yield from ref_matches(p.pattern, e, b)
    elif isinstance(p, CallPattern):
        yield from _ref_call(p, e, b)
    elif isinstance(p, TuplePattern):
        if isinstance(e, Tuple) and len(e.fields) == len(p.fields):
            yield from _ref_args(list(p.fields), list(e.fields), b)
    elif isinstance(p, TupleGetItemPattern):
        if isinstance(e, TupleGetItem) and p.index in (None, e.index):
            yield from ref_matches(p.tuple, e.tuple_value, b)
    elif isinstance(p, PredicatePattern):
        for b1 in ref_matches(p.pattern, e, b):
            if p.predicate(e):
                yield b1
    else:
        raise AssertionError(f"reference does not know {type(p).__name__}")


def _ref_call(p, e, b):
    if not isinstance(e, Call) or len(p.args) != len(e.args):
        return
    orders = [list(e.args)]
    if e.op.commutative:
        orders.append([e.args[1], e.args[0]])
    for args in orders:
        for b1 in ref_matches(p.op, e.op, b):
            yield from _ref_args(list(p.args), args, b1)


def _ref_args(pats, exprs, b):
    if not pats:
        yield b
        return
    for b1 in ref_matches(pats[0], exprs[0], b):
        yield from _ref_args(pats[1:], exprs[1:], b1)


def ref_first(p, e):
    return next(ref_matches(p, e, {}), None)


# ---- random graphs and patterns ----------------------------------------------------------------


@st.composite
def graphs(draw):
    """A small DAG with sharing over x, y and two constants; returns every node."""
    nodes = [
        var("x", (2,), "float32"),
        var("y", (2,), "float32"),
        const([1.0, 2.0]),
        const([0.5, -1.0]),
    ]
    for _ in range(draw(st.integers(1, 7))):
        kind = draw(st.sampled_from(("binary", "unary", "clip", "item")))
        pick = st.integers(0, len(nodes) - 1)
        if kind == "binary":
            op = get_op(draw(st.sampled_from(BINARY)))
            nodes.append(op(nodes[draw(pick)], nodes[draw(pick)]))
        elif kind == "unary":
            nodes.append(get_op(draw(st.sampled_from(UNARY)))(nodes[draw(pick)]))
        elif kind == "item":
            pair = Tuple([nodes[draw(pick)], nodes[draw(pick)]])
            nodes.append(TupleGetItem(pair, draw(st.integers(0, 1))))
        else:
            bound = draw(st.sampled_from((1.0, 6.0)))
            nodes.append(get_op("clip")(nodes[draw(pick)], a_min=0.0, a_max=bound))
    for n in nodes:
        infer_type(n)
    return nodes


@st.composite
def patterns(draw, depth=3, pool=None):
    """A random pattern; sub-patterns are sometimes reused (consistency) and named (captures)."""
    pool = [] if pool is None else pool
    if pool and draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(pool))
    choices = (
        ["wildcard", "constant", "var"]
        + (["item", "where"] if depth > 0 else [])
        + (["call", "alt", "optional", "attr", "dtype"] if depth > 0 else [])
    )
    kind = draw(st.sampled_from(choices))
    sub = lambda: draw(patterns(depth - 1, pool))  # noqa: E731
    if kind == "wildcard":
        p = wildcard(draw(st.sampled_from((None, None, "a", "b"))))
    elif kind == "constant":
        p = is_constant()
    elif kind == "var":
        p = is_var(draw(st.sampled_from((None, "x", "y"))))
    elif kind == "call":
        p = _call_pattern(draw, sub)
    elif kind == "alt":
        p = sub() | sub()
    elif kind == "optional":
        p = sub().optional(lambda q: is_op("nn.relu")(q))
    elif kind == "item":
        fields = is_tuple([sub(), sub()])
        p = is_tuple_get_item(fields, draw(st.sampled_from((None, 0, 1))))
    elif kind == "where":
        p = sub().where(lambda e: isinstance(e, (Var, TupleGetItem)))
    elif kind == "attr":
        p = is_op("clip")(sub()).has_attr({"a_max": draw(st.sampled_from((1.0, 6.0)))})
    else:
        p = sub().has_dtype("float32")
    if draw(st.integers(0, 5)) == 0:
        p = p.named(draw(st.sampled_from(("a", "b", "c"))))
    pool.append(p)
    return p


def _call_pattern(draw, sub):
    arity = draw(st.sampled_from((1, 2)))
    if arity == 2:
        names = draw(st.lists(st.sampled_from(BINARY), min_size=1, max_size=2, unique=True))
    else:
        names = draw(
            st.lists(st.sampled_from(UNARY + ("clip",)), min_size=1, max_size=2, unique=True)
        )
    op = is_op(names[0])
    for n in names[1:]:
        op = op | is_op(n)
    return op(*[sub() for _ in range(arity)])


def _captures(bindings) -> dict:
    return {k: id(v) for k, v in bindings.items() if isinstance(k, str)}


@settings(max_examples=300, deadline=None)
@given(graphs(), patterns())
def test_matcher_agrees_with_reference(nodes, pattern):
    for node in nodes:
        expected = ref_first(pattern, node)
        got = match(pattern, node)
        assert (got is not None) == (expected is not None), (pattern, node)
        if got is not None:
            assert {k: id(v) for k, v in got.captures.items()} == _captures(expected)


@settings(max_examples=100, deadline=None)
@given(graphs(), patterns())
def test_find_lists_exactly_the_matching_nodes(nodes, pattern):
    root = get_op("add")(nodes[-1], nodes[-2])
    infer_type(root)
    found = {id(m.root) for m in pattern.find(root)}
    from partita.ir import post_order

    expected = {id(n) for n in post_order(root) if ref_first(pattern, n) is not None}
    assert found == expected
