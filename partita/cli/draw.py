"""Draw a partitioned module: Graphviz DOT, rendered to SVG when Graphviz's ``dot`` is installed.

One colour per target; each partition is a cluster; composites are boxes named by their pattern;
ops left on the host are labelled with the reason the placement report gives.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from partita.errors import PartitaError
from partita.ir import Call, Constant, Function, GlobalVar, Tuple, TupleGetItem, post_order

PALETTE = ("#8ecae6", "#ffb703", "#90be6d", "#f4a261", "#cdb4db", "#e9c46a")
HOST_COLOUR = "#e0e0e0"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class _Dot:
    def __init__(self, mod, report):
        self.mod, self.lines, self.ids = mod, [], {}
        self.reasons = {r.index: r.reason for r in report.rows if r.reason}
        targets = sorted({t for r in report.rows for t in r.target.split("+")} - {report.host})
        self.colour = {t: PALETTE[i % len(PALETTE)] for i, t in enumerate(targets)}
        self.colour[report.host] = HOST_COLOUR
        self.host = report.host
        self.count = 0

    def new(self, label: str, shape: str, colour: str, tooltip: str = "") -> str:
        self.count += 1
        name = f"n{self.count}"
        extra = f", tooltip={_quote(tooltip)}" if tooltip else ""
        self.lines.append(
            f"  {name} [label={_quote(label)}, shape={shape}, style=filled, "
            f"fillcolor={_quote(colour)}{extra}];"
        )
        return name

    def edge(self, a: str | None, b: str) -> None:
        if a is not None:
            self.lines.append(f"  {a} -> {b};")

    def source(self, node, env) -> str | None:
        """The drawn node that produces ``node``'s value (None for constants)."""
        if isinstance(node, Constant):
            return None
        if isinstance(node, TupleGetItem):
            inner = self.ids.get(id(node.tuple_value))
            if isinstance(inner, list):
                return inner[node.index]
            return self.source(node.tuple_value, env)
        if id(node) in env:
            return env[id(node)]
        out = self.ids.get(id(node))
        return out[0] if isinstance(out, list) else out

    def function(self, fn: Function, env: dict, target: str) -> object:
        for node in post_order(fn.body):
            if isinstance(node, Call):
                self.call(node, env, target)
            elif isinstance(node, Tuple):
                self.ids[id(node)] = [self.source(f, env) for f in node.fields]
        return self.ids.get(id(fn.body)) or self.source(fn.body, env)

    def call(self, node: Call, env: dict, target: str) -> None:
        op = node.op
        args = [self.source(a, env) for a in node.args]
        if isinstance(op, GlobalVar) and self.mod[op.name_hint].attrs.get("Compiler"):
            callee = self.mod[op.name_hint]
            tgt = str(callee.attrs["Compiler"])
            self.lines.append(f"  subgraph cluster_{op.name_hint} {{")
            self.lines.append(f"  label={_quote(op.name_hint + ' (' + tgt + ')')};")
            inner = {id(p): a for p, a in zip(callee.params, args)}
            self.ids[id(node)] = self.function(callee, inner, tgt)
            self.lines.append("  }")
            return
        if isinstance(op, Function) and op.attrs.get("Composite"):
            label, shape = str(op.attrs["Composite"]), "box"
        elif isinstance(op, Function):
            inner = {id(p): a for p, a in zip(op.params, args)}
            self.ids[id(node)] = self.function(op, inner, target)
            return
        else:
            label, shape = getattr(op, "name", str(op)), "ellipse"
        tooltip = ""
        span = node.span
        if target == self.host and span is not None and span.index in self.reasons:
            tooltip = self.reasons[span.index]
            label += "\n" + (tooltip if len(tooltip) <= 60 else tooltip[:57] + "...")
        if span is not None and span.op_type:
            label = f"{span.op_type} #{span.index}\n{label}"
        me = self.new(label, shape, self.colour.get(target, HOST_COLOUR), tooltip)
        for a in args:
            self.edge(a, me)
        self.ids[id(node)] = me


def to_dot(mod, report) -> str:
    """The partitioned ``mod`` as Graphviz DOT."""
    d = _Dot(mod, report)
    main = mod["main"]
    env = {}
    for p in main.params:
        env[id(p)] = d.new(p.name_hint, "invhouse", "white")
    out = d.function(main, env, report.host)
    sink = d.new("output", "house", "white")
    for o in out if isinstance(out, list) else [out]:
        d.edge(o, sink)
    legend = ", ".join(f"{t}: {c}" for t, c in d.colour.items())
    head = ["digraph partita {", "  rankdir=TB;", f"  label={_quote('targets: ' + legend)};"]
    return "\n".join(head + d.lines + ["}"]) + "\n"


def write_drawing(mod, report, path, fmt: str) -> str:
    """Write DOT, or SVG through Graphviz; returns a note for the user (what was written)."""
    dot = to_dot(mod, report)
    path = Path(path)
    if fmt == "dot":
        path.write_text(dot)
        return f"wrote {path} (Graphviz DOT)"
    exe = shutil.which("dot")
    if exe is None:
        fallback = path.with_suffix(".dot")
        fallback.write_text(dot)
        return (
            f"Graphviz's 'dot' is not installed, so no SVG: wrote {fallback} instead "
            f"(render it with: dot -Tsvg {fallback} -o {path})"
        )
    done = subprocess.run([exe, "-Tsvg", "-o", str(path)], input=dot.encode(), capture_output=True)
    if done.returncode != 0:
        raise PartitaError(f"Graphviz failed: {done.stderr.decode(errors='replace').strip()}")
    return f"wrote {path} (SVG)"


__all__ = ["to_dot", "write_drawing"]
