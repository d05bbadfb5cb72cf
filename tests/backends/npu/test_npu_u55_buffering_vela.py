"""The U55's weight buffering as Vela 5.2 charges it (weight_staging.shared_sram_wait), against
its debug database (`vela --enable-debug-db`, session 21 n30w: perf's op_cycles, perf_debug's
weight_buffering, weight_transfer_cycles, est_op_cycles_without_buffering and the previous
operation's npu_cycles, regor's slack): a buffered operation waits for the part of its weights'
transfer from flash that the previous operation does not cover; the first waits for all of it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from partita.backends.npu.blocks import Query, find_block
from partita.backends.npu.config import get_config
from partita.backends.npu.weight_staging import shared_sram_wait
from partita.frontends import from_tflite

import partita as P

ROOT = Path(__file__).resolve().parents[3]
OPS = ROOT / "tests" / "models" / "tflite" / "ops"
RECORD = Path(__file__).resolve().parent / "data" / "vela_cycles.json"

# a SUM's Conv2D after its transpose: preset, (h, w, c) input, Vela's bytes moved (48 encoded
# + 16 of records), the transpose's npu_cycles (the slack), the Conv2D's estimate without
# buffering and its op cycles (0: weight_buffering empty, the weights read from flash)
SUM_CONV2DS = {
    ("sum_wc", "u55-256"): ((6, 4, 5), 64, 92, 177, 213),
    ("sum_wc", "u55-128"): ((6, 4, 5), 64, 92, 199, 235),
    ("sum_hw", "u55-128"): ((1, 32, 8), 64, 96, 196, 228),
    ("sum_hw", "u55-256"): ((1, 32, 8), 64, 96, 154, 0),  # 128 + 40 > 154: not buffered
}


@pytest.mark.parametrize("name,preset", sorted(SUM_CONV2DS))
def test_the_wait_is_regors_on_velas_figures(name, preset):
    ifm, nbytes, slack, estimate, vela = SUM_CONV2DS[(name, preset)]
    config = get_config(preset)
    q = Query("conv", ifm, (*ifm[:2], 1))
    wait = shared_sram_wait(config, q, find_block(config, q), nbytes, slack, estimate)
    if vela:
        assert estimate + wait == vela
    else:
        assert wait == 0


def test_the_u65_keeps_its_own_rule():
    config = get_config("u65-256")
    q = Query("conv", (6, 4, 5), (6, 4, 1))
    assert shared_sram_wait(config, q, find_block(config, q), 64, 92, 177) == 0


def _region_cycles(model: Path, preset: str) -> list[int]:
    exe = P.build(from_tflite(str(model)), f"npu -config={preset}, ref")
    (region,) = [s.region for s in exe.steps if s.target == "npu"]
    return [c["cycles"] for c in region.cycles]


def _recorded(model: Path, preset: str) -> float:
    row = json.loads(RECORD.read_text())[f"{model.relative_to(ROOT).with_suffix('')}/{preset}"]
    assert row["sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()[:16]
    return row["cycles"]


def test_a_first_operation_waits_for_its_whole_transfer():
    # transpose_conv_s2_valid on u55-128: 18x12 output blocks, the weights read twice, so
    # regor forces their initial buffering; 736 bytes from flash, 800 cycles, no slack:
    # Vela's op cycles 4,664 = 3,864 + 800 (u55-256: one block, read once, not buffered)
    model = OPS / "transpose_conv_s2_valid.tflite"
    assert sum(_region_cycles(model, "u55-128")) == _recorded(model, "u55-128") == 4664
    assert sum(_region_cycles(model, "u55-256")) == _recorded(model, "u55-256") == 2460


def test_digits_first_convolution_waits_as_velas():
    # digits_mobilenetv2 u55-256, its first Conv2D: est 3,232 + its 832-cycle transfer = 4,064
    # (Vela's op cycles; before session 21 n30w ours was 3,232)
    cycles = _region_cycles(ROOT / "partita" / "data" / "digits_mobilenetv2.tflite", "u55-256")
    assert cycles[0] == 4064


@pytest.mark.parametrize("name,preset", sorted(SUM_CONV2DS))
def test_the_sum_rows_are_within_ten_percent(name, preset):
    model = OPS / f"{name}.tflite"
    ratio = sum(_region_cycles(model, preset)) / _recorded(model, preset)
    # sum_hw u55-256 1.06: our stream is 48 bytes against regor's 64 (its codec; the same 256
    # weights), so 112 + 38 cycles fit our 152-cycle estimate and we buffer where Vela does not
    lo, hi = (1.03, 1.09) if (name, preset) == ("sum_hw", "u55-256") else (0.92, 0.97)
    assert lo <= ratio <= hi, ratio
