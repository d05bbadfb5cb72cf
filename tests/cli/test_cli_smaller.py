"""The smaller items of issue 29: what each command prints and writes, said plainly."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

import partita.cli as cli

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "partita" / "data" / "digits_mobilenetv2.tflite"
CONV = ROOT / "tests" / "models" / "tflite" / "ops" / "conv2d_same_s1_relu.tflite"


def run(capsys, *argv):
    status = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("exe") / "c.partita"
    assert cli.main(["compile", str(CONV), "-t", "llvm", "-o", str(path)]) == 0
    return path


def test_compile_prints_no_python_dicts(capsys, tmp_path):
    status, out, _ = run(capsys, "compile", DIGITS, "-t", "npu, llvm", "-o", tmp_path / "d.p")
    assert status == 0 and "{" not in out and "cycles 549,140" in out
    assert (tmp_path / "d.p").is_file()


def test_run_writes_the_file_it_names_with_full_digests(capsys, saved, tmp_path):
    status, out, _ = run(capsys, "run", saved, "--random", "-o", tmp_path / "outs")
    assert status == 0 and f"wrote {tmp_path / 'outs'}" in out
    assert (tmp_path / "outs").is_file() and not (tmp_path / "outs.npz").exists()
    with np.load(tmp_path / "outs") as z:
        (name,) = z.files
        array = z[name]
    h = hashlib.sha256(f"{array.dtype}{array.shape}".encode())
    h.update(array.tobytes())
    assert f"sha256:{h.hexdigest()}" in out and len(h.hexdigest()) == 64


def test_a_text_file_as_input_is_named_as_not_npy(capsys, saved, tmp_path):
    (tmp_path / "t.npy").write_text("1 2 3\n")
    status, _, err = run(capsys, "run", saved, "--input", tmp_path / "t.npy")
    assert status == 2 and "is not a .npy file" in err and "pickle" not in err


def test_a_saved_executable_refuses_compile_options(capsys, saved):
    status, _, err = run(capsys, "run", saved, "-t", "llvm", "--cpu-op", "CONV_2D", "--random")
    assert status == 2 and "-t/--target, --cpu-op apply when compiling a model file" in err
    status, _, err = run(capsys, "inspect", saved, "--min-region-size", "3")
    assert status == 2 and "--min-region-size" in err


def test_inspect_checks_the_target_as_compile_does(capsys):
    for command in ("inspect", "compile"):
        status, _, err = run(capsys, command, DIGITS, "-t", "npu -config=u55-999, llvm")
        assert status == 2 and "unknown NPU config 'u55-999'" in err, err
        status, _, err = run(capsys, command, DIGITS, "-t", "llvm -mcpu=foo")
        assert status == 2 and "-mcpu=foo is not a CPU LLVM knows" in err, err


def test_backends_lists_presets_and_sram_sizes_and_no_none(capsys):
    status, out, _ = run(capsys, "backends")
    assert status == 0 and "None" not in out
    for preset in ("u55-128", "u55-256", "u65-256", "u65-512"):
        assert f"-config={preset}" in out
    assert "-sram=SIZE: 16k to 64m" in out
    status, out, _ = run(capsys, "backends", "--json")
    npu = next(r for r in json.loads(out) if r["name"] == "npu")
    assert [p["name"] for p in npu["presets"]] == ["u55-128", "u55-256", "u65-256", "u65-512"]


def test_sweep_rows_in_grid_order_and_flat_csv(capsys):
    grid = "npu -config={u65-256,u55-128,u55-256}, llvm"
    status, out, _ = run(capsys, "sweep", DIGITS, "-t", grid, "--engine", "local:2", "--csv")
    assert status == 0, out
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["target"] for r in rows] == [
        f"npu -config={c}, llvm" for c in ("u65-256", "u55-128", "u55-256")
    ]
    assert "npu_bytes" not in rows[0] and any(k.startswith("npu_bytes.") for k in rows[0])
    assert not any("{" in v for r in rows for v in r.values() if v)


def test_eval_throughput_counts_partitas_runs_only(capsys):
    status, out, _ = run(capsys, "eval", DIGITS, "--data", "digits", "--limit", "6",
                         "--engine", "local:1", "--json")
    assert status == 0
    result = json.loads(out)
    assert result["samples"] == 6
    assert result["samples_per_s"] == pytest.approx(6 / result["run_s"])
    assert result["wall_s"] >= result["run_s"]


def test_eval_help_names_the_shipped_model(capsys):
    with pytest.raises(SystemExit):
        cli.main(["eval", "--help"])
    out = capsys.readouterr().out
    assert "digits_mobilenetv2.tflite" in out and "digits.tflite" not in out.replace(
        "mobilenetv2.tflite", "")


def test_a_split_source_op_is_explained(capsys, tmp_path):
    """A source op whose IR ops land on two targets is reported as ``a+b``; the text says what
    that means."""
    from partita.backends import Backend, register_backend, unregister_backend

    model = tmp_path / "split.relay"
    model.write_text(
        "def @main(%x: Tensor[(2, 4), float32]) {\n"
        "  %0 = add(%x, %x) /* span=FUSED:0:y */;\n"
        "  tanh(%0) /* span=FUSED:0:y */\n"
        "}\n"
    )
    register_backend(Backend("acc_split", ops=["add"]), override=True)
    try:
        status, out, _ = run(capsys, "inspect", model, "-t", "acc_split, ref")
    finally:
        unregister_backend("acc_split")
    assert status == 0 and "acc_split+ref" in out
    assert "(acc_split+ref: a source op that became several IR ops, some placed on acc_split" in out
