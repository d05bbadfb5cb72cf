"""Vela 5.2's recorded figures for the one-op models (data/vela_cycles.json, filled by
`benchmarks/npu_ops.py --record`) and the NPU region partita builds for the same file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from partita.frontends import from_tflite

import partita as P

ROOT = Path(__file__).resolve().parents[3]
RECORD = json.loads((Path(__file__).resolve().parent / "data" / "vela_cycles.json").read_text())


def ops_region(name: str, preset: str):
    """(partita's NPU region, Vela's recorded row) for tests/models/tflite/ops/NAME.tflite on
    ``preset``; the row must be the record of this very file (its SHA-256)."""
    path = ROOT / "tests" / "models" / "tflite" / "ops" / f"{name}.tflite"
    row = RECORD[f"tests/models/tflite/ops/{name}/{preset}"]
    assert row["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()[:16], path
    exe = P.build(from_tflite(str(path)), f"npu -config={preset}, ref")
    (region,) = [s.region for s in exe.steps if s.target == "npu"]
    return region, row
