"""The ``partita`` command line: ``partita inspect MODEL --target TARGET [--json]``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from partita.backends import Backend, register_backend, unregister_backend
from partita.patterns import is_op, wildcard

import partita.cli as cli

ROOT = Path(__file__).resolve().parents[1]
MOBILENET = ROOT / "tests" / "models" / "tflite" / "nets" / "mobilenet_v1_025_128.tflite"
MODEL = """
def @main(%x: Tensor[(2, 4), float32]) {
  %0 = add(%x, %x) /* span=ADD:0:sum */;
  %1 = tanh(%0) /* span=TANH:1:squash */;
  nn.relu(%1) /* span=RELU:2:out */
}
"""


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "net.relay"
    path.write_text(MODEL)
    return path


@pytest.fixture(autouse=True)
def acc():
    register_backend(
        Backend("acc_cli", ops=["add"], patterns=[("relu", is_op("nn.relu")(wildcard()))]),
        override=True,
    )
    yield
    unregister_backend("acc_cli")


def run(capsys, *argv):
    status = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_inspect_prints_the_report_and_the_summary(capsys, model):
    status, out, err = run(capsys, "inspect", model, "--target", "acc_cli, llvm")
    assert status == 0 and err == ""
    lines = out.splitlines()
    head = ["#", "op", "name", "target", "composite", "partition", "fallback", "cost", "reason"]
    assert lines[0].split() == head  # the cost of each fallback (issue 26)
    assert lines[1].split()[:5] == ["0", "ADD", "sum", "acc_cli", "acc_cli_main_0"]
    assert "no pattern matched: no acc_cli pattern contains tanh" in lines[2]
    assert lines[-1] == ("3 source ops, 0 MACs: acc_cli 2 ops, llvm 1 op; 2 partitions")


def test_inspect_json(capsys, model):
    status, out, _ = run(capsys, "inspect", model, "-t", "acc_cli", "--json")
    data = json.loads(out)
    assert status == 0
    assert [r["target"] for r in data["rows"]] == ["acc_cli", "llvm", "acc_cli"]
    assert data["summary"]["partitions"] == 2


def test_policies_from_the_command_line(capsys, model):
    _, out, _ = run(
        capsys, "inspect", model, "-t", "acc_cli", "--json", "--cpu-op", "RELU", "--cpu-node", "sum"
    )
    assert {r["target"] for r in json.loads(out)["rows"]} == {"llvm"}
    _, out, _ = run(capsys, "inspect", model, "-t", "acc_cli", "--json", "--min-region-size", "2")
    assert json.loads(out)["summary"]["partitions"] == 0


def test_strict_exits_with_1_and_still_prints_the_report(capsys, model):
    status, out, err = run(capsys, "inspect", model, "-t", "acc_cli", "--strict")
    assert status == 1
    assert "no pattern matched" in out
    assert err == "partita: strict mode: 1 source op left on the llvm\n"


@pytest.mark.parametrize(
    "name, message",
    [
        ("net.caffemodel", "cannot tell the format of .* \\(partita reads .tflite, .onnx, .pt2"),
        ("missing.tflite", "no such model file"),
    ],
)
def test_bad_model_paths(capsys, tmp_path, name, message):
    import re

    path = tmp_path / name
    if name.endswith(".caffemodel"):
        path.write_text("x")
    status, _, err = run(capsys, "inspect", path, "-t", "llvm")
    assert status == 3 and re.search(message, err), err  # 3: a model file that cannot be read


def test_formats_without_a_frontend_say_so(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(
        cli.LOADERS,
        ".pt2",
        ("partita.frontends.no_such_frontend", "from_pt2", "PyTorch (torch.export)"),
    )
    path = tmp_path / "net.pt2"
    path.write_bytes(b"")
    status, _, err = run(capsys, "inspect", path, "-t", "llvm")
    assert status == 4  # an unsupported model
    assert "PyTorch (torch.export) models (.pt2) are not supported yet" in err


def test_a_frontend_missing_a_dependency_says_which(capsys, tmp_path, monkeypatch):
    fake = tmp_path / "fake_frontend_needing_dep.py"
    fake.write_text("import a_package_that_is_not_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli.LOADERS, ".pt2", ("fake_frontend_needing_dep", "load", "PyTorch"))
    path = tmp_path / "net.pt2"
    path.write_bytes(b"")
    _, _, err = run(capsys, "inspect", path, "-t", "llvm")
    assert "needs the 'a_package_that_is_not_installed' package" in err


def test_unknown_target_is_a_usage_error(capsys, model):
    status, _, err = run(capsys, "inspect", model, "-t", "gpu9")
    assert status == 2 and "unknown backend 'gpu9'" in err


@pytest.mark.skipif(not MOBILENET.exists(), reason="the MobileNet test model is not built")
def test_inspect_a_tflite_mobilenet(capsys):
    status, out, _ = run(capsys, "inspect", MOBILENET, "--target", "llvm")
    assert status == 0
    assert out.splitlines()[-1].startswith("30 source ops, 13.3 M MACs: llvm 30 ops")


def test_python_dash_m_and_the_console_script(model):
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"partita": "partita.cli:main"}
    result = subprocess.run(
        [sys.executable, "-m", "partita", "inspect", str(model), "-t", "llvm"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "3 source ops, 0 MACs: llvm 3 ops; 0 partitions"
    version = subprocess.run(
        [sys.executable, "-m", "partita", "--version"], capture_output=True, text=True
    )
    assert version.stdout.startswith("partita ")


@pytest.mark.parametrize(
    "path",
    [
        "tests/models/onnx/nets/mobilenet_v1_025_96.qdq_u8s8_pt.onnx",
        pytest.param("tests/models/pytorch/pt2e_x86_ops.pt2", marks=pytest.mark.slow),
    ],
)
def test_inspect_dispatches_on_the_extension(capsys, path):
    path = ROOT / path
    if not path.exists():
        pytest.skip(f"{path.name} is not built")
    if path.suffix == ".pt2":
        pytest.importorskip("torch")
    status, out, err = run(capsys, "inspect", path, "-t", "llvm", "--json")
    assert status == 0, err
    data = json.loads(out)
    assert data["summary"]["ops"] == len(data["rows"]) > 0
