"""The half-pixel 2x bilinear resize as Vela 5.2 runs it (backends/npu/vela_decompose.py's
_half_pixel_2x), per operation against Vela's debug database (`vela --enable-debug-db`,
resize_bilinear_2x_half_pixel, an 8x8x4 input, on each preset): five MemoryCopies into the
bordered 10x10x4 map (the interior and the top and bottom rows from the input, the left and
right columns from the bordered map) and four 2x2 depthwise convolutions, the first of which
waits for its weights on the U65."""

from __future__ import annotations

import numpy as np
import pytest
from partita.backends.npu.config import get_config
from partita.backends.npu.vela_decompose import (
    _first_phase,
    _phase_conv,
    resize_bilinear_as_vela,
)
from partita.backends.npu.vela_pad import copy_cycles
from vela_record import ops_region

# per preset: the interior copy, a row copy, a column copy, the first and the other phases
VELA = {
    "u55-128": (693, 154, 258, 1485, 1485),
    "u55-256": (446, 153, 169, 1157, 1157),
    "u65-256": (1318, 947, 161, 2326, 2044),
    "u65-512": (1263, 934, 116, 2105, 1804),
}


@pytest.mark.parametrize("preset", sorted(VELA))
def test_copies_are_velas(preset):
    config = get_config(preset)
    src = "sram" if preset.startswith("u55") else "dram"  # where the region's input lives
    copies = (
        copy_cycles(config, (8, 8, 4), src, "sram", "int8"),
        copy_cycles(config, (1, 8, 4), src, "sram", "int8"),
        copy_cycles(config, (10, 1, 4), "sram", "sram", "int8"),
    )
    for ours, vela in zip(copies, VELA[preset]):
        assert abs(ours - vela) <= 2, (copies, VELA[preset])


@pytest.mark.parametrize("preset", sorted(VELA))
def test_phases_are_velas(preset):
    """Each phase as Vela's (its 9x9x4 input window), the first waiting for its weights on the
    U65 (Vela: 282 and 301 cycles more than the others) and not on the U55 (flash)."""
    config = get_config(preset)
    dst = "sram" if preset.startswith("u55") else "dram"
    ifm, ofm = (8, 8, 4), (16, 16, 4)
    phase = _phase_conv(config, ifm, ofm, ("sram", dst))
    first = _first_phase(config, ifm, ofm, phase)
    *_, vela_first, vela_phase = VELA[preset]
    assert abs(phase - vela_phase) <= 2, phase
    assert abs(first - vela_first) <= 3, (first, vela_first)


@pytest.mark.parametrize("in_graph", [False, True])
@pytest.mark.parametrize("preset", sorted(VELA))
def test_resize_total_as_velas(preset, in_graph):
    name = "resize_bilinear_2x_half_pixel" + ("_in_graph" if in_graph else "")
    region, vela = ops_region(name, preset)
    ours = sum(c["cycles"] for c in region.cycles)
    # one-op: was 1.03 / 1.03 / 0.90 / 0.88 on u55-128 / u55-256 / u65-256 / u65-512
    assert abs(ours / vela["cycles"] - 1) <= 0.002, (ours, vela)
    if in_graph:
        return
    taps = np.zeros((16, 8), np.int64)
    taps[1, :2] = (3, 1)
    src = "sram" if preset.startswith("u55") else "dram"
    direct = resize_bilinear_as_vela(region.config, (1, 8, 8, 4), (1, 16, 16, 4), taps, (src, src))
    assert direct == pytest.approx(ours, abs=1)
