"""Relay's op spellings (``relay.add``, ``relay.nn.conv2d``, ``relay.qnn.op.requantize``) built
from partita's op registry: each is ``fn(*inputs, **attrs) -> Call``.

A list or tuple of expressions passed as an input becomes a ``Tuple`` (``relay.concatenate((a,
b), axis=1)``); Python numbers become constants. Attributes are partita's schema (validated).
"""

from __future__ import annotations

import types

from partita.ir import Call, Expr, Tuple, const
from partita.ops import get_op, list_ops


def _arg(a):
    if isinstance(a, Expr):
        return a
    if isinstance(a, (list, tuple)) and all(isinstance(x, Expr) for x in a):
        return Tuple(list(a))
    return const(a)


def make_op_fn(name: str):
    """The Relay-style builder for op ``name``."""
    op = get_op(name)

    def build(*args, **attrs) -> Call:
        return Call(op, [_arg(a) for a in args], attrs or None)

    build.__name__ = name.rsplit(".", 1)[-1]
    build.__qualname__ = name
    build.__doc__ = f"``{name}({', '.join(op.inputs)}, **attrs)`` (partita's {name})."
    return build


def _names() -> list[str]:
    return sorted(o if isinstance(o, str) else o.name for o in list_ops())


def namespace(prefix: str, module_name: str) -> types.ModuleType:
    """A module holding a builder for every registered op ``<prefix>.<name>``."""
    mod = types.ModuleType(module_name)
    for name in _names():
        head, _, tail = name.rpartition(".")
        if head == prefix:
            setattr(mod, tail, make_op_fn(name))
    return mod


def top_level_ops() -> dict:
    """Builders for the ops without a namespace (``add``, ``clip``, ``concatenate``, ...)."""
    return {n: make_op_fn(n) for n in _names() if "." not in n}
