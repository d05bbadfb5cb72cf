"""``dominates(parent, path, child)``: the diamond check, run after ``child`` matched.

Semantics (TVM's intent, stated exactly): searching down from the child's inputs, the first node
that matches ``parent`` is the parent; the nodes between the child and the parent must match
``path`` (each on its own: path nodes need not be one node); every input of the child and of
each path node is the parent, a path node that leads to the parent, or a leaf (a variable or
constant: weights, biases), so two different parents ("fake diamonds") or a branch computed from
something else do not match; every consumer of the parent's value, transitively up to the child,
is such a path node, so the child is the only way the value leaves the region.
"""

from __future__ import annotations

from partita.ir.nodes import Call, Expr, Tuple, TupleGetItem

from .checks import describe


def inputs_of(e: Expr) -> tuple:
    """The data inputs of a node (a call's arguments, a tuple's fields, an item's tuple)."""
    if type(e) is Call:
        return e.args
    if type(e) is Tuple:
        return e.fields
    if type(e) is TupleGetItem:
        return (e.tuple_value,)
    return ()


def check_dominator(s, p, child: Expr):
    """``(parent_node, path_nodes)`` if the diamond holds below ``child``, else the reason."""
    parent, region = _search_down(s, p, child)
    if parent is None:
        return "no input of the child leads (through path nodes) to a node matching the parent"
    reach = _reaching(s, region, parent)
    if not any(id(x) in reach for x in inputs_of(child)):
        return "no input of the child leads to the parent"
    kept = tuple(n for n in region if id(n) in reach)
    for node in (child, *kept):
        for x in inputs_of(node):
            if id(x) not in reach and inputs_of(x):  # leaves (weights, inputs) are free
                return (
                    f"{describe(x)}, an input of {describe(node)}, does not lead to the parent "
                    f"{describe(parent)} through path nodes"
                )
    return _check_users(s, parent, child, kept)


def _search_down(s, p, child):
    """Walk inputs from the child: the parent (bound into the match) and candidate path nodes."""
    parent, region = None, []
    seen = {id(child)}
    stack = [child]
    while stack:
        node = stack.pop()
        for x in inputs_of(node):
            if id(x) in seen or x is parent:
                continue
            if parent is None and _commit(s, p.parent, x):
                parent = x
                continue
            if inputs_of(x) and type(s)(s.graph_fn).run(p.path, x):
                seen.add(id(x))
                region.append(x)
                stack.append(x)
    return parent, region


def _commit(s, pattern, x) -> bool:
    """Match ``pattern`` at ``x`` consistently with the match so far, keeping its bindings."""
    sub = type(s)(s.graph_fn)
    if not sub.run(pattern, x, seed=s.binds):
        return False
    for key in sub.trail:
        s.binds[key] = sub.binds[key]
        s.trail.append(key)
    return True


def _reaching(s, region, parent) -> set:
    """ids of the region nodes from which the parent is reachable (plus the parent)."""
    pos = s.graph().pos
    reach = {id(parent)}
    for n in sorted(region, key=lambda n: pos.get(id(n), -1)):
        if any(id(x) in reach for x in inputs_of(n)):
            reach.add(id(n))
    return reach


def _check_users(s, parent, child, kept):
    users = s.graph().users
    allowed = {id(n) for n in kept}
    seen, stack = {id(parent)}, [parent]
    while stack:
        node = stack.pop()
        for u in users.get(id(node), ()):
            if u is child:
                continue
            if id(u) not in allowed:
                return (
                    f"the parent {describe(parent)} is not dominated: its value reaches "
                    f"{describe(u)}, which is not a path node between it and the child"
                )
            if id(u) not in seen:
                seen.add(id(u))
                stack.append(u)
    return parent, kept
