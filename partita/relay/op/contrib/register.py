"""``tvm.relay.op.contrib.register``: ``register_pattern_table(target)`` and
``get_pattern_table(target)`` with TVM's target names (``"ethos-n"``, ``"cmsis-nn"``)."""

from __future__ import annotations

from partita.relay.op_attr import get_pattern_table, register_pattern_table

__all__ = ["get_pattern_table", "register_pattern_table"]
