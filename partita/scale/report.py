"""Sweep records as a table, CSV, and a plot of cycles against SRAM and MAC-array size with the
Pareto front marked (matplotlib; SVG or PNG by the file's extension)."""

from __future__ import annotations

import csv
import io

from partita.errors import PartitaError

COLUMNS = (
    "model",
    "target",
    "status",
    "npu_cycles",
    "npu_time_at_clock_s",
    "npu_sram_peak_bytes",
    "npu_ops",
    "npu_macs",
    "macs",
    "cpu_time_s",
    "partitions",
)


def _size(value) -> float | None:
    """``256k`` / ``1m`` / ``524288`` -> bytes."""
    if value is None:
        return None
    text = str(value).strip().lower()
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1:], 1)
    try:
        return float(text[:-1] if scale > 1 else text) * scale
    except ValueError:
        return None


def table(records: list[dict]) -> str:
    """One line per point: cycles, time at the clock, SRAM peak, NPU share, CPU time."""
    lines = [
        f"{'model':28} {'target':44} {'NPU cycles':>12} {'ms@clk':>8} {'SRAM peak':>10} "
        f"{'NPU MACs':>8} {'CPU ms':>8}"
    ]
    for r in records:
        if r.get("status") != "ok":
            lines.append(f"{r['model'][:28]:28} {r['target'][:44]:44} failed: {r.get('error')}")
            continue
        cycles = r.get("npu_cycles")
        clk = r.get("npu_time_at_clock_s")
        peak = r.get("npu_sram_peak_bytes")
        share = r["npu_macs"] / r["macs"] if r.get("macs") and r.get("npu_macs") is not None else 0
        lines.append(
            f"{r['model'][:28]:28} {r['target'][:44]:44} "
            f"{(f'{cycles:,}' if cycles else '-'):>12} {(f'{1e3 * clk:.3f}' if clk else '-'):>8} "
            f"{(f'{peak / 1024:.0f} KiB' if peak else '-'):>10} {100 * share:7.1f}% "
            f"{1e3 * r.get('cpu_time_s', 0):8.3f}"
        )
    return "\n".join(lines)


def _flat(record: dict) -> dict:
    """Dict values (``npu_bytes``: bytes per memory) as one column per key (``npu_bytes.sram``)."""
    out = {}
    for k, v in record.items():
        if isinstance(v, dict) and k != "options":
            out.update({f"{k}.{sub}": value for sub, value in v.items()})
        else:
            out[k] = v
    return out


def to_csv(records: list[dict]) -> str:
    records = [_flat(r) for r in records]
    keys = list(COLUMNS) + sorted({k for r in records for k in r} - set(COLUMNS) - {"options"})
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=keys, extrasaction="ignore")
    writer.writeheader()
    for r in records:
        writer.writerow({k: r.get(k) for k in keys})
    return buf.getvalue()


def pareto(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats in both coordinates (lower is better)."""
    front = []
    for i, (x, y) in enumerate(points):
        if not any((a <= x and b <= y) and (a < x or b < y) for a, b in points):
            front.append(i)
    return front


def plot(records: list[dict], path) -> None:
    """Cycles against SRAM size and against MACs per cycle, per model, Pareto front marked."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PartitaError("--plot needs matplotlib: pip install 'partita[plot]'") from None
    ok = [r for r in records if r.get("status") == "ok" and r.get("npu_cycles")]
    if not ok:
        raise PartitaError("nothing to plot: no point has NPU cycles")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for model in sorted({r["model"] for r in ok}):
        rs = [r for r in ok if r["model"] == model]
        sram = [
            _size(r["options"].get("npu", {}).get("sram")) or r.get("npu_sram_peak_bytes") or 0
            for r in rs
        ]
        macs = [r.get("npu_macs_per_cycle") or 0 for r in rs]
        cycles = [r["npu_cycles"] for r in rs]
        for ax, xs, label in ((axes[0], sram, "SRAM (bytes)"), (axes[1], macs, "MACs per cycle")):
            line = ax.scatter(xs, cycles, label=model, alpha=0.7)
            front = pareto(list(zip(xs, cycles)))
            pts = sorted((xs[i], cycles[i]) for i in front)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "--", color=line.get_facecolor()[0])
            ax.set_xlabel(label)
            ax.set_ylabel("NPU cycles")
    axes[0].set_title("cycles vs SRAM (dashed: Pareto front)")
    axes[1].set_title("cycles vs MAC array size")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(str(path))
    plt.close(fig)
