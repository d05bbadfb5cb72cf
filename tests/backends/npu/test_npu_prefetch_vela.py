"""A staged operation waits for its weights' DMA where the previous operation is shorter
(weight_staging.prefetch_stall), as Vela 5.2's debug database shows (`vela --enable-debug-db`,
u65-256: est_op_cycles_with_buffering = est_op_cycles_without_buffering + weight_transfer_cycles
- the previous operation's est_op_cycles_without_buffering, reported as the op cycles)."""

from __future__ import annotations

from pathlib import Path

import pytest
from partita.backends.npu.config import get_config
from partita.backends.npu.weight_staging import prefetch_stall, transfer_cycles
from partita.frontends import from_tflite

import partita as P

ROOT = Path(__file__).resolve().parents[3]


def test_weight_transfer_is_velas():
    # weight_transfer_cycles for 48 + 80, 128 + 80 and 208 + 80 bytes of weights and records
    config = get_config("u65-256")
    for nbytes, vela in ((128, 510), (208, 517), (288, 524)):
        assert abs(transfer_cycles(config, nbytes) - vela) <= 1, (nbytes, vela)


def test_the_stall_is_the_transfer_not_hidden():
    config = get_config("u65-256")
    assert abs(prefetch_stall(config, 128, 143) - (1479 - 1112)) <= 1  # reduce_min_in_graph
    assert abs(prefetch_stall(config, 208, 167) - (1211 - 861)) <= 1  # mean_axis2_in_graph
    assert prefetch_stall(config, 288, 1615) == 0  # dwconv_m2_in_graph: under the transposes
    assert prefetch_stall(config, 128, None) == 0  # the first operation
    assert prefetch_stall(get_config("u55-256"), 128, 10) == 0  # the U55: not modelled


def _last_op(name, preset):
    path = ROOT / "tests" / "models" / "tflite" / "ops" / f"{name}.tflite"
    exe = P.build(from_tflite(str(path)), f"npu -config={preset}, ref")
    (step,) = [s for s in exe.steps if s.target == "npu"]
    return step.region.cycles[-1]["cycles"], sum(c["cycles"] for c in step.region.cycles)


@pytest.mark.parametrize(
    "name, vela_op, vela_total",
    # Vela's last convolution's op cycles and the model's total on u65-256
    (("mean_axis2_in_graph", 1211, 2822), ("reduce_min_in_graph", 1479, 4368)),
)
def test_the_last_convolution_waits_for_its_weights(name, vela_op, vela_total):
    last, total = _last_op(name, "u65-256")
    # our convolution without the stall: 522 and 576 cycles; with it (n30q: regor's
    # buffered cycles, test_npu_buffered_vela.py) 1,237 and 1,478
    assert abs(last / vela_op - 1) <= 0.03, (last, vela_op)
    assert abs(total / vela_total - 1) <= 0.08, (total, vela_total)


def test_no_stall_after_a_pool():
    # reduce_max_in_graph: Vela's last convolution (516 op cycles) moves its weights (517
    # cycles) under a ReduceMax whose estimate is 803 (its op cycles 111): no stall
    last, total = _last_op("reduce_max_in_graph", "u65-256")
    assert last < 600, last
    assert 0.90 <= total / 2308 <= 1.05, total
