"""``tvm.relay.op.op``: ``get(name)``, the registered op (ops match ``is_op`` patterns)."""

from __future__ import annotations

from partita.ops import get_op as get

__all__ = ["get"]
