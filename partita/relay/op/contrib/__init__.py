"""``tvm.relay.op.contrib``: where TVM's BYOC pattern-table modules live, and their registry
(``register_pattern_table``, ``get_pattern_table``)."""

from __future__ import annotations

from .register import get_pattern_table, register_pattern_table

__all__ = ["get_pattern_table", "register_pattern_table"]
