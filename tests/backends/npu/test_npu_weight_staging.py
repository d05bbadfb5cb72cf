"""Vela 5.2's choice of which weights to stage in SRAM (backends/npu/weight_staging.py) and
what leaving them in DRAM costs, against Vela's schedule and per-layer report of
digits_mobilenetv2 (``vela --verbose-schedule --verbose-performance``, Vela 5.2.0, default
system configs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from partita.backends.npu.blocks import Query, find_block
from partita.backends.npu.config import get_config
from partita.backends.npu.cycles import input_descs
from partita.backends.npu.op_compute import MAC_KINDS
from partita.backends.npu.op_compute import staged_weights as _staged
from partita.backends.npu.weight_staging import weights_staged
from partita.frontends import from_tflite

import partita as P

DIGITS = Path(__file__).resolve().parents[3] / "partita" / "data" / "digits_mobilenetv2.tflite"
# Vela's schedule on u65-256 leaves these expansion convolutions' weights in DRAM ("Weight
# buffer = 0 bytes (None)"), each right after a residual ADD of 48-202 cycles, as numbered in
# our program (Vela's 54 and 58 are our 55 and 60: our program keeps a RESHAPE Vela removes).
# 17 and 21 (4x4x16 -> 96 after a 192-cycle ADD) are decided by the SRAM read of the encoded
# stream (2,960 bytes, 217 cycles, against the ADD's 192; the raw 2,496 bytes read in 188 and
# were staged until session 21). 50 (56 -> 336), which Vela splits into two depth slices and
# double-buffers, is staged since session 21 (n30w): the convolution before it now costs
# Vela's 1,766 (ours 1,767, was 1,484: a single block's command issue bound, blocks.mac_cycles),
# a slack its first 16-channel slice moves under (ours 2,922 against Vela's 3,059; was 7,661)
LEFT_IN_DRAM = {17, 21, 28, 32, 36, 43, 47, 55, 60}
# Vela's per-layer 'Op Cycles' of unstaged expansions: ours must be within 10%
VELA_UNSTAGED = {
    "u65-256": {28: 3674, 43: 4613, 55: 7660, 60: 7660},
    "u65-512": {17: 2567, 28: 3610, 43: 4549, 55: 7391, 60: 7391},
}


def _region(preset: str):
    exe = P.build(from_tflite(str(DIGITS)), f"npu -config={preset}, ref")
    (region,) = [s.region for s in exe.steps if s.target == "npu"]
    return region


def _unstaged(region) -> set[int]:
    program, out, slack = region.program, set(), None
    for i, (op, cost) in enumerate(zip(program.ops, region.cycles)):
        desc = program.tensors[op.output]
        if op.kind in MAC_KINDS and not _staged(
            op, input_descs(op, program), desc, region.config, slack
        ):
            out.add(i)
        slack = cost["cycles"]
    return out


def test_digits_keeps_velas_expansions_in_dram_on_u65_256():
    assert _unstaged(_region("u65-256")) == LEFT_IN_DRAM


def test_the_slack_before_50_and_50_itself_are_velas():
    # Vela's op cycles (debug database, u65-256): the one-block 192 -> 56 convolution 1,766
    # (a single block: regor's balanced output stage, blocks.mac_cycles), the
    # double-buffered 56 -> 336 one after it 3,059
    cycles = [c["cycles"] for c in _region("u65-256").cycles]
    assert abs(cycles[49] / 1766 - 1) <= 0.01, cycles[49]
    assert 0.94 <= cycles[50] / 3059 <= 1.0, cycles[50]


@pytest.mark.parametrize("preset", sorted(VELA_UNSTAGED))
def test_an_unstaged_expansion_costs_what_vela_charges(preset):
    region = _region(preset)
    for i, vela in VELA_UNSTAGED[preset].items():
        assert 0.87 <= region.cycles[i]["cycles"] / vela <= 1.03, (i, region.cycles[i], vela)


def test_the_rule_on_its_own():
    config = get_config("u65-256")
    q = Query("conv", (2, 2, 24), (2, 2, 144), (1, 1), (1, 1), (1, 1), 8)
    block = find_block(config, q)
    nbytes = 24 * 144 + 10 * 144
    # after a 96-cycle ADD the DMA cannot hide and one read from DRAM is cheaper
    assert not weights_staged(config, q, block, nbytes, slack=96.0)
    # after a long operation the DMA runs under it
    assert weights_staged(config, q, block, nbytes, slack=3000.0)
    # a program's first operation, read once: left where it is (Vela's one-op FC)
    assert not weights_staged(config, q, block, nbytes, slack=None)
    # a first operation whose weights are read per block of a large map: staged
    big = Query("conv", (64, 64, 24), (64, 64, 144), (1, 1), (1, 1), (1, 1), 8)
    assert weights_staged(config, big, find_block(config, big), nbytes, slack=None)
