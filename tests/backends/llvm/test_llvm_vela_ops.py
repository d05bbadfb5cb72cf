"""The ops the NPU took from Vela's list also compile for the llvm host, so a build with
"npu, llvm" (or "llvm" alone) never fails when the NPU gives one back: qnn.prelu as an EWISE
kernel, tile / reverse / nn.dilate as GATHER tables, qnn.conv2d_transpose as nn.dilate +
qnn.conv2d (passes/transpose_conv.py). Each equals the interpreter bit for bit; the
converter-made models also equal TFLite's reference kernels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from partita.frontends import from_tflite

import partita as P
from partita.ir import Function, IRModule, TensorType, Var, post_order
from partita.ops import get_op
from partita.passes.transpose_conv import LegalizeTransposeConv

OPS = Path(__file__).resolve().parents[2] / "models" / "tflite" / "ops"
MODELS = ["prelu", "prelu_in_graph", "reverse_v2", "reverse_v2_in_graph",
          "transpose_conv_s2_same", "transpose_conv_s2_valid", "transpose_conv_in_graph"]


def _run(mod, *xs):
    out = P.build(mod, "llvm").run(*xs)
    return np.asarray(out[0] if isinstance(out, (list, tuple)) else out)


@pytest.mark.parametrize("name", MODELS)
def test_converter_model_on_llvm_equals_tflite_reference(name):
    mod = from_tflite(str(OPS / f"{name}.tflite"))
    data = np.load(OPS / f"{name}.npz")
    for x, want in zip(data["input_0"], data["ref_0"]):
        got = _run(mod, x)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, np.asarray(P.interpret(mod, [x])[0]))


def test_transpose_conv_is_rewritten_for_the_host_with_the_same_bits():
    mod = P.InferType()(from_tflite(str(OPS / "transpose_conv_s2_same.tflite")))
    new = LegalizeTransposeConv()(mod)
    names = {getattr(n.op, "name", "") for n in post_order(new["main"]) if hasattr(n, "op")}
    assert "qnn.conv2d_transpose" not in names and {"nn.dilate", "qnn.conv2d"} <= names
    x = np.load(OPS / "transpose_conv_s2_same.npz")["input_0"][0]
    np.testing.assert_array_equal(np.asarray(P.interpret(new, [x])[0]),
                                  np.asarray(P.interpret(mod, [x])[0]))


@settings(max_examples=25, deadline=None)
@given(
    channels=st.integers(1, 9),
    per_channel=st.booleans(),
    zps=st.tuples(*(st.integers(-128, 127) for _ in range(3))),
    scales=st.tuples(*(st.floats(1e-3, 2.0) for _ in range(3))),
    seed=st.integers(0, 2**31 - 1),
)
def test_qprelu_equals_the_interpreter(channels, per_channel, zps, scales, seed):
    rng = np.random.default_rng(seed)
    x = Var("x", TensorType((1, 3, 4, channels), "int8"))
    alpha = rng.integers(-128, 128, (channels,) if per_channel else (1,)).astype(np.int8)
    c = P.const
    call = get_op("qnn.prelu")(
        x, c(alpha), c(np.float32(scales[0])), c(np.int32(zps[0])), c(np.float32(scales[1])),
        c(np.int32(zps[1])), c(np.float32(scales[2])), c(np.int32(zps[2])),
    )
    mod = IRModule.from_expr(Function([x], call))
    data = rng.integers(-128, 128, (1, 3, 4, channels)).astype(np.int8)
    np.testing.assert_array_equal(_run(mod, data), np.asarray(P.interpret(mod, [data])[0]))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "float32"])
@pytest.mark.parametrize(
    "name, attrs",
    [("tile", {"reps": (1, 2, 1, 3)}), ("tile", {"reps": (2, 1, 1, 1)}),
     ("reverse", {"axis": 1}), ("reverse", {"axis": -1}),
     ("nn.dilate", {"strides": (1, 2, 3, 1), "dilation_value": 5.0})],
)
def test_data_movement_on_llvm_equals_the_interpreter(dtype, name, attrs):
    x = Var("x", TensorType((1, 3, 4, 5), dtype))
    mod = IRModule.from_expr(Function([x], get_op(name)(x, **attrs)))
    data = np.random.default_rng(0).integers(-100, 100, (1, 3, 4, 5)).astype(dtype)
    np.testing.assert_array_equal(_run(mod, data), np.asarray(P.interpret(mod, [data])[0]))
