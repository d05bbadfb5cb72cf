"""AlterOpLayout: each op call rewritten by the layout hook registered for its op, if any.

    register_alter_op_layout("nn.conv2d", to_nhwc)     # hook(attrs, inputs, types, out_type)
    %1 = nn.conv2d(%x, %w)                       ->      whatever to_nhwc returns for it
                                                         (a graph of the same result type)

Relay registers target-specific hooks (x86's NCHWc convolutions, ...); partita registers none,
so without a hook the pass changes nothing, as Relay's does for ops that have no hook. A hook
returns an expression or None (keep the call); a result of another type is an error naming the
op, since the rest of the graph reads the old type. Functions that belong to a backend
(``Composite``, ``Compiler``) are left alone, as Relay's function passes skip them.
"""

from __future__ import annotations

from collections.abc import Callable

from partita.errors import PartitaError
from partita.ir.module import IRModule
from partita.ir.nodes import Expr
from partita.ops.registry import Op, get_op

from .infer_type import infer_type
from .infra import module_pass
from .rewrite_util import ScopedMutator, rewrite_module, typed

_HOOKS: dict[str, Callable] = {}


def register_alter_op_layout(op_name: str, hook: Callable | None = None):
    """Register ``hook(attrs, inputs, input_types, out_type) -> Expr | None`` for ``op_name``
    (Relay's ``register_alter_op_layout``); without ``hook`` it is a decorator."""
    get_op(op_name)  # an unknown op fails here, not by never being altered

    def install(fn):
        _HOOKS[op_name] = fn
        return fn

    return install if hook is None else install(hook)


def remove_alter_op_layout(op_name: str) -> None:
    """Forget the layout hook of ``op_name`` (if any)."""
    _HOOKS.pop(op_name, None)


@module_pass("AlterOpLayout", opt_level=3)
def AlterOpLayout(mod: IRModule, ctx) -> IRModule:
    """Replace each call of an op that has a registered layout hook by the hook's result
    (module docstring); the identity when no hook is registered."""
    for fn in mod.functions.values():
        infer_type(fn, mod)
    if not _HOOKS:
        return mod
    return rewrite_module(mod, _Alter)


class _Alter(ScopedMutator):
    def __init__(self, mod: IRModule):
        super().__init__()
        self.mod = mod

    def scope(self):
        return _Alter(self.mod)

    def _rewrite(self, node: Expr) -> Expr:
        return typed(super()._rewrite(node), self.mod)

    def rewrite_call(self, call, op, args):
        new = typed(super().rewrite_call(call, op, args), self.mod)
        hook = _HOOKS.get(op.name) if isinstance(op, Op) else None
        if hook is None:
            return new
        out = hook(new.attrs, list(new.args), [a.type_or_none for a in new.args], new.type_or_none)
        if out is None:
            return new
        if not isinstance(out, Expr):
            raise PartitaError(f"AlterOpLayout: the {op.name} hook returned {out!r}, not an Expr")
        got = infer_type(out, self.mod)
        if got != new.type_or_none:
            raise PartitaError(
                f"AlterOpLayout: the {op.name} hook changed {call.short()}'s type from "
                f"{new.type_or_none} to {got}; a hook must keep the call's result type"
            )
        return out


def registered_hooks() -> dict[str, Callable]:
    """A copy of the registered hooks by op name."""
    return dict(_HOOKS)


__all__ = [
    "AlterOpLayout",
    "register_alter_op_layout",
    "registered_hooks",
    "remove_alter_op_layout",
]
