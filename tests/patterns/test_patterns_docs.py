"""Every ```python block of docs/rewrites.md runs, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "rewrites.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_docs_have_examples_for_each_required_rewrite():
    text = DOC.read_text()
    assert len(python_blocks(text)) >= 10
    for title in (
        "QnnQuantizeConstFold",
        "RemoveClipAfterRequantize",
        "Fuse dequantize → float op → quantize",
    ):
        assert title in text


def test_doc_examples_run(capsys):
    namespace: dict = {"__name__": "docs_rewrites"}
    for i, block in enumerate(python_blocks(DOC.read_text())):
        try:
            exec(compile(block, f"{DOC.name} block {i}", "exec"), namespace)
        except Exception as e:
            raise AssertionError(f"docs/rewrites.md block {i} failed:\n{block}") from e
    out = capsys.readouterr().out
    assert "did you mean strides?" in out
    shown = re.search(r"^prints\n\n```text\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)
    assert shown and shown.group(1) in out, "the explain output shown in the doc is stale"
