"""The issue's bar for quantized ONNX: every committed QDQ and QOperator network (per-tensor and
per-channel, s8s8 and u8s8; tf2onnx / torch.onnx exports quantized by ONNX Runtime's
quantize_static, tools/gen_onnx_models.py) built for a target with the NPU puts at least 99% of
its MACs on the NPU, with the default options, on any host."""

from __future__ import annotations

from pathlib import Path

import pytest
from partita.frontends import from_onnx

import partita as P

NETS = sorted((Path(__file__).resolve().parents[2] / "models" / "onnx" / "nets").glob("*.q*.onnx"))


@pytest.mark.parametrize("path", NETS, ids=[p.name for p in NETS])
def test_quantized_onnx_nets_put_99_percent_of_their_macs_on_the_npu(path):
    exe = P.build(from_onnx(str(path)), "npu, ref")
    summary = exe.report.summary()
    assert summary["macs_by_target"].get("npu", 0) >= 0.99 * summary["macs"], exe.report.table()
    assert summary["partitions"] == 1


def test_the_qdq_per_channel_mobilenet_v2_meets_the_bar():
    """MobileNetV2 (width 0.35, 96x96) in QDQ form with per-channel s8s8 weights: every MAC on
    the NPU (6.9% before the integer-semantics variant; the 224x224 model of the same script,
    too large to commit, also puts 100% there)."""
    path = NETS[0].parent / "mobilenet_v2_035_96.qdq_s8s8_pc.onnx"
    exe = P.build(from_onnx(str(path)), "npu, ref")
    summary = exe.report.summary()
    assert summary["macs_by_target"]["npu"] == summary["macs"]
