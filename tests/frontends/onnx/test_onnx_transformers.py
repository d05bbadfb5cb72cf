"""The BERT-style encoders of tests/models/transformers (tools/gen_transformer_models.py) against
ONNX Runtime: float exports within float rounding, the int8 parts bit-exact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx_cases import ort_run
from partita.frontends.onnx import from_onnx

import partita

MODELS = Path(__file__).resolve().parents[2] / "models" / "transformers"
SHAPES = {"input_ids": (1, 16), "attention_mask": (1, 16)}
# max abs difference allowed on the logits (about 0.5 in size): float32 rounding of a 2-layer
# encoder summed in another order; measured <= 5e-7 (docs/transformers.md)
FLOAT_TOL = {
    "bert_tiny.onnx": 2e-6,
    "bert_tiny.opset14.onnx": 2e-6,
    "bert_tiny.dynamo.onnx": 2e-6,
    "bert_tiny.ort_fused.onnx": 2e-6,
    "bert_tiny.dyn_int8.onnx": 2e-6,
    "bert_tiny.dyn_int8.ort_opt.onnx": 2e-6,
    "bert_tiny.qdq.onnx": 0.0,
}


def token_feeds(n: int, seed: int, batch: int = 1, seq: int = 16) -> list[dict]:
    """Random token ids (vocab 100) with the last 0..seq/2 positions of each row padded."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        ids = rng.integers(1, 100, (batch, seq), dtype=np.int64)
        mask = np.ones((batch, seq), np.int64)
        for row in range(batch):
            mask[row, seq - int(rng.integers(0, seq // 2 + 1)) :] = 0
        out.append({"input_ids": ids * mask, "attention_mask": mask})
    return out


def _first(x):
    return np.asarray(x[0] if isinstance(x, (list, tuple)) else x)


@pytest.mark.parametrize("name", sorted(FLOAT_TOL))
def test_encoder_matches_ort(name):
    path = MODELS / name
    mod = from_onnx(path, None if "dynamo" in name else SHAPES)
    for feed in token_feeds(3, seed=len(name)):
        want = ort_run(path, feed, "enable_all")[0]
        got = _first(partita.interpret(mod, feed))
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=0, atol=FLOAT_TOL[name])


@pytest.mark.parametrize("batch, seq", [(2, 24), (1, 8)])
def test_dynamic_axes_fold_for_other_shapes(batch, seq):
    """The legacy export's Shape -> Gather -> Range / Concat code folds for any fixed shape."""
    path = MODELS / "bert_tiny.onnx"
    mod = from_onnx(path, {"input_ids": (batch, seq), "attention_mask": (batch, seq)})
    (feed,) = token_feeds(1, seed=seq, batch=batch, seq=seq)
    want = ort_run(path, feed, "enable_all")[0]
    np.testing.assert_allclose(_first(partita.interpret(mod, feed)), want, rtol=0, atol=2e-6)


def _with_outputs(path: Path, op_type: str) -> tuple[onnx.ModelProto, list[str]]:
    """The model with every ``op_type`` node's first output added as a graph output."""
    model = onnx.load(path)
    names = [n.output[0] for n in model.graph.node if n.op_type == op_type]
    model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
    return model, names


@pytest.mark.parametrize("op_type", ["DynamicQuantizeLinear", "MatMulInteger"])
def test_dynamic_int8_integer_parts_bit_exact(op_type):
    """Every uint8 activation and int32 accumulator of the dynamic int8 encoder equals ONNX
    Runtime's (graph optimizations off, so that it keeps them)."""
    model, names = _with_outputs(MODELS / "bert_tiny.dyn_int8.onnx", op_type)
    mod = from_onnx(model, SHAPES)
    for feed in token_feeds(2, seed=5):
        want = ort_run(model.SerializeToString(), feed, "disable_all")
        got = partita.interpret(mod, feed)
        for name, g, w in zip(names, got[1:], want[1:]):
            assert g.dtype == w.dtype, name
            np.testing.assert_array_equal(g, w, err_msg=name)


def test_qdq_integer_parts_bit_exact():
    """Every QuantizeLinear output of the static int8 (QDQ) encoder equals ONNX Runtime's."""
    model, names = _with_outputs(MODELS / "bert_tiny.qdq.onnx", "QuantizeLinear")
    mod = from_onnx(model, SHAPES, qdq_to_qnn=False)
    (feed,) = token_feeds(1, seed=11)
    want = ort_run(model.SerializeToString(), feed, "disable_all")
    got = partita.interpret(mod, feed)
    for name, g, w in zip(names, got[1:], want[1:]):
        np.testing.assert_array_equal(g, w, err_msg=name)


def test_qdq_matmuls_become_qnn():
    from partita.ir import Call, post_order

    mod = from_onnx(MODELS / "bert_tiny.qdq.onnx", SHAPES)
    ops = {n.op.name for n in post_order(mod["main"]) if isinstance(n, Call)}
    assert {"qnn.dense", "qnn.requantize"} <= ops


def test_tvm_style_params_build_and_run():
    """mod, params = from_onnx(model, shape_dict, freeze_params=False); build(params=...)."""
    path = MODELS / "bert_tiny.onnx"
    mod, params = from_onnx(onnx.load(path), SHAPES, freeze_params=False)
    names = [p.name_hint for p in mod["main"].params]
    assert names[:2] == ["input_ids", "attention_mask"] and "tok.weight" in params
    assert set(names[2:]) == set(params)
    exe = partita.build(mod, "ref", params=params)
    (feed,) = token_feeds(1, seed=2)
    exe.set_input(**feed)
    exe.run()
    want = ort_run(path, feed, "enable_all")[0]
    np.testing.assert_allclose(exe.get_output(0), want, rtol=0, atol=2e-6)
