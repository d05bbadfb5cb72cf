"""The uint8 input QUANTIZE Vela 5.2 folds into the convolution that reads it
(backends/npu/vela_quantize.py), against Vela's recorded figures and its debug database
(`vela --enable-debug-db`, u55-256: quantize_uint8_io's Conv2D reads the UInt8 graph input and
no Quantize precedes it; mobilenet_v2_035_96_uint8's input Quantize runs, 14,016 cycles)."""

from __future__ import annotations

import numpy as np
import pytest
from partita.backends.npu.config import get_config
from partita.backends.npu.program import TensorDesc
from partita.backends.npu.stream import decode, encode
from partita.backends.npu.vela_quantize import (
    folded_quantize,
    output_quantize_cycles,
    quantize_after,
    read_through,
)
from partita.frontends import from_tflite
from vela_record import ROOT, ops_region

import partita as P

MOBILENET_UINT8 = ROOT / "tests" / "models" / "tflite" / "nets" / "mobilenet_v2_035_96_uint8.tflite"


@pytest.mark.parametrize("preset", ["u55-128", "u55-256", "u65-256", "u65-512"])
def test_folded_quantize_costs_nothing(preset):
    region, vela = ops_region("quantize_uint8_io", preset)
    program = region.program
    quantize, conv = program.ops
    assert quantize.params["zero_points"] == [128, 0]
    assert folded_quantize(quantize, program)
    assert read_through(conv, program) == program.inputs[0]
    assert region.cycles[0]["cycles"] == 0
    # the convolution reads the uint8 input where it lives (the U65: DRAM), then Vela's
    # output Quantize runs (test_output_quantize_is_velas_operation)
    ours = sum(c["cycles"] for c in region.cycles)
    assert 0.999 <= ours / vela["cycles"] <= 1.002, (ours, vela)  # was 1.52 / 0.99 (u55-256)


def test_zero_point_minus_one_keeps_its_operation():
    """mobilenet_v2_035_96_uint8's input QUANTIZE (uint8 127 -> int8 -1, the same table x -
    128) is an operation in Vela's schedule: it keeps its cost."""
    exe = P.build(from_tflite(str(MOBILENET_UINT8)), "npu -config=u55-256, ref")
    (region,) = [s.region for s in exe.steps if s.target == "npu"]
    first = region.program.ops[0]
    assert first.params["zero_points"] == [127, -1]
    assert np.array_equal(first.arrays["table"], np.arange(256) - 128)
    assert not folded_quantize(first, region.program)
    assert region.cycles[0]["cycles"] > 10_000


def test_zero_points_survive_the_stream():
    region, _ = ops_region("quantize_uint8_io", "u55-256")
    program = decode(encode(region.program))
    assert program.ops[0].params["zero_points"] == [128, 0]
    assert folded_quantize(program.ops[0], program)


# Vela's debug database (`vela --enable-debug-db`), per operation: quantize_uint8_io's Conv2D
# (writing its int8 8x8x8 map to SRAM) and its output Quantize (to the uint8 output);
# mobilenet_v2_035_96_uint8's last Quantize after its FullyConnected (1x16)
CONV2D = {"u55-128": 896, "u55-256": 576, "u65-256": 1253, "u65-512": 1157}
QUANTIZE = {"u55-128": 816, "u55-256": 464, "u65-256": 740, "u65-512": 622}
QUANTIZE_16 = {"u55-128": 110, "u55-256": 109, "u65-256": 329, "u65-512": 308}


@pytest.mark.parametrize("preset", sorted(QUANTIZE))
def test_output_quantize_is_velas_operation(preset):
    """The output QUANTIZE fused into the convolution is charged as Vela's own Quantize
    after a convolution that writes its int8 map to SRAM, each as Vela's figure."""
    region, _ = ops_region("quantize_uint8_io", preset)
    program, config = region.program, region.config
    conv = program.ops[1]
    assert conv.params["table_op"] == "qnn.requantize" and quantize_after(conv)
    out = program.tensors[conv.output]
    quantize = output_quantize_cycles(config, out, out.memory)
    assert abs(quantize - QUANTIZE[preset]) <= 1, quantize
    assert abs(region.cycles[1]["cycles"] - quantize - CONV2D[preset]) <= 2, region.cycles[1]
    fc_out = TensorDesc((1, 16), "uint8", out.memory)
    small = output_quantize_cycles(get_config(preset), fc_out, out.memory)
    assert abs(small - QUANTIZE_16[preset]) <= 1, small


def test_table_op_survives_the_stream():
    region, _ = ops_region("quantize_uint8_io", "u55-256")
    program = decode(encode(region.program))
    assert quantize_after(program.ops[1])
    assert region.program.ops[1].params == program.ops[1].params
