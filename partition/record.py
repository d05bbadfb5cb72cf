"""The partition record: what the partition passes learn that the IR cannot say, declared.

Three facts outlive the pass that finds them, and each has one writer and one reader:

=================  ==================  ==================  =====================================
field              written by          read by             what
=================  ==================  ==================  =====================================
``pattern_table``  MergeComposite      AnnotateTarget      the table rows applied (to explain the
                                                           ops no row claimed)
``refusals``       MergeComposite      AnnotateTarget      id(call) -> (call, reason) for ops a
                                                           check refused
``placement``      PartitionGraph      placement_report    the host's name and why each host op is
                                                           there
=================  ==================  ==================  =====================================

The record travels with the module (``record_of(mod)`` / ``with_record(mod, ...)``), so the passes
compose as Relay's do (``Sequential([MergeComposite(t), AnnotateTarget("npu"), ...])``) and a
report can be asked of the result; nothing else is handed between passes through ``mod.attrs``.
A record holds the nodes it names, so an id in it cannot be reused by another node.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from partita.ir.module import IRModule

_KEY = "partition.record"


class Placement:
    """PartitionGraph's finding: the host's name and why each host op is there (id(node) ->
    (node, reason))."""

    def __init__(self, host: str):
        self.host = host
        self.reasons: dict[int, tuple] = {}

    def reason(self, node) -> str | None:
        """Why ``node`` (of the partitioned module) stays on the host, if recorded."""
        found = self.reasons.get(id(node))
        return found[1] if found is not None and found[0] is node else None


@dataclass(frozen=True)
class PartitionRecord:
    """See the module docstring: one declared field per fact, with its writer and reader."""

    pattern_table: tuple | None = None
    refusals: dict = field(default_factory=dict)
    placement: Placement | None = None


def record_of(mod: IRModule) -> PartitionRecord:
    """The partition record ``mod`` carries (an empty one before any partition pass)."""
    found = mod.attrs.get(_KEY)
    return found if isinstance(found, PartitionRecord) else PartitionRecord()


def with_record(mod: IRModule, **changes) -> IRModule:
    """``mod`` (changed in place: passes build their output module) with the record's named
    fields replaced; returns it."""
    mod.attrs[_KEY] = dataclasses.replace(record_of(mod), **changes)
    return mod
