"""QUANTIZE around a convolution as Vela 5.2 runs it (session 20, n30m), against its debug
database (`vela --enable-debug-db`, quantize_uint8_io of tests/models/tflite/ops: a uint8
8x8x4 input, QUANTIZE to int8, a 3x3 CONV_2D with ReLU, QUANTIZE back to uint8): no operation
for the input QUANTIZE (the Conv2D reads the uint8 input), the output Quantize an operation of
its own, 464 / 740 op cycles on u55-256 / u65-256 (block 6x6x8)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from partita.backends.npu import vela_quantize
from partita.backends.npu.config import get_config
from partita.backends.npu.program import TensorDesc

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))

from npu import P, from_tflite  # noqa: E402

VELA_OUTPUT_QUANTIZE = {"u55-256": 464, "u65-256": 740}


def _region(preset: str):
    exe = P.build(
        from_tflite(str(ROOT / "tests/models/tflite/ops/quantize_uint8_io.tflite")),
        f"npu -config={preset}, ref",
    )
    (step,) = [s for s in exe.steps if s.target == "npu"]
    return step.region


@pytest.mark.parametrize("preset", sorted(VELA_OUTPUT_QUANTIZE))
def test_input_quantize_is_folded_and_output_quantize_split(preset):
    region = _region(preset)
    program = region.program
    quantize, conv = program.ops
    assert vela_quantize.quantize_folded(quantize, program)
    assert not vela_quantize.quantize_folded(conv, program)
    assert vela_quantize.quantize_split(conv, program)
    assert region.cycles[0]["cycles"] == 0
    assert region.cycles[1]["cycles"] > VELA_OUTPUT_QUANTIZE[preset]


@pytest.mark.parametrize("preset, tolerance", [("u55-256", 0.0), ("u65-256", 0.07)])
def test_output_quantize_is_velas(preset, tolerance):
    config = get_config(preset)
    out = TensorDesc((1, 8, 8, 8), "uint8", "sram" if preset == "u55-256" else "dram")
    ours = vela_quantize.split_quantize_cycles(config, out)
    vela = VELA_OUTPUT_QUANTIZE[preset]
    assert abs(ours / vela - 1) <= tolerance, (ours, vela)
