"""Grouping matches for rewrite and partition: outermost first, never overlapping, self-contained.

As in TVM's PatternGrouper, nodes are visited from the output down, so a match that can grow
(``requantize.optional(clip)``) is taken whole before its smaller part is tried. A match is
refused when one of its interior nodes already belongs to another group (overlap) or is used by a
node outside the match: replacing the match would then compute that value twice or create a cycle.
``pattern.partition`` accepts, as TVM does, an outside user that only flows back into the match
(the root post-dominates it): the value is then computed outside for it, and again inside.
A match's *inputs* are the expressions bound to leaf patterns (wildcard, is_var, is_expr, and
constants matched by ``wildcard()``); constants matched by ``is_constant()`` stay inside.
"""

from __future__ import annotations

from collections.abc import Callable

from partita.ir.graph import Graph, node_key
from partita.ir.nodes import Constant, Expr, Function

from .checks import describe
from .control import Recursion
from .matcher import Solver
from .pattern import ConstantPattern, ExprPattern, Pattern, VarPattern, WildcardPattern, _PostCheck

_LEAVES = (WildcardPattern, VarPattern, ConstantPattern, ExprPattern)


class Group:
    """A claimed match: its rule, root, bindings, interior node ids and the rule's payload."""

    __slots__ = ("rule", "root", "bindings", "interior", "inputs", "embedded", "payload")

    def __init__(self, rule, root, bindings, interior, inputs, embedded, payload):
        self.rule, self.root, self.bindings = rule, root, bindings
        self.interior, self.inputs, self.embedded = interior, inputs, embedded
        self.payload = payload


class RuleIndex:
    """Rules by the op (or node kind) their pattern's root can match, in priority order."""

    def __init__(self, rules: list):
        self.rules = rules
        self._by_key: dict[str, list[int]] = {}
        self._any: list[int] = []
        for i, rule in enumerate(rules):
            keys = rule.pattern.root_keys()
            if keys is None:
                self._any.append(i)
            else:
                for k in keys:
                    self._by_key.setdefault(k, []).append(i)
        self._cache: dict[str, list] = {}

    def for_node(self, node: Expr) -> list:
        """The rules whose pattern can match at ``node``, in priority order."""
        key = node_key(node)
        found = self._cache.get(key)
        if found is None:
            ids = sorted(set(self._by_key.get(key, ())) | set(self._any))
            found = self._cache[key] = [self.rules[i] for i in ids]
        return found


_KIND: dict[type, int] = {}  # type of a bindings key -> 0 other, 1 leaf, 2 inner, 3 post-check
_NODE: dict[type, bool] = {}  # type of a bound value -> an expression other than a Function


def _kind(t: type) -> int:
    k = _KIND.get(t)
    if k is None:
        k = _KIND[t] = (
            3
            if t in (_PostCheck, Recursion)
            else 0
            if not issubclass(t, Pattern)
            else 1
            if issubclass(t, _LEAVES)
            else 2
        )
    return k


def _is_node(t: type) -> bool:
    k = _NODE.get(t)
    if k is None:
        k = _NODE[t] = issubclass(t, Expr) and t is not Function
    return k


# the keys of a match's bindings (in order) -> (post-check keys, inner pattern keys, leaf pattern
# keys): one table pattern binds the same keys at most of its matches, so region_of sorts them
# once; capped, since patterns made for one rewrite would otherwise stay alive here
_PLANS: dict[tuple, tuple] = {}
_PLANS_MAX = 4096


def _plan(keys: tuple) -> tuple:
    checks, inner, leaves = [], [], []
    for k in keys:
        kind = _KIND.get(type(k)) or _kind(type(k))
        if kind == 3:
            checks.append(k)
        elif kind == 2:
            inner.append(k)
        elif kind == 1:
            leaves.append(k)
    if len(_PLANS) >= _PLANS_MAX:
        _PLANS.clear()
    plan = _PLANS[keys] = (tuple(checks), tuple(inner), tuple(leaves))
    return plan


