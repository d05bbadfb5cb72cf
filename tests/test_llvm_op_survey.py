"""tools/llvm_op_survey.py on a few ops: the summary's structure and the JSON it writes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1] / "tools"


@pytest.fixture
def survey(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(TOOLS))
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path / "llvm-cache"))
    import llvm_op_survey

    yield llvm_op_survey
    sys.modules.pop("llvm_op_survey", None)


def test_survey_of_three_ops_counts_every_case(survey, tmp_path, capsys):
    out = tmp_path / "survey.json"
    summary = survey.main(["--ops", "add,qnn.tanh,annotation.", "--max-cases-per-op", "3",
                           "--out", str(out)])  # fmt: skip
    assert set(summary["ops"]) == {"add", "qnn.tanh"}
    assert set(summary["skipped"]) == {"annotation.compiler_begin", "annotation.compiler_end"}
    for counts in summary["ops"].values():
        assert counts["cases"] == 3 == len(counts["details"])
        assert counts["cases"] == sum(counts[s] for s in survey.STATUSES)
        assert all(r["status"] in survey.STATUSES for r in counts["details"])
        assert not any("survey:" in r.get("message", "") for r in counts["details"])
    totals = summary["totals"]
    assert totals["cases"] == 6 == sum(totals.get(s, 0) for s in survey.STATUSES)
    assert json.loads(out.read_text())["totals"] == totals
    table = capsys.readouterr().out
    assert "TOTAL" in table and "qnn.tanh" in table and "skipped" in table


def test_float_comparison_reports_ulps_and_flags_a_wrong_integer(survey):
    import numpy as np

    want = np.array([1.0, -0.0, np.nan], np.float32)
    got = np.array([np.nextafter(np.float32(1), np.float32(2)), 0.0, np.nan], np.float32)
    status, _, worst = survey.compare([got], [want])
    assert status == "tol" and worst["ulps"] == 1
    status, message, _ = survey.compare([np.array([1, 2], np.int8)], [np.array([1, 3], np.int8)])
    assert status == "wrong" and "1 of 2 differ" in message
