"""The int8 BERT-style encoder (TFLite, tools/gen_transformer_tflite.py) on "npu, ref": the NPU
takes the fully-connected layers and elementwise ops it supports, the placement report says why
the rest stays on the CPU, and the built executable equals the interpreter bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from partita.frontends import from_tflite

import partita as P

MODEL = Path(__file__).resolve().parents[2] / "models" / "transformers" / "bert_tiny_int8.tflite"


def test_the_npu_takes_the_dense_layers_and_says_why_not_the_rest():
    mod = from_tflite(str(MODEL))
    report = P.placement_report(P.partition_for(mod, "npu, ref"))
    rows = {}
    for row in report.rows:
        rows.setdefault(row.op, []).append(row)
    assert all(r.target == "npu" for r in rows["FULLY_CONNECTED"])
    assert all(r.target == "npu" for r in rows["SOFTMAX"] + rows["GELU"])  # issue 30
    assert all(r.target == "npu" for r in rows["RSQRT"])  # a table, as Vela runs it
    assert all(r.target == "npu" for r in rows["BATCH_MATMUL"])  # int8 x int8, as Vela
    # layer norm's moments: MEAN over the channels of (1, 16, 64), seen as (1, 1, 16, 64)
    # (one of H, W, C is 1), and over the 16 rows: Vela 5.2 runs all 11 on the NPU
    assert all(r.target == "npu" for r in rows["MEAN"])
    reasons = {
        # no pattern matches a gather (the LSTM's 16-bit tables are the only NPU take)
        "GATHER": "take",
    }
    for op, text in reasons.items():
        for row in rows[op]:
            assert row.target != "npu" and text in row.reason, (op, row.target, row.reason)
    npu_macs = sum(r.macs for r in report.rows if r.target == "npu")
    assert npu_macs > 0.9 * sum(r.macs for r in report.rows)


def test_the_encoder_built_for_npu_and_ref_equals_the_interpreter():
    mod = from_tflite(str(MODEL))
    exe = P.build(mod, "npu, ref")
    rng = np.random.default_rng(0)
    inputs = []
    for t in exe.input_types:
        hi = 30 if t.dtype.startswith("int") and np.iinfo(t.dtype).bits >= 32 else 127
        inputs.append(rng.integers(0, hi, t.shape).astype(t.dtype))
    want = P.interpret(mod, inputs)
    got = exe.run(*inputs)
    for w, g in zip(want, got):
        assert w.dtype == g.dtype and np.array_equal(w, g)
