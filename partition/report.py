"""The placement report: every source op, where it runs, and why it stays on the CPU.

    #   op       name          target  composite     partition   reason
    0   CONV_2D  conv1/Relu6   npu     npu.conv2d    npu_main_0
    28  MEAN     pool          llvm                              no pattern matched: ...
    30 source ops, 5.6 M MACs: npu 29 ops (100.0% of MACs), llvm 1 op (0.0%); 1 partition

One row per source op (the spans the frontend put on every node); a graph without spans gets one
row per call. MACs are counted for conv2d, dense and batch_matmul (and their qnn forms).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from partita.backends.cost import count_macs
from partita.backends.registry import DEFAULT_HOST

from partita.errors import PartitaError
from partita.ir.graph import dataflow_order
from partita.ir.module import IRModule
from partita.ir.nodes import Call, Function, GlobalVar
from partita.ops.registry import Op
from partita.passes.infer_type import infer_new_types

from .record import record_of


@dataclass
class PlacementRow:
    """One source op: its index and name in the source model, the IR ops it became, where they
    run, and (for ops left on the CPU) why."""

    index: int | None
    op: str
    name: str
    target: str = ""
    composite: str = ""
    partition: str = ""
    reason: str = ""
    macs: int = 0
    ir_ops: list = field(default_factory=list)
    # what leaving it on the host costs (``partition.estimate.fallback_costs`` fills them):
    # its estimated host time, and the bytes that cross between it and accelerator partitions
    host_s: float | None = None
    transfer_bytes: int | None = None


class _RowBuilder:
    __slots__ = ("row", "targets", "composites", "partitions", "reasons")

    def __init__(self, row: PlacementRow):
        self.row = row
        self.targets, self.composites, self.partitions, self.reasons = {}, {}, {}, {}

    def add(self, call: Call, target, composite, partition, reason) -> None:
        self.row.ir_ops.append(call.op.name)
        self.row.macs += count_macs(call)
        for bucket, value in (
            (self.targets, target),
            (self.composites, composite),
            (self.partitions, partition),
            (self.reasons, reason),
        ):
            if value:
                bucket[value] = None

    def finish(self) -> PlacementRow:
        row = self.row
        row.target = "+".join(self.targets)
        row.composite = ", ".join(self.composites)
        row.partition = ", ".join(self.partitions)
        row.reason = "; ".join(self.reasons)
        return row


class PlacementReport:
    """Rows, a summary, and three renderings: ``table()``, ``to_json()`` and ``summary_line()``."""

    def __init__(
        self,
        rows: list[PlacementRow],
        host: str,
        partitions: list[str],
        macs_by_target: dict[str, int],
        notes: list[str] | None = None,
    ):
        self.rows, self.host, self.partitions = rows, host, partitions
        self.macs_by_target = macs_by_target
        self.notes = list(notes or ())  # what the build computes differently from the source

    @property
    def host_rows(self) -> list[PlacementRow]:
        """The rows with at least one op left on the host."""
        return [r for r in self.rows if self.host in r.target.split("+")]

    def summary(self) -> dict:
        """Ops (by target, a split op under ``a+b``), MACs by target, and the partition count."""
        ops: dict[str, int] = {}
        for row in self.rows:
            ops[row.target] = ops.get(row.target, 0) + 1
        return {
            "ops": len(self.rows),
            "macs": sum(self.macs_by_target.values()),
            "ops_by_target": ops,
            "macs_by_target": dict(self.macs_by_target),
            "partitions": len(self.partitions),
        }

    def summary_line(self) -> str:
        """``30 source ops, 13.3 M MACs: npu 28 ops (100.0% of MACs), ...; 2 partitions``."""
        s = self.summary()
        parts = []
        for target, n in s["ops_by_target"].items():
            share = ""
            if s["macs"] and "+" not in target:
                share = f" ({100 * self.macs_by_target.get(target, 0) / s['macs']:.1f}% of MACs)"
            parts.append(f"{target} {n} op{'s' * (n != 1)}{share}")
        p = s["partitions"]
        n = s["ops"]
        return (
            f"{n} source op{'s' * (n != 1)}, {_count(s['macs'])} MACs: "
            f"{', '.join(parts) or 'none'}; {p} partition{'s' * (p != 1)}"
        )

    def table(self, name_width: int = 32) -> str:
        """The rows as an aligned text table (long tensor names are shortened)."""
        costs = any(r.host_s is not None for r in self.rows)
        head = ("#", "op", "name", "target", "composite", "partition")
        head += ("fallback cost", "reason") if costs else ("reason",)
        lines = [head] + [
            (
                "" if r.index is None else str(r.index),
                r.op,
                _shorten(r.name.split(";")[0], name_width),
                r.target,
                r.composite,
                r.partition,
                *([_cost(r)] if costs else []),
                r.reason,
            )
            for r in self.rows
        ]
        widths = [max(len(line[i]) for line in lines) for i in range(len(head) - 1)]
        return (
            "\n".join(
                "  ".join(c.ljust(w) for c, w in zip(line, widths)) + "  " + line[-1]
                for line in lines
            ).rstrip()
            + "\n"
        )

    def to_dict(self) -> dict:
        """Rows, summary, host and partitions as plain data."""
        return {
            "rows": [asdict(r) for r in self.rows],
            "summary": self.summary(),
            "host": self.host,
            "partitions": list(self.partitions),
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: dict) -> PlacementReport:
        """The inverse of ``to_dict()`` (a saved executable keeps its report as data)."""
        rows = [PlacementRow(**row) for row in data["rows"]]
        macs = dict(data["summary"]["macs_by_target"])
        return cls(rows, data["host"], list(data["partitions"]), macs, data.get("notes"))

    def to_json(self, indent: int | None = 2) -> str:
        """``to_dict()`` as JSON."""
        return json.dumps(self.to_dict(), indent=indent)

    def __str__(self):
        notes = "".join(f"\nnote: {n}" for n in self.notes)
        return self.table() + self.summary_line() + notes


def _cost(row: PlacementRow) -> str:
    if row.host_s is None:
        return ""
    moved = row.transfer_bytes or 0
    return f"{row.host_s * 1e3:.3f} ms host, {moved} B moved"


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else "..." + text[-(width - 3) :]


def _count(n: int) -> str:
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.1f} {prefix}"
    return str(n)


def placement_report(mod: IRModule) -> PlacementReport:
    """The placement report of a partitioned module (see the module docstring)."""
    if not isinstance(mod, IRModule):
        raise PartitaError(f"placement_report takes an IRModule, got {type(mod).__name__}")
    placement = record_of(mod).placement
    host = placement.host if placement is not None else DEFAULT_HOST
    infer_new_types(mod["main"], mod)  # what partitioning rebuilt; the rest is typed
    walk = _Walk(mod, host, placement)
    walk.function(mod["main"], host, "", "")
    rows = [b.finish() for b in walk.rows.values()]
    # source order (dataflow order differs where branches join); ops without an index last
    rows.sort(key=lambda r: (r.index is None, r.index if r.index is not None else 0))
    return PlacementReport(rows, host, walk.partitions, walk.macs, semantics_notes(mod))


def semantics_notes(mod: IRModule) -> list[str]:
    """Per output, whether the module computes what its source runtime does on this CPU, from
    the note a frontend leaves when a target picked its integer semantics (``semantics_note``)."""
    note = mod.attrs.get("semantics_note") if mod.attrs.get("semantics") == "integer" else None
    if not note:
        return []
    lines = [f"computes {note['semantics']}; {note['how']}"]
    for out in note["outputs"]:
        if out["equal"]:
            lines.append(f"{out['name']}: equals {note['runtime']}")
        elif "detail" in out:
            lines.append(f"{out['name']}: may differ from {note['runtime']}: {out['detail']}")
        else:
            why = []
            if out["exact_sums"]:
                why.append(
                    f"saturates int16 pairs in {out['exact_sums']} of the convolutions / "
                    "matmuls it depends on"
                )
            if out["integer_groups"]:
                why.append(f"runs {out['integer_groups']} of its QDQ groups in float")
            lines.append(f"{out['name']}: may differ from {note['runtime']}, which "
                         + " and ".join(why))
    return lines


class _Walk:
    def __init__(self, mod, host, placement):
        self.mod, self.host, self.placement = mod, host, placement
        self.rows: dict = {}
        self.partitions: list[str] = []
        self.macs: dict[str, int] = {}

    def function(self, fn: Function, target, partition, composite, reason=None) -> None:
        for node in dataflow_order(fn.body):
            if type(node) is not Call:
                continue
            op = node.op
            why = reason or (self.placement.reason(node) if self.placement else None)
            if isinstance(op, Op):
                self.add(node, target, composite, partition, why if target == self.host else "")
            elif type(op) is Function:
                self.function(op, target, partition, op.attrs.get("Composite", composite), why)
            elif type(op) is GlobalVar:
                callee = self.mod[op.name_hint]
                if "Compiler" in callee.attrs and op.name_hint not in self.partitions:
                    self.partitions.append(op.name_hint)
                self.function(
                    callee,
                    callee.attrs.get("Compiler", target),
                    op.name_hint if "Compiler" in callee.attrs else partition,
                    "",
                )

    def add(self, call: Call, target, composite, partition, reason) -> None:
        span = call.span
        if span is not None and span.index is not None:
            key = (span.index, span.op_type)
        else:
            key = ("call", id(call))
        builder = self.rows.get(key)
        if builder is None:
            index = span.index if span is not None else None
            op = span.op_type if span is not None and span.op_type else call.op.name
            name = span.tensor if span is not None and span.tensor else ""
            builder = self.rows[key] = _RowBuilder(PlacementRow(index, op, name))
        builder.add(call, target, composite, partition, reason)
        self.macs[target] = self.macs.get(target, 0) + count_macs(call)
