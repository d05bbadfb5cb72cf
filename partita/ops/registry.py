"""The op registry, re-exported: it lives in partita.ir.op (Op itself in partita.ir.nodes) so
that the IR never imports the op definitions. Kept for the code that imports it from here."""

from __future__ import annotations

from partita.ir.attrs import Attrs, NoAttrs, choice
from partita.ir.nodes import Op
from partita.ir.op import _REGISTRY, get_op, has_op, list_ops, register_op

__all__ = [
    "Attrs",
    "NoAttrs",
    "Op",
    "_REGISTRY",
    "choice",
    "get_op",
    "has_op",
    "list_ops",
    "register_op",
]
