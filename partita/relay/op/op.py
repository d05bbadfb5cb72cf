"""``tvm.relay.op.op``: ``get(name)``, the registered op (ops match ``is_op`` patterns), and
``Op``, its class (``isinstance(call.op, tvm.ir.Op)``)."""

from __future__ import annotations

from partita.ir.nodes import Op
from partita.ops import get_op as get

__all__ = ["Op", "get"]
