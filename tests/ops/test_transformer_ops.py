"""The transformer ops (partita/ops/transformer.py): values against independently computed
results, inferred types, and precise failures."""

from __future__ import annotations

import math

import numpy as np
import pytest
from op_helpers import assert_same, attr_error, op, run, run_const, type_error, type_of

import partita as P
from partita import IRModule, TensorType, TupleType, const, var
from partita.errors import InterpreterError


def dynamic_quantize(x):
    call = P.get_op("qnn.dynamic_quantize")(var("x", x.shape, "float32"))
    return P.interpret(IRModule.from_expr(call), [x])


def test_take_modes_and_type():
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[0, -1], [5, 2]], np.int64)
    assert type_of("take", ((3, 4), "float32"), ((2, 2), "int64"), axis=1) == TensorType(
        (3, 2, 2), "float32"
    )
    assert_same(run("take", data, idx, axis=1), data[:, [[0, 3], [1, 2]]])
    assert_same(run("take", data, idx, axis=1, mode="clip"), data[:, [[0, 0], [3, 2]]])
    with pytest.raises(InterpreterError, match="out of range for axis 1 of size 4"):
        run("take", data, idx, axis=1, mode="fast")
    assert_same(run("take", data, np.array(-1, np.int32), axis=0), data[2])


def test_take_rejects_float_indices_and_bad_axis():
    with type_error("indices must be int32 or int64, got float32"):
        type_of("take", ((3,), "float32"), ((2,), "float32"))
    with type_error("axis 2 is out of range"):
        type_of("take", ((3,), "float32"), ((2,), "int32"), axis=2)
    with attr_error("mode"):
        type_of("take", ((3,), "float32"), ((2,), "int32"), mode="nearest")


def test_compare_and_not():
    a, b = np.array([1, 2, 3], np.int64), np.array([[3], [2]], np.int64)
    assert_same(run("equal", a, b), np.equal(a, b))
    assert_same(run("less", a, b), np.less(a, b))
    assert_same(run("logical_not", np.array([True, False])), np.array([False, True]))
    with type_error("data must be bool, got int64"):
        type_of("logical_not", ((3,), "int64"))
    with type_error("do not broadcast"):
        type_of("equal", ((3,), "int64"), ((2,), "int64"))


def test_broadcast_to():
    x = np.array([[1.0], [2.0]], np.float32)
    assert_same(run("broadcast_to", x, shape=(3, 2, 4)), np.broadcast_to(x, (3, 2, 4)))
    with type_error(r"data \(2, 1\) does not broadcast to \(3, 4\)"):
        type_of("broadcast_to", ((2, 1), "float32"), shape=(3, 4))


def test_erf_and_gelu_against_math():
    x = np.array([-3.0, -0.5, 0.0, 0.7, 2.5], np.float32)
    # float32: float32_math's algorithms, within a few ulp of float64 math (test_float32_math.py)
    want = np.array([math.erf(float(v)) for v in x])
    np.testing.assert_allclose(run("erf", x), want, rtol=3e-7, atol=1e-9)
    gelu = np.array([0.5 * float(v) * (1 + math.erf(float(v) / math.sqrt(2))) for v in x])
    np.testing.assert_allclose(run("nn.gelu", x), gelu, rtol=3e-6, atol=1e-9)
    # float16: float64 math rounded once
    half = x.astype(np.float16)
    want16 = np.array([math.erf(float(v)) for v in half], np.float16)
    assert_same(run("erf", half), want16)
    tanh = np.array(
        [
            0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))
            for v in x.astype(np.float64)
        ],
        np.float32,
    )
    assert_same(run("nn.gelu", x, approximate="tanh"), tanh)
    with type_error("data must be float16 or float32, got int32"):
        type_of("erf", ((3,), "int32"))


def test_layer_norm():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    g, b = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    x64 = x.astype(np.float64)
    mu, var = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
    want = ((x64 - mu) / np.sqrt(var + np.float32(1e-5)) * g + b).astype(np.float32)
    assert_same(run("nn.layer_norm", x, g, b), want)
    got, _ = run_const("nn.layer_norm", x, g, b, center=False, scale=False)
    np.testing.assert_allclose(got, (x64 - mu) / np.sqrt(var + np.float32(1e-5)), atol=1e-6)
    with type_error(r"gamma must be float32 of shape \(8,\)", r"got float32 \(4,\)"):
        type_of("nn.layer_norm", ((2, 8), "float32"), ((4,), "float32"), ((8,), "float32"))
    with attr_error("epsilon must be >= 0"):
        type_of(
            "nn.layer_norm", ((2, 8), "float32"), ((8,), "float32"), ((8,), "float32"), epsilon=-1.0
        )


def test_dynamic_quantize():
    x = np.array([[-1.0, 0.0, 0.5, 3.0]], np.float32)
    q, s, z = dynamic_quantize(x)
    scale = np.float32(np.float32(4.0) / np.float32(255))
    zp = np.rint(np.float32(1.0) / scale)
    assert s.dtype == np.float32 and s == scale and z.dtype == np.uint8 and z == zp
    assert_same(q, np.clip(np.rint(x / scale) + zp, 0, 255).astype(np.uint8))
    q, s, z = dynamic_quantize(np.zeros((2, 2), np.float32))
    assert s == 1.0 and z == 0 and not q.any()
    assert type_of("qnn.dynamic_quantize", ((2, 3), "float32")) == TupleType(
        [TensorType((2, 3), "uint8"), TensorType((), "float32"), TensorType((), "uint8")]
    )
    with type_error("data must be float32, got int8"):
        type_of("qnn.dynamic_quantize", ((2,), "int8"))


def test_take_wraps_huge_negative_indices_at_once():
    """Random int64 token ids (partita run --random) include values near -2**63; numpy's own
    "wrap" mode steps them up one table size at a time and never finished on a BERT."""
    data = np.arange(12, dtype=np.float32).reshape(6, 2)
    idx = np.array([-(2**63), -(2**63) + 5, 2**63 - 1, -7, 13], np.int64)
    out = run("take", data, idx, axis=0, mode="wrap")
    assert np.array_equal(out, data[[int(i) % 6 for i in idx]])


def test_batch_norm_normalizes_along_its_axis_and_passes_the_statistics_through():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    gamma, beta, mean = (rng.standard_normal(3).astype(np.float32) for _ in range(3))
    var = rng.random(3).astype(np.float32) + 0.5
    out, m, v = P.interpret(
        op("nn.batch_norm", *(const(a) for a in (x, gamma, beta, mean, var)), epsilon=1e-3)
    )
    c = (slice(None), None, None)
    want = (x - mean[c]) / np.sqrt(var[c] + np.float32(1e-3)) * gamma[c] + beta[c]
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=2e-6)
    assert out.dtype == np.float32 and np.array_equal(m, mean) and np.array_equal(v, var)
    with pytest.raises(P.TypeInferenceError, match="gamma must be float32 of shape \\(3,\\)"):
        type_of(
            "nn.batch_norm", ((2, 3, 4, 4), "float32"), ((4,), "float32"), *[((3,), "float32")] * 3
        )
