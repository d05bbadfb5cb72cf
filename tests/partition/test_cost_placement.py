"""placement="cost": never estimated slower than all-on-the-accelerator, strictly faster where
islands pay more in invocations and transfers than they save, the same bits as the
interpreter, and a run that agrees with the estimate's direction."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from common_graphs import int8_convnet
from partita.backends.cost import HOST_PRESETS, parse_host
from partita.partition import partition_for, placement_report
from partita.partition.estimate import estimate, measured

import partita as P
from partita.errors import PartitaError

NETS = Path(__file__).resolve().parents[1] / "models" / "tflite" / "nets"
TARGET = "npu, llvm"


def _both(mod, host):
    all_on = partition_for(mod, TARGET)
    cost = partition_for(mod, TARGET, placement="cost", host_model=host)
    return all_on, cost, estimate(all_on, TARGET, host), estimate(cost, TARGET, host)


def _same_bits(mod, out, seed=0):
    t = mod["main"].params[0].type_annotation
    x = np.random.default_rng(seed).integers(-128, 128, t.shape, dtype=np.int8)
    before, after = P.interpret(mod, [x]), P.interpret(out, [x])
    assert all(np.array_equal(a, b) for a, b in zip(before, after))
    return x


@pytest.mark.parametrize("name", ["mobilenet_v2_035_96", "mobilenet_v1_025_128", "resnet_mini_64"])
@pytest.mark.parametrize("host", ["cortex-a55", "cortex-a76:2.4GHz", "cortex-m55"])
def test_never_worse_than_all_on_the_accelerator(name, host):
    from partita.frontends import from_tflite

    mod = from_tflite(str(NETS / f"{name}.tflite"))
    _all_on, _cost, est_all, est_cost = _both(mod, host)
    assert est_cost.total_s <= est_all.total_s + 1e-12


def test_an_unsupported_op_between_supported_ones_is_better():
    # conv0 on the NPU, conv1 (stride 4) on the host, the mean alone on the NPU after it
    mod = int8_convnet()
    all_on, cost, est_all, est_cost = _both(mod, "cortex-a55")
    assert est_cost.total_s < est_all.total_s
    _same_bits(mod, cost)
    report = placement_report(cost)
    moved = [r for r in report.host_rows if r.reason.startswith("cost:")]
    assert moved and "vs" in moved[0].reason and "on the host" in moved[0].reason


def test_a_tiny_region_between_host_ops_goes_to_the_host():
    mod = int8_convnet(strides=((4, 4), (1, 1), (4, 4)))  # conv1 alone between host convs
    all_on, cost, est_all, est_cost = _both(mod, "cortex-a55")
    assert len(placement_report(all_on).partitions) == 2
    assert est_cost.total_s < est_all.total_s
    assert len(placement_report(cost).partitions) < 2
    _same_bits(mod, cost, seed=1)


def test_pinned_nodes_stay_on_the_accelerator():
    mod = int8_convnet()
    pinned = partition_for(
        mod, TARGET, placement="cost", host_model="cortex-a55", npu_nodes=["mean"]
    )
    report = placement_report(pinned)
    assert any(r.name == "mean" and r.target == "npu" for r in report.rows)


def test_build_with_cost_placement_runs_the_same_bits_and_reports_the_measured_side():
    """With this machine's measured host the cost placement is estimated faster, builds, runs
    the interpreter's bits, and its run fills the estimate's table with measured quantities.
    Whether the measured times agree with the estimate's direction is a speed, and machines
    differ (an SSE-only host runs these kernels slower than the model thinks):
    benchmarks/placement.py reports it."""
    mod = int8_convnet(strides=((4, 4), (1, 1), (4, 4)))
    host = parse_host("measured")
    all_on, cost, est_all, est_cost = _both(mod, host)
    assert est_cost.total_s < est_all.total_s
    x = _same_bits(mod, cost, seed=2)
    want = P.interpret(mod, [x])[0]
    exe_all = P.build(mod, TARGET)
    exe_cost = P.build(mod, TARGET, placement="cost", config={"host_model": host})
    assert np.array_equal(exe_cost.run(x)[0], want)
    assert np.array_equal(exe_all.run(x)[0], want)
    profile = exe_cost.profile(x)
    got = measured(est_cost, exe_cost, profile)
    kernels = [op.time_s for s in profile.steps if s.target == "llvm" for op in s.ops]
    assert kernels and got["host_s"] == pytest.approx(sum(kernels))  # not the profiler's own time
    assert got["total_s"] >= got["host_s"] > 0
    assert got["weight_bytes"] == est_cost.totals()["weight_bytes"]
    on_npu = measured(est_all, exe_all, exe_all.profile(x))
    assert on_npu["accelerator_cycles"] > got["accelerator_cycles"] >= 0


def test_placement_and_host_are_validated():
    mod = int8_convnet()
    with pytest.raises(PartitaError, match="placement must be one of"):
        partition_for(mod, TARGET, placement="fastest")
    with pytest.raises(ValueError, match="unknown host"):
        parse_host("pentium-4")
    a55 = parse_host("cortex-a55:2GHz")
    clock, macs, _ = HOST_PRESETS["cortex-a55"]
    assert a55.macs_per_s == pytest.approx(2e9 * macs)


def test_the_estimate_table_and_json():
    mod = int8_convnet()
    est = estimate(partition_for(mod, TARGET), TARGET, "cortex-a55")
    totals = est.totals()
    assert totals["accelerator_cycles"] > 0 and totals["host_s"] > 0
    assert totals["transfer_bytes"] > 0 and totals["sram_peak_bytes"] > 0
    assert totals["weight_bytes"] > 0 and totals["host_arena_bytes"] > 0
    text = est.table()
    for label in (
        "accelerator cycles",
        "host time",
        "boundary transfers",
        "SRAM peak",
        "weights",
        "host arena",
        "end to end",
    ):
        assert label in text
    assert '"estimated"' in est.to_json()


def _conv_then_sigmoid():
    """x -> CONV_2D (2.4 M MACs: the NPU's) -> LOGISTIC on 16k elements (a LUT: one element a
    cycle on the NPU, a table lookup per byte on the host)."""
    from partita.ir import Span

    rng = np.random.default_rng(0)
    op = P.get_op
    x = P.var("x", (1, 32, 32, 16), "int8")
    s0 = Span(0, "CONV_2D", "conv")
    zero, scale = P.const(np.int32(0)), P.const(np.float32(0.05))
    w = P.const(rng.integers(-8, 8, (3, 3, 16, 16), dtype=np.int8))
    y = op("qnn.conv2d")(x, w, zero, zero, scale, P.const(np.float32(0.02)), padding=(1, 1),
                         data_layout="NHWC", kernel_layout="HWIO", span=s0)
    y = op("qnn.requantize")(y, P.const(np.float32(0.001)), zero, scale, zero,
                             out_dtype="int8", span=s0)
    y = op("qnn.sigmoid")(y, scale, zero, P.const(np.float32(1 / 256)),
                          P.const(np.int32(-128)), span=Span(1, "LOGISTIC", "sigmoid"))
    return P.IRModule.from_expr(y)


def test_a_partition_is_split_where_only_part_of_it_pays():
    mod = _conv_then_sigmoid()
    all_on, cost, est_all, est_cost = _both(mod, "cortex-a55")
    assert len(placement_report(all_on).partitions) == 1
    assert est_cost.total_s < est_all.total_s
    report = placement_report(cost)
    conv = next(r for r in report.rows if r.name == "conv")
    sigmoid = next(r for r in report.rows if r.name == "sigmoid")
    assert conv.target == "npu" and sigmoid.target == "llvm"
    assert sigmoid.reason.startswith("cost: split off the accelerator partition")
    _same_bits(mod, cost, seed=3)


@pytest.mark.parametrize(
    "target",
    ["npu, llvm -host=cortex-a55:1.8GHz", "npu -host=cortex-a55:1.8GHz, llvm"],
)
def test_the_host_declared_in_the_target_string(target):
    """``-host=`` in the target string (on the host or on an accelerator) is the same as
    host_model=: the same placement, the same estimate."""
    mod = int8_convnet()
    by_option = partition_for(mod, TARGET, placement="cost", host_model="cortex-a55:1.8GHz")
    by_target = partition_for(mod, target, placement="cost")
    assert str(by_target) == str(by_option)
    est = estimate(by_target, target)
    assert est.host_model.startswith("cortex-a55 at 1.80 GHz")
    assert est.total_s == estimate(by_option, TARGET, "cortex-a55:1.8GHz").total_s
    assert est.total_s < estimate(partition_for(mod, target), target).total_s
    _same_bits(mod, by_target)
    exe = P.build(mod, target, placement="cost")
    x = _same_bits(mod, by_target, seed=3)
    assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("npu, llvm -host=pentium-4", r"-host=pentium-4: unknown host 'pentium-4'"),
        ("npu, llvm -host=cortex-a55:fast", r"expected <name>:<clock, e.g. 1.8GHz>"),
        ("npu, llvm -host=cortex-a55:0GHz", "must be positive"),
        ("npu, llvm -host", "-host needs a value"),
        ("npu -host=cortex-a55, llvm -host=cortex-a76", "declares the host twice"),
    ],
)
def test_a_bad_host_in_the_target_string_is_refused(target, message):
    from partita.partition import TargetError, parse_target

    with pytest.raises(TargetError, match=message):
        parse_target(target)


def test_two_different_hosts_are_refused():
    mod = int8_convnet()
    with pytest.raises(PartitaError, match="two hosts declared"):
        partition_for(mod, "npu, llvm -host=cortex-a55", placement="cost", host_model="cortex-a76")


def test_the_cli_reads_the_host_from_the_target(capsys):
    from partita.cli import main

    model = str(NETS / "mobilenet_v2_035_96.tflite")
    status = main(
        ["inspect", model, "-t", "npu, llvm -host=cortex-a55:1.8GHz", "--placement", "cost",
         "--estimate"]
    )
    assert status == 0
    assert "host: cortex-a55 at 1.80 GHz (declared)" in capsys.readouterr().out
    status = main(["inspect", model, "-t", "npu, llvm -host=cortex-a55:9x"])
    assert status != 0
    assert "-host=cortex-a55:9x" in capsys.readouterr().err
