"""Iterative traversal: post-order walks, a visitor and a memoizing mutator.

Nothing here recurses on the graph, so a 100,000-node chain never hits Python's recursion limit.
Function bodies (composites called inline) are entered like any other sub-expression.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from . import order as _order
from .nodes import Call, Constant, Expr, Function, GlobalVar, If, Let, Op, Tuple, TupleGetItem, Var
from .order import dataflow_order
from .refs import REF_NODES, RefCreate, RefRead, RefWrite, ref_inputs, ref_with_inputs


def children(node: Expr) -> tuple:
    """The sub-expressions of ``node`` in evaluation order (a called Function comes first)."""
    if isinstance(node, Call):  # a called Function or let-bound Var is evaluated first
        return (node.op, *node.args) if isinstance(node.op, (Function, Var)) else node.args
    if isinstance(node, Tuple):
        return node.fields
    if isinstance(node, TupleGetItem):
        return (node.tuple_value,)
    if isinstance(node, Function):
        return (*node.params, node.body)
    if isinstance(node, If):
        return (node.cond, node.true_branch, node.false_branch)
    if isinstance(node, Let):  # the value before the variable that names it
        return (node.value, node.var, node.body)
    if type(node) in REF_NODES:
        return ref_inputs(node)
    return ()


_order._CHILDREN[0] = children


def post_order(root: Expr, enter_functions: bool = True) -> list[Expr]:
    """Every node reachable from ``root`` once, each after all of its children (graph.py's one
    walk over ``children``; other functions than ``root`` entered unless ``enter_functions`` is
    False)."""
    return dataflow_order(root, () if enter_functions else (Function,), children)


def walk(root: Expr, fn: Callable[[Expr], None], enter_functions: bool = True) -> None:
    """Call ``fn`` on every node reachable from ``root``, children before parents."""
    for node in post_order(root, enter_functions):
        fn(node)


def iter_calls(root: Expr) -> Iterator[Call]:
    """Every Call reachable from ``root`` in post-order."""
    return (n for n in post_order(root) if isinstance(n, Call))


def free_vars(expr: Expr) -> list[Var]:
    """Vars used in ``expr`` that no enclosing Function binds, in order of first use."""
    bound: set[int] = set()
    for node in post_order(expr):
        if isinstance(node, Function):
            bound.update(id(p) for p in node.params)
        elif isinstance(node, Let):
            bound.add(id(node.var))
    out, seen = [], set()
    for node in post_order(expr):
        if isinstance(node, Var) and id(node) not in bound and id(node) not in seen:
            seen.add(id(node))
            out.append(node)
    return out


class ExprVisitor:
    """Post-order visitor: override ``visit_call``, ``visit_var``, ... (each node once)."""

    enter_functions = True

    def visit(self, expr: Expr) -> None:
        for node in post_order(expr, self.enter_functions):
            method = getattr(self, _VISIT[type(node)], None)
            if method is not None:
                method(node)


_VISIT = {
    Var: "visit_var",
    Constant: "visit_constant",
    Call: "visit_call",
    Tuple: "visit_tuple",
    TupleGetItem: "visit_tuple_getitem",
    Function: "visit_function",
    GlobalVar: "visit_global_var",
    If: "visit_if",
    Let: "visit_let",
    RefCreate: "visit_ref_create",
    RefRead: "visit_ref_read",
    RefWrite: "visit_ref_write",
}


class ExprMutator:
    """Memoizing post-order mutator: shared sub-graphs stay shared in the result.

    Override ``rewrite_call(call, op, args)`` (and the like for other nodes): it receives the
    original node and its already-rewritten children and returns the replacement. The defaults
    rebuild a node only when a child changed, keeping its span (and type, when nothing changed).
    """

    enter_functions = True

    def __init__(self):
        self.memo: dict[int, Expr] = {}

    def visit(self, expr: Expr) -> Expr:
        memo = self.memo
        for node in post_order(expr, self.enter_functions):
            if id(node) in memo:
                continue
            memo[id(node)] = self._rewrite(node)
        return memo[id(expr)]

    def _rewrite(self, node: Expr) -> Expr:
        m = self.memo
        if isinstance(node, Call):
            op = m.get(id(node.op), node.op) if isinstance(node.op, (Function, Var)) else node.op
            return self.rewrite_call(node, op, [m[id(a)] for a in node.args])
        if isinstance(node, Var):
            return self.rewrite_var(node)
        if isinstance(node, Constant):
            return self.rewrite_constant(node)
        if isinstance(node, Tuple):
            return self.rewrite_tuple(node, [m[id(f)] for f in node.fields])
        if isinstance(node, TupleGetItem):
            return self.rewrite_tuple_getitem(node, m[id(node.tuple_value)])
        if isinstance(node, If):
            return self.rewrite_if(
                node, m[id(node.cond)], m[id(node.true_branch)], m[id(node.false_branch)]
            )
        if isinstance(node, Let):
            return self.rewrite_let(node, m[id(node.var)], m[id(node.value)], m[id(node.body)])
        if type(node) in REF_NODES:
            return self.rewrite_ref(node, [m[id(k)] for k in ref_inputs(node)])
        if isinstance(node, Function):
            # Without enter_functions, an inner function's body is not in the memo: keep it.
            return self.rewrite_function(
                node, [m.get(id(p), p) for p in node.params], m.get(id(node.body), node.body)
            )
        return self.rewrite_global_var(node)

    # Default rewrites: rebuild only when something below changed.
    def rewrite_call(self, call: Call, op, args: list[Expr]) -> Expr:
        if op is call.op and all(a is b for a, b in zip(args, call.args)):
            return call
        return Call(op, args, call.attrs if isinstance(op, Op) else None, call.span)

    def rewrite_var(self, var: Var) -> Expr:
        return var

    def rewrite_constant(self, c: Constant) -> Expr:
        return c

    def rewrite_tuple(self, tup: Tuple, fields: list[Expr]) -> Expr:
        if all(a is b for a, b in zip(fields, tup.fields)):
            return tup
        return Tuple(fields, tup.span)

    def rewrite_tuple_getitem(self, tgi: TupleGetItem, value: Expr) -> Expr:
        if value is tgi.tuple_value:
            return tgi
        return TupleGetItem(value, tgi.index, tgi.span)

    def rewrite_function(self, fn: Function, params: list, body: Expr) -> Expr:
        if body is fn.body and all(a is b for a, b in zip(params, fn.params)):
            return fn
        return Function(params, body, fn.ret_type, fn.attrs, fn.span)

    def rewrite_global_var(self, gv: GlobalVar) -> Expr:
        return gv

    def rewrite_if(self, node: If, cond: Expr, true_branch: Expr, false_branch: Expr) -> Expr:
        same = cond is node.cond and true_branch is node.true_branch
        if same and false_branch is node.false_branch:
            return node
        return If(cond, true_branch, false_branch, node.span)

    def rewrite_ref(self, node: Expr, inputs: list[Expr]) -> Expr:
        """RefCreate, RefRead and RefWrite: rebuilt when an input changed."""
        if all(a is b for a, b in zip(inputs, ref_inputs(node))):
            return node
        return ref_with_inputs(node, inputs)

    def rewrite_let(self, node: Let, var: Expr, value: Expr, body: Expr) -> Expr:
        if var is node.var and value is node.value and body is node.body:
            return node
        return Let(var, value, body, node.span)


def substitute(expr: Expr, mapping: dict[Expr, Expr]) -> Expr:
    """Replace nodes (by identity) in ``expr``: ``substitute(body, {param: arg})``."""
    by_id = {id(k): v for k, v in mapping.items()}

    class _Sub(ExprMutator):
        def _rewrite(self, node):
            if id(node) in by_id:
                return by_id[id(node)]
            return super()._rewrite(node)

    return _Sub().visit(expr)
