"""CONCATENATION, PACK and TRANSPOSE charged as Vela 5.2 runs them (vela_layout.py): each
hardware transpose and each concatenation copy against Vela's debug database (`vela
--enable-debug-db`, perf's op_cycles per operation, one-op models of tests/models/tflite/ops
on u55-256 with SRAM maps and u65-256 with DRAM maps), and the one-op models against Vela's
totals recorded in data/vela_cycles.json (``benchmarks/npu_ops.py --record``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from partita.backends.npu.config import get_config
from partita.backends.npu.program import TensorDesc
from partita.backends.npu.vela_layout import transpose_as_vela, transpose_steps
from partita.backends.npu.vela_pad import copy_cycles
from partita.frontends import from_tflite

import partita as P

ROOT = Path(__file__).resolve().parents[3]
RECORD = json.loads((Path(__file__).resolve().parent / "data" / "vela_cycles.json").read_text())

# Vela's two hardware transposes for transpose.tflite (8x8x4, perm 0,3,1,2): NCWH reading the
# input map, NHCW writing the output map, the intermediate 4x8x8 in SRAM; op cycles
# u55-256 / u65-256
VELA_TRANSPOSES = {
    "NCWH 8x8x4 -> 4x8x8": ((1, 8, 8, 4), (0, 3, 2, 1), "in", 160, 841),
    "NHCW 4x8x8 -> 4x8x8": ((1, 4, 8, 8), (0, 1, 3, 2), "out", 64, 306),
}


@pytest.mark.parametrize("name", sorted(VELA_TRANSPOSES))
def test_each_hardware_transpose_is_velas(name):
    shape, axes, side, u55, u65 = VELA_TRANSPOSES[name]
    for preset, vela in (("u55-256", u55), ("u65-256", u65)):
        config = get_config(preset)
        io = (config.io_memory, "sram") if side == "in" else ("sram", config.io_memory)
        ours = transpose_as_vela(config, TensorDesc(shape, "int8", io[0]), axes, io)
        assert abs(ours - vela) <= 1, (preset, ours, vela)


def test_transpose_decomposition():
    assert transpose_steps((1, 8, 8, 4), (0, 3, 1, 2)) == [(2, 1, 0), (0, 2, 1)]  # NCHW
    assert transpose_steps((1, 8, 8, 4), (0, 2, 3, 1)) == [(0, 2, 1), (2, 1, 0)]  # NWCH
    assert transpose_steps((1, 8, 8, 4), (0, 2, 1, 3)) == [(1, 0, 2)]  # NWHC: one step
    assert transpose_steps((8, 6), (1, 0)) is None  # below 3-D: not modelled
    assert transpose_steps((5, 1, 6), (1, 0, 2)) is None  # the LSTM's time-major swap
    assert transpose_steps((2, 8, 8, 4), (1, 0, 2, 3)) is None  # the batch moves


def test_concat_copies_are_the_pad_interiors():
    # concat_same_scale: Vela copies each 8x8x4 input into the output, 446 / 1,354 cycles
    for preset, vela in (("u55-256", 446), ("u65-256", 1354)):
        config = get_config(preset)
        ours = copy_cycles(config, (8, 8, 4), config.io_memory, config.io_memory, "int8")
        assert 0.95 <= ours / vela <= 1.05, (preset, ours, vela)


def _per_op(name, preset):
    path = ROOT / "tests" / "models" / "tflite" / "ops" / f"{name}.tflite"
    exe = P.build(from_tflite(str(path)), f"npu -config={preset}, ref")
    return [
        (op.params.get("op"), c["cycles"])
        for s in exe.steps
        if s.target == "npu"
        for op, c in zip(s.region.program.ops, s.region.cycles)
    ]


def test_pack_folds_its_slices_and_reshapes_into_the_copies():
    # Vela: two copies of an 8x8x2 channel slice into the 2x8x8x2 output, 370 cycles each on
    # u55-256; our reshapes and slice cost nothing, the concatenation the two copies
    ops = _per_op("pack", "u55-256")
    assert [c for name, c in ops if name != "concatenate"] == [0, 0, 0]
    (concat,) = [c for name, c in ops if name == "concatenate"]
    assert 0.95 <= concat / (2 * 370) <= 1.05


def test_a_quantize_feeding_only_the_concatenation_is_its_copy():
    ops = dict(_per_op("concat_diff_scale", "u55-256"))
    assert ops["qnn.requantize"] == 0
    assert 0.95 <= ops["qnn.concatenate"] / (2 * 446) <= 1.05  # Vela's Quantize and Relu6


@pytest.mark.parametrize("preset", ("u55-256", "u65-256"))
@pytest.mark.parametrize("name", ("concat_same_scale", "transpose", "pack", "concat_diff_scale"))
def test_one_op_layout_against_vela(name, preset):
    path = ROOT / "tests" / "models" / "tflite" / "ops" / f"{name}.tflite"
    row = RECORD[f"tests/models/tflite/ops/{name}/{preset}"]
    assert row["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    ours = sum(c for _, c in _per_op(name, preset))
    assert 0.95 <= ours / row["cycles"] <= 1.05, (ours, row["cycles"])


@pytest.mark.parametrize("preset, mul, tanh", (("u55-256", 96, 320), ("u65-256", 160, 782)))
def test_operations_feeding_only_the_copies_run_on_the_flat_shape(preset, mul, tanh):
    # concat_diff_scale: Vela's MUL and TANH of the region's inputs run on 4x4x16 into SRAM
    # (the TANH's table loaded under the MUL), their op cycles in its debug database
    ops = dict((name, c) for name, c in _per_op("concat_diff_scale", preset))
    assert abs(ops["qnn.mul"] - mul) <= 2, (ops, mul)
    assert abs(ops["qnn.tanh"] - tanh) <= 2, (ops, tanh)
