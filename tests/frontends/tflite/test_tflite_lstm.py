"""UNIDIRECTIONAL_SEQUENCE_LSTM (TFLite's integer LSTM, made by tools/gen_tflite_lstm_models.py
from Keras LSTMs): partita's import, unrolled into integer ops, against TFLite's reference
kernels (BUILTIN_REF) and its default kernels bit for bit, on the interpreter, the llvm host and
"npu, llvm"; LSTM variants partita does not import are refused with the reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from partita.frontends import from_tflite
from partita.frontends.errors import TFLiteUnsupportedOperatorError
from partita.frontends.tflite.reader import read_model
from tflbuild import Model, Op, T, build
from tflite_cases import MODELS, assert_same, stored_samples

import partita as P
from partita import interpret

LSTM = sorted((MODELS / "lstm").glob("*.tflite"))
pytestmark = pytest.mark.skipif(not LSTM, reason="LSTM test models not generated")
IDS = [p.stem for p in LSTM]


def tflite_fresh(path: Path, inputs: list[np.ndarray], kernels: str = "BUILTIN_REF"):
    """TFLite's outputs with the LSTM state at zero (a fresh interpreter: TFLite keeps the
    variable state tensors between invokes)."""
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    it = litert.Interpreter(
        model_path=str(path),
        experimental_op_resolver_type=getattr(litert.OpResolverType, kernels),
        num_threads=1,
    )
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def as_list(out) -> list[np.ndarray]:
    return [np.asarray(o) for o in out] if isinstance(out, (list, tuple)) else [np.asarray(out)]


def test_the_models_hold_integer_lstms():
    """Each model has UNIDIRECTIONAL_SEQUENCE_LSTM with int8 input and an int16 cell state; the
    in-graph ones have a FULLY_CONNECTED or a CONV_2D besides."""
    names = {p.stem for p in LSTM}
    assert {"lstm", "lstm_two_layers", "lstm_in_graph", "lstm_conv"} <= names
    for path in LSTM:
        m = read_model(path.read_bytes())
        ops = [op for op in m.operators if op.name == "UNIDIRECTIONAL_SEQUENCE_LSTM"]
        assert ops, path.stem
        for op in ops:
            assert m.tensors[op.inputs[0]].dtype == "int8"
            assert m.tensors[op.inputs[19]].dtype == "int16"
    ops = {
        op.name
        for op in read_model((MODELS / "lstm" / "lstm_in_graph.tflite").read_bytes()).operators
    }
    assert "FULLY_CONNECTED" in ops


@pytest.mark.parametrize("path", LSTM, ids=IDS)
def test_stored_samples_match_reference_and_default_kernels(path):
    mod = from_tflite(path)
    for inputs, want in stored_samples(path):
        got = as_list(interpret(mod, inputs))
        assert_same(got, want["ref"], f"{path.stem} vs BUILTIN_REF")
        assert_same(got, want["builtin"], f"{path.stem} vs the builtin kernels")


@pytest.mark.parametrize("path", LSTM, ids=IDS)
def test_full_range_inputs_match_reference(path):
    """Uniform int8 inputs over the whole range (saturated gates and cell state included)."""
    mod = from_tflite(path)
    shapes = [
        t.shape
        for t in (
            read_model(path.read_bytes()).tensors[i] for i in read_model(path.read_bytes()).inputs
        )
    ]
    for seed in range(2):
        rng = np.random.default_rng(seed)
        inputs = [rng.integers(-128, 128, s).astype(np.int8) for s in shapes]
        assert_same(as_list(interpret(mod, inputs)), tflite_fresh(path, inputs), path.stem)


@pytest.mark.parametrize("target", ["llvm", "npu, llvm"])
@pytest.mark.parametrize("name", ["lstm_last", "lstm_in_graph"])
def test_builds_equal_the_interpreter(name, target):
    path = MODELS / "lstm" / f"{name}.tflite"
    mod = from_tflite(path)
    exe = P.build(mod, target)
    for inputs, want in stored_samples(path):
        assert_same(as_list(exe.run(*inputs)), want["ref"], f"{name} on {target}")


def _crafted_lstm(variant: str) -> bytes:
    """A one-LSTM model by hand (2 inputs, 2 cells) with one unsupported feature."""
    n, k = 2, 2
    w8 = np.ones((n, k), np.int8)
    t = [T("x", (1, 3, k), "int8", scale=[0.1], zp=[0])]
    t += [T(f"wx{g}", (n, k), "int8", data=w8, scale=[0.01], zp=[0]) for g in range(4)]
    t += [T(f"wh{g}", (n, n), "int8", data=w8, scale=[0.01], zp=[0]) for g in range(4)]
    t += [
        T(f"peep{g}", (n,), "int16", data=np.ones(n, np.int16), scale=[0.01], zp=[0])
        for g in range(3)
    ]
    t += [
        T(f"b{g}", (n,), "int32", data=np.zeros(n, np.int32), scale=[1e-3], zp=[0])
        for g in range(4)
    ]
    t += [T("proj", (n, n), "int8", data=w8, scale=[0.01], zp=[0])]
    t += [
        T("h", (1, n), "int8", scale=[0.01], zp=[0]),
        T("c", (1, n), "int16", scale=[2**-11], zp=[0]),
    ]
    t += [
        T(f"ln{g}", (n,), "int16", data=np.ones(n, np.int16), scale=[0.01], zp=[0])
        for g in range(4)
    ]
    t += [T("y", (1, 3, n), "int8", scale=[0.01], zp=[0])]
    idx = {x.name: i for i, x in enumerate(t)}
    ins = [idx["x"]] + [idx[f"wx{g}"] for g in range(4)] + [idx[f"wh{g}"] for g in range(4)]
    ins += [idx[f"peep{g}"] if variant == "peephole" else -1 for g in range(3)]
    ins += [idx[f"b{g}"] for g in range(4)]
    ins += [idx["proj"] if variant == "projection" else -1, -1, idx["h"], idx["c"]]
    ins += [idx[f"ln{g}"] if variant == "layer_norm" else -1 for g in range(4)]
    if variant == "cifg":
        ins[1] = ins[5] = -1
    opts = ("UnidirectionalSequenceLSTMOptions", {"FusedActivationFunction": 4})
    op = Op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [idx["y"]], opts)
    return build(Model(t, [op], [idx["x"]], [idx["y"]]))


@pytest.mark.parametrize(
    "variant, reason",
    [
        ("peephole", "peephole"),
        ("projection", "projection"),
        ("layer_norm", "layer-norm"),
        ("cifg", "CIFG"),
    ],
)
def test_unsupported_variants_are_refused_with_the_reason(variant, reason):
    with pytest.raises(TFLiteUnsupportedOperatorError) as e:
        from_tflite(_crafted_lstm(variant))
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in str(e.value) and reason in str(e.value)


def test_npu_takes_the_whole_lstm_in_one_partition():
    """In "npu, llvm" the whole unrolled LSTM (the input side, every step's recurrent FC, gates,
    tables and cell update) is one NPU partition holding all the MACs
    (tests/backends/npu/test_npu_lstm.py checks every model and preset)."""
    path = MODELS / "lstm" / "lstm.tflite"
    exe = P.build(from_tflite(path), "npu, llvm")
    assert [s.target for s in exe.steps] == ["npu"], exe.report.table()
    summary = exe.report.summary()
    assert summary["macs_by_target"].get("npu", 0) == summary["macs"]
