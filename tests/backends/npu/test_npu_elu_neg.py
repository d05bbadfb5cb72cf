"""TFLite's int8 ELU and NEG (tests/models/tflite/ops: the converter's float op given its int8
tensors, tools/tflite_vela_specs.py) imported, interpreted, and run on the NPU and the llvm host,
bit-exact with TFLite's kernels on every int8 input value. BUILTIN_REF registers no ELU kernel,
so ELU's oracle is the builtin kernel set (without delegates); NEG's is BUILTIN_REF."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from partita.frontends import from_tflite

import partita as P

litert = pytest.importorskip("ai_edge_litert.interpreter")

OPS = Path(__file__).resolve().parents[2] / "models" / "tflite" / "ops"
ORACLE = {
    "elu": litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    "neg": litert.OpResolverType.BUILTIN_REF,
}
SEMANTICS = {"elu": "tflite_builtin", "neg": "tflite"}  # the convolutions' kernels, as the oracle
MODELS = [f"{op}{suffix}" for op in ORACLE for suffix in ("", "_in_graph")]


def load(name):
    return from_tflite(str(OPS / f"{name}.tflite"), semantics=SEMANTICS[name.split("_")[0]])


def tflite(name, x):
    it = litert.Interpreter(
        model_path=str(OPS / f"{name}.tflite"),
        experimental_op_resolver_type=ORACLE[name.split("_")[0]],
    )
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def inputs(shape):
    """Every int8 value (the table's whole domain), then random maps."""
    size = int(np.prod(shape))
    sweep = np.resize(np.arange(-128, 128, dtype=np.int8), size).reshape(shape)
    rng = np.random.default_rng(0)
    return [sweep, *(rng.integers(-128, 128, shape, np.int8) for _ in range(2))]


def test_the_patched_models_hold_the_int8_op_alone():
    for name in MODELS:
        mod = load(name)
        text = str(mod)
        assert "dequantize" not in text and "qnn.quantize" not in text, name
        assert ("qnn.elu" if name.startswith("elu") else "negative") in text, name


@pytest.mark.parametrize("target", ["ref", "npu, ref", "llvm"])
@pytest.mark.parametrize("name", MODELS)
def test_bit_exact_with_tflite(name, target):
    exe = P.build(load(name), target)
    if target == "npu, ref":
        assert [s.target for s in exe.steps] == ["npu"], exe.report.table()
    for x in inputs(exe.input_types[0].shape):
        (got,) = exe.run(x)
        assert np.array_equal(got, tflite(name, x)), (name, target)


def test_neg_wraps_the_smallest_value_as_tflite_does():
    x = np.full((1, 8, 8, 4), -128, np.int8)
    assert np.all(tflite("neg", x) == -128)
    (got,) = P.build(from_tflite(str(OPS / "neg.tflite")), "npu, ref").run(x)
    assert np.all(got == -128)
