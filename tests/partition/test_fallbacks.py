"""Ops left on the host say which requirement they broke with their values, the nearest
variant the accelerator runs, and what the fallback costs (host time, boundary bytes)."""

from __future__ import annotations

import numpy as np
from common_graphs import int8_convnet
from partita.partition import partition_for, placement_report
from partita.partition.estimate import fallback_costs
from partita.partition.reasons import nearest_variant

import partita as P


def test_a_stride_out_of_range_names_the_nearest_stride_that_runs():
    report = placement_report(partition_for(int8_convnet(), "npu, llvm"))
    row = next(r for r in report.rows if r.name == "conv1")
    assert "(got 4x4)" in row.reason
    assert "stride 4x4 where 1..3 is allowed; nearest that runs: stride 3x3" in row.reason


def test_nearest_variant_clamps_each_range_it_finds():
    text = "Kernel height and width must be in the range [1, 8] (got 9x3)"
    assert nearest_variant(text).endswith("nearest that runs: kernel 8x3")
    assert nearest_variant("no pattern matched") == "no pattern matched"


def test_a_float_model_is_told_to_quantize():
    x = P.var("x", (1, 8, 8, 4), "float32")
    w = P.const(np.ones((3, 3, 4, 4), np.float32))
    y = P.get_op("nn.conv2d")(x, w, padding=(1, 1), data_layout="NHWC", kernel_layout="HWIO")
    y = P.get_op("nn.relu")(y)
    report = placement_report(partition_for(P.IRModule.from_expr(y), "npu, llvm"))
    conv, relu = report.rows
    assert conv.reason.startswith("float32: the npu runs quantized ops on int8, uint8 and int16")
    assert "npu.conv2d takes qnn.conv2d" in conv.reason and "quantize the model" in conv.reason
    assert relu.reason.startswith("float32:") and "quantize the model" in relu.reason


def test_fallback_costs_give_host_time_and_boundary_bytes():
    partitioned = partition_for(int8_convnet(), "npu, llvm")
    report = fallback_costs(partitioned, placement_report(partitioned), "cortex-a55")
    row = next(r for r in report.rows if r.name == "conv1")
    assert row.host_s > 0
    # its input comes from npu_main_0 (1x8x8x4 int8) and its output goes to npu_main_1
    assert row.transfer_bytes == 8 * 8 * 4 + 2 * 2 * 4
    assert "ms host" in report.table() and "B moved" in report.table()
    on_npu = next(r for r in report.rows if r.name == "conv0")
    assert on_npu.host_s is None
