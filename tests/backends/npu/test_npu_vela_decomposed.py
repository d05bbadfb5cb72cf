"""Operators Vela 5.2 rewrites into several NPU operations, charged as that rewrite
(backends/npu/vela_access.py): our one operation's cycles against the sum of Vela's per-layer
'Op Cycles' for the operations it makes of the same source operator, recorded with the Vela
version and each model's SHA-256 in data/vela_decomposed.json (``benchmarks/npu_ops.py
--layers``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from partita.frontends import from_tflite

import partita as P

ROOT = Path(__file__).resolve().parents[3]
DATA = json.loads((Path(__file__).resolve().parent / "data" / "vela_decomposed.json").read_text())
OPS = {
    "Prelu": "qnn.prelu",
    # a table between two convolutions: Vela's 1x1 pooling operation with the table in its
    # output stage, the table loaded while the previous operation runs
    "Exp": "qnn.exp",
    "Log": "qnn.log",
    "Rsqrt": "qnn.rsqrt",
    "Elu": "qnn.elu",
    "Relu0To1": "qnn.requantize+clip",
}
TABLES = ("exp_in_graph", "log_in_graph", "rsqrt_in_graph", "elu_in_graph", "relu_0_to_1_in_graph")
# the rows our rule does not match yet, with the reason
WIDER = {
    # since session 21 (n30v) an elementwise block is no deeper than the map on the two-core
    # U65-512 too (Vela's blocks 4x4x8 and 4x4x16 there; ours were 16 deep, 1.3-1.4 before):
    # its MULs and MAXIMUM on the 8x8x8 map, 192 each against Vela's 299, 299 and 192
    ("prelu_in_graph", "u65-512"): (0.7, 0.75),
    # the tables' 1x1 pool: our block model matches Vela's on the 256-MAC arrays (460 and 424
    # cycles against 464 and 428) and, since session 19 (Vela 5.2's pooling at ifm bits / 2
    # cycles per micro-block, its fractional block count), on u55-128 (816, was 544); the
    # two-core u65-512 is 300 against 264 (was 406)
    **{(name, "u65-512"): (1.1, 1.15) for name in TABLES},
}


def _ours(path: Path, preset: str, name: str) -> int:
    exe = P.build(from_tflite(str(path)), f"npu -config={preset}, ref")
    (cycles,) = [
        c["cycles"]
        for s in exe.steps
        if s.target == "npu"
        for op, c in zip(s.region.program.ops, s.region.cycles)
        if op.params.get("op") == name
    ]
    return cycles


@pytest.mark.parametrize(
    "row", DATA["rows"], ids=lambda r: f"{Path(r['model']).stem}-{r['preset']}"
)
def test_decomposed_operator_costs_velas_operations(row):
    assert DATA["vela"] == "5.2.0"
    path = ROOT / row["model"]
    assert hashlib.sha256(path.read_bytes()).hexdigest()[:16] == row["sha256"], path
    ours = _ours(path, row["preset"], OPS[row["operator"]])
    vela = sum(row["op_cycles"])
    lo, hi = WIDER.get((path.stem, row["preset"]), (0.985, 1.01))
    assert lo <= ours / vela <= hi, (ours, vela, row["vela_ops"], row["op_cycles"])


def test_prelu_is_velas_three_operations():
    """The one-op PReLU (alpha 0.1-0.5 per channel, input and output scales differ): Vela's
    MUL by alpha, MUL by one and MAXIMUM; on u55-256 the alpha MUL reads its 4-byte constant
    from flash at the output's size in 8-byte runs of 128-byte bursts: 4,096 cycles."""
    (row,) = [
        r for r in DATA["rows"] if r["model"].endswith("/prelu.tflite") and r["preset"] == "u55-256"
    ]
    assert row["vela_ops"] == ["Mul", "Mul", "Maximum"]
    assert _ours(ROOT / row["model"], "u55-256", "qnn.prelu") == sum(row["op_cycles"]) == 4288
