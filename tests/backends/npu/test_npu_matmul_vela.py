"""BATCH_MATMUL charged as Vela 5.2 runs it (backends/npu/vela_matmul.py): a Transpose of the
second operand and the compound MatMul, against Vela's debug database recorded per model and
preset in data/vela_matmul.json (`tools/gen_matmul_models.py --record`: the two one-op models
of tests/models/tflite/ops and the eight shape models of tests/models/tflite/matmul on
u55-128, u55-256, u65-256 and u65-512; each row SHA-checked against its model file)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from partita.backends.npu.config import get_config
from partita.backends.npu.vela_matmul import (
    dependency_fit,
    matmul_as_vela,
    matmul_cycles,
    reduce_block,
    scratch_memory,
)
from partita.frontends import from_tflite

import partita as P

ROOT = Path(__file__).resolve().parents[3]
RECORD = json.loads((Path(__file__).resolve().parent / "data" / "vela_matmul.json").read_text())


def _region(key: str):
    """(partita's NPU region, Vela's recorded row) for a recorded 'path/preset' key."""
    model, preset = key.rsplit("/", 1)
    path, row = ROOT / f"{model}.tflite", RECORD[key]
    assert row["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()[:16], path
    exe = P.build(from_tflite(str(path)), f"npu -config={preset}, ref")
    (region,) = [s.region for s in exe.steps if s.target == "npu"]
    return region, row, get_config(preset)


def _vela(row, name: str) -> dict:
    (op,) = [o for o in row["ops"] if o["op"] == name]
    return op


@pytest.mark.parametrize("key", sorted(RECORD))
def test_batch_matmul_is_velas_transpose_and_matmul(key):
    region, row, config = _region(key)
    program = region.program
    ops = list(zip(program.ops, region.cycles))
    (matmul, cost) = [(op, c) for op, c in ops if op.params.get("op") == "qnn.batch_matmul"][0]
    # the reshapes and the requantize fold into Vela's MatMul: nothing of their own
    assert all(c["cycles"] == 0 for op, c in ops if op is not matmul)
    # Vela's total counts each operation's NPU cycles: ours within one cycle of it
    assert abs(cost["cycles"] - row["npu_cycles"]) <= 1, (cost["cycles"], row["npu_cycles"])
    # the MatMul alone, from its operands' shapes and memories
    a, b = (program.tensors[t] for t in matmul.inputs)
    adj = matmul.params["attrs"]["transpose_b"]
    m, k = a.shape[-2:]
    n = b.shape[-2] if adj else b.shape[-1]
    batch = a.shape[0] if len(a.shape) == 3 else 1
    mems = (config.io_memory, "sram", scratch_memory(config), config.io_memory)
    assert matmul_cycles(config, (batch, m, k), n, mems) == _vela(row, "MatMul")["npu_cycles"]
    # regor's ReduceSum block (the MatMul's recorded block)
    ofm_block, _ = reduce_block(config, (batch, m, k))
    assert "x".join(map(str, ofm_block)) == _vela(row, "MatMul")["block"]
    # the Transpose: the rest, to the cycle where regor truncates as we round
    transpose = cost["cycles"] - _vela(row, "MatMul")["npu_cycles"]
    assert abs(transpose - _vela(row, "Transpose")["npu_cycles"]) <= 1


def test_dependency_fit():
    # regor's MatMulDependencyFit: columns split in three (or two) while each part keeps 4
    assert dependency_fit((1, 16, 16)) == (1, 6, 16)
    assert dependency_fit((2, 20, 1)) == (2, 7, 1)
    assert dependency_fit((1, 8, 8)) == (1, 4, 8)
    assert dependency_fit((1, 7, 8)) == (1, 7, 8)
    assert dependency_fit((1, 100, 16)) == (1, 100, 16)  # wider than a block: left
    assert dependency_fit((40, 4, 8)) == (40, 4, 8)  # taller than a block: rows, left


def test_scratch_lives_with_the_feature_maps():
    # the debug database's Int32 scratch: Sram on the U55 (Shared_Sram), Dram on the U65
    assert scratch_memory(get_config("u55-256")) == "sram"
    assert scratch_memory(get_config("u65-256")) == "dram"


def test_other_operations_are_not_matmuls():
    region, _, config = _region("tests/models/tflite/ops/batch_matmul/u55-256")
    program = region.program
    requantize = next(op for op in program.ops if op.params.get("op") == "qnn.requantize")
    assert matmul_as_vela(config, requantize, program) == 0.0  # Vela's output stage
    for name in ("add_same", "fc_keep_dims", "reshape"):  # reshapes not next to a MatMul
        path = ROOT / "tests" / "models" / "tflite" / "ops" / f"{name}.tflite"
        exe = P.build(from_tflite(str(path)), "npu -config=u55-256, ref")
        (other,) = [s.region.program for s in exe.steps if s.target == "npu"]
        assert all(matmul_as_vela(config, op, other) is None for op in other.ops), name


# The BERT encoder's attention products in a graph (tests/models/transformers, its SHA-256
# prefix): 4 heads of 16x16 by 16 columns, operands and output in SRAM, the scratch in DRAM on
# the U65; Vela's debug database per preset: (MatMul, its operand's Transpose) NPU cycles
BERT = ROOT / "tests" / "models" / "transformers" / "bert_tiny_int8.tflite"
BERT_SHA = "eda086517b81bdd4"
BERT_VELA = {
    "u55-128": (16256, 160),
    "u55-256": (12144, 160),
    "u65-256": (28272, 96),
    "u65-512": (26160, 96),
}


@pytest.mark.parametrize("preset", sorted(BERT_VELA))
def test_in_graph_matmuls_are_velas(preset):
    assert hashlib.sha256(BERT.read_bytes()).hexdigest()[:16] == BERT_SHA
    exe = P.build(from_tflite(str(BERT)), f"npu -config={preset}, ref")
    charged = {
        c["cycles"]
        for s in exe.steps
        if s.target == "npu"
        for op, c in zip(s.region.program.ops, s.region.cycles)
        if op.params.get("op") == "qnn.batch_matmul"
    }
    assert charged == {sum(BERT_VELA[preset])}