def region_of(bindings: dict, root: Expr) -> tuple[dict, dict, set]:
    """``(interior, inputs, embedded)``: id -> node maps of a match, and embedded constant ids.
    The root is always interior (``wildcard().where(...)`` rewrites the node it matched)."""
    inputs: dict[int, Expr] = {}
    embedded: set[int] = set()
    inner: dict[int, Expr] = {}
    keys = tuple(bindings)
    plan = _PLANS.get(keys)
    if plan is None:
        plan = _plan(keys)
    checks, inner_keys, leaf_keys = plan
    for k in checks:
        if isinstance(bindings[k], tuple):
            return _fuzzy_region_of(bindings, root)
    for k in inner_keys:
        v = bindings[k]
        if _NODE.get(type(v)) or _is_node(type(v)):
            inner[id(v)] = v
    for k in leaf_keys:
        v = bindings[k]
        if not (_NODE.get(type(v)) or _is_node(type(v))):
            continue
        if type(v) is Constant and (
            type(k) is ConstantPattern or (type(k) is ExprPattern and type(k.expr) is Constant)
        ):
            embedded.add(id(v))
        else:
            inputs[id(v)] = v
    inputs.pop(id(root), None)
    embedded.discard(id(root))
    interior = {k: v for k, v in inner.items() if k not in inputs and k not in embedded}
    interior[id(root)] = root
    return interior, inputs, embedded


def _fuzzy_region_of(bindings: dict, root: Expr) -> tuple[dict, dict, set]:
    """region_of for a match with a diamond (a dominator's post-check) or a redirected
    wildcard: the nodes they saw are interior, listed first."""
    inputs: dict[int, Expr] = {}
    embedded: set[int] = set()
    inner: dict[int, Expr] = {}
    for k, v in bindings.items():
        if type(k) in (_PostCheck, Recursion) and isinstance(v, tuple):
            # A diamond's parent and path nodes are inside it even where a wildcard of the
            # child saw them (TVM's "fuzzy" matches).
            for n in (v[0], *v[1]):
                inner[id(n)] = n
    fuzzy = set(inner)
    for k, v in bindings.items():
        if not isinstance(k, Pattern) or not isinstance(v, Expr) or type(v) is Function:
            continue
        if isinstance(k, _LEAVES) and id(v) not in fuzzy:
            if type(v) is Constant and (
                type(k) is ConstantPattern or (type(k) is ExprPattern and type(k.expr) is Constant)
            ):
                embedded.add(id(v))
            else:
                inputs[id(v)] = v
        else:
            inner[id(v)] = v
    inputs.pop(id(root), None)
    embedded.discard(id(root))
    interior = {k: v for k, v in inner.items() if k not in inputs and k not in embedded}
    interior[id(root)] = root
    return interior, inputs, embedded


def region_problem(
    root: Expr, interior: dict, graph: Graph, claimed: set, dominated_escape: bool = False
) -> str | None:
    """Why a match cannot be grouped (overlap, or an interior value used outside), or None.
    ``dominated_escape``: an interior value may also feed an outside node whose every path to
    the output passes through the root (TVM's partition then keeps a copy outside for it)."""
    users = graph.users
    for k, node in interior.items():
        if node is root:
            continue
        if k in claimed:
            return f"{describe(node)} already belongs to another match"
        for u in users.get(k, ()):
            if id(u) in interior or (dominated_escape and _flows_into(u, interior, users)):
                continue
            return f"{describe(node)} inside the match is also used by {describe(u)} outside it"
    return None


def _flows_into(start: Expr, interior: dict, users: dict) -> bool:
    """True if every path from ``start`` to the graph's output enters the match (whose nodes all
    lead to its root): the root post-dominates ``start``."""
    seen, stack = {id(start)}, [start]
    while stack:
        node = stack.pop()
        outs = users.get(id(node), ())
        if not outs:
            return False  # an output of the graph reached without passing through the match
        for u in outs:
            if id(u) not in interior and id(u) not in seen:
                seen.add(id(u))
                stack.append(u)
    return True


def group_matches(
    graph: Graph, index: RuleIndex, accept: Callable, dominated_escape: bool = False
) -> list[Group]:
    """Claim matches from the output down; ``accept(rule, root, bindings)`` returns a payload or
    None to refuse (the next rule is then tried at that node). ``dominated_escape``: see
    ``region_problem``."""
    claimed: set[int] = set()
    groups: list[Group] = []
    solver = Solver(lambda: graph)
    for node in reversed(graph.order):
        if id(node) in claimed or type(node) is Function:
            continue
        for rule in index.for_node(node):
            if not solver.run(rule.pattern, node):
                continue
            binds = solver.binds
            interior, inputs, embedded = region_of(binds, node)
            if region_problem(node, interior, graph, claimed, dominated_escape):
                continue
            payload = accept(rule, node, binds)
            if payload is None:
                continue
            claimed.update(interior)
            groups.append(Group(rule, node, binds, interior, inputs, embedded, payload))
            break
    return groups
