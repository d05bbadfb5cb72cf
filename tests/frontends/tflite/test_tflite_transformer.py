"""The int8 Keras BERT-style encoder (tests/models/transformers/bert_tiny_int8.tflite, from
tools/gen_transformer_tflite.py) and its new operators one at a time (GELU, RSQRT,
SQUARED_DIFFERENCE over every int8 value), bit-exact with TFLite's reference kernels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from partita.frontends import from_tflite
from tflbuild import Model, Op, T, build
from tflite_cases import Oracle, assert_same

from partita import interpret

MODEL = Path(__file__).resolve().parents[2] / "models" / "transformers" / "bert_tiny_int8.tflite"
ALL_INT8 = np.arange(-128, 128, dtype=np.int8)


def token_inputs(oracle: Oracle, rng: np.random.Generator) -> list[np.ndarray]:
    mask = np.ones((1, 16), np.int32)
    mask[0, 16 - int(rng.integers(0, 9)) :] = 0
    ids = rng.integers(1, 100, (1, 16)).astype(np.int32) * mask
    return [ids if "input_ids" in d["name"] else mask for d in oracle.inputs]


@pytest.mark.parametrize("kernels, semantics", [("ref", "tflite"), ("builtin", "tflite_builtin")])
def test_keras_encoder_bit_exact(kernels, semantics):
    oracle = Oracle(MODEL, kernels)
    mod = from_tflite(MODEL, semantics=semantics)
    ops = {c.op.name for c in _calls(mod)}
    assert {
        "qnn.batch_matmul",
        "qnn.softmax",
        "qnn.gelu",
        "qnn.rsqrt",
        "qnn.squared_difference",
        "take",
    } <= ops
    rng = np.random.default_rng(7)
    for _ in range(4):
        x = token_inputs(oracle, rng)
        assert_same(interpret(mod, x), oracle(x), f"bert_tiny_int8 ({kernels})")


def _calls(mod):
    from partita.ir import iter_calls

    return iter_calls(mod["main"])


def _unary_model(op: str, options, in_q, out_q, data=ALL_INT8) -> bytes:
    t = [
        T("x", data.shape, "int8", scale=[in_q[0]], zp=[in_q[1]]),
        T("y", data.shape, "int8", scale=[out_q[0]], zp=[out_q[1]]),
    ]
    return build(Model(t, [Op(op, [0], [1], options)], [0], [1]))


@pytest.mark.parametrize("approximate", [False, True])
@pytest.mark.parametrize("in_q, out_q", [((0.05, 3), (0.03, -100)), ((0.2, -20), (0.1, -120))])
def test_gelu_every_value(approximate, in_q, out_q):
    data = _unary_model("GELU", ("GeluOptions", {"Approximate": approximate}), in_q, out_q)
    got = interpret(from_tflite(data), [ALL_INT8])
    assert_same(got, Oracle(data, "ref")([ALL_INT8]), "GELU")


@pytest.mark.parametrize("in_q, out_q", [((0.01, -128), (0.05, -128)), ((0.3, -10), (0.002, 5))])
def test_rsqrt_every_value(in_q, out_q):
    x = np.arange(in_q[1], 128, dtype=np.int8)  # TFLite refuses values below the zero point
    data = _unary_model("RSQRT", None, in_q, out_q, x)
    assert_same(interpret(from_tflite(data), [x]), Oracle(data, "ref")([x]), "RSQRT")


@pytest.mark.parametrize("scales", [(0.05, 0.02, 0.01), (0.01, 0.01, 0.3), (0.1, 0.4, 2.0)])
def test_squared_difference_every_value(scales):
    rng = np.random.default_rng(1)
    b = rng.integers(-128, 128, ALL_INT8.shape).astype(np.int8)
    t = [
        T("a", (256,), "int8", scale=[scales[0]], zp=[-3]),
        T("b", (256,), "int8", scale=[scales[1]], zp=[10]),
        T("y", (256,), "int8", scale=[scales[2]], zp=[-128]),
    ]
    data = build(Model(t, [Op("SQUARED_DIFFERENCE", [0, 1], [2])], [0, 1], [2]))
    got = interpret(from_tflite(data), [ALL_INT8, b])
    assert_same(got, Oracle(data, "ref")([ALL_INT8, b]), "SQUARED_DIFFERENCE")


def test_keras_encoder_npu_ref_build_bit_exact_and_placement():
    """build(mod, "npu, ref"): the NPU takes every FULLY_CONNECTED, every op it refuses carries
    its reason, and the results stay bit-exact with TFLite's reference kernels."""
    import partita

    exe = partita.build(from_tflite(MODEL), "npu, ref")
    rows = exe.report.rows
    assert {r.target for r in rows if r.op == "FULLY_CONNECTED"} == {"npu"}
    refused = [r for r in rows if r.target == "ref"]
    assert "GATHER" in {r.op for r in refused}
    # issue 30: RSQRT as a table, BATCH_MATMUL on the MAC array, as Vela runs them
    on_npu = ("SOFTMAX", "GELU", "RSQRT", "BATCH_MATMUL")
    assert {r.target for r in rows if r.op in on_npu} == {"npu"}
    assert all(r.reason for r in refused if r.op in ("GATHER", "MEAN"))
    oracle = Oracle(MODEL, "ref")
    x = token_inputs(oracle, np.random.default_rng(3))
    assert_same(exe.run(*x), oracle(x), "bert_tiny_int8 on npu, ref")
