"""A convolution's fused ReLU-family activation that Vela 5.2 runs as its own operation when the
output has fewer than 8 channels (backends/npu/vela_activation.py): the convolution writes an
SRAM map, a 1x1 pool moves it through the activation to the output. Vela's figures: the
recorded totals in data/vela_cycles.json (dwconv_m1_s1_same_relu6: its DepthwiseConv2D 576 and
Relu6 320 cycles on u55-256, 1,207 and 532 on u65-256)."""

from __future__ import annotations

import pytest
from partita.backends.npu.config import get_config
from partita.backends.npu.program import TensorDesc
from partita.backends.npu.vela_activation import activation_cycles, split_activation
from vela_record import ops_region


@pytest.mark.parametrize("preset", ["u55-256", "u65-256"])
def test_four_channel_relu6_runs_apart(preset):
    region, vela = ops_region("dwconv_m1_s1_same_relu6", preset)
    (op,) = region.program.ops
    # the ReLU6's bounds are int8's whole range here (output zero point -128): only the
    # compiler's mark says there is an activation
    assert (op.params["act_min"], op.params["act_max"]) == (-128, 127)
    assert split_activation(op, region.program.tensors[op.output])
    ours = sum(c["cycles"] for c in region.cycles)
    assert abs(ours / vela["cycles"] - 1) <= 0.01, (ours, vela)  # was 0.64 on u55-256


@pytest.mark.parametrize("preset", ["u55-256", "u65-256"])
def test_eight_channels_keep_it_fused(preset):
    region, vela = ops_region("conv2d_same_s2_relu6", preset)
    (op,) = region.program.ops
    assert op.params["activation"] == "clip"
    assert not split_activation(op, region.program.tensors[op.output])
    ours = sum(c["cycles"] for c in region.cycles)
    # u55-256: 464 against 480, the weight stream's 16 bytes (vela_weights.py's encoder: 384,
    # Vela's own: 400)
    assert abs(ours / vela["cycles"] - 1) <= 0.04, (ours, vela)


def test_activation_operation_is_velas():
    """Vela's Relu6 operation on u55-256 for 8x8 maps of 1, 2 and 4 channels and a 16x16x4 one
    (one-op models made with TFLite's converter; the figures of its per-layer report)."""
    config = get_config("u55-256")
    for shape, vela in (((1, 8, 8, 1), 128), ((1, 8, 8, 2), 192), ((1, 8, 8, 4), 320)):
        assert round(activation_cycles(config, TensorDesc(shape, "int8"), "sram")) == vela
    out = TensorDesc((1, 16, 16, 4), "int8")
    assert round(activation_cycles(config, out, "sram")) == 864
    dram = TensorDesc((1, 8, 8, 4), "int8", "dram")
    assert round(activation_cycles(get_config("u65-256"), dram, "dram")) == 533  # Vela 532
