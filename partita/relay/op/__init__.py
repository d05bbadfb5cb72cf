"""``tvm.relay.op``: every op builder without a namespace (``relay.op.clip``),
``relay.op.annotation`` and ``relay.op.op.get(name)`` / ``relay.op.get(name)``."""

from __future__ import annotations

from partita.relay import _ops

from . import annotation, op
from .op import get

globals().update(_ops.top_level_ops())

__all__ = ["annotation", "get", "op", *sorted(_ops.top_level_ops())]
