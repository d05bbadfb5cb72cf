"""The one dependency-order walk (``dataflow_order``) and what a node consumes
(``value_inputs``): the graph API (graph.py) exports both; visitor.post_order, the interpreter
and the backends walk with it. Its own module so that visitor.py (which module.py imports) can
use it without importing graph.py's module helpers."""

from __future__ import annotations

from collections.abc import Callable

from .nodes import Call, Expr, Function, If, Let, Tuple, TupleGetItem
from .refs import REF_NODES, ref_inputs


def value_inputs(node: Expr) -> tuple:
    """What ``node`` consumes in the dataflow graph: a call's args (and the composite it calls),
    a tuple's fields, a projection's tuple, an If's condition and branches, a Let's value and
    body; nothing for leaves and functions."""
    t = type(node)
    if t is Call:
        return node.args if type(node.op) is not Function else (node.op, *node.args)
    if t is Tuple:
        return node.fields
    if t is TupleGetItem:
        return (node.tuple_value,)
    if t is If:  # dataflow: both branches are values of the graph
        return (node.cond, node.true_branch, node.false_branch)
    if t is Let:  # the variable is a leaf of the body that stands for the value
        return (node.value, node.body)
    if t in REF_NODES:
        return ref_inputs(node)
    return ()



def dataflow_order(
    root: Expr, leaves: tuple[type, ...] = (), inputs: Callable[[Expr], tuple] = value_inputs,
) -> list[Expr]:
    """Every node under ``root`` once, each after its inputs, without entering called functions
    (a Function ``root`` contributes its params and body); nodes of the types in ``leaves``
    are taken as leaves (their inputs not visited: the llvm backend's walk, which lowers
    dataflow and refuses control flow where it meets it). The one dependency-order walk of
    partita: ``inputs`` says what a node depends on (``value_inputs``, the dataflow graph;
    ``visitor.children`` for ``post_order``, which also enters functions; the interpreter's,
    which stops at an If's condition)."""
    order: list[Expr] = []
    state: dict[int, bool] = {}
    stack = [root]
    while stack:
        node = stack[-1]
        key = id(node)
        done = state.get(key)
        if done is None:
            state[key] = False
            kids = (*node.params, node.body) if node is root and type(node) is Function else None
            ins = () if type(node) in leaves else inputs(node)
            pending = [k for k in (kids or ins) if id(k) not in state]
            if pending:
                stack.extend(reversed(pending))
                continue
        stack.pop()
        if not done:
            state[key] = True
            order.append(node)
    return order
