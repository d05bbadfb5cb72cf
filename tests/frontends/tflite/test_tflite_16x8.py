"""TFLite 16x8 models (int16 activations, int8 weights, int64 biases; made by
tools/gen_tflite_16x8_models.py): partita's interpreter against TFLite's reference kernels
(BUILTIN_REF) and its optimized builtin kernels, bit for bit; operators partita does not model in
int16 yet are refused with a reason naming them."""

from __future__ import annotations

import numpy as np
import pytest
from partita.frontends import from_tflite
from partita.frontends.tflite.int16 import INT16_OPS
from partita.frontends.tflite.reader import read_model
from tflite_cases import MODELS, Oracle, assert_same, stored_samples

from partita import interpret

INT16 = sorted((MODELS / "int16").glob("*.tflite"))
pytestmark = pytest.mark.skipif(not INT16, reason="16x8 test models not generated")


def quantized_ops(path) -> set[str]:
    return {op.name for op in read_model(path.read_bytes()).operators} - {
        "RESHAPE",
        "PAD",
        "MAX_POOL_2D",
    }


SUPPORTED = [p for p in INT16 if quantized_ops(p) <= INT16_OPS]
REFUSED = [p for p in INT16 if p not in SUPPORTED]


def test_the_models_are_16x8():
    """Every model computes in int16 with int8 weights (not an int8 model by mistake)."""
    assert len(INT16) >= 21
    for path in INT16:
        m = read_model(path.read_bytes())
        assert {m.tensors[i].dtype for i in m.inputs} == {"int16"}, path.stem
        weights = [
            m.tensors[op.inputs[1]]
            for op in m.operators
            if op.name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
        ]
        assert all(w.dtype == "int8" for w in weights), path.stem


@pytest.mark.parametrize("path", SUPPORTED, ids=[p.stem for p in SUPPORTED])
def test_stored_samples_match_reference_and_builtin(path):
    mods = {"ref": from_tflite(path), "builtin": from_tflite(path, semantics="tflite_builtin")}
    for inputs, want in stored_samples(path):
        for kernels, mod in mods.items():
            assert_same(interpret(mod, inputs), want[kernels], f"{path.stem} vs {kernels}")


@pytest.mark.parametrize("path", SUPPORTED, ids=[p.stem for p in SUPPORTED])
def test_full_range_inputs_match_reference(path):
    """Uniform inputs over the whole int16 range (saturating paths included)."""
    oracle = Oracle(path, "ref")
    mod = from_tflite(path)
    rng = np.random.default_rng(16)
    for _ in range(2):
        x = oracle.random_inputs(rng)
        assert_same(interpret(mod, x), oracle(x), path.stem)


def test_unmodelled_int16_operators_are_refused_by_name():
    """Every converter-made 16x8 model's operators are modelled now, so the refusal is checked
    on the operator check itself: an int16 operator outside INT16_OPS is refused, naming it."""
    from types import SimpleNamespace

    from partita.frontends.tflite.context import Unsupported
    from partita.frontends.tflite.int16 import check_16x8_io

    assert not REFUSED, "a 16x8 test model has an operator partita refuses: check its reason"
    for name in ("HARD_SWISH", "RESIZE_BILINEAR", "SQUARED_DIFFERENCE"):
        assert name not in INT16_OPS
        ctx = SimpleNamespace(op=SimpleNamespace(name=name), options={})
        with pytest.raises(Unsupported, match=f"{name} on int16 tensors \\(16x8\\)"):
            check_16x8_io(ctx, ())


def test_the_supported_set_covers_the_weighted_ops():
    names = {p.stem for p in SUPPORTED}
    assert {"conv_relu", "depthwise_relu6", "fully_connected", "add", "mul", "mean"} <= names


def test_power_of_two_int16_add_is_refused():
    """ADD/SUB with pot_scale_int16 (the schema's default) take TFLite's other int16 path,
    which partita does not model: refused with the reason (the converter writes false)."""
    from types import SimpleNamespace

    from partita.frontends.tflite.context import Unsupported
    from partita.frontends.tflite.int16 import check_16x8_io

    ctx = SimpleNamespace(op=SimpleNamespace(name="ADD"), options={"PotScaleInt16": True})
    with pytest.raises(Unsupported, match="pot_scale_int16"):
        check_16x8_io(ctx, ())
