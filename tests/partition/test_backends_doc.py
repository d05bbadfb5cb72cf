"""docs/backends.md: every ```python block runs, in order, in one namespace; the outputs it shows
are the outputs it prints; the toy backend's code in it is the example package's code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from partita.backends import unregister_backend

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "backends.md"
EXAMPLE = ROOT / "examples" / "custom_backend"
MOBILENET = ROOT / "tests" / "models" / "tflite" / "nets" / "mobilenet_v1_025_128.tflite"


def blocks(kind: str) -> list[str]:
    return re.findall(rf"^```{kind}\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)


def shown_outputs() -> list[str]:
    """The ```text blocks right after a ```python block (with an optional "prints" between)."""
    pattern = r"^```python\n.*?^```\n\n(?:prints\n\n)?```text\n(.*?)^```"
    return re.findall(pattern, DOC.read_text(), flags=re.S | re.M)


@pytest.mark.skipif(not MOBILENET.exists(), reason="the MobileNet test model is not built")
def test_doc_examples_run_and_print_what_the_doc_shows(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    unregister_backend("toy")
    namespace: dict = {"__name__": "docs_backends"}
    try:
        for i, block in enumerate(blocks("python")):
            try:
                exec(compile(block, f"{DOC.name} block {i}", "exec"), namespace)
            except Exception as e:
                raise AssertionError(f"docs/backends.md block {i} failed:\n{block}") from e
    finally:
        unregister_backend("toy")
    out = capsys.readouterr().out
    shown = shown_outputs()
    assert len(shown) >= 5
    for text in shown:
        assert text in out, f"the doc shows output the code does not print:\n{text}"


def test_the_toy_code_in_the_doc_is_the_example_package():
    module = (EXAMPLE / "partita_toy.py").read_text()
    for block in blocks("python")[:3]:
        assert block in module, f"docs/backends.md drifted from partita_toy.py:\n{block}"
    assert blocks("toml")[0] == (EXAMPLE / "pyproject.toml").read_text()
