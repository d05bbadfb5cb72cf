from pathlib import Path

from partita.ops import list_ops
from partita.ops.docgen import render

ROOT = Path(__file__).resolve().parents[1]


def test_ops_doc_is_up_to_date():
    committed = (ROOT / "docs" / "ops.md").read_text()
    assert committed == render(), "docs/ops.md is stale: python -m partita.ops.docgen > docs/ops.md"


def test_every_op_is_documented():
    missing = [op.name for op in list_ops() if len(op.doc) < 10]
    assert not missing, f"ops without a docstring: {missing}"
