"""``partita compare``: every intermediate tensor against TFLite (all tensors preserved), ONNX
Runtime (extra outputs), the interpreter or another target; the first op that differs, a
histogram in LSB per op, and the exit status."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from partita.frontends import from_tflite

from partita.cli import main
from partita.cli.compare import compare, first_difference

MODELS = Path(__file__).resolve().parents[1] / "models"
TFLITE = MODELS / "tflite" / "nets" / "mobilenet_v2_035_96.tflite"
ONNX = MODELS / "onnx" / "nets"


def _run(capsys, *argv):
    status = main([str(a) for a in argv])
    return status, capsys.readouterr().out


def test_tflite_reference_kernels_agree_on_every_tensor(capsys):
    status, out = _run(capsys, "compare", TFLITE, "-t", "npu, llvm", "--against", "tflite")
    assert status == 0
    assert "every one of 64 tensors agrees" in out


def test_the_optimized_kernels_differ_and_the_first_difference_is_named(capsys):
    status, out = _run(
        capsys, "compare", TFLITE, "-t", "npu, llvm", "--against", "tflite_builtin", "--json"
    )
    data = json.loads(out)
    assert status == 1
    first = data["first_difference"]
    assert first["max_lsb"] >= 1 and first["index"] == min(
        r["index"] for r in data["rows"] if r["max_lsb"] > 0
    )
    for row in data["rows"]:
        if row["histogram"]:
            assert sum(row["histogram"].values()) == int(np.prod(row["shape"]))
    # within a tolerance that covers the rounding, CI passes again
    assert (
        main(
            [
                "compare",
                str(TFLITE),
                "-t",
                "npu, llvm",
                "--against",
                "tflite_builtin",
                "--tolerance",
                "1000",
            ]
        )
        == 0
    )


@pytest.mark.parametrize(
    "name, match",
    [
        ("mobilenet_v2_035_96.qop_s8s8_pt.onnx", None),
        ("mobilenet_v2_035_96.qdq_s8s8_pc.onnx", "ort_disable_all"),
    ],
)
def test_onnxruntime_with_every_node_output(capsys, name, match):
    argv = ["compare", ONNX / name, "-t", "npu, llvm", "--against", "onnxruntime"]
    status, out = _run(capsys, *argv, *(["--match", match] if match else []))
    assert status == 0, out
    assert "tensors agree" in out


def test_against_the_interpreter_and_another_target():
    mod = from_tflite(str(TFLITE))
    for against in ("interpreter", "npu -config=u65-256, ref"):
        rows, _ = compare(mod, "npu, llvm", against)
        assert len(rows) == 64 and first_difference(rows) is None
        assert all(r.histogram["0"] == int(np.prod(r.shape)) for r in rows)


def test_a_reference_for_the_wrong_format_is_a_usage_error(capsys):
    status = main(["compare", str(TFLITE), "-t", "npu, llvm", "--against", "onnxruntime"])
    assert status == 2
