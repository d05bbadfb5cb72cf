"""What-if: the predicted change in latency, SRAM and transfers of a placement change, without
building an executable.

    w = what_if(mod, "npu, llvm", ["cpu-node=conv1", "preset=u65-256"], host_model="cortex-a55")
    print(w.table())     # before, after and the change, per quantity of the estimate

Changes: ``cpu-node=NAME`` (a source op's index or tensor name forced onto the host),
``npu-node=NAME`` (kept on the accelerator: its CPU override dropped, and under
placement="cost" pinned there whatever the estimate), ``preset=NAME`` (the NPU's
``-config``). Both sides are partitioned and estimated (partition.estimate); nothing is
compiled to code or run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from partita.errors import PartitaError

from .estimate import SystemEstimate, estimate, host_model_of
from .pipeline import partition_for
from .report import placement_report
from .target import parse_target

CHANGES = ("cpu-node", "npu-node", "preset")
COMPARED = (
    ("total_s", "end-to-end latency", "s"),
    ("accelerator_s", "accelerator time", "s"),
    ("host_s", "host time", "s"),
    ("transfer_bytes", "boundary transfers", "B"),
    ("sram_peak_bytes", "SRAM peak", "B"),
    ("weight_bytes", "weights", "B"),
)


@dataclass
class WhatIf:
    """The estimates before and after ``changes``, and where the changed ops run."""

    changes: list
    before: SystemEstimate
    after: SystemEstimate
    notes: list

    def delta(self) -> dict:
        """after - before, per quantity."""
        b, a = self.before.totals(), self.after.totals()
        return {key: a[key] - b[key] for key, _label, _kind in COMPARED}

    def to_dict(self) -> dict:
        return {
            "changes": list(self.changes),
            "before": self.before.totals(),
            "after": self.after.totals(),
            "delta": self.delta(),
            "notes": list(self.notes),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def table(self) -> str:
        b, a = self.before.totals(), self.after.totals()
        lines = [f"what if {', '.join(self.changes)} (estimated, nothing compiled):"]
        lines.append(f"  {'':<20} {'before':>12} {'after':>12} {'change':>12}")
        for key, label, kind in COMPARED:
            lines.append(
                f"  {label:<20} {_fmt(b[key], kind):>12} {_fmt(a[key], kind):>12} "
                f"{_signed(a[key] - b[key], kind):>12}"
            )
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def _fmt(value, kind: str) -> str:
    return f"{value * 1e3:.3f} ms" if kind == "s" else f"{int(value):,} B"


def _signed(value, kind: str) -> str:
    return ("+" if value > 0 else "") + _fmt(value, kind) if value else "0"


def parse_changes(changes) -> list[tuple[str, str]]:
    """``["cpu-node=12", "preset=u65-256"]`` -> ``[("cpu-node", "12"), ...]``."""
    out = []
    for text in [changes] if isinstance(changes, str) else changes:
        kind, sep, value = str(text).partition("=")
        if not sep or kind not in CHANGES or not value:
            raise PartitaError(
                f"what-if change {text!r}: expected one of "
                f"{', '.join(c + '=NAME' for c in CHANGES)}"
            )
        out.append((kind, value))
    return out


def _with_preset(target, preset: str) -> str:
    composite = parse_target(target)
    specs = []
    for spec in (*composite.targets, composite.host):
        options = dict(spec.options)
        if spec.name == "npu":
            options["config"] = preset
        opts = " ".join(f"-{k}={v}" if v is not True else f"-{k}" for k, v in options.items())
        specs.append(f"{spec.name} {opts}".strip())
    if not any(s.name == "npu" for s in composite.targets):
        raise PartitaError(f"what-if preset={preset}: the target {target!r} has no npu")
    return ", ".join(specs)


def what_if(
    mod,
    target="npu, llvm",
    changes=(),
    host_model=None,
    *,
    placement: str = "all",
    cpu_nodes=(),
    npu_nodes=(),
    **options,
) -> WhatIf:
    """Estimate ``mod`` partitioned for ``target`` as given and with ``changes`` (module
    docstring); ``options`` are partition_for's (``min_region_size``, ``cpu_ops``)."""
    parsed = parse_changes(changes)
    host = host_model_of(host_model, target)
    after_target, after_cpu, after_npu = target, list(cpu_nodes), list(npu_nodes)
    notes = []
    for kind, value in parsed:
        if kind == "cpu-node":
            after_cpu.append(value)
        elif kind == "npu-node":
            after_npu.append(value)
            after_cpu = [c for c in after_cpu if str(c) != value]
        else:
            after_target = _with_preset(after_target, value)
    cache: dict = {}
    common = dict(options, placement=placement, host_model=host)
    before_mod = partition_for(mod, target, cpu_nodes=cpu_nodes, npu_nodes=npu_nodes, **common)
    after_mod = partition_for(mod, after_target, cpu_nodes=after_cpu, npu_nodes=after_npu, **common)
    same_target = after_target == target
    before = estimate(before_mod, target, host, cache)
    after = estimate(after_mod, after_target, host, cache if same_target else None)
    report = placement_report(after_mod)
    for kind, value in parsed:
        if kind == "npu-node":
            rows = [r for r in report.rows if str(r.index) == value or r.name == value]
            for r in rows:
                if report.host in r.target.split("+"):
                    notes.append(f"{value} stays on the {report.host}: {r.reason}")
    return WhatIf([f"{k}={v}" for k, v in parsed], before, after, notes)
