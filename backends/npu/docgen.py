"""Generate docs/npu_supported_ops.md from the pattern table and the constraint texts.

python -m partita.backends.npu.docgen > docs/npu_supported_ops.md
"""

from __future__ import annotations

from partita.backends.verdict import requirements_of

from .config import PRESETS
from .patterns import pattern_table

HEADER = """# Operators the NPU runs

Generated from backends/npu/patterns.py and backends/npu/constraints.py by
`python -m partita.backends.npu.docgen`; a test fails when this file is stale. An op that
matches no row, or fails a requirement, stays on the CPU with the requirement's text as its
reason in the placement report.
"""


def render() -> str:
    lines = [HEADER, "| composite | requirements |", "|---|---|"]
    for name, _pattern, check in pattern_table():
        reqs = requirements_of(check) if check is not None else []
        text = "<br>".join(reqs) or "none"
        lines.append(f"| `npu.{name}` | {text} |")
    lines += ["", "Presets: " + ", ".join(f"`{p}`" for p in PRESETS) + " (docs/npu.md).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(), end="")
