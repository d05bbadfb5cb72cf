"""A depth multiplier's data movement charged as Vela 5.2 runs it (vela_depthmult.py): the
seven hardware transposes against Vela's debug database (`vela --enable-debug-db`,
perf_debug's shapes and transpose_type, perf's op_cycles per operation; the depth-multiplier
models of tests/models/tflite/ops on u55-256 and u65-256), and the models against Vela's totals
recorded in data/vela_cycles.json (``benchmarks/npu_ops.py --record``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from partita.backends.npu.vela_depthmult import transpose_views
from partita.frontends import from_tflite

import partita as P

ROOT = Path(__file__).resolve().parents[3]
RECORD = json.loads((Path(__file__).resolve().parent / "data" / "vela_cycles.json").read_text())

# model: the (M, H, W, C) map Vela transposes, its seven transposes' op cycles on u55-256 and
# u65-256 (each in SRAM, the last writing the output: the U65's DRAM for a one-op model)
VELA = {
    "dwconv_m2_s1_valid": (
        (2, 6, 6, 4),
        (108, 108, 288, 288, 288, 72, 288),
        (68, 68, 144, 144, 144, 50, 634),
    ),
    "dwconv_m2_s2_valid_relu": (
        (2, 4, 4, 4),
        (48, 48, 128, 128, 128, 48, 128),
        (40, 40, 64, 64, 64, 40, 420),
    ),
    "dwconv_m2_in_graph": (
        (2, 8, 8, 8),
        (384, 384, 256, 640, 640, 256, 768),
        (192, 192, 128, 320, 320, 128, 384),
    ),
}


def test_the_seven_views_are_velas():
    # dwconv_m2_s1_valid's perf_debug rows, in order
    assert transpose_views((2, 6, 6, 4)) == [
        ((2, 6, 24), (6, 2, 24), "NWHC"),
        ((6, 2, 24), (2, 6, 24), "NWHC"),
        ((12, 6, 4), (12, 4, 6), "NHCW"),
        ((2, 24, 6), (6, 24, 2), "NCWH"),
        ((36, 4, 2), (36, 2, 4), "NHCW"),
        ((6, 6, 8), (6, 6, 8), "NWHC"),
        ((36, 2, 4), (36, 4, 2), "NHCW"),
    ]


def _per_op(name, preset):
    path = ROOT / "tests" / "models" / "tflite" / "ops" / f"{name}.tflite"
    exe = P.build(from_tflite(str(path)), f"npu -config={preset}, ref")
    return [
        (op.kind, op.params.get("op"), c["cycles"])
        for s in exe.steps
        if s.target == "npu"
        for op, c in zip(s.region.program.ops, s.region.cycles)
    ]


@pytest.mark.parametrize("preset", ("u55-256", "u65-256"))
@pytest.mark.parametrize("name", sorted(VELA))
def test_transposes_against_velas_debug_database(name, preset):
    _, u55, u65 = VELA[name]
    vela = sum(u55 if preset == "u55-256" else u65)
    ops = _per_op(name, preset)
    (transpose,) = [c for kind, op, c in ops if op == "transpose"]
    assert abs(transpose - vela) <= 2, (transpose, vela)
    # Vela's convolutions write their slices and the reshape is a view: no concatenation
    assert [c for kind, op, c in ops if op in ("concatenate", "reshape")] == [0, 0]


@pytest.mark.parametrize("preset", ("u55-256", "u65-256"))
@pytest.mark.parametrize("name", ("dwconv_m2_s1_valid", "dwconv_m2_in_graph"))
def test_depth_multiplier_models_against_vela(name, preset):
    path = ROOT / "tests" / "models" / "tflite" / "ops" / f"{name}.tflite"
    row = RECORD[f"tests/models/tflite/ops/{name}/{preset}"]
    assert row["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    ours = sum(c for *_, c in _per_op(name, preset))
    assert 0.97 <= ours / row["cycles"] <= 1.03, (ours, row["cycles"])


@pytest.mark.parametrize("preset", ("u55-256", "u65-256"))
def test_a_multiplier_piece_keeps_the_relu_of_its_8_channel_whole(preset):
    # dwconv_m2_s2_valid_relu: 8 output channels, so Vela fuses the ReLU (vela_activation.py
    # splits it off below 8); its scheduler then cuts two 4-channel pieces, which keep it:
    # each 382 cycles on u55-256, 1,154 and 1,104 on u65-256 (the first reads the DRAM input)
    vela = {"u55-256": (382, 382), "u65-256": (1154, 1104)}[preset]
    convs = [c for kind, op, c in _per_op("dwconv_m2_s2_valid_relu", preset) if kind == "DWCONV"]
    assert len(convs) == 2
    for ours, theirs in zip(convs, vela):
        assert 0.95 <= ours / theirs <= 1.02, (convs, vela)


def test_the_s2_relu_model_against_vela():
    for preset in ("u55-256", "u65-256"):
        row = RECORD[f"tests/models/tflite/ops/dwconv_m2_s2_valid_relu/{preset}"]
        ours = sum(c for *_, c in _per_op("dwconv_m2_s2_valid_relu", preset))
        assert 0.97 <= ours / row["cycles"] <= 1.03, (preset, ours, row["cycles"])
