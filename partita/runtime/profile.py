"""Profiles: where an inference's time went, per step and per operation, as data and a table.

Each step reports its measured host time; its region adds its own records (an NPU operation's
cycles, MACs, utilisation and bytes per memory; a CPU kernel's time). Totals sum the numeric
metrics per target, so ``profile.totals["npu"]["cycles"]`` is the NPU's cycle count.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from partita.backends.compiled import OpProfile

# Metrics summed into the totals when a region reports them.
SUMMED = ("cycles", "compute_cycles", "memory_cycles", "macs", "bytes", "time_at_clock_s")


@dataclass
class StepProfile:
    """One step: its symbol, target, measured host time and the region's own records."""

    symbol: str
    target: str
    time_s: float
    ops: list[OpProfile] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "symbol": self.symbol,
            "target": self.target,
            "time_s": self.time_s,
            "ops": [op.to_dict() for op in self.ops],
        }


class Profile:
    """The median run of ``Executable.profile``: steps, totals, ``table()`` and ``to_json()``."""

    def __init__(self, target: str, total_s: float, steps: list[StepProfile], repeat: int = 1):
        self.target, self.total_s, self.steps, self.repeat = target, total_s, steps, repeat

    @property
    def totals(self) -> dict:
        """Per target: host time, step and op counts, and the summed metrics of its ops."""
        out: dict[str, dict] = {}
        for step in self.steps:
            t = out.setdefault(step.target, {"time_s": 0.0, "steps": 0, "ops": 0})
            t["time_s"] += step.time_s
            t["steps"] += 1
            t["ops"] += len(step.ops)
            for op in step.ops:
                for key in SUMMED:
                    value = op.metrics.get(key)
                    if isinstance(value, (int, float)):
                        t[key] = t.get(key, 0) + value
                    elif isinstance(value, dict):  # e.g. bytes per memory
                        sub = t.setdefault(key, {})
                        for k, v in value.items():
                            sub[k] = sub.get(k, 0) + v
        return out

    def to_dict(self) -> dict:
        return {
            "target": self.target,
            "total_s": self.total_s,
            "repeat": self.repeat,
            "totals": self.totals,
            "steps": [s.to_dict() for s in self.steps],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=_plain)

    def table(self, ops: bool = True) -> str:
        """Steps and (with ``ops``) their operations, then the totals per target."""
        lines = [
            f"{'step / operation':40} {'target':8} {'host ms':>9} {'cycles':>11} {'MACs':>11} "
            f"{'util':>5} {'bytes':>10} {'GMAC/s':>8}"
        ]
        for step in self.steps:
            cycles = sum(op.metrics.get("cycles", 0) or 0 for op in step.ops)
            macs = sum(op.metrics.get("macs", 0) or 0 for op in step.ops)
            moved = sum(_bytes(op.metrics.get("bytes")) for op in step.ops)
            lines.append(
                f"{step.symbol[:40]:40} {step.target[:8]:8} {1e3 * step.time_s:9.3f} "
                f"{_num(cycles):>11} {_num(macs):>11} {'':>5} {_num(moved):>10}"
            )
            if ops and len(step.ops) > 1:
                for op in step.ops:
                    m = op.metrics
                    t = "" if op.time_s is None else f"{1e3 * op.time_s:9.3f}"
                    util = m.get("utilisation", m.get("utilization"))
                    util = f"{100 * util:4.0f}%" if isinstance(util, (int, float)) else ""
                    lines.append(
                        f"  {op.name[:38]:38} {op.kind[:8]:8} {t:>9} "
                        f"{_num(m.get('cycles', 0)):>11} {_num(m.get('macs', 0)):>11} "
                        f"{util:>5} {_num(_bytes(m.get('bytes'))):>10} {_rate(m):>8}"
                    )
        lines.append("")
        for target, t in self.totals.items():
            extra = ""
            if t.get("cycles"):
                extra = f", {t['cycles']:,} cycles"
                if t.get("time_at_clock_s"):
                    extra += f" ({1e3 * t['time_at_clock_s']:.3f} ms at the NPU clock)"
            if isinstance(t.get("bytes"), dict) and t["bytes"]:
                extra += ", bytes " + ", ".join(f"{k} {v:,}" for k, v in t["bytes"].items())
            lines.append(
                f"{target}: {t['steps']} step{'s' * (t['steps'] != 1)}, "
                f"{1e3 * t['time_s']:.3f} ms host time{extra}"
            )
        lines += _peak_lines(self.steps)
        lines.append(f"total: {1e3 * self.total_s:.3f} ms (median of {self.repeat})")
        return "\n".join(lines)

    def __str__(self):
        return self.table()


def _bytes(value) -> int:
    """A bytes metric: a count, or a dict of counts per memory (summed)."""
    if isinstance(value, dict):
        return int(sum(v for v in value.values() if isinstance(v, (int, float))))
    return int(value) if isinstance(value, (int, float)) else 0


def _rate(m: dict) -> str:
    """A product kernel's GMAC/s (a CPU kernel's peak.speed_metrics), else blank."""
    rate = m.get("gmac_s")
    return f"{rate:8.2f}" if isinstance(rate, (int, float)) else ""


def _peak_lines(steps) -> list[str]:
    """Per tier and kind of product (int8, float): the product kernels' time, GMAC/s and
    fraction of one core's peak at the measured clock."""
    groups: dict[tuple, list] = {}
    for step in steps:
        for op in step.ops:
            m = op.metrics
            if isinstance(m.get("gmac_s"), (int, float)) and op.time_s:
                cls = "float" if "gflop_s" in m else "int8"
                groups.setdefault((m["tier"], cls, m["peak_gmac_s"], m["clock_ghz"],
                                   m.get("achievable_gmac_s")), []).append((m["macs"], op.time_s))
    lines = []
    for (tier, cls, peak, clock, reach), rows in groups.items():
        macs, secs = sum(r[0] for r in rows), sum(r[1] for r in rows)
        rate = macs / secs / 1e9
        lines.append(
            f"{tier} {cls} products: {len(rows)} kernels, {1e3 * secs:.3f} ms, {rate:.2f} "
            f"GMAC/s = {100 * rate / peak:.0f}% of the tier's peak ({peak:.1f} GMAC/s per core "
            f"at {clock:.2f} GHz)"
            + (f", {100 * rate / reach:.0f}% of the {reach:.1f} GMAC/s reachable into int32 sums"
               if reach else "")
        )
    return lines


def _num(value) -> str:
    return f"{value:,}" if value else ""


def _plain(value):
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
