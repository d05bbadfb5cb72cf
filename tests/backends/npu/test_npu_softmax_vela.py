"""int8 SOFTMAX charged as Vela 5.2's 29 operations (vela_softmax.py): operations against
Vela's debug database (`vela --enable-debug-db`, perf's op_cycles; softmax_4d, a 1x4x4x8 map,
on u55-256) and the one-op models against Vela's totals recorded in data/vela_cycles.json."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from partita.backends.npu import vela_softmax as S
from partita.backends.npu.config import get_config
from partita.backends.npu.program import TensorDesc
from partita.frontends import from_tflite

import partita as P

ROOT = Path(__file__).resolve().parents[3]
RECORD = json.loads((Path(__file__).resolve().parent / "data" / "vela_cycles.json").read_text())


def test_row_sum_operations_are_velas():
    # the reciprocal's operations on the 4x4x1 int32 row sums, NHCWB16 in SRAM: with a flash
    # scalar 288 cycles (the 32-bit output rate over 256 bricked elements), with two maps 384
    # (3 x 1,024 bytes of SRAM); the ADD of the 4x4x8 int32 constant from flash 2,048
    config = get_config("u55-256")
    sums = TensorDesc((1, 4, 4, 1), "int32", "sram")
    scalar = TensorDesc((1,), "int32", "flash")
    wide = 1.125
    assert S.elementwise_op(config, [sums, scalar], sums, wide, (True, False, True)) == 288
    assert S.elementwise_op(config, [sums, sums], sums, wide, (True, True, True)) == 384
    exps = TensorDesc((1, 4, 4, 8), "int32", "sram")
    offsets = TensorDesc((1, 4, 4, 8), "int32", "flash")
    assert S.elementwise_op(config, [offsets, exps], exps, wide, (False, True, True)) == 2048


def test_a_scalar_second_operand_off_chip_is_one_burst():
    # u55-256, softmax (1x16): Vela's ASR of the 16 exponentials by a flash scalar, 128 cycles
    config = get_config("u55-256")
    exps = TensorDesc((1, 1, 1, 16), "int32", "sram")
    scalar = TensorDesc((1,), "int32", "flash")
    out = TensorDesc((1, 1, 1, 16), "int32", "sram")
    assert S.elementwise_op(config, [exps, scalar], out, 1.125, (True, False, False)) == 128
    # a one-element first operand: Vela reads no burst for the scalar (18 cycles)
    sums = TensorDesc((1, 1, 1, 1), "int32", "sram")
    assert abs(S.elementwise_op(config, [sums, scalar], sums, 1.125, (True, False, True)) - 18) < 1


def test_a_dram_scalar_binds_the_command_cycles():
    # u65-256, softmax (1x16): Vela's scalar operations on one row sum cost 68 cycles each
    # (its debug database: cmd 68), the DRAM scalar's block read in the minimum memory cycles
    config = get_config("u65-256")
    sums = TensorDesc((1, 1, 1, 1), "int32", "sram")
    scalar = TensorDesc((1,), "int32", "dram")
    ours = S.elementwise_op(config, [sums, scalar], sums, 1.125, (True, False, True))
    assert 0.9 <= ours / 68 <= 1.1, ours


# the one-op rows (u55-256 / u65-256: softmax 0.97 / 1.01, softmax_4d 0.99 / 1.06; softmax_4d's
# max pool into the U65's DRAM costs us 1,480 cycles against Vela's 1,237)
BANDS = {"softmax": (0.95, 1.05), "softmax_4d": (0.95, 1.08)}


@pytest.mark.parametrize("preset", ("u55-256", "u65-256"))
@pytest.mark.parametrize("name", sorted(BANDS))
def test_one_op_softmax_against_vela(name, preset):
    path = ROOT / "tests" / "models" / "tflite" / "ops" / f"{name}.tflite"
    row = RECORD[f"tests/models/tflite/ops/{name}/{preset}"]
    assert row["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    exe = P.build(from_tflite(str(path)), f"npu -config={preset}, ref")
    ours = sum(c["cycles"] for s in exe.steps if s.target == "npu" for c in s.region.cycles)
    lo, hi = BANDS[name]
    assert lo <= ours / row["cycles"] <= hi, (ours, row["cycles"])


@pytest.mark.parametrize("preset", ("u55-256", "u65-256"))
def test_16x8_softmax_against_vela(preset):
    # Vela's 15 operations (900 / 1,527 cycles on u55-256 / u65-256); ours 853 / 1,511: its
    # 16-bit max pool 234 against our 202 on u55-256
    path = ROOT / "tests" / "models" / "tflite" / "int16" / "softmax.tflite"
    row = RECORD[f"tests/models/tflite/int16/softmax/{preset}"]
    assert row["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    exe = P.build(from_tflite(str(path)), f"npu -config={preset}, ref")
    ours = sum(c["cycles"] for s in exe.steps if s.target == "npu" for c in s.region.cycles)
    assert 0.93 <= ours / row["cycles"] <= 1.05, (ours, row["cycles"])
