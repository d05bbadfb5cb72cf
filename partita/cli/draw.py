"""Draw a partitioned module: SVG from a pure-Python layered layout, or Graphviz DOT.

SVG (``to_svg``, no system packages): one box per step of the schedule, in dataflow layers —
a partition lists its ops (a composite as its pattern's name, never its insides), an op left
on the host shows the reason and, when known, its fallback cost; one colour per target.
DOT (``to_dot``): every op, each partition a cluster, for Graphviz users.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from partita.ir import (
    Call,
    Constant,
    Function,
    GlobalVar,
    Tuple,
    TupleGetItem,
    Var,
    post_order,
)
from partita.ir.graph import dataflow_order

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
    """Write SVG (pure Python) or DOT; returns a note for the user (what was written)."""
    path = Path(path)
    if fmt == "dot":
        path.write_text(to_dot(mod, report))
        return f"wrote {path} (Graphviz DOT)"
    path.write_text(to_svg(mod, report))
    return f"wrote {path} (SVG)"


# ---- the SVG: steps as boxes in layers --------------------------------------------------------

LINE_H, CHAR_W, PAD, GAP_X, GAP_Y = 14, 6.6, 8, 28, 44
MAX_ROWS = 24  # lines per column of a partition's box before it wraps into another column
WRAP = 46  # characters per line of a host op's reason


class _Box:
    __slots__ = (
        "key",
        "title",
        "lines",
        "colour",
        "tooltip",
        "kind",
        "layer",
        "x",
        "y",
        "w",
        "h",
        "ins",
        "order",
        "ir_ops",
    )

    def __init__(self, key, title, lines, colour, tooltip="", kind="op"):
        self.key, self.title, self.lines, self.colour = key, title, lines, colour
        self.tooltip, self.kind = tooltip, kind
        self.layer, self.x, self.y, self.order = 0, 0.0, 0.0, 0.0
        self.ins: list = []
        self.ir_ops = 0
        self.size()

    def size(self) -> None:
        lines, title = self.lines, self.title
        columns = [lines[i : i + MAX_ROWS] for i in range(0, len(lines), MAX_ROWS)] or [[]]
        widest = [max((len(t) for t in col), default=0) for col in columns]
        self.w = (
            max(len(title) * (CHAR_W + 0.4), sum(widest) * CHAR_W + 16 * len(columns)) + 2 * PAD
        )
        self.h = (1 + min(MAX_ROWS, len(lines))) * LINE_H + 2 * PAD


def _wrap(text: str, width: int = WRAP, lines: int = 4) -> list[str]:
    words, out, line = text.split(), [], ""
    for word in words:
        if len(line) + len(word) + 1 > width and line:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    if line:
        out.append(line)
    return out[: lines - 1] + ["..."] if len(out) > lines else out


def _op_line(call: Call) -> str:
    span = call.span
    label = call.op_name
    if span is not None and span.index is not None:
        return f"{span.op_type or 'op'} #{span.index}  {label}"
    return label


def _steps(mod, report) -> list[_Box]:
    """The boxes, in dataflow order, with their inputs (``ins``: boxes)."""
    colours = _colours(report)
    rows = {(r.index, r.op): r for r in report.rows}
    boxes: list[_Box] = []
    source: dict[int, list] = {}
    groups: dict = {}  # (source op index, type) -> the host box of its IR ops
    main = mod["main"]
    for node in dataflow_order(main.body):
        key = id(node)
        if type(node) is Var:
            box = _Box(
                key, f"input {node.name_hint}", [str(node.type_or_none or "")], "white", kind="io"
            )
        elif type(node) is Call and type(node.op) is GlobalVar:
            fn = mod[node.op.name_hint]
            target = str(fn.attrs.get("Compiler", report.host))
            lines = [
                _op_line(c) if type(c.op) is not Function else _composite_line(c)
                for c in _units(fn.body)
            ]
            box = _Box(
                key,
                f"{node.op.name_hint} ({target}, {len(lines)} ops)",
                lines,
                colours.get(target, HOST_COLOUR),
                kind="partition",
            )
        elif type(node) is Call and _group_key(node) in groups:  # the same source op
            box = groups[_group_key(node)]
            box.lines.insert(box.ir_ops, node.op_name)
            box.ir_ops += 1
            _connect(box, node, source)
            source[key] = [box]
            continue
        elif type(node) is Call:
            span = node.span
            row = rows.get((span.index, span.op_type)) if span is not None else None
            reason = row.reason if row is not None else ""
            cost = ""
            if row is not None and row.host_s is not None:
                cost = f"fallback: {row.host_s * 1e3:.3f} ms host, {row.transfer_bytes} B moved"
            title = _composite_line(node) if type(node.op) is Function else _op_line(node)
            lines = [f"on {report.host}"] + _wrap(reason) + ([cost] if cost else [])
            box = _Box(key, title, lines, HOST_COLOUR, reason, kind="host")
            if _group_key(node) is not None:
                box.title = f"{span.op_type} #{span.index}"
                box.lines.insert(0, node.op_name)
                box.ir_ops = 1
                groups[_group_key(node)] = box
        else:  # tuples and items pass their inputs' boxes on
            inputs = []
            for kid in _kids(node):
                inputs += source.get(id(kid), [])
            source[key] = inputs
            continue
        _connect(box, node, source)
        boxes.append(box)
        source[key] = [box]
    out = _Box("output", "output", [], "white", kind="io")
    out.ins = list(source.get(id(main.body), []))
    boxes.append(out)
    return boxes


def _group_key(node):
    span = node.span
    if type(node.op) is Function or span is None or span.index is None:
        return None
    return (span.index, span.op_type)


def _connect(box: _Box, node, source: dict) -> None:
    for kid in _kids(node):
        for b in source.get(id(kid), []):
            if b is not box and b not in box.ins:
                box.ins.append(b)


def _kids(node) -> tuple:
    if type(node) is Call:
        return tuple(node.args)
    if type(node) is Tuple:
        return node.fields
    if type(node) is TupleGetItem:
        return (node.tuple_value,)
    return ()


def _units(body) -> list:
    """The calls a partition runs, composites whole, in dataflow order."""
    return [n for n in dataflow_order(body) if type(n) is Call]


def _composite_line(call: Call) -> str:
    name = str(call.op.attrs.get("Composite", "fn"))
    span = call.span
    if span is None or span.index is None:
        inner = [c for c in post_order(call.op.body) if type(c) is Call and c.span is not None]
        span = inner[-1].span if inner else None
    if span is not None and span.index is not None:
        return f"{span.op_type or 'op'} #{span.index}  {name}"
    return name


def _colours(report) -> dict:
    targets = sorted({t for r in report.rows for t in r.target.split("+")} - {report.host})
    colours = {t: PALETTE[i % len(PALETTE)] for i, t in enumerate(targets)}
    colours[report.host] = HOST_COLOUR
    return colours


def layout(boxes: list[_Box]) -> tuple[float, float]:
    """Layered layout: layer = longest path from an input, order in a layer by the mean
    position of the inputs (two sweeps), then x packed left to right and centred; returns the
    picture's width and height."""
    for box in boxes:
        box.size()
    _layers(boxes)
    layers: dict[int, list] = {}
    for box in boxes:
        layers.setdefault(box.layer, []).append(box)
    for n, row in sorted(layers.items()):
        for i, box in enumerate(row):
            box.order = i
        if n:
            row.sort(key=lambda b: sum(i.order for i in b.ins) / max(1, len(b.ins)))
            for i, box in enumerate(row):
                box.order = i
    width = max(sum(b.w for b in row) + GAP_X * (len(row) - 1) for row in layers.values())
    y = GAP_Y / 2
    for _n, row in sorted(layers.items()):
        x = (width - (sum(b.w for b in row) + GAP_X * (len(row) - 1))) / 2 + GAP_X / 2
        for box in row:
            box.x, box.y = x, y
            x += box.w + GAP_X
        y += max(b.h for b in row) + GAP_Y
    return width + GAP_X, y


