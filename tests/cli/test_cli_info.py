"""``partita info``: inputs and outputs with shape, dtype, scale and zero point, checked against
the TFLite interpreter's own tensor details for models made by TFLite's converter."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import partita.cli as cli

ROOT = Path(__file__).resolve().parents[2]
TFLITE = ROOT / "tests" / "models" / "tflite"
MODELS = [
    ROOT / "partita" / "data" / "digits_mobilenetv2.tflite",
    TFLITE / "nets" / "mobilenet_v2_035_96_uint8.tflite",
    TFLITE / "nets" / "mobilenet_v2_035_96_float_io.tflite",
    TFLITE / "ops" / "conv2d_same_s1_relu.tflite",
    TFLITE / "ops" / "add_broadcast.tflite",
]


def _tflite_ports(path: Path) -> dict:
    interpreter = pytest.importorskip("ai_edge_litert.interpreter")
    it = interpreter.Interpreter(model_path=str(path))
    rows = {}
    for kind, details in (("inputs", it.get_input_details()),
                          ("outputs", it.get_output_details())):
        rows[kind] = [
            {"shape": [int(d) for d in t["shape"]], "dtype": np.dtype(t["dtype"]).name,
             "quant": t["quantization"]}
            for t in details
        ]
    return rows


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.name)
def test_info_matches_tflites_tensor_details(capsys, path):
    assert cli.main(["info", str(path), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = _tflite_ports(path)
    for kind in ("inputs", "outputs"):
        assert len(got[kind]) == len(want[kind])
        for g, w in zip(got[kind], want[kind]):
            assert g["shape"] == w["shape"] and g["dtype"] == w["dtype"], (g, w)
            scale, zero_point = w["quant"]
            if w["dtype"] in ("int8", "uint8", "int16"):
                assert np.float32(g["scale"]) == np.float32(scale), (g, w)
                assert g["zero_point"] == zero_point, (g, w)
            else:
                assert "scale" not in g


def test_info_text_and_a_saved_executable_which_keeps_the_quantization(capsys, tmp_path):
    model = MODELS[0]
    assert cli.main(["info", str(model)]) == 0
    text = capsys.readouterr().out
    assert "inputs:" in text and "(1, 32, 32, 3) int8  scale 0.00784314 zero point -1" in text
    exe = tmp_path / "d.partita"
    assert cli.main(["compile", str(model), "-t", "npu, llvm", "-o", str(exe)]) == 0
    capsys.readouterr()
    assert cli.main(["info", str(exe)]) == 0
    out = capsys.readouterr().out
    assert "(1, 32, 32, 3) int8  scale 0.00784314 zero point -1" in out
