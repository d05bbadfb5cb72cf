"""REDUCE_MAX and REDUCE_MIN as Vela 5.2 runs them (backends/npu/vela_reduce.py), against its
debug database (`vela --enable-debug-db`, session 20, n30j): one ReduceMax pooling operation
per reduced axis, REDUCE_MIN between two negating SUBs."""

from __future__ import annotations

from pathlib import Path

import pytest
from partita.backends.npu.program import NPUOp, TensorDesc
from partita.backends.npu.vela_reduce import _views, reduces_as_vela
from partita.frontends import from_tflite

import partita as P

OPS = Path(__file__).resolve().parents[2] / "models" / "tflite" / "ops"

# Vela's op cycles per operation (u55-256, u65-256) and, where the model has operations of its
# own around the reduction, the band our total keeps to Vela's total
VELA = {
    "reduce_max": ({"u55-256": [266, 124], "u65-256": [719, 337]}, 0.90, 1.01),
    "reduce_min": ({"u55-256": [192, 595, 48], "u65-256": [192, 590, 137]}, 0.92, 1.01),
}


def _ours(name: str, preset: str) -> int:
    exe = P.build(from_tflite(str(OPS / f"{name}.tflite")), f"npu -config={preset}, ref")
    return sum(c["cycles"] for s in exe.steps if s.target == "npu" for c in s.region.cycles)


@pytest.mark.parametrize("name", sorted(VELA))
@pytest.mark.parametrize("preset", ["u55-256", "u65-256"])
def test_reduction_costs_velas_operations(name, preset):
    figures, lo, hi = VELA[name]
    vela = sum(figures[preset])
    assert lo <= _ours(name, preset) / vela <= hi


def test_the_maps_vela_pools():
    # over H and W of 8x8x4: H on (1, 8, 32), then W on (1, 8, 4); over C: (64, 4, 1)
    assert _views((1, 8, 8, 4), [1, 2]) == [((1, 8, 32), 8), ((1, 8, 4), 8)]
    assert _views((1, 8, 8, 4), [3]) == [((64, 4, 1), 4)]
    assert _views((1, 6, 5, 4), [-1, 1]) == [((1, 6, 20), 6), ((5, 4, 1), 4)]


def test_which_reductions():
    ifm = TensorDesc((1, 8, 8, 4), "int8", "sram")
    op = NPUOp("UNIT", "max", [0], 1, {"op": "max", "attrs": {"axis": [1, 2]}}, {})
    assert reduces_as_vela(op, ifm)
    assert not reduces_as_vela(op, TensorDesc((8, 4), "int8", "sram"))
    op = NPUOp("UNIT", "max", [0], 1, {"op": "max", "attrs": {"axis": [0]}}, {})
    assert not reduces_as_vela(op, ifm)
