"""Compiled patterns: a pattern table's patterns turned into nested closures, for MergeComposite.

The Solver (matcher.py) interprets any pattern on an explicit goal list, retrying alternatives
when a later goal fails. Most table patterns are trees: no sub-pattern or capture name is shared
between siblings (the branches of ``p | q`` may share: only one of them is bound). In a tree the
siblings bind disjoint keys, so a later sibling's failure never depends on which alternative an
earlier one took: the first match the Solver finds is each subtree's first match, left
alternative first, written operand order before the swapped one. ``compiled(pattern)`` returns a
function ``(expr, bindings, trail) -> bool`` that finds exactly that match with the Solver's
bindings in the Solver's insertion order, or None when the pattern is not such a tree or uses a
kind this module does not compile (predicates, whose call counts could differ; dominators;
recursion; control nodes; functions; a call whose op pattern is not an unnamed ``is_op``). A
``divide`` pattern that meets a ``multiply`` (or the reverse) raises Fallback: the Solver then
tries the other association. The Solver stays the reference; a test
runs both on every node of the test graphs.
"""

from __future__ import annotations

from partita.ir.nodes import Call, Constant, Tuple, TupleGetItem, Var
from partita.ops.registry import get_op

from .checks import attr_mismatch, commute_permutation, type_mismatch
from .control import REDIRECTS
from .pattern import (
    AltPattern,
    AttrPattern,
    CallPattern,
    ConstantPattern,
    DataTypePattern,
    ExprPattern,
    OpPattern,
    Pattern,
    ShapePattern,
    TupleGetItemPattern,
    TuplePattern,
    TypePattern,
    VarPattern,
    WildcardPattern,
)

_NONE = object()


def compiled(pattern: Pattern):
    """The compiled matcher of ``pattern``, or None when the Solver must run it (see the module
    docstring). Recursive patterns (a wildcard redirected anywhere) always go to the Solver."""
    if REDIRECTS:
        return None
    found = getattr(pattern, "_matcher", _NONE)
    if found is _NONE:
        found = _compile(pattern) if _is_tree(pattern) is not None else None
        object.__setattr__(pattern, "_matcher", found)
    return found


class Fallback(Exception):
    """The Solver must decide: a divide pattern met a multiply, or a multiply pattern a divide
    (the Solver then tries the other association, as TVM's matcher does)."""


def run_compiled(fn, expr) -> dict | None:
    """The bindings of ``fn``'s match at ``expr``, or None; raises Fallback when only the
    Solver can tell."""
    binds: dict = {}
    return binds if fn(expr, binds, []) else None


# ---- eligibility: a tree of supported kinds ---------------------------------------------------

_WRAPPERS = (AttrPattern, DataTypePattern, ShapePattern, TypePattern)
_LEAVES = (WildcardPattern, ConstantPattern, VarPattern, ExprPattern)


def _is_tree(p: Pattern):
    """``(pattern ids, capture names)`` a match of ``p`` may bind, or None if ``p`` is not a
    tree of compiled kinds."""
    t = type(p)
    own_ids = {id(p)}
    own_names = {p.name} if p.name is not None else set()
    if t in _LEAVES:
        return own_ids, own_names
    if t in _WRAPPERS:
        kids = [p.pattern]
    elif t is AltPattern:
        left, right = _is_tree(p.left), _is_tree(p.right)
        if left is None or right is None:
            return None
        ids, names = left[0] | right[0], left[1] | right[1]
        if id(p) in ids or own_names & names:
            return None
        return ids | own_ids, names | own_names
    elif t is CallPattern:
        op = p.op
        if type(op) is not OpPattern or p.args is None:
            return None
        if op.name is not None:  # an unnamed op pattern may be shared: it binds the same op
            return None
        kids = list(p.args)
    elif t is TuplePattern:
        kids = list(p.fields or ())
    elif t is TupleGetItemPattern:
        kids = [p.tuple]
    else:
        return None
    ids, names = set(own_ids), set(own_names)
    for kid in kids:
        found = _is_tree(kid)
        if found is None or ids & found[0] or names & found[1]:
            return None
        ids |= found[0]
        names |= found[1]
    return ids, names


# ---- compilation --------------------------------------------------------------------------------


def _undo(binds: dict, trail: list, mark: int) -> None:
    while len(trail) > mark:
        del binds[trail.pop()]


