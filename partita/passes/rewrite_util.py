"""Helpers shared by the generic passes: function scopes, opaque functions, typing new nodes."""

from __future__ import annotations

from partita.ir.module import IRModule
from partita.ir.nodes import Call, Expr, Function
from partita.ir.visitor import ExprMutator
from partita.ops.registry import Op

from .infer_type import infer_node_type

# Functions whose bodies belong to a backend: their ops must stay as the patterns matched them.
OPAQUE_FUNCTION_ATTRS = ("Composite", "Compiler")


def is_opaque(fn: Function) -> bool:
    """True for a composite or a partitioned function (generic passes leave their bodies alone)."""
    return any(k in fn.attrs for k in OPAQUE_FUNCTION_ATTRS)


def is_op(e: Expr, name: str) -> bool:
    """True when ``e`` is a call of the registered op ``name``."""
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == name


class ScopedMutator(ExprMutator):
    """An ExprMutator that treats each function as a scope of its own: inner functions are
    rewritten by a fresh mutator made by ``scope()``, and opaque ones (composites, partitions) are
    left as they are."""

    enter_functions = False

    def scope(self) -> ScopedMutator | None:
        """The mutator for an inner function's body (None: keep inner bodies unchanged)."""
        return None

    def rewrite_function(self, fn, params, body):
        if body is fn.body and id(fn.body) not in self.memo and not is_opaque(fn):
            inner = self.scope()
            if inner is not None:
                body = inner.visit(fn.body)
        return super().rewrite_function(fn, params, body)


def rewrite_module(mod: IRModule, make_mutator) -> IRModule:
    """A new module with every non-opaque function rewritten by ``make_mutator(mod).visit``."""
    out = IRModule({}, mod.attrs)
    for name, fn in mod.items():
        out[name] = fn if is_opaque(fn) else make_mutator(mod).visit(fn)
    return out


def typed(e: Expr, mod: IRModule | None = None) -> Expr:
    """``e`` with its type inferred from its (already typed) children: constant time, unlike
    ``infer_type``, which walks the whole sub-graph."""
    if e.type_or_none is None:
        infer_node_type(e, mod)
    return e


class TypedScopedMutator(ScopedMutator):
    """A ScopedMutator of module ``mod`` whose every rewritten node is typed (``typed``), with
    inner functions rewritten by a mutator of the same class: what SimplifyExpr and
    SimplifyInference share."""

    def __init__(self, mod: IRModule):
        super().__init__()
        self.mod = mod

    def scope(self):
        return type(self)(self.mod)

    def _rewrite(self, node: Expr) -> Expr:
        return typed(super()._rewrite(node), self.mod)
