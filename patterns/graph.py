"""The dataflow graph a pattern is matched in: nodes in post-order, their users, and node keys.

Composite functions (a Call whose op is a Function) are opaque: their bodies are regions that a
partition already carved out, so matching and rewriting never enter them.
"""

from __future__ import annotations

from partita.ir.module import IRModule
from partita.ir.nodes import Call, Expr, Function, Tuple, TupleGetItem
from partita.ir.visitor import children
from partita.ops.registry import Op


def node_key(e: Expr) -> str:
    """The index key of a node: its op name for op calls, else its kind (``"Tuple"``, ...)."""
    if type(e) is Call and isinstance(e.op, Op):
        return e.op.name
    return type(e).__name__


def dataflow_order(root: Expr) -> list[Expr]:
    """Post-order of ``root`` without entering functions (visitor.post_order's result for
    ``enter_functions=False``, specialised because every pass of a rewrite starts with it)."""
    order: list[Expr] = []
    state: dict[int, bool] = {}
    stack = [root]
    while stack:
        node = stack[-1]
        key = id(node)
        done = state.get(key)
        if done is None:
            state[key] = False
            t = type(node)
            if t is Call:
                kids = node.args if type(node.op) is not Function else (node.op, *node.args)
            elif t is Tuple:
                kids = node.fields
            elif t is TupleGetItem:
                kids = (node.tuple_value,)
            else:
                kids = ()
            if type(node) is Function and node is root:
                kids = (*node.params, node.body)
            pending = [k for k in kids if id(k) not in state]
            if pending:
                stack.extend(reversed(pending))
                continue
        stack.pop()
        if not done:
            state[key] = True
            order.append(node)
    return order


class Graph:
    """One function body: post-order, positions and (lazily) users of every node."""

    def __init__(self, root: Expr):
        self.root = root
        self.order: list[Expr] = dataflow_order(root)
        self._pos: dict[int, int] | None = None
        self._users: dict[int, list[Expr]] | None = None

    @property
    def pos(self) -> dict[int, int]:
        if self._pos is None:
            self._pos = {id(n): i for i, n in enumerate(self.order)}
        return self._pos

    @property
    def users(self) -> dict[int, list[Expr]]:
        """id(node) -> the nodes that use it (once per use: ``add(x, x)`` uses x twice)."""
        if self._users is None:
            users: dict[int, list[Expr]] = {}
            for node in self.order:
                t = type(node)
                if t is Call:
                    kids = node.args if type(node.op) is not Function else (node.op, *node.args)
                elif t is Tuple:
                    kids = node.fields
                elif t is TupleGetItem:
                    kids = (node.tuple_value,)
                else:
                    continue
                for kid in kids:
                    found = users.get(id(kid))
                    if found is None:
                        users[id(kid)] = [node]
                    else:
                        found.append(node)
            self._users = users
        return self._users


def type_new_nodes(root: Expr, mod=None) -> None:
    """Type the nodes under ``root`` that have no type yet, without walking the typed part.

    A typed node's inputs are all typed (types are inferred bottom-up), so after a rewrite only
    the rebuilt nodes need InferType; the full ``infer_type`` would walk the whole graph again.
    """
    from partita.passes.infer_type import infer_node_type

    pending: list[Expr] = []
    state: dict[int, bool] = {}
    stack = [root]
    while stack:
        node = stack[-1]
        key = id(node)
        if key not in state:
            state[key] = False
            kids = [k for k in children(node) if k._type is None and id(k) not in state]
            if kids:
                stack.extend(reversed(kids))
                continue
        stack.pop()
        if not state[key]:
            state[key] = True
            pending.append(node)
    for node in pending:
        if node._type is None or type(node) is Function:
            infer_node_type(node, mod)


def function_bodies(expr_or_mod):
    """``(name, function_or_None, body)`` for a module's functions, a Function or an expression."""
    if isinstance(expr_or_mod, IRModule):
        return [(name, fn, fn.body) for name, fn in expr_or_mod.items()]
    if isinstance(expr_or_mod, Function):
        return [(None, expr_or_mod, expr_or_mod.body)]
    if isinstance(expr_or_mod, Expr):
        return [(None, None, expr_or_mod)]
    from .pattern import PatternError

    raise PatternError(
        f"expected an IRModule, a Function or an expression, got {type(expr_or_mod).__name__}"
    )


def rebuild(expr_or_mod, bodies: dict):
    """The input with each function body replaced by ``bodies[name]`` (same params and attrs)."""
    if isinstance(expr_or_mod, IRModule):
        out = IRModule({}, expr_or_mod.attrs)
        for name, fn in expr_or_mod.items():
            body = bodies[name]
            out[name] = (
                fn if body is fn.body else Function(fn.params, body, fn.ret_type, fn.attrs, fn.span)
            )
        return out
    body = bodies[None]
    if isinstance(expr_or_mod, Function):
        fn = expr_or_mod
        return fn if body is fn.body else Function(fn.params, body, fn.ret_type, fn.attrs, fn.span)
    return body
