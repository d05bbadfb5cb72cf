"""The "declare a pattern table for a new backend" story: examples/custom_backend is an outside
package whose entry point makes ``toy`` a target, with no change to partita."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from backend_helpers import fake_distribution
from common_graphs import int8_convnet
from partita.backends import get_backend, unregister_backend
from partita.partition import partition_for, placement_report

import partita as P

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "custom_backend"
MOBILENET = ROOT / "tests" / "models" / "tflite" / "nets" / "mobilenet_v1_025_128.tflite"
RELAY_MODEL = """
def @main(%x: Tensor[(1, 4, 4, 2), int8]) {
  %0 = qnn.add(%x, %x, 0.5f, 0, 0.5f, 0, 1f, 0) /* span=ADD:0:sum */;
  clip(%0, a_min=-100f, a_max=100f) /* span=ADD:0:sum */
}
"""


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The example registered through the entry-point machinery (its .dist-info on sys.path)."""
    fake_distribution(tmp_path, "partita-toy-backend", {"toy": "partita_toy:backend"}, {})
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.syspath_prepend(str(tmp_path))
    unregister_backend("toy")
    yield get_backend("toy")
    unregister_backend("toy")
    sys.modules.pop("partita_toy", None)


def test_example_is_one_small_module_and_one_pyproject():
    built = ("__pycache__", "build")  # what an in-tree `pip install examples/custom_backend` leaves
    files = sorted(
        p.name
        for p in EXAMPLE.iterdir()
        if p.name not in built and not p.name.endswith(".egg-info")
    )
    assert files == ["partita_toy.py", "pyproject.toml"]
    assert len((EXAMPLE / "partita_toy.py").read_text().splitlines()) < 100
    assert '[project.entry-points."partita.backends"]' in (EXAMPLE / "pyproject.toml").read_text()


def test_toy_partitions_a_model_and_explains_the_rest(toy):
    mod = int8_convnet(strides=((1, 1), (4, 4)))
    out = partition_for(mod, "toy, llvm")
    rows = {r.name: r for r in placement_report(out).rows}
    assert (rows["conv0"].target, rows["conv0"].composite) == ("toy", "toy.conv2d")
    assert rows["conv0"].partition == "toy_main_0"
    assert rows["conv1"].target == "llvm"
    assert rows["conv1"].reason == "toy.conv2d: Stride must be 1 or 2 in both directions (got 4x4)"
    assert rows["mean"].reason == (
        "no pattern matched: no toy pattern contains qnn.mean, and no target supports it alone"
    )
    x = np.random.default_rng(1).integers(-128, 128, (1, 8, 8, 4), dtype=np.int8)
    assert np.array_equal(P.interpret(mod, [x])[0], P.interpret(out, [x])[0])


def test_toy_options_change_its_table(toy):
    mod = int8_convnet(strides=((1, 1),))
    grouped = partition_for(mod, "toy -depthwise=no, llvm")  # not depthwise: still taken
    assert placement_report(grouped).rows[0].target == "toy"
    with pytest.raises(P.PartitaError, match="no option -colour"):
        partition_for(mod, "toy -colour=red")


def test_toy_compile_hook_runs_a_partition(toy):
    out = partition_for(int8_convnet(strides=((1, 1),)), "toy")
    region = toy.compile(out["toy_main_0"])
    assert region.backend == "toy" and region.name == "toy_main_0"
    x = np.random.default_rng(2).integers(-128, 128, (1, 8, 8, 4), dtype=np.int8)
    expected = P.interpret(out["toy_main_0"], [x])[0]
    assert np.array_equal(region.run([x])[0], expected)
    again = toy.load(region.to_bytes())  # the registered loader, no recompilation
    assert np.array_equal(again.run([x])[0], expected)


@pytest.mark.skipif(not MOBILENET.exists(), reason="the MobileNet test model is not built")
def test_toy_on_mobilenet(toy):
    from partita.frontends import from_tflite

    report = placement_report(partition_for(from_tflite(str(MOBILENET)), "toy, llvm"))
    summary = report.summary()
    assert summary["ops_by_target"] == {"toy": 28, "llvm": 2}
    assert {r.op for r in report.host_rows} == {"MEAN", "RESHAPE"}


@pytest.mark.slow
def test_pip_installed_example_is_a_target_of_the_cli(tmp_path):
    """Install the example with pip (offline) into a folder and run ``partita inspect``."""
    source = tmp_path / "src"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("__pycache__"))
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--target",
            str(site),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    model = tmp_path / "net.relay"  # a text model: no frontend needed
    model.write_text(RELAY_MODEL)
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run(
        [sys.executable, "-m", "partita", "inspect", str(model), "--target", "toy, llvm", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["summary"]["ops_by_target"] == {"toy": 1}
    assert report["partitions"] == ["toy_main_0"]
