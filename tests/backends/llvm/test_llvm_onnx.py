"""ONNX models through the LLVM backend: NCHW graphs are converted to NHWC by the backend's own
layout pass, QLinearGlobalAveragePool is MLAS's arithmetic, and on CPUs without VNNI the
convolutions saturate pairs as ONNX Runtime's do. The compiled model equals the interpreter and
ONNX Runtime at its default level, bit for bit, on whatever CPU runs the test."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import partita as P

ort = pytest.importorskip("onnxruntime")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "frontends" / "onnx"))
from onnx_cases import feeds_for, models, ort_run  # noqa: E402
from partita.frontends import from_onnx  # noqa: E402

# The networks the LLVM backend compiles whole (the s8s8 QDQ ones whose int8 activations fan out
# keep float MLAS groups: float convolutions in MLAS's order, conv_lower.py / sum_order.py).
NETS = [
    "mobilenet_v1_025_96.qdq_s8s8_pc", "mobilenet_v1_025_96.qdq_u8s8_pt",
    "mobilenet_v1_025_96.qop_s8s8_pt", "mobilenet_v1_025_96.qop_u8s8_pc",
    "mobilenet_v2_035_96.qdq_u8s8_pt", "mobilenet_v2_035_96.qop_s8s8_pt",
    "mobilenet_v2_035_96.qop_u8s8_pc", "resnet_mini_64.qdq_u8s8_pt",
    "resnet_mini_64.qop_s8s8_pt", "resnet_mini_64.qop_u8s8_pc",
    "torch_mobilenetv2_64.qop_u8s8_pt",  # its float ReduceMean of dequantized uint8: FMEAN
    "mobilenet_v2_035_96.qdq_s8s8_pc", "resnet_mini_64.qdq_s8s8_pc",
    "torch_mobilenetv2_64.qdq_s8s8_pc",
]


@pytest.mark.parametrize("name", NETS)
def test_onnx_net_on_llvm_equals_onnxruntime(name):
    path = models("nets", f"{name}.onnx")[0]
    mod = from_onnx(path)
    exe = P.build(mod, "llvm")
    assert [s.target for s in exe.steps] == ["llvm"]
    for seed in range(2):
        feeds = feeds_for(mod, seed)
        (got,) = exe.run(*feeds.values())
        assert got.tobytes() == P.interpret(mod, feeds)[0].tobytes()
        assert got.tobytes() == ort_run(path, feeds, "enable_all")[0].tobytes()

