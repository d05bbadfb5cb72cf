"""The order a host function's kernels are lowered in: calls, tuples and tuple items after
their inputs (iterative, so deep graphs do not recurse)."""

from __future__ import annotations

from partita.ir import Call, Tuple, TupleGetItem


def value_order(root) -> list:
    """Every call, tuple and tuple item under ``root`` (and the leaves), inputs first."""
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in seen:
            continue
        if done:
            seen.add(id(node))
            order.append(node)
            continue
        stack.append((node, True))
        kids = (
            node.args
            if isinstance(node, Call)
            else node.fields
            if isinstance(node, Tuple)
            else [node.tuple_value]
            if isinstance(node, TupleGetItem)
            else []
        )
        stack.extend((k, False) for k in reversed(kids) if id(k) not in seen)
    return order
