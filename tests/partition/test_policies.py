"""Policies: minimum region size, a backend's cost hook, CPU overrides and strict mode."""

from __future__ import annotations

import pytest
from common_graphs import registered
from partita.backends import Backend, CostModel, RegionStats, Verdict
from partita.partition import (
    Overrides,
    RegionPolicies,
    StrictPartitionError,
    partition_for,
    placement_report,
)
from partition_graphs import assert_same_bits, placement

import partita as P

GRAPH = """
def @main(%x: Tensor[(2, 4), float32]) {
  %0 = add(%x, %x) /* span=ADD:0:a */;
  %1 = tanh(%0) /* span=TANH:1:t */;
  %2 = nn.relu(%1) /* span=RELU:2:r */;
  %3 = negative(%2) /* span=NEG:3:n */;
  multiply(%3, %3) /* span=MUL:4:m */
}
"""
ACC = Backend("acc_p", ops=["add", "nn.relu", "negative", "multiply"])


@pytest.fixture(autouse=True)
def acc():
    with registered(ACC):
        yield


def test_small_regions_go_back_to_the_cpu():
    mod = P.parse(GRAPH)
    out = partition_for(mod, "acc_p", min_region_size=2)
    assert placement(out) == {"main": ["a", "t"], "acc_p_main_0": ["m", "n", "r"]}
    reason = {r.name: r.reason for r in placement_report(out).rows}["a"]
    assert reason == "the acc_p region of 1 op is smaller than the minimum region size 2"
    assert_same_bits(mod, out)
    assert len(placement_report(partition_for(mod, "acc_p", min_region_size=3)).partitions) == 1
    assert len(placement_report(partition_for(mod, "acc_p", min_region_size=4)).partitions) == 0


def test_a_cost_hook_may_refuse_a_region():
    def cost(stats: RegionStats) -> Verdict:
        return Verdict(stats.ops > 1, f"{stats.ops} op, {stats.boundary_bytes} B across")

    with registered(Backend("acc_c", ops=["add", "nn.relu", "negative", "multiply"], cost=cost)):
        out = partition_for(P.parse(GRAPH), "acc_c")
    rows = {r.name: r for r in placement_report(out).rows}
    assert rows["a"].reason == "acc_c refused the region: 1 op, 64 B across"
    assert rows["r"].partition == "acc_c_main_0"


def test_a_cost_model_as_the_hook():
    model = CostModel(cpu_macs_per_s=1e9, acc_macs_per_s=1e12, bytes_per_s=1e9)
    with registered(Backend("acc_m", ops=["add"], cost=model)):
        out = partition_for(P.parse(GRAPH), "acc_m")
    assert (
        placement_report(out)
        .rows[0]
        .reason.startswith("acc_m refused the region: moving 64 B across the boundary costs")
    )


def test_regions_without_ops_and_bad_sizes():
    policy = RegionPolicies(min_size=1)
    from partita.partition.regions import Region

    assert (
        policy.refusal(Region("acc"), RegionStats("acc", 0, 0, 0, 0))
        == "the acc region holds no ops"
    )
    with pytest.raises(P.PartitaError, match="positive integer"):
        RegionPolicies(min_size=0)


@pytest.mark.parametrize(
    "kwargs, forced, reason",
    [
        ({"cpu_ops": ["nn.relu"]}, "r", "forced onto the CPU (op type nn.relu)"),
        ({"cpu_ops": ["NEG"]}, "n", "forced onto the CPU (op type NEG)"),
        ({"cpu_nodes": [0]}, "a", "forced onto the CPU (source op #0)"),
        ({"cpu_nodes": ["2"]}, "r", "forced onto the CPU (source op #2)"),
        ({"cpu_nodes": ["m"]}, "m", "forced onto the CPU (source op 'm')"),
    ],
)
def test_overrides_force_ops_onto_the_cpu(kwargs, forced, reason):
    out = partition_for(P.parse(GRAPH), "acc_p", **kwargs)
    assert forced in placement(out)["main"]
    rows = [r for r in placement_report(out).rows if forced in r.name or r.reason == reason]
    assert any(reason in r.reason for r in rows)


def test_an_override_that_matches_nothing_is_an_error():
    with pytest.raises(P.PartitaError, match="CPU overrides CONV2D, #9 match no op"):
        partition_for(P.parse(GRAPH), "acc_p", cpu_ops=["CONV2D"], cpu_nodes=[9])
    with pytest.raises(P.PartitaError, match="takes lists"):
        Overrides("nn.relu")


def test_strict_mode_fails_with_the_report():
    with pytest.raises(StrictPartitionError) as info:
        partition_for(P.parse(GRAPH), "acc_p", strict=True)
    message = str(info.value)
    assert message.startswith("strict mode: 1 source op left on the llvm:\n  TANH #1: ")
    assert "no acc_p pattern contains tanh" in message
    assert info.value.report.host_rows[0].name == "t"
    assert len(partition_for(P.parse(GRAPH), "acc_p", cpu_nodes=[]).functions) == 3
    with registered(Backend("acc_all", ops=["add", "tanh", "nn.relu", "negative", "multiply"])):
        partition_for(P.parse(GRAPH), "acc_all", strict=True)  # nothing left: no error
