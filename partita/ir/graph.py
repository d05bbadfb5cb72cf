"""The public graph API that passes, patterns, partitioning and backends share.

A function body as a dataflow graph: nodes in post-order (``dataflow_order``), their users and
positions (``Graph``), the key an index files a node under (``node_key``), and the helpers that
rebuild a module function by function (``map_functions``). Composite functions called inline are
opaque here: their bodies are regions a partition already carved out, so a dataflow walk never
enters them (``visitor.post_order`` does, for passes that must).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import chain

from partita.errors import PartitaError

from .module import IRModule
from .nodes import Call, Expr, Function, If, Let, Tuple, TupleGetItem
from .order import dataflow_order, value_inputs
from .refs import REF_NODES, ref_with_inputs


def node_key(e: Expr) -> str:
    """The index key of a node: its op name for op calls, else its kind (``"Tuple"``, ...)."""
    if type(e) is Call and not isinstance(e.op, Expr):
        return e.op.name
    return type(e).__name__


def with_inputs(node: Expr, inputs) -> Expr:
    """``node`` with its ``value_inputs`` replaced by ``inputs`` (same order), or ``node`` itself
    when none changed; span kept, type left for the caller (a rewrite may change it)."""
    inputs = list(inputs)
    if all(a is b for a, b in zip(inputs, value_inputs(node))):
        return node
    t = type(node)
    if t is Call:
        op, args = (inputs[0], inputs[1:]) if type(node.op) is Function else (node.op, inputs)
        return Call(op, args, node.attrs if not isinstance(op, Expr) else None, node.span)
    if t is Tuple:
        return Tuple(inputs, node.span)
    if t is TupleGetItem:
        return TupleGetItem(inputs[0], node.index, node.span)
    if t is If:
        return If(*inputs, node.span)
    if t is Let:
        return Let(node.var, inputs[0], inputs[1], node.span)
    if t in REF_NODES:
        return ref_with_inputs(node, inputs)
    return node


def map_inner_functions(body: Expr, rewrite: Callable[[Expr], Expr]) -> Expr:
    """``body`` with each plain function literal of its graph (a let-bound function: no
    composite, no region) given the body ``rewrite(fn.body)``, so a pass that works on one graph
    also reaches the graphs inside, as Relay's passes do."""
    memo: dict[int, Expr] = {}
    for node in dataflow_order(body):
        if type(node) is Function and not ({"Composite", "Compiler"} & set(node.attrs)):
            new = node.with_body(rewrite(node.body))
        else:
            new = with_inputs(node, [memo[id(k)] for k in value_inputs(node)])
        if new is not node and new.type_or_none is None and node.type_or_none is not None:
            new.with_type(node.type_or_none)
        memo[id(node)] = new
    return memo[id(body)]


class Graph:
    """One function body: post-order, positions and (lazily) users of every node."""

    def __init__(self, root: Expr, order: list[Expr] | None = None):
        """``order``: ``dataflow_order(root)`` when the caller already has it."""
        self.root = root
        self.order: list[Expr] = dataflow_order(root) if order is None else order
        self._pos: dict[int, int] | None = None
        self._users: dict[int, list[Expr]] | None = None
        self._uses: Counter | None = None

    @property
    def pos(self) -> dict[int, int]:
        """id(node) -> its index in ``order``."""
        if self._pos is None:
            self._pos = {id(n): i for i, n in enumerate(self.order)}
        return self._pos

    @property
    def users(self) -> dict[int, list[Expr]]:
        """id(node) -> the nodes that use it (once per use: ``add(x, x)`` uses x twice)."""
        if self._users is None:
            users: dict[int, list[Expr]] = {}
            for node in self.order:
                for kid in value_inputs(node):
                    users.setdefault(id(kid), []).append(node)
            self._users = users
        return self._users

    @property
    def uses(self) -> Counter:
        """id(node) -> how many times it is used (``users`` counted, without the lists)."""
        if self._uses is None:
            self._uses = use_counts(self.order)
        return self._uses


def use_counts(nodes) -> Counter:
    """id(node) -> how many times the ``nodes`` use it as a value input (``add(x, x)`` uses x
    twice). Counting needs no per-node Python work beyond ``value_inputs``, so it is several
    times cheaper than a users map; a pass that only asks "is every use of this value inside
    this set?" compares counts (patterns/claims.py). ``nodes``: a graph's order, or only its
    units (leaves use nothing)."""
    return Counter(map(id, chain.from_iterable(map(value_inputs, nodes))))


def function_bodies(expr_or_mod) -> list[tuple]:
    """``(name, function_or_None, body)`` for a module's functions, a Function or an expression."""
    if isinstance(expr_or_mod, IRModule):
        return [(name, fn, fn.body) for name, fn in expr_or_mod.items()]
    if isinstance(expr_or_mod, Function):
        return [(None, expr_or_mod, expr_or_mod.body)]
    if isinstance(expr_or_mod, Expr):
        return [(None, None, expr_or_mod)]
    raise PartitaError(
        f"expected an IRModule, a Function or an expression, got {type(expr_or_mod).__name__}"
    )


def rebuild(expr_or_mod, bodies: dict):
    """The input with each function body replaced by ``bodies[name]`` (same params and attrs);
    ``name`` is None for a lone Function or expression."""
    if isinstance(expr_or_mod, IRModule):
        out = IRModule({}, expr_or_mod.attrs)
        for name, fn in expr_or_mod.items():
            out[name] = fn.with_body(bodies[name])
        return out
    if isinstance(expr_or_mod, Function):
        return expr_or_mod.with_body(bodies[None])
    return bodies[None]


def map_functions(
    mod: IRModule,
    fn: Callable[[str, Function], Function],
    skip: Callable[[Function], bool] = lambda f: False,
) -> IRModule:
    """A new module with ``fn(name, function)`` for every function ``skip`` does not exclude
    (kept as is), in the module's order, with the module's attrs."""
    out = IRModule({}, mod.attrs)
    for name, func in mod.items():
        out[name] = func if skip(func) else fn(name, func)
    return out
