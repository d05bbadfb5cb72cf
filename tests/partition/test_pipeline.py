"""partition_for: the composite target's pipeline, end to end, on small graphs and a real model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from common_graphs import int8_convnet, registered
from partita.backends import Backend
from partita.partition import partition_for, partition_pipeline, placement_report
from partita.patterns import constants, is_constant, is_op, wildcard
from partition_graphs import assert_same_bits, placement

import partita as P

ROOT = Path(__file__).resolve().parents[2]
NETS = ROOT / "tests" / "models" / "tflite" / "nets"

GRAPH = """
def @main(%x: Tensor[(2, 4), float32]) {
  %0 = add(%x, %x) /* span=ADD:0:a */;
  %1 = nn.relu(%0) /* span=RELU:1:r */;
  negative(%1) /* span=NEG:2:n */
}
"""


def conv_table():
    conv = is_op("qnn.conv2d")(wildcard(), is_constant(), *constants(4))
    conv = conv.optional(lambda c: is_op("nn.bias_add")(c, is_constant()))
    out = is_op("qnn.requantize")(conv, *constants(4)).optional(lambda r: is_op("clip")(r))
    return [("conv2d", out)]


def test_the_pipeline_is_a_visible_list_of_named_passes():
    with registered(Backend("acc_v", ops=["add"])):
        pipeline = partition_pipeline("acc_v, llvm")
    assert [p.name for p in pipeline.passes] == [
        "InferType",
        "LLVMConvertLayout",  # the host's own pass, after the accelerators' (none here)
        "MergeComposite",
        "AnnotateTarget",
        "MergeCompilerRegions",
        "RegionPolicies",
        "PartitionGraph",
    ]


def test_earlier_targets_have_priority_for_ops_and_patterns():
    first = Backend("acc_1", ops=["add"], patterns=[("relu", is_op("nn.relu")(wildcard()))])
    second = Backend(
        "acc_2",
        ops=["add", "negative"],
        patterns=[("relu_neg", is_op("negative")(is_op("nn.relu")(wildcard())))],
    )
    with registered(first, second):
        out = partition_for(P.parse(GRAPH), "acc_1, acc_2, llvm")
        assert placement(out) == {"main": [], "acc_1_main_0": ["a", "r"], "acc_2_main_0": ["n"]}
        out = partition_for(P.parse(GRAPH), "acc_2, acc_1")
        assert placement(out) == {"main": [], "acc_2_main_0": ["a", "n", "r"]}


def test_backend_passes_run_before_merge_composite():
    seen = []

    @P.passes.infra.module_pass("Spy")
    def spy(mod, ctx):
        seen.append(str(mod).count("fn ("))
        return mod

    with registered(Backend("acc_s", ops=["add"], passes=[spy()])):
        assert [p.name for p in partition_pipeline("acc_s").passes][1] == "Spy"
        partition_for(P.parse(GRAPH), "acc_s")
    assert seen == [0]


def test_int8_network_same_bits_and_a_report():
    mod = int8_convnet(((1, 1), (2, 2), (1, 1)))
    with registered(Backend("acc_q", patterns=conv_table)):
        out = partition_for(mod, "acc_q, llvm -mcpu=native")
    assert_same_bits(mod, out)
    report = placement_report(out)
    assert [r.target for r in report.rows] == ["acc_q", "acc_q", "acc_q", "llvm"]
    assert report.partitions == ["acc_q_main_0"]


def test_partition_for_takes_a_module():
    with pytest.raises(P.PartitaError, match="takes an IRModule"):
        partition_for(P.parse(GRAPH)["main"], "llvm")


@pytest.mark.parametrize("model", ["mobilenet_v1_025_128", "mobilenet_v2_035_96"])
def test_tflite_mobilenet(model):
    path = NETS / f"{model}.tflite"
    if not path.exists():
        pytest.skip(f"{path.name} is not built")
    from partita.frontends import from_tflite

    mod = from_tflite(str(path))
    with registered(Backend("acc_m", patterns=conv_table, ops=["qnn.add"])):
        out = partition_for(mod, "acc_m, llvm")
    shape = mod["main"].params[0].type_annotation
    x = np.random.default_rng(0).integers(-128, 128, shape.shape, dtype=shape.dtype)
    assert np.array_equal(P.interpret(mod, [x])[0], P.interpret(out, [x])[0])
    report = placement_report(out)
    spans = {
        n.span.index
        for n in P.ir.post_order(mod["main"].body)
        if isinstance(n, P.Call) and n.span is not None
    }
    assert [r.index for r in report.rows] == sorted(spans)
    conv_rows = [r for r in report.rows if r.op in ("CONV_2D", "DEPTHWISE_CONV_2D")]
    assert conv_rows and all(r.target == "acc_m" for r in conv_rows)
    mac_rows = [
        r for r in report.rows if r.op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
    ]
    assert sum(r.macs for r in mac_rows) == report.summary()["macs"] > 0
    assert all(r.reason for r in report.host_rows)
