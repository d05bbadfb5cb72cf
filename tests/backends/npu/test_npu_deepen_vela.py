"""Shallow elementwise maps as Vela 5.2 runs them (vela_deepen.deepened_shape, session 21,
n30y): an elementwise operation whose output has fewer than 8 channels and more than 16
elements, no operand broadcasting (a scalar does not), runs on its maps deepened to 16
channels, and those maps keep no NHCWB16 bricks. The pattern is MobileNetV3's input rescale
(a MUL and an ADD of scalars on the 224x224x3 input); rescale_in_graph is it on 64x64x3.
Vela's figures: its per-layer report (`vela --verbose-performance`, op cycles) and its
recorded totals (data/vela_cycles.json)."""

from __future__ import annotations

import pytest
from partita.backends.npu.vela_deepen import deepened_shape
from vela_record import ops_region

# Vela 5.2's op cycles of rescale_in_graph's MUL, ADD and 3x3 convolution (its NPU column
# for the convolution on u55-256, where its op cycles are 10,000)
VELA = {
    "u55-128": (9216, 18432, 13451),
    "u55-256": (4608, 9216, 7894),
    "u65-256": (4608, 9216, 7567),
    "u65-512": (2304, 4608, 6454),
}


def test_deepened_shape_is_regors():
    # MobileNetV3's rescale: Vela's per-layer report runs it as 168x56x16
    assert deepened_shape((1, 224, 224, 3)) == (168, 56, 16)
    assert deepened_shape((1, 64, 64, 3)) == (48, 16, 16)
    # regor's own cases (ReshapeToIncreaseDepth's unit test)
    assert deepened_shape((1, 512, 4, 1)) == (16, 8, 16)
    assert deepened_shape((256, 2)) == (8, 4, 16)
    assert deepened_shape((3, 7, 11)) == (11, 1, 21)


@pytest.mark.parametrize("preset", sorted(VELA))
def test_rescale_runs_deepened(preset):
    region, row = ops_region("rescale_in_graph", preset)
    mul, add, conv = (c["cycles"] for c in region.cycles)
    vela_mul, vela_add, vela_conv = VELA[preset]
    # on the NHWC 64x64x3 maps in bricks of 16 these were 16/3 times Vela's
    assert (mul, add) == (vela_mul, vela_add)
    # the convolution reads the ADD's NHWC map (in bricks: 12,272 and 5,112 on u55-256 and
    # u65-512)
    assert abs(conv / vela_conv - 1) <= 0.09, (conv, vela_conv)
    assert abs(sum(c["cycles"] for c in region.cycles) / row["cycles"] - 1) <= 0.1
