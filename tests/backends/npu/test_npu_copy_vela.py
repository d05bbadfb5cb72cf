"""Copies charged as Vela 5.2's MemoryCopy (vela_copy.py, vela_pad.copy_cycles), each copy
against Vela's debug database (`vela --enable-debug-db`, perf_debug's
est_op_cycles_without_buffering, which is the per-layer 'Op Cycles' of these one-op models)
on u55-256 (SRAM maps) and u65-256 (DRAM maps), and the one-op models against Vela's totals
recorded in data/vela_cycles.json (``benchmarks/npu_ops.py --record``). strided_slice_shrink and
UNPACK are slices followed by a reshape to the output, which regor removes (the slice writes
the output): 3.66 / 1.70 and 1.54 / 1.22 of Vela on u55-256 / u65-256 with the reshape
charged as a copy of its own."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from partita.backends.npu.config import get_config
from partita.backends.npu.program import TensorDesc
from partita.backends.npu.vela_copy import copies_as_vela, copy_shape
from partita.backends.npu.vela_pad import copy_cycles
from partita.frontends import from_tflite

import partita as P

ROOT = Path(__file__).resolve().parents[3]
RECORD = json.loads((Path(__file__).resolve().parent / "data" / "vela_cycles.json").read_text())

# the map each copy moves (Vela's perf_debug ofm shape) and Vela's cycles, u55-256 / u65-256
VELA_COPIES = {
    "reshape 8x8x4 -> 16x16": ((4, 4, 16), 320, 1026),
    "squeeze 1x1x1x16": ((1, 1, 16), 109, 801),
    "strided_slice 8x8x4 -> 3x6x3": ((3, 6, 3), 221, 1073),
    "strided_slice_shrink 8x8x4 -> 3x3": ((1, 3, 3), 114, 818),
    "slice 8x8x4 -> 5x6x3": ((5, 6, 3), 275, 1142),
    "split 8x8x4, one half": ((8, 8, 2), 370, 1236),
    "unpack 8x8x4, one channel": ((8, 8, 1), 353, 1189),
    "pad's interior 8x8x4": ((8, 8, 4), 446, 1354),
}


@pytest.mark.parametrize("name", sorted(VELA_COPIES))
def test_each_copy_as_velas(name):
    """Regor's operation both first and last (blocks.single_mac_op, session 21 n30x): every
    copy within 4 cycles of Vela's, but the strided 3x6x3 slice (214 / 1,048 against 221 /
    1,073, not explained); the earlier form was within 5%."""
    shape, u55, u65 = VELA_COPIES[name]
    for preset, vela in (("u55-256", u55), ("u65-256", u65)):
        config = get_config(preset)
        ours = copy_cycles(config, shape, config.io_memory, config.io_memory, "int8")
        if name.startswith("strided_slice 8x8x4 -> 3x6x3"):
            assert 0.96 <= ours / vela <= 1.0, (preset, ours, vela)
        else:
            assert abs(ours - vela) <= 4, (preset, ours, vela)


def test_multi_block_copies_on_dram_no_longer_pay_a_quarter_of_the_first_block():
    # the rule the one-op convolutions were matched with (each later block at least a quarter
    # of the first block's transfers, 1,006 cycles between DRAM maps) costs 1,629 here
    config = get_config("u65-256")
    assert copy_cycles(config, (8, 8, 4), "dram", "dram", "int8") < 1400


def test_copy_shapes():
    out = TensorDesc((1, 16, 16), "int8", "dram")
    assert copy_shape("reshape", out) == (4, 4, 16)  # Vela's 4x4x16 for 256 bytes
    assert copy_shape("squeeze", TensorDesc((1, 16), "int8", "dram")) == (1, 1, 16)
    assert copy_shape("strided_slice", TensorDesc((1, 3, 6, 3), "int8", "dram")) == (3, 6, 3)
    assert copy_shape("strided_slice", TensorDesc((1, 3, 3), "int8", "dram")) == (1, 3, 3)
    # 12 bytes: not a multiple of 16, the output's depth stays
    assert copy_shape("reshape", TensorDesc((1, 4, 3), "int8", "dram")) == (2, 2, 3)


def test_which_operations_copy():
    # regor keeps a reshape only from a graph input (or output) to a graph output
    assert copies_as_vela("reshape", True, True)
    assert not copies_as_vela("reshape", True, False)
    assert not copies_as_vela("squeeze", False, True)
    # a slice on a region's input or output; between two operations it keeps its charge
    assert copies_as_vela("strided_slice", True, False)
    assert not copies_as_vela("strided_slice", False, False)
    assert not copies_as_vela("concatenate", True, True)


@pytest.mark.parametrize("preset", ("u55-256", "u65-256"))
@pytest.mark.parametrize(
    "name",
    ("reshape", "squeeze", "strided_slice", "slice", "split", "strided_slice_shrink", "unpack"),
)
def test_one_op_copy_against_vela(name, preset):
    path = ROOT / "tests" / "models" / "tflite" / "ops" / f"{name}.tflite"
    row = RECORD[f"tests/models/tflite/ops/{name}/{preset}"]
    assert row["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    exe = P.build(from_tflite(str(path)), f"npu -config={preset}, ref")
    ours = sum(c["cycles"] for s in exe.steps if s.target == "npu" for c in s.region.cycles)
    assert 0.94 <= ours / row["cycles"] <= 1.06, (ours, row["cycles"])
