"""PAD, PADV2 and MIRROR_PAD charged as Vela 5.2 runs them (vela_pad.py): a copy of the
interior and one copy per padded border. Each copy against the cycles of Vela's per-layer
report (`vela --verbose-performance`, 'Op Cycles', u55-256) and the one-op models against
Vela's totals recorded in data/vela_cycles.json (``benchmarks/npu_ops.py --record``); session
18's charge (one copy of the output and a 300-cycle fixed cost) was 0.08-0.34 of them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from partita.backends.npu.config import get_config
from partita.backends.npu.vela_pad import copy_cycles, pad_borders
from partita.frontends import from_tflite

import partita as P

ROOT = Path(__file__).resolve().parents[3]
RECORD = json.loads((Path(__file__).resolve().parent / "data" / "vela_cycles.json").read_text())

# Vela 5.2's per-layer 'Op Cycles' on u55-256 for the one-op models' copies (8x8x4 inputs)
VELA_COPIES = {
    # pad [1, 2] x [2, 1]: the interior, top, bottom, left, right (constant from flash)
    "pad": [446, 768, 1536, 1536, 768],
    # padv2 [1, 1] x [0, 2]: the interior, top, bottom, right
    "padv2": [446, 768, 768, 1536],
    # mirror_pad [1, 2] x [2, 1]: the interior, then top, bottom, left, right from the output
    "mirror_pad": [446, 153, 170, 202, 185],
}
PADS = {
    "pad": ([[0, 0], [1, 2], [2, 1], [0, 0]], False),
    "padv2": ([[0, 0], [1, 1], [0, 2], [0, 0]], False),
    "mirror_pad": ([[0, 0], [1, 2], [2, 1], [0, 0]], True),
}


def test_border_shapes_follow_velas_copies():
    assert pad_borders((1, 8, 8, 4), PADS["pad"][0], False) == [
        (1, 11, 4),
        (2, 11, 4),
        (11, 2, 4),
        (11, 1, 4),
    ]
    # reflected rows span the input's width; an empty border is no copy
    assert pad_borders((1, 8, 8, 4), PADS["mirror_pad"][0], True)[:2] == [(1, 8, 4), (2, 8, 4)]
    assert len(pad_borders((1, 8, 8, 4), PADS["padv2"][0], False)) == 3


@pytest.mark.parametrize("name", sorted(VELA_COPIES))
def test_each_copy_within_eight_percent_of_velas_layer(name):
    config = get_config("u55-256")
    pad_width, reflect = PADS[name]
    source = "sram" if reflect else config.weight_memory
    ours = [copy_cycles(config, (8, 8, 4), "sram", "sram", "int8")]
    ours += [
        copy_cycles(config, b, source, "sram", "int8")
        for b in pad_borders((1, 8, 8, 4), pad_width, reflect)
    ]
    for o, v in zip(ours, VELA_COPIES[name], strict=True):
        assert 0.92 <= o / v <= 1.08, (name, ours, VELA_COPIES[name])


@pytest.mark.parametrize("preset", ("u55-256", "u65-256"))
@pytest.mark.parametrize("name", sorted(VELA_COPIES))
def test_one_op_pad_against_vela(name, preset):
    path = ROOT / "tests" / "models" / "tflite" / "ops" / f"{name}.tflite"
    row = RECORD[f"tests/models/tflite/ops/{name}/{preset}"]
    assert row["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    exe = P.build(from_tflite(str(path)), f"npu -config={preset}, ref")
    ours = sum(c["cycles"] for s in exe.steps if s.target == "npu" for c in s.region.cycles)
    # within 5% on both (u65-256 was 1.13-1.18 before session 19's MemoryCopy command
    # cycles, test_npu_copy_vela.py: the interior 1,629 cycles against Vela's 1,354)
    assert 0.95 <= ours / row["cycles"] <= 1.05, (ours, row["cycles"])
