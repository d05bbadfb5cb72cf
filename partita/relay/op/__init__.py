"""``tvm.relay.op``: every op builder without a namespace (``relay.op.clip``),
``relay.op.annotation``, ``relay.op.op.get(name)`` / ``relay.op.get(name)`` and
``relay.op.register_alter_op_layout`` (the hooks AlterOpLayout applies)."""

from __future__ import annotations

from partita.passes.alter_op_layout import register_alter_op_layout
from partita.relay import _ops

from . import annotation, op
from .op import get

globals().update(_ops.top_level_ops())

__all__ = ["annotation", "get", "op", "register_alter_op_layout", *sorted(_ops.top_level_ops())]