def _layers(boxes: list[_Box]) -> None:
    """layer = the longest path from an input (a box that groups a source op's IR ops may
    take inputs from boxes made after it, so this walks the inputs, not the creation order)."""
    done: dict[int, int] = {}
    for start in boxes:
        stack = [(start, iter(start.ins))]
        done.setdefault(id(start), -1)
        while stack:
            box, pending = stack[-1]
            for b in pending:
                if id(b) not in done:
                    done[id(b)] = -1  # in progress: an edge back to it is ignored
                    stack.append((b, iter(b.ins)))
                    break
            else:
                stack.pop()
                box.layer = 1 + max((b.layer for b in box.ins if done[id(b)] >= 0), default=-1)
                done[id(box)] = box.layer


def to_svg(mod, report) -> str:
    """The partitioned ``mod`` as a standalone SVG (see the module docstring)."""
    boxes = _steps(mod, report)
    width, height = layout(boxes)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="monospace" font-size="11">',
        "<defs><marker id='arrow' viewBox='0 0 8 8' refX='8' refY='4' markerWidth='7' "
        "markerHeight='7' orient='auto'><path d='M0,0 L8,4 L0,8 z' fill='#555'/></marker></defs>",
    ]
    for box in boxes:
        for src in box.ins:
            x1, y1 = src.x + src.w / 2, src.y + src.h
            x2, y2 = box.x + box.w / 2, box.y
            mid = (y1 + y2) / 2
            parts.append(
                f'<path d="M{x1:.1f},{y1:.1f} C{x1:.1f},{mid:.1f} {x2:.1f},{mid:.1f} '
                f'{x2:.1f},{y2:.1f}" fill="none" stroke="#555" marker-end="url(#arrow)"/>'
            )
    for box in boxes:
        parts.append(_svg_box(box))
    legend = "  ".join(f"{t}: {c}" for t, c in _colours(report).items())
    parts.append(f'<text x="4" y="12" fill="#333">{escape(legend)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _svg_box(box: _Box) -> str:
    rx = 10 if box.kind == "host" else 3
    out = [
        f'<g class="step {box.kind}" data-key="{escape(str(box.title))}">',
        f"<title>{escape(box.tooltip or box.title)}</title>",
        f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" '
        f'rx="{rx}" fill="{box.colour}" stroke="#333"/>',
        f'<text x="{box.x + PAD:.1f}" y="{box.y + PAD + 10:.1f}" font-weight="bold">'
        f"{escape(box.title)}</text>",
    ]
    col_x = box.x + PAD
    for c in range(0, len(box.lines), MAX_ROWS):
        column = box.lines[c : c + MAX_ROWS]
        for i, line in enumerate(column):
            y = box.y + PAD + 10 + (i + 1) * LINE_H
            out.append(f'<text x="{col_x:.1f}" y="{y:.1f}">{escape(line)}</text>')
        col_x += max(len(t) for t in column) * CHAR_W + 16
    out.append("</g>")
    return "".join(out)


__all__ = ["layout", "to_dot", "to_svg", "write_drawing"]
