"""Vela 5.2's U65 cascades (backends/npu/vela_cascade.py) against its schedule: which operations
it cascades and the stripe each runs in (``vela --verbose-schedule``: each operation's "OFM
Stripe" and "Assigned Cascade", the same on u65-256 and u65-512), the rolling buffers of
MobileNetV2 224's first cascade (its "ccd" bytes), and the block and cycles of the cascaded
first convolution (its "Operator Config" and per-layer 'Op Cycles')."""

from __future__ import annotations

from pathlib import Path

import pytest
from partita.backends.npu.config import get_config
from partita.backends.npu.vela_cascade import _rolling, cascade_stripes
from partita.frontends import from_tflite

import partita as P

TFLITE = Path(__file__).resolve().parents[2] / "models" / "tflite"
# Vela's cascaded operations in order, each's output stripe height; a new list per cascade
VELA_CASCADES = {
    "large/mobilenet_v2_100_224": [[6, 6, 6, 6, 3, 3], [10, 10, 10], [18, 18, 9]],
    "large/mobilenet_v1_100_224": [[12, 12, 12, 6], [6, 6, 6, 3], [8, 8, 8]],
    "nets/big_map_288": [[6, 3, 3]],
    "nets/mobilenet_v2_035_96": [],
    "nets/efficientnet_w050_d050_128": [],
}


def _program(model: str, preset: str):
    exe = P.build(from_tflite(str(TFLITE / f"{model}.tflite")), f"npu -config={preset}, ref")
    (step,) = [s for s in exe.steps if s.target == "npu"]
    return step.region


@pytest.mark.parametrize("model", sorted(VELA_CASCADES))
def test_cascades_and_stripes_are_velas(model):
    program = _program(model, "u65-256").program
    stripes = cascade_stripes(program, get_config("u65-256"))
    expected = [h for cascade in VELA_CASCADES[model] for h in cascade]
    assert [stripes[i] for i in sorted(stripes)] == expected


def test_no_cascade_on_the_u55():
    program = _program("nets/big_map_288", "u55-256").program
    assert cascade_stripes(program, get_config("u55-256")) == {}


def test_first_cascade_rolling_buffers_are_velas():
    """MobileNetV2 224's first cascade: Vela's schedule reports 304,640 bytes of cascade
    buffers ("ccd") for its five rolling buffers."""
    program = _program("large/mobilenet_v2_100_224", "u65-512").program
    stripes = cascade_stripes(program, get_config("u65-512"))
    ops = program.ops
    total = sum(
        _rolling(program, ops[i - 1], ops[i], stripes[i - 1], stripes[i]) for i in range(1, 6)
    )
    assert total == 304_640


@pytest.mark.parametrize("preset", ["u65-256", "u65-512"])
def test_cascaded_first_convolution_is_velas(preset):
    """Vela runs the first convolution in 6x20x16 blocks in its 6-row stripes (6x16x32 on its
    own), reading the 3-channel DRAM input once per 16 output channels: 539,397 cycles on both
    presets (303,706 with --disable-cascading)."""
    region = _program("large/mobilenet_v2_100_224", preset)
    first = region.cycles[0]
    assert first["block"] == "6x20x16"
    assert abs(first["cycles"] / 539_397 - 1) < 0.02
