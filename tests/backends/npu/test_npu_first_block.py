"""Vela 5.2 charges a MAC operation its first output block unoverlapped (the block's input
and output transfers, its MAC cycles and its output stage in sequence), then the later blocks
pipelined, and no fixed cost per operation (blocks.mac_cycles with ``fill``). On the one-op
convolutions of tests/models/tflite/ops, one output block each, our compute cycles are Vela's
'NPU' cycles and our totals its totals (the recorded figures in data/vela_cycles.json)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from partita.frontends import from_tflite

import partita as P

ROOT = Path(__file__).resolve().parents[3]
RECORD = json.loads((Path(__file__).resolve().parent / "data" / "vela_cycles.json").read_text())
# one-op models whose operation is one output block on u55-256
ONE_BLOCK = (
    "conv2d_1x1",
    "conv2d_nobias",
    "conv2d_same_dil2",
    "conv2d_same_s1_relu",
    "conv2d_valid_s1",
    "conv2d_valid_dil2",
    "conv2d_same_s2_relu6",
    "dwconv_m1_s2_same",
)


def _figures(name: str, preset: str):
    path = ROOT / "tests" / "models" / "tflite" / "ops" / f"{name}.tflite"
    row = RECORD[f"tests/models/tflite/ops/{name}/{preset}"]
    assert row["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()[:16], path
    exe = P.build(from_tflite(str(path)), f"npu -config={preset}, ref")
    (ours,) = [c for s in exe.steps if s.target == "npu" for c in s.region.cycles]
    return ours, row


@pytest.mark.parametrize("name", ONE_BLOCK)
def test_one_block_convolution_is_velas(name):
    ours, vela = _figures(name, "u55-256")
    assert ours.get("block"), ours
    # compute: Vela's NPU cycles (the block's transfers + MACs + output stage, in sequence)
    assert abs(ours["compute_cycles"] - vela["npu_cycles"]) <= 0.02 * vela["npu_cycles"], (
        ours,
        vela,
    )
    # total: the slower of that and the weight stream from flash, with no fixed cost (the
    # stream as Arm's reference encoder writes it: 384 bytes for conv2d_valid_s1's 3x3x4x8
    # weights where Vela 5.2's own encoder writes 400, so 464 cycles against 480)
    assert 0.96 <= ours["cycles"] / vela["cycles"] <= 1.04, (ours, vela)


@pytest.mark.parametrize("name", ONE_BLOCK)
def test_one_block_convolution_from_dram_is_near_velas(name):
    """On u65-256 the model's input and output live in DRAM: the block's transfers carry
    DRAM's first-byte latencies (0.93-1.00 of Vela's totals; was 0.76-0.86 with a fixed cost
    in place of the unoverlapped first block)."""
    ours, vela = _figures(name, "u65-256")
    assert 0.92 <= ours["cycles"] / vela["cycles"] <= 1.02, (ours, vela)


def test_dram_input_whose_block_spans_its_depth_is_read_in_whole_rows():
    """regor's EstimateMemoryTransfer: an NHWC read whose block spans the map's depth moves the
    block's rows per burst (conv2d_valid_s2_relu: 16x16x8 in 18x18x8 blocks, 144-byte runs,
    full 128-byte bursts; Vela 1,333 cycles on u65-256, its DRAM 298); one whose block does
    not (a 3-channel image in 8-deep blocks) moves 8 bytes per 128-byte burst."""
    ours, vela = _figures("conv2d_valid_s2_relu", "u65-256")
    assert abs(ours["cycles"] / vela["cycles"] - 1) <= 0.02, (ours, vela)  # was 2.49
    from partita.backends.npu.blocks import Block, Query
    from partita.backends.npu.config import get_config
    from partita.backends.npu.program import TensorDesc
    from partita.backends.npu.vela_access import ifm_block_read

    config = get_config("u65-256")
    q = Query("conv", (16, 16, 8), (7, 7, 8), (3, 3), (2, 2))
    t = TensorDesc((1, 16, 16, 8), "int8", "dram")
    assert ifm_block_read(config, q, Block((8, 8, 8), (18, 18, 8), True), t)[1] == 1.0
    q = Query("conv", (224, 224, 3), (112, 112, 32), (3, 3), (2, 2))
    t = TensorDesc((1, 224, 224, 3), "int8", "dram")
    assert ifm_block_read(config, q, Block((6, 16, 32), (14, 34, 8), True), t)[1] == 16.0
