"""``partita inspect --html FILE``: one offline HTML file with the picture of the partitions
(inline SVG), the whole-system estimate, and the placement table with each host op's reason
and fallback cost. No scripts, fonts or styles are fetched: a browser opens it offline."""

from __future__ import annotations

from html import escape
from pathlib import Path

from partita.cli.draw import to_svg
from partita.partition.estimate import ESTIMATE_ROWS

STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
table { border-collapse: collapse; font-size: 0.85em; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; } tr.host td { background: #f7f7f7; }
td.num { text-align: right; font-family: monospace; }
.picture { overflow: auto; max-width: 100%; border: 1px solid #ddd; }
"""


def _row(cells, cls: str = "", header: bool = False) -> str:
    tag = "th" if header else "td"
    out = "".join(
        f"<{tag}{' class=num' if isinstance(c, (int, float)) else ''}>{escape(str(c))}</{tag}>"
        for c in cells
    )
    return f"<tr{f' class={cls}' if cls else ''}>{out}</tr>"


def render_html(title: str, target: str, partitioned, report, est) -> str:
    """The report as one HTML document."""
    totals = est.totals()
    est_rows = [
        _row(("quantity", "estimated", "measured"), header=True),
        *(_row((label, _value(totals[key], kind), "-")) for key, label, kind in ESTIMATE_ROWS),
    ]
    head = ("#", "op", "name", "target", "composite", "partition", "fallback cost", "reason")
    rows = [_row(head, header=True)]
    for r in report.rows:
        cost = (
            f"{r.host_s * 1e3:.3f} ms host, {r.transfer_bytes} B moved"
            if r.host_s is not None
            else ""
        )
        cells = (
            "" if r.index is None else r.index,
            r.op,
            r.name,
            r.target,
            r.composite,
            r.partition,
            cost,
            r.reason,
        )
        rows.append(_row(cells, "host" if report.host in r.target.split("+") else ""))
    partitions = "".join(f"<li>{escape(p)}</li>" for p in report.partitions)
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>partita: {escape(title)}</title><style>{STYLE}</style></head><body>",
            f"<h1>{escape(title)} for <code>{escape(target)}</code></h1>",
            f"<p id='summary'>{escape(report.summary_line())}</p>",
            f"<h2>Partitions</h2><ul id='partitions'>{partitions}</ul>",
            f"<div class='picture' id='picture'>{to_svg(partitioned, report)}</div>",
            f"<h2>Whole-system estimate</h2><p>host: {escape(est.host_model)}</p>",
            f"<table id='estimate'>{''.join(est_rows)}</table>",
            "<h2>Placement</h2>",
            f"<table id='placement'>{''.join(rows)}</table>",
            "</body></html>",
        ]
    )


def _value(v, kind: str) -> str:
    if kind == "s":
        return f"{v * 1e3:.3f} ms"
    if kind == "B":
        return f"{int(v):,} B"
    return f"{v:,.0f}"


def write_html(path, model, target: str, partitioned, report, est) -> None:
    """Write the report to ``path``."""
    Path(path).write_text(render_html(Path(str(model)).name, target, partitioned, report, est))
