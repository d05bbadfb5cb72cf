"""Every test model of the three frontends (tests/models: TFLite, ONNX, PyTorch torch.export;
not the large benchmark networks, the transformers and TorchScript files, which need input
shapes and have their own tests) builds for ``"llvm"`` whole and equals the interpreter: bit for
bit on integer outputs, within 1e-5 of the output's magnitude on float ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import partita as P
from partita.cli.models import load_model

MODELS = Path(__file__).resolve().parents[2] / "models"
FILES = sorted(
    p for p in MODELS.rglob("*")
    if p.suffix in (".tflite", ".onnx", ".pt2") and "large" not in p.parts
    and p.parent.name not in ("transformers", "int16")  # 16x8: test_llvm_16x8.py
)  # fmt: skip


def feed(rng, ty):
    """Integers over the whole 8-bit range, small non-negative indices for wider integers,
    standard normal floats."""
    shape, dtype = tuple(int(d) for d in ty.shape), np.dtype(ty.dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu" and dtype.itemsize == 1:
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    if dtype.kind in "iu":
        return rng.integers(0, 4, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.slow
@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(MODELS)))
def test_every_model_builds_for_llvm_and_equals_the_interpreter(path):
    mod = load_model(path)
    exe = P.build(mod, "llvm")
    rng = np.random.default_rng(7)
    feeds = [feed(rng, p.checked_type) for p in mod["main"].params]
    for got, want in zip(exe.run(*feeds), P.interpret(mod, feeds)):
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape
        if want.dtype.kind == "f":
            scale = max(1.0, float(np.abs(want).max(initial=0)))
            assert np.allclose(got, want, rtol=0, atol=1e-5 * scale, equal_nan=True)
        else:
            assert np.array_equal(got, want)


def test_the_model_list_is_not_empty():
    assert len(FILES) > 200
