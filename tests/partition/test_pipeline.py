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


def _residual_chain():
    """relu / add-the-input ops cut by tanh (the host's), with residual adds across the cuts
    that MergeCompilerRegions must refuse to merge (a cycle)."""
    x = P.var("x", (4,))
    y = x
    for i in range(40):
        if i % 7 == 6:
            y = P.get_op("tanh")(y)
        else:
            y = P.get_op("add")(y, x) if i % 2 else P.get_op("nn.relu")(y)
    return P.IRModule.from_expr(y)


@pytest.mark.parametrize("graph", ["convnet", "residual", "mobilenet"])
def test_deferred_region_functions_build_what_each_pass_would(graph):
    """The region passes hand each other their labelled graph (DeferredModule) and build
    nothing in between: the result is the same module as when every intermediate module is
    built (an instrument that prints each one), and each intermediate prints the same whether
    it was read at once or after the next pass took its labels."""
    from partita.partition.deferred import DeferredModule

    from partita.passes.infra import DumpIR, PassContext, PassInstrument

    mod = {"convnet": int8_convnet, "residual": _residual_chain}.get(graph)
    if mod is None:
        path = NETS / "mobilenet_v2_035_96.tflite"
        if not path.exists():
            pytest.skip("no MobileNetV2 model here")
        from partita.frontends import from_tflite

        mod = from_tflite(str(path))
    else:
        mod = mod()

    class Keep(PassInstrument):
        def __init__(self):
            self.outputs = []

        def run_after_pass(self, p, out):
            self.outputs.append((p.name, out))

    with registered(Backend("acc_d", ops=["add", "nn.relu"], patterns=conv_table)):
        target = "acc_d, llvm"
        keep, dump = Keep(), DumpIR()
        with PassContext(instruments=[keep]):
            lazy = partition_pipeline(target)(mod)
        with PassContext(instruments=[dump]):
            eager = partition_pipeline(target)(mod)
    assert str(lazy) == str(eager)
    middle = {name: out for name, out in keep.outputs}
    for name in ("AnnotateTarget", "MergeCompilerRegions", "RegionPolicies"):
        assert type(middle[name]) is DeferredModule
        assert middle[name]._built is None, f"{name}'s functions were built in between"
    assert type(lazy) is not DeferredModule
    dumped = dict(dump.dumps)
    for name in ("AnnotateTarget", "MergeCompilerRegions", "RegionPolicies"):
        assert str(middle[name]) == dumped[name]  # built late, after the next pass: the same
    assert_same_bits(mod, lazy)
