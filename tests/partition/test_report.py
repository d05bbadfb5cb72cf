"""The placement report: one row per source op, MACs from types, reasons, text, JSON, summary."""

from __future__ import annotations

import json

import pytest
from common_graphs import int8_convnet
from partita.partition import placement_report
from partita.patterns import constants, is_constant, is_op, wildcard
from partition_graphs import passes

import partita as P


def conv_pattern(clip=True):
    conv = is_op("qnn.conv2d")(wildcard(), is_constant(), *constants(4))
    out = is_op("qnn.requantize")(is_op("nn.bias_add")(conv, is_constant()), *constants(4))
    return is_op("clip")(out) if clip else out


def test_one_row_per_source_op_with_macs_composite_and_partition():
    out = passes([("acc.conv", conv_pattern())], ["acc"])(int8_convnet(((1, 1), (2, 2))))
    report = placement_report(out)
    assert [(r.index, r.op, r.name, r.target) for r in report.rows] == [
        (0, "CONV_2D", "conv0", "acc"),
        (1, "CONV_2D", "conv1", "acc"),
        (2, "MEAN", "mean", "llvm"),
    ]
    conv0 = report.rows[0]
    assert conv0.ir_ops == ["qnn.conv2d", "nn.bias_add", "qnn.requantize", "clip"]
    # (1, 8, 8, 4) outputs x 4 input channels x 3 x 3; stride 2 gives (1, 4, 4, 4)
    assert conv0.macs == 256 * 36 and report.rows[1].macs == 64 * 36
    assert (conv0.composite, conv0.partition, conv0.reason) == ("acc.conv", "acc_main_0", "")
    assert report.rows[2].reason == (
        "no pattern matched: no acc pattern contains qnn.mean, and no target supports it alone"
    )
    assert report.summary() == {
        "ops": 3,
        "macs": 11520,
        "ops_by_target": {"acc": 2, "llvm": 1},
        "macs_by_target": {"acc": 11520, "llvm": 0},
        "partitions": 1,
    }
    assert report.summary_line() == (
        "3 source ops, 11.5 k MACs: acc 2 ops (100.0% of MACs), "
        "llvm 1 op (0.0% of MACs); 1 partition"
    )


def test_a_source_op_split_between_targets():
    out = passes([("acc.conv", conv_pattern(clip=False))], ["acc"])(int8_convnet(((1, 1),)))
    row = placement_report(out).rows[0]
    assert row.target == "acc+llvm" and row.composite == "acc.conv"
    assert row.reason.startswith("no pattern matched")
    assert placement_report(out).summary()["ops_by_target"] == {"acc+llvm": 1, "llvm": 1}


def test_text_table_and_json():
    out = passes([("acc.conv", conv_pattern())], ["acc"])(int8_convnet(((1, 1),)))
    report = placement_report(out)
    lines = report.table().splitlines()
    assert lines[0].split() == ["#", "op", "name", "target", "composite", "partition", "reason"]
    assert lines[1].split() == ["0", "CONV_2D", "conv0", "acc", "acc.conv", "acc_main_0"]
    assert str(report).endswith(report.summary_line())
    data = json.loads(report.to_json())
    assert data["rows"][0]["ir_ops"][0] == "qnn.conv2d" and data["partitions"] == ["acc_main_0"]
    assert data["summary"]["macs"] == 9216 and data["host"] == "llvm"


def test_long_tensor_names_are_shortened_in_the_table_only():
    mod = P.parse(
        "def @main(%x: Tensor[(4), float32]) { nn.relu(%x) /* span=RELU:0:"
        + "block_1/" * 10
        + "relu;other/name */ }"
    )
    report = placement_report(passes((), [])(mod))
    assert report.rows[0].name.endswith("relu;other/name")
    assert " .../block_1/block_1/block_1/relu " in report.table()


def test_a_graph_without_spans_gets_a_row_per_call():
    mod = P.parse("""
    def @main(%x: Tensor[(4), float32]) {
      %0 = nn.relu(%x);
      %1 = nn.relu(%0);
      add(%1, %0)
    }""")
    report = placement_report(passes((), ["acc"])(mod))
    assert [(r.index, r.op) for r in report.rows] == [
        (None, "nn.relu"),
        (None, "nn.relu"),
        (None, "add"),
    ]


def test_a_module_partitioned_elsewhere_reports_without_reasons():
    mod = P.parse("def @main(%x: Tensor[(4), float32]) { nn.relu(%x) }")
    report = placement_report(mod)
    assert report.rows[0].target == "llvm" and report.rows[0].reason == ""
    assert report.summary_line() == "1 source op, 0 MACs: llvm 1 op; 0 partitions"
    with pytest.raises(P.PartitaError, match="takes an IRModule"):
        placement_report(mod["main"])


def tflite_macs(path) -> int:
    """MACs read straight from the flatbuffer with the tflite package (not through partita):
    conv = outputs x KH x KW x in; depthwise = outputs x KH x KW; fully connected = outputs x in."""
    import numpy as np
    import tflite

    model = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    graph = model.Subgraphs(0)
    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
    total = 0
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        code = model.OperatorCodes(op.OpcodeIndex())
        name = names[max(code.BuiltinCode(), code.DeprecatedBuiltinCode())]
        if name not in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
            continue
        out = int(np.prod(graph.Tensors(op.Outputs(0)).ShapeAsNumpy()))
        w = graph.Tensors(op.Inputs(1)).ShapeAsNumpy()
        if name == "CONV_2D":
            total += out * int(w[1] * w[2] * w[3])
        elif name == "DEPTHWISE_CONV_2D":
            total += out * int(w[1] * w[2])
        else:
            total += out * int(w[1])
    return total


def test_macs_of_a_mobilenet_match_the_flatbuffer():
    from pathlib import Path

    nets = Path(__file__).resolve().parents[1] / "models" / "tflite" / "nets"
    path = nets / "mobilenet_v2_035_96.tflite"
    if not path.exists():
        pytest.skip("the MobileNetV2 test model is not built")
    from partita.frontends import from_tflite

    report = placement_report(passes((), [])(from_tflite(str(path))))
    assert report.summary()["macs"] == tflite_macs(path) == 10_674_608
