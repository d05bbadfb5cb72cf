"""The CLI end to end: compile, run, inspect, profile, backends; exit codes; JSON errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import partita as P
import partita.cli as cli

ROOT = Path(__file__).resolve().parents[2]
NETS = ROOT / "tests" / "models" / "tflite" / "nets"
MOBILENET = NETS / "mobilenet_v2_035_96.tflite"


def run(capsys, *argv):
    status = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_compile_run_profile_a_tflite_model(capsys, tmp_path):
    exe_path = tmp_path / "m.partita"
    status, out, err = run(capsys, "compile", MOBILENET, "-t", "ref", "-o", exe_path)
    assert status == 0, err
    assert out.splitlines()[0].startswith("64 source ops")
    assert f"wrote {exe_path}" in out
    x = np.random.default_rng(0).integers(-128, 128, (1, 96, 96, 3), dtype=np.int8)
    np.save(tmp_path / "x.npy", x)
    outputs = tmp_path / "out.npz"
    status, out, err = run(
        capsys,
        "run",
        exe_path,
        "--input",
        f"serving_default_keras_tensor:0={tmp_path / 'x.npy'}",
        "-o",
        outputs,
    )
    assert status == 0, err
    want = P.interpret(P.frontends.from_tflite(str(MOBILENET)), [x])[0]
    with np.load(outputs) as z:
        assert np.array_equal(z["StatefulPartitionedCall_1:0"], want)
    assert cli.commands.digest(want) in out
    status, out, _ = run(capsys, "profile", exe_path, "--repeat", "1", "--json")
    data = json.loads(out)
    assert status == 0 and [s["symbol"] for s in data["steps"]] == ["host_0"]


def test_an_executable_is_known_by_its_contents_not_only_its_name(capsys, tmp_path):
    """`compile -o model.bin` then `run model.bin`: the zip comment says it is partita's; a
    zip that is not (a PyTorch archive, say) is still read as a model."""
    exe_path = tmp_path / "m.bin"
    status, _, err = run(capsys, "compile", MOBILENET, "-t", "ref", "-o", exe_path)
    assert status == 0, err
    status, out, err = run(capsys, "run", exe_path, "--random", "--json")
    assert status == 0, err
    assert json.loads(out)["outputs"][0]["shape"] == [1, 16]
    import zipfile

    other = tmp_path / "other.bin"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("data.pkl", b"x")
    assert not cli.models.is_executable(other) and cli.models.is_executable(exe_path)


def test_an_executable_for_a_cpu_this_host_is_not_is_refused_by_run(capsys, tmp_path,
                                                                        monkeypatch):
    """Code compiled for -mcpu=sapphirerapids on a host without AVX-512 (forced here: the
    host's features as an AVX2-only Zen 3 reports them) runs nowhere here: `run` exits 2 and
    names what the host lacks, whatever the file is called."""
    from partita.backends.llvm import host_cpu

    zen3 = {"+sse4.2", "+avx", "+avx2", "+fma", "+bmi2", "+f16c", "+popcnt"}
    monkeypatch.setattr(host_cpu, "host_features", lambda: zen3)
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")  # a cached region holds the real host's
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path / "cache"))  # record of its needs
    conv = ROOT / "tests" / "models" / "tflite" / "ops" / "conv2d_same_s1_relu.tflite"
    exe_path = tmp_path / "spr.p"
    status, _, err = run(capsys, "compile", conv, "-t", "llvm -mcpu=sapphirerapids", "-o",
                         exe_path)
    assert status == 0, err
    status, _, err = run(capsys, "run", exe_path, "--random")
    assert status == 2 and "lacks" in err and "avx512" in err.lower(), err


def test_run_compiles_a_model_in_memory_and_random_is_seeded(capsys):
    first = run(capsys, "run", MOBILENET, "-t", "ref", "--random", "--seed", "3", "--json")
    second = run(capsys, "run", MOBILENET, "-t", "ref", "--random", "--seed", "3", "--json")
    assert first[0] == 0 and first[1] == second[1]
    assert json.loads(first[1])["outputs"][0]["shape"] == [1, 16]


@pytest.mark.parametrize(
    "argv, status, message",
    [
        (["run", "MODEL", "--random"], 2, "is a model file: give --target"),
        (["run", "MODEL", "-t", "ref"], 2, "give the inputs .* with --input"),
        (["run", "MODEL", "-t", "ref", "--input", "x=missing.npy"], 2, "cannot read"),
        (["compile", "MODEL", "-t", "gpu9"], 2, "unknown backend 'gpu9'"),
        (["inspect", "MODEL", "-t", "ref", "--input-shape", "x=1,a"], 2, "NAME=D1,D2"),
        (["inspect", "MODEL", "-t", "ref", "--match", "ort"], 2, "--match applies to ONNX"),
        (["inspect", "MODEL", "-t", "ref", "--ort-cpu", "avx2"], 2, "--ort-cpu applies to ONNX"),
        (["run", "BAD", "--random"], 3, "not a partita executable"),
        (["inspect", "GARBAGE", "-t", "ref"], 3, "not a TFLite model"),
    ],
)
def test_errors_have_one_line_a_hint_and_a_documented_status(
    capsys, tmp_path, argv, status, message
):
    import re

    bad = tmp_path / "bad.partita"
    bad.write_bytes(b"PK\x03\x04 not really")
    garbage = tmp_path / "garbage.tflite"
    garbage.write_bytes(b"\x00" * 64)
    subst = {"MODEL": str(MOBILENET), "BAD": str(bad), "GARBAGE": str(garbage)}
    got, out, err = run(capsys, *[subst.get(a, a) for a in argv])
    assert got == status, err
    assert re.search(message, err), err
    assert "partita: hint:" in err and "Traceback" not in err
    got, out, err = run(capsys, *[subst.get(a, a) for a in argv], "--json")
    data = json.loads(out)["error"]
    assert got == status and data["exit_status"] == status and re.search(message, data["message"])


def test_ort_cpu_picks_the_onnx_runtime_to_reproduce(capsys):
    """--ort-cpu vnni: exact sums, so the NPU takes the convolutions; avx2: ONNX Runtime's
    saturating pairs, which the NPU refuses with the reason."""
    model = ROOT / "tests/models/onnx/nets/mobilenet_v1_025_96.qop_u8s8_pc.onnx"
    placed = {}
    for cpu in ("vnni", "avx2"):
        status, out, err = run(capsys, "inspect", model, "-t", "npu, ref", "--ort-cpu", cpu,
                               "--json")
        assert status == 0, err
        data = json.loads(out)
        placed[cpu] = data["summary"]["macs_by_target"].get("npu", 0) / data["summary"]["macs"]
    assert placed["vnni"] > 0.99 and placed["avx2"] < 0.5
    assert "must sum exactly in int32" in out


def test_internal_errors_exit_5_and_say_it_is_a_bug(capsys, monkeypatch):
    def boom(*args, **kwargs):
        raise ZeroDivisionError("oops")

    monkeypatch.setitem(cli.COMMANDS, "backends", boom)
    status, _, err = run(capsys, "backends")
    assert status == 5 and "internal error: ZeroDivisionError: oops" in err
    assert "this is a bug in partita" in err


def test_inspect_draws_dot_and_svg_without_graphviz(capsys, tmp_path, monkeypatch):
    dot = tmp_path / "g.dot"
    status, _, err = run(capsys, "inspect", MOBILENET, "-t", "ref", "--dot", dot)
    assert status == 0 and dot.read_text().startswith("digraph partita {")
    assert "CONV_2D #0" in dot.read_text()
    monkeypatch.setattr("shutil.which", lambda name: None)  # SVG is drawn in Python (issue 26)
    status, _, err = run(capsys, "inspect", MOBILENET, "-t", "ref", "--svg", tmp_path / "g.svg")
    assert status == 0 and "(SVG)" in err
    assert (tmp_path / "g.svg").read_text().startswith("<svg")


def test_backends_lists_names_roles_options_and_origins(capsys):
    status, out, _ = run(capsys, "backends", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert status == 0
    assert rows["ref"]["host"] and rows["ref"]["origin"].startswith("built-in")
    status, out, _ = run(capsys, "backends")
    assert "ref" in out and "host" in out


def test_every_command_has_help_with_an_example():
    for command in ("compile", "run", "inspect", "profile", "backends"):
        done = subprocess.run(
            [sys.executable, "-m", "partita", command, "--help"], capture_output=True, text=True
        )
        assert done.returncode == 0 and "examples:" in done.stdout, command


def test_verbose_shows_the_pass_pipeline_with_timings(capsys):
    status, _, err = run(capsys, "inspect", MOBILENET, "-t", "ref", "-v")
    assert status == 0
    assert "partition_for:" in err and "MergeCompilerRegions:" in err


@pytest.mark.slow
def test_subprocess_compile_save_load_run_equals_the_api(tmp_path):
    exe_path = tmp_path / "m.partita"
    cmd = [sys.executable, "-m", "partita"]
    done = subprocess.run(
        [*cmd, "compile", str(MOBILENET), "-t", "ref", "-o", str(exe_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    done = subprocess.run(
        [*cmd, "run", str(exe_path), "--random", "--seed", "9", "-o", str(tmp_path / "o.npz")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    exe = P.load(exe_path)
    x = np.random.default_rng(9).integers(-128, 127, (1, 96, 96, 3), dtype=np.int8, endpoint=True)
    with np.load(tmp_path / "o.npz") as z:
        assert np.array_equal(z[exe.output_names[0]], exe.run(x)[0])
