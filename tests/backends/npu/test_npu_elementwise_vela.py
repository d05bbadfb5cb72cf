"""Vela 5.2's rule for its native elementwise operations (cycles.elementwise_cycles and the
broadcast element access) against Vela's own per-layer figures, recorded with the Vela version
and each model's SHA-256 in data/vela_layers.json (``vela --verbose-performance``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from partita.frontends import from_tflite

import partita as P

ROOT = Path(__file__).resolve().parents[3]
LAYERS = json.loads((Path(__file__).resolve().parent / "data" / "vela_layers.json").read_text())


@pytest.mark.parametrize(
    "layer", LAYERS["layers"], ids=lambda r: f"{Path(r['model']).stem}-{r['preset']}"
)
def test_one_op_elementwise_cycles_are_velas(layer):
    assert LAYERS["vela"] == "5.2.0"
    path = ROOT / layer["model"]
    assert hashlib.sha256(path.read_bytes()).hexdigest()[:16] == layer["sha256"], path
    exe = P.build(from_tflite(str(path)), f"npu -config={layer['preset']}, ref")
    (cycles,) = [c for s in exe.steps if s.target == "npu" for c in s.region.cycles]
    # no fixed cost per operation: the op's cycles are Vela's (max of its compute and memories)
    assert cycles["cycles"] == layer["op_cycles"], cycles
    # compute: the output rate, or the per-block bound off-chip (228 against Vela's 192 for
    # add_broadcast on u65-256: Vela reshapes the maps; we keep the block of the NHWC map)
    assert 1.0 <= cycles["compute_cycles"] / layer["npu_cycles"] <= 1.2, cycles
