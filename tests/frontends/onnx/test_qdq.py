"""frontends/qdq.py: the QDQ -> QNN rewrites on hand-written graphs.

Rules that only move integers must keep every bit (checked with the interpreter on random
inputs); rules that compute are checked against the integer formula written out here.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from partita.frontends.qdq import qdq_rules, qdq_to_qnn, quantize_value

import partita as P
from partita.ir import iter_calls

RNG = np.random.default_rng(7)
W = RNG.integers(-127, 128, (6, 4, 3, 3), dtype=np.int8)
WS = np.linspace(0.004, 0.02, 6).astype(np.float32)
B = RNG.integers(-2000, 2000, 6, dtype=np.int32)


def conv_graph(bias: str, act: str = "") -> P.IRModule:
    act_line = f"%4 = {act}(%3);" if act else "%4 = %3;"
    text = f"""
def @main(%x: Tensor[(1, 4, 7, 7), int8]) {{
  %0 = qnn.dequantize(%x, 0.03f, 3);
  %1 = qnn.dequantize(meta[relay.Constant][0], meta[relay.Constant][1], 0, axis=0);
  %2 = nn.conv2d(%0, %1, padding=[1, 1, 1, 1], kernel_size=[3, 3], channels=6);
  %3 = nn.bias_add(%2, {bias}, axis=1);
  {act_line}
  qnn.quantize(%4, 0.05f, -4, out_dtype="int8", semantics="onnx")
}}"""
    b_dq = np.float32(0.03) * WS
    consts = [P.ir.const(W), P.ir.const(WS), P.ir.const(B), P.ir.const(b_dq),
              P.ir.const((B * b_dq).astype(np.float32))]
    return P.parse(text, consts)


def ops(mod):
    return [c.op.name for c in iter_calls(mod["main"].body)]


def expected_conv(x: np.ndarray, bias: np.ndarray, lo=-128, hi=127) -> np.ndarray:
    """The integer conv and ORT's requantize, written out: rint(acc * f32(xs*ws/ys)) + zp."""
    xp = np.pad(x.astype(np.int64) - 3, ((0, 0), (0, 0), (1, 1), (1, 1)))
    acc = np.zeros((1, 6, 7, 7), np.int64)
    for o in range(6):
        for i in range(7):
            for j in range(7):
                acc[0, o, i, j] = np.sum(xp[0, :, i:i + 3, j:j + 3] * W[o])
    acc += bias.reshape(1, 6, 1, 1)
    scale = ((np.float32(0.03) * WS) / np.float32(0.05)).astype(np.float32).reshape(1, 6, 1, 1)
    q = np.rint(acc.astype(np.float32) * scale).astype(np.int64) - 4
    return np.clip(q, max(lo, -128), min(hi, 127)).astype(np.int8)


@pytest.mark.parametrize("bias", ["int32", "float"])
def test_conv_group_becomes_qnn_conv2d(bias):
    text = ("qnn.dequantize(meta[relay.Constant][2], meta[relay.Constant][3], 0, axis=0)"
            if bias == "int32" else "meta[relay.Constant][4]")
    mod = conv_graph(text)
    out = qdq_to_qnn(mod)
    assert ops(out) == ["qnn.conv2d", "nn.bias_add", "qnn.requantize"]
    x = RNG.integers(-128, 128, (1, 4, 7, 7), dtype=np.int8)
    assert np.array_equal(P.interpret(out, {"x": x})[0], expected_conv(x, B))


def test_relu_after_conv_becomes_a_clip_on_integers():
    bias = "qnn.dequantize(meta[relay.Constant][2], meta[relay.Constant][3], 0, axis=0)"
    out = qdq_to_qnn(conv_graph(bias, "nn.relu"))
    assert ops(out)[-1] == "clip"
    x = RNG.integers(-128, 128, (1, 4, 7, 7), dtype=np.int8)
    assert np.array_equal(P.interpret(out, {"x": x})[0], expected_conv(x, B, lo=-4))


def test_bias_with_another_scale_is_left_alone():
    """A bias not quantized with input_scale * weight_scale does not fit qnn.conv2d."""
    bias = "qnn.dequantize(meta[relay.Constant][2], 0.5f, 0)"
    out = qdq_to_qnn(conv_graph(bias))
    assert "nn.conv2d" in ops(out) and "qnn.conv2d" not in ops(out)


MOVES = {
    "max_pool": "nn.max_pool2d(%0, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1])",
    "reshape": "reshape(%0, newshape=[1, -1])",
    "transpose": "transpose(%0, axes=[0, 2, 3, 1])",
    "relu": "nn.relu(%0)",
    "clip": "clip(%0, a_min=-0.3f, a_max=0.4f)",
    "pad": "nn.pad(%0, 0.07f, pad_width=[[0, 0], [0, 0], [1, 2], [2, 1]])",
    "resize": 'image.resize2d(%0, size=[16, 16], method="nearest_neighbor", '
              'coordinate_transformation_mode="asymmetric", rounding_method="floor")',
}


def move_graph(op: str, dtype: str, zp: int, out_scale: str = "0.035f") -> P.IRModule:
    return P.parse(f"""
def @main(%x: Tensor[(1, 3, 8, 8), {dtype}]) {{
  %0 = qnn.dequantize(%x, 0.035f, {zp});
  %1 = {MOVES[op]};
  qnn.quantize(%1, {out_scale}, {zp}, out_dtype="{dtype}", semantics="onnx")
}}""")


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(sorted(MOVES)), st.sampled_from([("int8", -5), ("uint8", 131)]),
       st.integers(0, 2**31))
def test_integer_moves_keep_every_bit(op, dtype_zp, seed):
    dtype, zp = dtype_zp
    mod = move_graph(op, dtype, zp)
    out = qdq_to_qnn(mod)
    assert "qnn.quantize" not in ops(out) and "qnn.dequantize" not in ops(out)
    info = np.iinfo(dtype)
    x = np.random.default_rng(seed).integers(info.min, info.max + 1, (1, 3, 8, 8)).astype(dtype)
    assert P.interpret(out, {"x": x})[0].tobytes() == P.interpret(mod, {"x": x})[0].tobytes()


def test_moves_with_other_output_parameters_stay_float():
    out = qdq_to_qnn(move_graph("max_pool", "int8", -5, out_scale="0.05f"))
    assert ops(out) == ["qnn.dequantize", "nn.max_pool2d", "qnn.quantize"]


def test_shared_dequantize_is_unshared_and_both_groups_fuse():
    mod = P.parse("""
def @main(%a: Tensor[(2, 8), int8], %b: Tensor[(2, 8), int8]) {
  %0 = qnn.dequantize(%a, 0.05f, 1);
  %1 = qnn.dequantize(%b, 0.04f, -2);
  %2 = qnn.quantize(add(%0, %1), 0.08f, 0, out_dtype="int8", semantics="onnx");
  %3 = qnn.quantize(multiply(%0, %1), 0.01f, 3, out_dtype="int8", semantics="onnx");
  (%2, %3)
}""")
    assert sorted(ops(qdq_to_qnn(mod))) == ["qnn.add", "qnn.mul"]


def test_rules_only_match_their_semantics():
    mod = move_graph("reshape", "int8", 0)
    tflite_only = qdq_rules("tflite")(mod)
    assert "qnn.quantize" in ops(tflite_only)


def test_quantize_value_rounds_half_to_even():
    scale, zp = P.ir.const(np.float32(0.5)), P.ir.const(np.int32(0))
    assert [quantize_value(v, scale, zp, "int8") for v in (0.25, 0.75, -0.25, 100.0)] == \
        [0, 2, 0, 127]
