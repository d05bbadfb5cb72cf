"""TRANSPOSE_CONV as Vela 5.2 runs it (backends/npu/vela_resample.py): one convolution that
reads its input upscaled, so our zero insertion (``nn.dilate``) costs nothing and the
convolution's blocks are those of the map before upscaling. Vela's figures: the recorded totals
in data/vela_cycles.json and its schedule (``vela --verbose-schedule``: IFM block 10x10 for the
16x16x8 output block of transpose_conv_s2_same, 12x12 for transpose_conv_s2_valid's 18x18)."""

from __future__ import annotations

import pytest
from partita.backends.npu.blocks import Query, find_block
from partita.backends.npu.config import get_config
from vela_record import ops_region

MODELS = ("transpose_conv_s2_same", "transpose_conv_s2_valid", "transpose_conv_in_graph")


@pytest.mark.parametrize("preset", ["u55-256", "u65-256"])
@pytest.mark.parametrize("name", MODELS)
def test_transpose_conv_is_velas(name, preset):
    """Within 1% of Vela's totals (were 1.07-1.44 with the zero insertion charged as a DMA
    and the convolution reading the zero-inserted map)."""
    region, vela = ops_region(name, preset)
    ours = sum(c["cycles"] for c in region.cycles)
    assert abs(ours / vela["cycles"] - 1) <= 0.01, (ours, vela)
    ops = region.program.ops
    dilates = [i for i, op in enumerate(ops) if op.params.get("op") == "nn.dilate"]
    assert dilates and all(region.cycles[i]["cycles"] == 0 for i in dilates)


def test_input_block_is_read_before_upscaling():
    config = get_config("u55-256")
    same = Query("conv", (8, 8, 4), (16, 16, 8), (3, 3), upscale=2)
    assert find_block(config, same).ifm[:2] == (10, 10)
    valid = Query("conv", (8, 8, 4), (18, 18, 8), (4, 4), upscale=2)
    assert find_block(config, valid).ifm[:2] == (12, 12)
    assert find_block(config, valid._replace(upscale=1)).ifm[:2] == (22, 22)
