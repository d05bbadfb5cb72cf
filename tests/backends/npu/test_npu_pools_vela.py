"""MAX_POOL_2D and AVERAGE_POOL_2D charged as Vela 5.2 charges them (cycles.py, BLOCK_POOLS):
its block model, ifm bits / 2 cycles per micro-block and kernel element, the first block
unoverlapped and no fixed cost. The one-op models against Vela's totals recorded in
data/vela_cycles.json (``benchmarks/npu_ops.py --record``); session 18's charge (window x
rate per element and a 300-cycle fixed cost) was 0.25-1.14 of them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from partita.frontends import from_tflite

import partita as P

ROOT = Path(__file__).resolve().parents[3]
RECORD = json.loads((Path(__file__).resolve().parent / "data" / "vela_cycles.json").read_text())
POOLS = ("maxpool_same_k3s1", "maxpool_valid_k2s2", "avgpool_same_k3s2", "avgpool_valid_k2s2")


@pytest.mark.parametrize("preset", ("u55-128", "u55-256", "u65-256", "u65-512"))
@pytest.mark.parametrize("name", POOLS)
def test_one_op_pool_is_about_velas(name, preset):
    path = ROOT / "tests" / "models" / "tflite" / "ops" / f"{name}.tflite"
    row = RECORD[f"tests/models/tflite/ops/{name}/{preset}"]
    assert row["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    exe = P.build(from_tflite(str(path)), f"npu -config={preset}, ref")
    ours = sum(c["cycles"] for s in exe.steps if s.target == "npu" for c in s.region.cycles)
    # one block: its output stage at least the command issue bound, (MACs + output) / 4
    # (regor's balanced cycles; session 21 n30w): the 3x3 stride-1 max pool of a 9x9x4 map,
    # 1,620 MAC cycles and 81 of output stage (Vela's debug database, u55-128), costs Vela
    # 1,620 + 425 + its 388 block transfers = 2,433 (ours 2,454: our output stage rounds the
    # depth to 8, 162); before, 2,170 (0.89); avgpool_same_k3s2 0.95 -> 1.01
    # avgpool_valid_k2s2 (1.01-1.06, unchanged): its averaging output stage on the 4x4x4 map
    # counted 8 deep, 32 cycles over Vela's 16 on u55-128
    hi = 1.07 if name == "avgpool_valid_k2s2" else 1.02
    assert 0.99 <= ours / row["cycles"] <= hi, (ours, row["cycles"])
