"""Render docs/ops.md from the registry, so the op reference cannot drift from the code.

python -m partita.ops.docgen > docs/ops.md
"""

from __future__ import annotations

import dataclasses
import inspect

from .registry import Op, list_ops

HEADER = """# partita ops

Generated from the op registry by `python -m partita.ops.docgen > docs/ops.md`; a test fails when
this file is stale. Each op's semantics is its numpy reference implementation, which the
interpreter runs; the text below is that implementation's docstring.

Quantized ops whose integer result depends on the runtime's algorithm carry `semantics`:
`"tflite"` reproduces TFLite's reference integer kernels bit for bit, `"onnx"` reproduces ONNX
Runtime (float scale, round half to even).
"""


def render_op(op: Op) -> str:
    lines = [f"### `{op.name}`", "", f"Inputs: {', '.join(f'`{i}`' for i in op.inputs)}."]
    flags = [f"kind: {op.kind}"] + (["commutative"] if op.commutative else [])
    lines.append(f"{'; '.join(flags).capitalize()}.")
    fields = dataclasses.fields(op.attrs_type)
    if fields:
        lines += ["", "| attribute | default | allowed |", "|---|---|---|"]
        for f in fields:
            default = "required" if f.default is dataclasses.MISSING else f"`{f.default!r}`"
            allowed = ", ".join(f"`{c}`" for c in f.metadata.get("choices", ())) or str(f.type)
            lines.append(f"| `{f.name}` | {default} | {allowed.replace('|', 'or')} |")
    lines += ["", inspect.cleandoc(op.doc) if op.doc else "(undocumented)", ""]
    return "\n".join(lines)


def render() -> str:
    ops = list_ops()
    groups: dict[str, list[Op]] = {}
    for op in ops:
        groups.setdefault(op.name.split(".")[0] if "." in op.name else "tensor", []).append(op)
    out = [HEADER]
    for group in sorted(
        groups,
        key=lambda g: (
            ("tensor", "nn", "image", "qnn").index(g)
            if g in ("tensor", "nn", "image", "qnn")
            else 9
        ),
    ):
        out.append(f"## {group}\n")
        out.extend(render_op(op) for op in groups[group])
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    import sys

    sys.stdout.write(render())
