"""A staged operation's cycles with its weights' DMA as Vela 5.2 charges them (regor's
EstimatePerformance for a buffered weight tensor: max(full transfer - the previous operation's
scheduler estimate + this operation's scheduler estimate, its cycles + the unhidden transfer);
weight_staging.buffered_cycles), and REVERSE_V2, which Vela 5.2 leaves on the CPU. Figures
from Vela's debug database (`vela --enable-debug-db` from /work/tfvenv; perf's op_cycles,
perf_debug's est_op_cycles_without_buffering and weight_transfer_cycles)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from partita.backends.npu.config import get_config
from partita.backends.npu.program import TensorDesc
from partita.backends.npu.vela_access import prelu_tail
from partita.backends.npu.weight_staging import buffered_cycles
from partita.frontends import from_tflite

import partita as P

ROOT = Path(__file__).resolve().parents[3]
OPS = ROOT / "tests" / "models" / "tflite" / "ops"
# Vela's op cycles (u65-256) of staged convolutions whose weights' DMA the previous operation
# hides (est_op_cycles_with_buffering = without; session 21, n30u), by the model's operator
# index: digits_mobilenetv2's 1x1 convolutions on 8x8 and 4x4 maps (the DMA's 500-cycle latency
# was in their memory cycles before: 544, 586, 650), sum_in_graph's SUM (503 before)
HIDDEN_DMA = {
    ROOT / "partita" / "data" / "digits_mobilenetv2.tflite": {5: 480, 8: 480, 12: 304, 19: 368},
    OPS / "sum_in_graph.tflite": {1: 184},
}


def test_buffered_cycles_is_regors_formula():
    config = get_config("u65-256")
    # prelu_in_graph's last 1x1 convolution: 517 - 335 (the MAXIMUM's estimate) + 1,069
    assert abs(buffered_cycles(config, 592, 208, 335, 1069) - 1251) <= 1
    # reduce_min_in_graph's: 510 - 143 (the negating SUB's estimate) + 1,112
    assert abs(buffered_cycles(config, 576, 128, 143, 1112) - 1479) <= 1
    # the operation's own cycles win where they are longer than its estimate
    assert abs(buffered_cycles(config, 2000, 128, 143, 1112) - (2000 + 510 - 143)) <= 1
    # without an estimate (weights sliced in depth) only the stall is charged
    assert abs(buffered_cycles(config, 576, 128, 143, None) - (576 + 510 - 143)) <= 1
    assert buffered_cycles(config, 576, 128, None, 1112) == 576  # the first operation
    assert buffered_cycles(get_config("u55-256"), 576, 128, 10, 1112) == 576  # the U55


def test_the_slack_is_the_scheduler_estimate():
    config = get_config("u65-256")
    ofm = TensorDesc((1, 8, 8, 8), "int8", "sram")
    assert abs(prelu_tail(config, ofm, True, False) - 335) <= 0.07 * 335  # ours 357


def _npu_cycles(name, preset, cpu_ops=()):
    exe = P.build(
        from_tflite(str(OPS / f"{name}.tflite")),
        f"npu -config={preset}, ref",
        config={"cpu_ops": list(cpu_ops)} if cpu_ops else None,
    )
    return [c["cycles"] for s in exe.steps if s.target == "npu" for c in s.region.cycles]


@pytest.mark.parametrize(
    "name, vela_last, vela_total",
    (("prelu_in_graph", 1251, 3528), ("reduce_min_in_graph", 1479, 4368)),
)
def test_last_convolution_after_an_elementwise_operation(name, vela_last, vela_total):
    cycles = _npu_cycles(name, "u65-256")
    assert abs(cycles[-1] / vela_last - 1) <= 0.03, (cycles[-1], vela_last)
    assert abs(sum(cycles) / vela_total - 1) <= 0.03, (sum(cycles), vela_total)


@pytest.mark.parametrize(
    "preset, vela",
    # Vela's two convolutions around the REVERSE_V2 it leaves on the CPU ('Unsupported
    # reverse mask'): SRAM maps on the U55, DRAM ones on the U65
    (("u55-256", [576, 384]), ("u65-256", [1524, 1140])),
)
def test_reverse_v2_in_graph_as_vela_places_it(preset, vela):
    # partita leaves the reverse on the CPU too (vela_ops.reverse): its two convolutions are
    # Vela's within a cycle, each in its own NPU region
    ours = _npu_cycles("reverse_v2_in_graph", preset)
    assert len(ours) == 2 and all(abs(a - b) <= 1 for a, b in zip(ours, vela)), ours
    assert ours == _npu_cycles("reverse_v2_in_graph", preset, ["reverse"])


@pytest.mark.parametrize("path", sorted(HIDDEN_DMA), ids=lambda p: p.stem)
def test_a_hidden_weight_dma_is_not_in_the_operations_cycles(path):
    exe = P.build(from_tflite(str(path)), "npu -config=u65-256, ref")
    ours: dict[int, int] = {}
    for s in exe.steps:
        for op, c in zip(s.region.program.ops, s.region.cycles):
            index = int(re.search(r"#(\d+)", op.name).group(1))
            ours[index] = ours.get(index, 0) + c["cycles"]
    for index, vela in HIDDEN_DMA[path].items():
        assert abs(ours[index] / vela - 1) <= 0.05, (index, ours[index], vela)
