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



@pytest.mark.parametrize("threads", [1, 2])
def test_a_quantizing_float_conv_writes_into_the_depthwise_padding(threads, monkeypatch):
    """A QDQ MobileNetV2's float convolutions (FCONV in ORT's order, quantized outputs) store
    straight into the next depthwise kernel's padded input (int8_halos.write_into_halos), as
    the int8 ones do: no depthwise kernel copies its input, and the model still equals ORT bit
    for bit, with two threads through both drivers."""
    from partita.backends.llvm.lower import context

    seen = []
    real = context.write_into_halos

    def spy(plan):
        real(plan)
        _, producer = plan.links()
        seen.extend((producer[k.inputs[0]].kind, k.params.get("prepadded"))
                    for k in plan.kernels if k.kind == "VDW")

    monkeypatch.setattr(context, "write_into_halos", spy)
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    path = models("nets", "mobilenet_v2_035_96.qdq_s8s8_pc.onnx")[0]
    mod = from_onnx(path)
    exe = P.build(mod, "llvm" + (" -threads=2" if threads == 2 else ""))
    assert ("FCONV", True) in seen and all(pre for _, pre in seen)
    for region in (s.region for s in exe.steps if getattr(s.region, "modes", None)):
        turns = iter(["pool", "alone"] * 2)
        region.modes.choose = lambda turns=turns: next(turns)
    for seed in range(2):
        feeds = feeds_for(mod, seed)
        (got,) = exe.run(*feeds.values())
        assert got.tobytes() == ort_run(path, feeds, "enable_all")[0].tobytes()