def _binder(p: Pattern):
    """Bind ``p`` (after its capture name, as Solver.bind does)."""
    name = p.name
    if name is None:

        def bind(e, binds, trail):
            binds[p] = e
            trail.append(p)
            return True

        return bind

    def bind_named(e, binds, trail):
        prev = binds.get(name)
        if prev is None:
            binds[name] = e
            trail.append(name)
        elif prev is not e:
            return False
        binds[p] = e
        trail.append(p)
        return True

    return bind_named


def _compile(p: Pattern):
    return _COMPILE[type(p)](p)


def _wildcard(p):
    return _binder(p)


def _constant(p):
    bind = _binder(p)

    def match(e, binds, trail):
        return type(e) is Constant and bind(e, binds, trail)

    return match


def _var(p):
    bind, want = _binder(p), p.var_name

    def match(e, binds, trail):
        if type(e) is not Var or (want is not None and e.name_hint != want):
            return False
        return bind(e, binds, trail)

    return match


def _expr(p):
    from .matcher import same_expr

    bind, expr = _binder(p), p.expr

    def match(e, binds, trail):
        return same_expr(expr, e) and bind(e, binds, trail)

    return match


def _call(p):
    opp = p.op
    op = opp.op
    bind, bind_op = _binder(p), _binder(opp)
    subs = [_compile(a) for a in p.args]
    n = len(subs)
    perm = commute_permutation(op)
    swapped = None if perm is None else [(s, perm[i]) for i, s in enumerate(subs)]

    other = {get_op("divide"): get_op("multiply"), get_op("multiply"): get_op("divide")}.get(op)

    def match(e, binds, trail):
        if type(e) is not Call or e.op is not op:
            if other is not None and type(e) is Call and e.op is other:
                raise Fallback
            return False
        args = e.args
        if len(args) != n or not bind(e, binds, trail):
            return False
        if opp not in binds and not bind_op(op, binds, trail):
            return False
        mark = len(trail)
        for sub, x in zip(subs, args):
            if not sub(x, binds, trail):
                break
        else:
            return True
        if swapped is None:
            return False
        _undo(binds, trail, mark)
        for sub, i in swapped:
            if not sub(args[i], binds, trail):
                return False
        return True

    return match


def _alt(p):
    bind, left, right = _binder(p), _compile(p.left), _compile(p.right)

    def match(e, binds, trail):
        if not bind(e, binds, trail):
            return False
        mark = len(trail)
        if left(e, binds, trail):
            return True
        _undo(binds, trail, mark)
        return right(e, binds, trail)

    return match


def _attr(p):
    bind, inner, attrs = _binder(p), _compile(p.pattern), p.attrs

    def match(e, binds, trail):
        if attr_mismatch(attrs, e) is not None or not bind(e, binds, trail):
            return False
        return inner(e, binds, trail)

    return match


def _typed(p):
    bind, inner = _binder(p), _compile(p.pattern)

    def match(e, binds, trail):
        if type_mismatch(p, e) is not None or not bind(e, binds, trail):
            return False
        return inner(e, binds, trail)

    return match


def _tuple(p):
    bind = _binder(p)
    subs = None if p.fields is None else [_compile(f) for f in p.fields]

    def match(e, binds, trail):
        if type(e) is not Tuple:
            return False
        if subs is None:
            return bind(e, binds, trail)
        if len(subs) != len(e.fields) or not bind(e, binds, trail):
            return False
        return all(sub(x, binds, trail) for sub, x in zip(subs, e.fields))

    return match


def _tuple_get_item(p):
    bind, inner, index = _binder(p), _compile(p.tuple), p.index

    def match(e, binds, trail):
        if type(e) is not TupleGetItem or (index is not None and index != e.index):
            return False
        return bind(e, binds, trail) and inner(e.tuple_value, binds, trail)

    return match


_COMPILE = {
    WildcardPattern: _wildcard,
    ConstantPattern: _constant,
    VarPattern: _var,
    ExprPattern: _expr,
    CallPattern: _call,
    AltPattern: _alt,
    AttrPattern: _attr,
    DataTypePattern: _typed,
    ShapePattern: _typed,
    TypePattern: _typed,
    TuplePattern: _tuple,
    TupleGetItemPattern: _tuple_get_item,
}
