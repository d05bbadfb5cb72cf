"""The one dependency-order walk (``dataflow_order``) and what a node consumes
(``value_inputs``): the graph API (graph.py) exports both; visitor.post_order, the interpreter
and the backends walk with it. Its own module so that visitor.py (which module.py imports) can
use it without importing graph.py's module helpers."""

from __future__ import annotations

import weakref
from collections.abc import Callable

from .nodes import Call, Constant, Expr, Function, If, Let, Tuple, TupleGetItem, Var
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



# root -> {inputs function: its order without the root}: the graphs are immutable, so a root's
# order never changes, and the partition pipeline orders the same body in several passes
# (InferType, the host's layout pass, MergeComposite, AnnotateTarget). Only the two shared
# input functions are cached (a per-call closure would never be asked again); weak keys, and
# the root itself is left out of the value (a value that holds its weak key keeps it alive).
_ORDERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
ORDER_STATS = {"walks": 0, "nodes": 0, "hits": 0}  # what tests/partition's counting test reads


def dataflow_order(
    root: Expr, leaves: tuple[type, ...] = (), inputs: Callable[[Expr], tuple] = value_inputs,
) -> list[Expr]:
    """Every node under ``root`` once, each after its inputs, without entering called functions
    (a Function ``root`` contributes its params and body); nodes of the types in ``leaves``
    are taken as leaves (their inputs not visited: the llvm backend's walk, which lowers
    dataflow and refuses control flow where it meets it). The one dependency-order walk of
    partita: ``inputs`` says what a node depends on (``value_inputs``, the dataflow graph;
    ``visitor.children`` for ``post_order``, which also enters functions; the interpreter's,
    which stops at an If's condition). A depth-first walk, inputs left to right; the order of
    a root is remembered (a fresh list is returned each time)."""
    cacheable = (inputs is value_inputs or inputs is _CHILDREN[0]) and type(leaves) is tuple
    if cacheable:
        known = _ORDERS.get(root)
        found = known.get((leaves, inputs)) if known is not None else None
        if found is not None:
            ORDER_STATS["hits"] += 1
            out = list(found)
            out.append(root)
            return out
    if inputs is value_inputs and not leaves:
        order = _walk_values(root)
    else:
        order = _walk(root, leaves, inputs)
    ORDER_STATS["walks"] += 1
    ORDER_STATS["nodes"] += len(order)
    if cacheable:
        try:
            known = _ORDERS.setdefault(root, {})
        except TypeError:  # not weakly referable
            return order
        known[(leaves, inputs)] = order[:-1]
    return order


_CHILDREN: list = [None]  # visitor.children, set by visitor.py (which imports this module)


def _walk(root: Expr, leaves: tuple, inputs: Callable[[Expr], tuple]) -> list[Expr]:
    order: list[Expr] = []
    seen: set[int] = set()
    add, append = seen.add, order.append
    if type(root) is Function:
        ins = (*root.params, root.body)
    else:
        ins = () if leaves and type(root) in leaves else inputs(root)
    add(id(root))
    stack = [(root, iter(ins))]
    push, pop = stack.append, stack.pop
    while stack:
        node, pending = stack[-1]
        for kid in pending:
            if id(kid) not in seen:
                add(id(kid))
                kins = () if leaves and type(kid) in leaves else inputs(kid)
                if kins:
                    push((kid, iter(kins)))
                    break
                append(kid)
        else:
            pop()
            append(node)
    return order


def _walk_values(root: Expr) -> list[Expr]:
    """``_walk(root, (), value_inputs)`` with an op call's inputs read inline (the common node
    of a 100k-node graph: a call per node was a fifth of the walk) and constants and variables
    taken as leaves inline, and the stack as two lists
    (nodes and their input iterators: no tuple per node; a sixth less on a 100k chain)."""
    order: list[Expr] = []
    seen: set[int] = set()
    add, append = seen.add, order.append
    ins = (*root.params, root.body) if type(root) is Function else value_inputs(root)
    add(id(root))
    nodes, pending = [root], [iter(ins)]
    push_node, push_kids, pop_node, pop_kids = nodes.append, pending.append, nodes.pop, pending.pop
    while pending:
        for kid in pending[-1]:
            key = id(kid)
            if key not in seen:
                add(key)
                kind = type(kid)
                if kind is Call and type(kid.op) is not Function:
                    kins = kid.args
                elif kind is Constant or kind is Var:  # the leaves most graphs are made of
                    append(kid)
                    continue
                else:
                    kins = value_inputs(kid)
                if kins:
                    push_node(kid)
                    push_kids(iter(kins))
                    break
                append(kid)
        else:
            pop_kids()
            append(pop_node())
    return order
