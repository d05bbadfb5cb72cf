"""TFLite 16x8 models (tests/models/tflite/int16, tools/gen_tflite_16x8_models.py) built for the
LLVM host: bit for bit with the interpreter on inputs over the whole int16 range, and with
TFLite's reference kernels on the stored samples."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from partita.frontends import from_tflite
from partita.frontends.errors import TFLiteUnsupportedOperatorError

import partita as P

MODELS = Path(__file__).resolve().parents[2] / "models" / "tflite" / "int16"


def _importable(path: Path) -> bool:
    try:
        from_tflite(path)
    except TFLiteUnsupportedOperatorError:
        return False
    return True


FILES = [p for p in sorted(MODELS.glob("*.tflite")) if _importable(p)]


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_16x8_model_on_llvm_equals_interpreter_and_tflite(path):
    mod = from_tflite(path)
    exe = P.build(mod, "llvm")
    rng = np.random.default_rng(30)
    for _ in range(2):
        feeds = [
            rng.integers(-32768, 32768, tuple(int(d) for d in p.checked_type.shape)).astype(
                np.int16
            )
            for p in mod["main"].params
        ]
        for got, want in zip(exe.run(*feeds), P.interpret(mod, feeds)):
            got, want = np.asarray(got), np.asarray(want)
            assert got.dtype == want.dtype == np.int16 and np.array_equal(got, want)
    with np.load(path.with_suffix(".npz")) as z:
        n_in = sum(k.startswith("input_") for k in z.files)
        n_out = sum(k.startswith("ref_") for k in z.files)
        for s in range(z["input_0"].shape[0]):
            got = exe.run(*[z[f"input_{i}"][s] for i in range(n_in)])
            for o in range(n_out):
                assert np.array_equal(np.asarray(got[o]), z[f"ref_{o}"][s]), (path.stem, s, o)


def test_the_16x8_list_is_not_empty():
    assert len(FILES) >= 19


@pytest.mark.parametrize("beta,scale", [(1.0, 0.001), (0.5, 0.0003), (2.0, 1e-5)])
def test_int16_softmax_rows_on_llvm(beta, scale):
    """QSOFTMAX16 over many rows of a 3-D tensor, whole-range inputs and near-constant rows."""
    mod = P.parse(
        f"""
def @main(%x: Tensor[(3, 5, 40), int16]) {{
  qnn.softmax(%x, {scale}f, 0, 3.0517578125e-05f, 0, beta={beta}f)
}}"""
    )
    exe = P.build(mod, "llvm")
    rng = np.random.default_rng(3)
    for x in (
        rng.integers(-32768, 32768, (3, 5, 40)).astype(np.int16),
        rng.integers(-3, 4, (3, 5, 40)).astype(np.int16),
    ):
        want = np.asarray(P.interpret(mod, [x])[0])
        assert np.array_equal(np.asarray(exe.run(x)[0]), want)


TIERS = ["amx", "vnni", "avxvnni", "avx2", "plain"]
ABS_LEAKY = ["abs", "leaky_relu", "abs_in_graph", "leaky_relu_in_graph"]  # session 20 (n30p)


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("name", ABS_LEAKY)
def test_16x8_abs_and_leaky_relu_on_every_isa_tier(name, tier):
    """16x8 ABS (|q| saturated at 32767: -32768 included) and LEAKY_RELU (two multipliers;
    the in-graph model's quantizations differ) on every -isa= tier, -emulate=yes standing in
    for what this CPU lacks: equal to the interpreter on the whole int16 range and to
    BUILTIN_REF's stored outputs."""
    path = MODELS / f"{name}.tflite"
    mod = from_tflite(path)
    exe = P.build(mod, f"llvm -isa={tier} -emulate=yes")
    shape = tuple(int(d) for d in mod["main"].params[0].checked_type.shape)
    rng = np.random.default_rng(20)
    x = rng.integers(-32768, 32768, shape).astype(np.int16)
    x.ravel()[:3] = (-32768, 32767, 0)
    want = np.asarray(P.interpret(mod, [x])[0])
    assert np.array_equal(np.asarray(exe.run(x)[0]), want)
    with np.load(path.with_suffix(".npz")) as z:
        for s in range(z["input_0"].shape[0]):
            assert np.array_equal(np.asarray(exe.run(z["input_0"][s])[0]), z["ref_0"][s])
