"""The tiny BERT encoder through torch.export (tests/models/transformers/bert_tiny.pt2, from
tools/gen_transformer_models.py) against PyTorch itself: float within rounding."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from partita.frontends.pytorch import from_pytorch

import partita

torch = pytest.importorskip("torch")

MODEL = Path(__file__).resolve().parents[2] / "models" / "transformers" / "bert_tiny.pt2"


def test_torch_export_encoder_matches_pytorch():
    mod = from_pytorch(MODEL)
    module = torch.export.load(str(MODEL)).module()
    rng = np.random.default_rng(3)
    for pad in (0, 5, 8):
        mask = np.ones((1, 16), np.int64)
        mask[0, 16 - pad :] = 0
        ids = rng.integers(1, 100, (1, 16)) * mask
        with torch.no_grad():
            want = module(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
        got = partita.interpret(mod, {"input_ids": ids, "attention_mask": mask})[0]
        assert got.shape == want.shape == (1, 3)
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)


def test_pt2e_xnnpack_encoder_close_to_pytorch():
    """PT2E (XNNPACKQuantizer): the 14 linears become qnn.dense; with match="pytorch_eager" the
    logits stay within 0.025 of PyTorch's (about one output LSB; the quantized model itself is
    0.57 away from the float one) — float layer norm, GELU and softmax between the quantized
    linears round differently (docs/transformers.md)."""
    pytest.importorskip("torchao")
    import torch.ao.quantization.fx._decomposed  # noqa: F401 - registers the quantized ops

    from partita.ir import iter_calls

    path = MODEL.with_name("bert_tiny.pt2e_xnnpack.pt2")
    mod = from_pytorch(path, match="pytorch_eager")
    assert sum(c.op.name == "qnn.dense" for c in iter_calls(from_pytorch(path)["main"])) == 14
    module = torch.export.load(str(path)).module()
    rng = np.random.default_rng(4)
    for pad in (0, 6):
        mask = np.ones((1, 16), np.int64)
        mask[0, 16 - pad :] = 0
        ids = rng.integers(1, 100, (1, 16)) * mask
        with torch.no_grad():
            want = module(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
        got = partita.interpret(mod, {"input_ids": ids, "attention_mask": mask})[0]
        np.testing.assert_allclose(got, want, rtol=0, atol=0.025)
