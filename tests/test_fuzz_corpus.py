"""Bad model files get a PartitaError, nothing else (issue 16): the committed reproducers of every
class the fuzzer found (tests/fuzz_corpus, made by tools/fuzz_corpus.py) and a short seeded run
of tools/fuzz.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fuzz_corpus"
sys.path.insert(0, str(ROOT / "tools"))
import fuzz  # noqa: E402

INDEX = json.loads((CORPUS / "index.json").read_text())


@pytest.fixture(autouse=True)
def fuzz_budget(monkeypatch):
    monkeypatch.setenv("PARTITA_MEMORY_BUDGET", "256m")  # the fuzzer's budget


@pytest.mark.parametrize("name", sorted(INDEX))
def test_reproducer_is_refused_or_handled(name):
    entry = INDEX[name]
    fmt = name.rsplit(".", 1)[1]
    outcome, error_class, message = fuzz.check(fmt, (CORPUS / name).read_bytes())
    assert outcome == entry["expect"], (outcome, error_class, message)
    assert entry["expect_text"].lower() in message.lower()


@pytest.mark.parametrize(
    "name", sorted(n for n, e in INDEX.items() if e["expect"] == "ok" and n.endswith(".tflite"))
)
def test_accepted_tflite_reproducers_equal_tflites_reference_kernels(name):
    """What partita accepts, TFLite's reference kernels accept too, with the same output bits
    (a 1e-45 output scale saturates; a zero input scale; a bias zero point TFLite ignores)."""
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    from partita.frontends import from_tflite

    import partita as P

    data = (CORPUS / name).read_bytes()
    it = litert.Interpreter(
        model_content=data, experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF
    )
    it.allocate_tensors()
    inp = it.get_input_details()[0]
    x = np.random.default_rng(0).integers(-128, 128, inp["shape"], dtype=np.int8)
    it.set_tensor(inp["index"], x)
    it.invoke()
    want = it.get_tensor(it.get_output_details()[0]["index"])
    got = P.interpret(from_tflite(data), [x])[0]
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_a_short_seeded_fuzz_run_finds_nothing(tmp_path):
    """In its own process, as users run it: forking the test process (which has imported torch,
    TensorFlow and Ray, with their threads) is not what the tool does."""
    import subprocess

    cmd = [
        sys.executable,
        str(ROOT / "tools" / "fuzz.py"),
        "--cases",
        "300",
        "--seed",
        "7",
        "--workers",
        "1",
        "--out",
        str(tmp_path),
        "--progress",
        "0",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert summary["cases"] == 300
    assert summary["findings"] == {}, summary["findings"]
    assert set(summary["outcomes"]) <= {"ok", "refused"}
    assert summary["outcomes"].get("ok", 0) > 30  # the mutations leave many models valid


def test_a_hang_says_where_its_cpu_time_went_and_is_run_again(tmp_path):
    """A timeout no case can meet: every case that is not refused first hangs; the message
    names the threads' CPU seconds, and the campaign runs every hang again in a fresh worker."""
    import subprocess

    cmd = [sys.executable, str(ROOT / "tools" / "fuzz.py"), "--cases", "6", "--seed", "7",
           "--workers", "1", "--timeout", "0.001", "--out", str(tmp_path), "--progress", "0"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    summary = json.loads((tmp_path / "summary.json").read_text())
    hangs = summary["outcomes"].get("hang", 0)
    assert hangs > 0, summary["outcomes"]
    assert done.returncode == 1  # a hang is a finding
    assert sum(summary["hangs_run_again"].values()) == hangs
    lines = [json.loads(x) for x in (tmp_path / "findings.jsonl").read_text().splitlines()]
    message = next(x["message"] for x in lines if x["class"] == "hang")
    assert "s of wall time; CPU seconds by thread: " in message, message
