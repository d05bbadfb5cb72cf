"""qnn.requantize and qnn.conv2d/dense/batch_matmul (qnn.add/subtract/mul and qnn.concatenate:
test_qnn_binary_ops.py).

"tflite" results are checked against scalar Python-int transcriptions of TFLite's reference
kernels (the helpers of test_fixedpoint.py, written from the C++ formulas); "onnx" results
against float32 scalars; the integer ops against naive loops.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qnn_helpers import call, clamp, rand
from test_fixedpoint import mbqm64_ref, mbqm_ref, quantize_multiplier_ref

import partita as P
from partita.errors import AttrError, TypeInferenceError
from partita.ir import const
from partita.ops import get_op

F32, F64 = np.float32, np.float64

# ---- requantize --------------------------------------------------------------------------------


def requantize_tflite_ref(x, s_in, zp_in, s_out, zp_out, dtype, wide=False):
    q, shift = quantize_multiplier_ref(float(F64(s_in) / F64(s_out)))
    f = mbqm64_ref if wide else mbqm_ref
    return clamp(f(int(x) - zp_in, q, shift) + zp_out, dtype)


def test_requantize_ties_differ_between_semantics():
    # m = 0.5 exactly: TFLite rounds x/2 half up (SRDHM's nudge), ONNX half to even.
    x = np.array([1, 3, 5, -1, -3, -5], np.int32)
    args = (x, F32(0.5), np.int32(0), F32(1.0), np.int32(0))
    assert call("qnn.requantize", *args).tolist() == [1, 2, 3, 0, -1, -2]
    assert call("qnn.requantize", *args, semantics="onnx").tolist() == [0, 2, 2, 0, -2, -2]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["int8", "uint8", "int16", "int32"]))
def test_requantize_tflite_matches_scalar_reference(seed, out_dtype):
    rng = np.random.default_rng(seed)
    x = rng.integers(-(2**31), 2**31, (4, 3, 5)).astype(np.int32)
    x[0, 0, :2] = [-(2**31), 2**31 - 1]
    s_in = (10 ** rng.uniform(-6, 0, 3)).astype(F64)  # the exact float64 conv product
    s_out = F32(10 ** rng.uniform(-3, 1))
    zp_in = rng.integers(-100, 100, 3).astype(np.int32)
    zp_out = np.int32(130 if out_dtype == "uint8" else 3)
    got = call("qnn.requantize", x, s_in, zp_in, s_out, zp_out, axis=1, out_dtype=out_dtype)
    assert got.dtype == out_dtype and got.shape == x.shape
    for idx in itertools.product(*map(range, x.shape)):
        c = idx[1]
        want = requantize_tflite_ref(x[idx], s_in[c], int(zp_in[c]), s_out, int(zp_out), out_dtype)
        assert got[idx] == want, idx


def test_requantize_tflite_within_one_lsb_of_float():
    rng = np.random.default_rng(3)
    x = rng.integers(-20000, 20000, 500).astype(np.int32)
    s_in, s_out = F64(F32(0.02) * F32(0.003)), F32(0.011)
    got = call("qnn.requantize", x, s_in, np.int32(7), s_out, np.int32(-5), out_dtype="int16")
    exact = (x.astype(F64) - 7) * s_in / F64(s_out) - 5
    assert np.abs(got - exact).max() <= 1.0


def test_requantize_int64_uses_tflite_16x8_form():
    rng = np.random.default_rng(4)
    x = rng.integers(-(2**40), 2**40, 300)
    s_in, s_out = F64(1e-7), F32(3e-4)
    got = call("qnn.requantize", x, s_in, np.int32(0), s_out, np.int32(0), out_dtype="int16")
    want = [requantize_tflite_ref(v, s_in, 0, s_out, 0, "int16", wide=True) for v in x]
    assert got.tolist() == want


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_requantize_onnx_matches_float32_formula(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-(2**26), 2**26, (6, 4)).astype(np.int32)
    s_in = (10 ** rng.uniform(-6, -2, 4)).astype(F32)
    s_out = F32(10 ** rng.uniform(-3, 0))
    got = call(
        "qnn.requantize",
        x,
        s_in,
        np.int32(-3),
        s_out,
        np.int32(10),
        axis=-1,
        out_dtype="uint8",
        semantics="onnx",
    )
    for (i, c), v in np.ndenumerate(x):
        scale = F32(s_in[c] / s_out)  # one float32 division, as ORT's X * W / Y
        value = F32(F32(int(v) + 3) * scale)  # float32(int) rounds for |v| > 2**24, as MLAS
        assert got[i, c] == clamp(round(float(value)) + 10, "uint8")  # round(): half even


def test_requantize_type_errors():
    x = const(np.zeros((2, 4), np.int32))
    rq = get_op("qnn.requantize")
    with pytest.raises(
        TypeInferenceError,
        match=r"qnn.requantize.*input_scale must be a scalar "
        r"or shape \(4,\).*got shape \(3,\)",
    ):
        P.interpret(rq(x, np.ones(3, F32), np.int32(0), F32(1), np.int32(0)))
    with pytest.raises(TypeInferenceError, match="input_scale must be float32 or float64"):
        P.interpret(rq(x, np.float16(1), np.int32(0), F32(1), np.int32(0)))
    with pytest.raises(
        TypeInferenceError, match="data must be int8, uint8, int16, int32 or int64, got float32"
    ):
        P.interpret(rq(np.zeros(3, F32), F32(1), np.int32(0), F32(1), np.int32(0)))
    with pytest.raises(TypeInferenceError, match="output_zero_point must be int32, got int8"):
        P.interpret(rq(x, F32(1), np.int32(0), F32(1), np.int8(0)))
    with pytest.raises(AttrError, match="out_dtype.*must be one of"):
        rq(x, F32(1), np.int32(0), F32(1), np.int32(0), out_dtype="float32")


def test_quantize_clamps_after_adding_the_zero_point():
    # -188 + 3 saturates to -128 (clamping before the zero point gave -126).
    x = np.array([-6.975, 6.975, 0.05], F32)
    for sem in ("tflite", "onnx"):
        got = call("qnn.quantize", x, F32(0.0371), np.int32(3), semantics=sem)
        assert got.tolist() == [-128, 127, 4]


# ---- conv2d, dense, batch_matmul ---------------------------------------------------------------


def conv_ref(x, w, zp_x, zp_w, stride, pad, dil, groups):
    """Naive NCHW / OIHW loop; padded taps are skipped (they hold the zero point)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    top, left, bottom, right = pad
    oh = (h + top + bottom - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + left + right - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow), np.int64)
    for b, oc, i, j in itertools.product(range(n), range(o), range(oh), range(ow)):
        g = oc // (o // groups)
        acc = 0
        for ci, a, e in itertools.product(range(cg), range(kh), range(kw)):
            y, z = i * stride[0] + a * dil[0] - top, j * stride[1] + e * dil[1] - left
            if 0 <= y < h and 0 <= z < wd:
                acc += (int(x[b, g * cg + ci, y, z]) - zp_x) * (int(w[oc, ci, a, e]) - zp_w[oc])
        out[b, oc, i, j] = acc
    return out


@pytest.mark.parametrize(
    "dtype, groups, stride, pad, dil",
    [
        ("int8", 1, (1, 1), (1, 1, 1, 1), (1, 1)),
        ("uint8", 2, (2, 1), (0, 1, 2, 0), (1, 2)),
        ("int8", 4, (1, 2), (2, 2, 0, 1), (2, 1)),  # depthwise
    ],
)
def test_conv2d_matches_naive_loop(dtype, groups, stride, pad, dil):
    rng = np.random.default_rng(groups)
    x = rand(rng, dtype, (2, 4, 7, 6))
    w = rand(rng, "int8", (8, 4 // groups, 3, 2))
    zp_w = rng.integers(-3, 4, 8).astype(np.int32)
    zp_x = 11
    scales = (10 ** rng.uniform(-3, -1, 8)).astype(F32)
    got = call(
        "qnn.conv2d",
        x,
        w,
        np.int32(zp_x),
        zp_w,
        F32(0.1),
        scales,
        strides=stride,
        padding=pad,
        dilation=dil,
        groups=groups,
        channels=8,
        kernel_size=(3, 2),
    )
    assert got.dtype == np.int32
    assert np.array_equal(got, conv_ref(x, w, zp_x, zp_w, stride, pad, dil, groups))


def test_conv2d_nhwc_hwio_and_dequantized_float_conv():
    rng = np.random.default_rng(7)
    x, w = rand(rng, "int8", (1, 5, 5, 3)), rand(rng, "int8", (3, 3, 3, 4))  # NHWC, HWIO
    s_x, s_w = F32(0.05), (10 ** rng.uniform(-2, -1, 4)).astype(F32)
    attrs = dict(padding=(1, 1), data_layout="NHWC", kernel_layout="HWIO")
    acc = call("qnn.conv2d", x, w, np.int32(-4), np.int32(0), s_x, s_w, **attrs)
    want = conv_ref(
        x.transpose(0, 3, 1, 2),
        w.transpose(3, 2, 0, 1),
        -4,
        [0] * 4,
        (1, 1),
        (1, 1, 1, 1),
        (1, 1),
        1,
    ).transpose(0, 2, 3, 1)
    assert np.array_equal(acc, want)
    # The accumulator times s_x * s_w is the float conv of the dequantized tensors (padding with
    # the zero point is padding the dequantized tensor with 0).
    dq = get_op("qnn.dequantize")
    fx = dq(const(x), const(s_x), const(np.int32(-4)))
    fw = dq(const(w), const(s_w), const(np.int32(0)), axis=3)
    ref = P.interpret(get_op("nn.conv2d")(fx, fw, **attrs))[0]
    np.testing.assert_allclose(acc * F64(s_x) * s_w.astype(F64), ref, rtol=1e-5, atol=1e-5)


def test_conv2d_int16_accumulates_in_int64():
    x = np.full((1, 1, 3, 3), 32767, np.int16)
    w = np.full((1, 1, 3, 3), 127, np.int8)
    acc = call(
        "qnn.conv2d", x, w, np.int32(-32768), np.int32(-128), F32(1), F32(1), out_dtype="int64"
    )
    assert acc.dtype == np.int64 and acc.item() == 9 * 65535 * 255


def test_conv2d_type_errors_name_op_and_shapes():
    x, w = const(np.zeros((1, 3, 8, 8), np.int8)), const(np.zeros((16, 3, 3, 3), np.int8))
    conv = get_op("qnn.conv2d")
    with pytest.raises(
        TypeInferenceError,
        match=r"qnn.conv2d.*kernel_scale must be a scalar or "
        r"shape \(16,\) \(one per output channel of "
        r"kernel \(16, 3, 3, 3\).*got shape \(8,\)",
    ):
        P.interpret(conv(x, w, np.int32(0), np.int32(0), F32(1), np.ones(8, F32)))
    with pytest.raises(
        TypeInferenceError,
        match="kernel_zero_point must be a scalar or shape "
        r"\(16,\)",
    ):
        P.interpret(conv(x, w, np.int32(0), np.zeros(3, np.int32), F32(1), F32(1)))
    with pytest.raises(TypeInferenceError, match="data must be int8, uint8 or int16, got float32"):
        P.interpret(conv(np.zeros((1, 3, 8, 8), F32), w, np.int32(0), np.int32(0), F32(1), F32(1)))
    with pytest.raises(TypeInferenceError, match="input_scale must be a scalar, got shape"):
        P.interpret(conv(x, w, np.int32(0), np.int32(0), np.ones(3, F32), F32(1)))
    with pytest.raises(TypeInferenceError, match="kernel_scale must be float32, got float64"):
        P.interpret(conv(x, w, np.int32(0), np.int32(0), F32(1), np.ones(16)))
    with pytest.raises(TypeInferenceError, match="kernel .* has 3 input channels, but data"):
        P.interpret(
            conv(np.zeros((1, 4, 8, 8), np.int8), w, np.int32(0), np.int32(0), F32(1), F32(1))
        )


def test_dense_and_batch_matmul_match_int_matmul():
    rng = np.random.default_rng(5)
    x, w = rand(rng, "uint8", (2, 3, 10)), rand(rng, "int8", (4, 10))
    zp_w = np.array([0, 1, -2, 3], np.int32)
    got = call("qnn.dense", x, w, np.int32(128), zp_w, F32(0.1), np.ones(4, F32), units=4)
    want = np.einsum("abk,uk->abu", x.astype(np.int64) - 128, w.astype(np.int64) - zp_w[:, None])
    assert got.shape == (2, 3, 4) and np.array_equal(got, want)

    a, b = rand(rng, "int8", (1, 5, 6)), rand(rng, "int8", (3, 7, 6))  # b: (B, N, K)
    got = call("qnn.batch_matmul", a, b, np.int32(2), np.int32(-1), F32(1), F32(1))
    want = np.einsum("xmk,bnk->bmn", a.astype(np.int64) - 2, b.astype(np.int64) + 1)
    assert got.shape == (3, 5, 7) and np.array_equal(got, want)
    got = call(
        "qnn.batch_matmul",
        a.transpose(0, 2, 1),
        b.transpose(0, 2, 1),
        np.int32(2),
        np.int32(-1),
        F32(1),
        F32(1),
        transpose_a=True,
        transpose_b=False,
    )
    assert np.array_equal(got, want)


def test_dense_and_batch_matmul_type_errors():
    with pytest.raises(
        TypeInferenceError,
        match=r"qnn.dense.*data \(2, 9\) has 9 input features "
        r"but weight \(4, 10\) has 10",
    ):
        call(
            "qnn.dense",
            np.zeros((2, 9), np.int8),
            np.zeros((4, 10), np.int8),
            np.int32(0),
            np.int32(0),
            F32(1),
            F32(1),
        )
    with pytest.raises(
        TypeInferenceError,
        match=r"kernel_scale must be a scalar or shape \(4,\) "
        r"\(one per row",
    ):
        call(
            "qnn.dense",
            np.zeros((2, 10), np.int8),
            np.zeros((4, 10), np.int8),
            np.int32(0),
            np.int32(0),
            F32(1),
            np.ones(5, F32),
        )
    with pytest.raises(TypeInferenceError, match="has 6 columns but y"):
        call(
            "qnn.batch_matmul",
            np.zeros((1, 5, 6), np.int8),
            np.zeros((1, 7, 5), np.int8),
            np.int32(0),
            np.int32(0),
            F32(1),
            F32(1),
        )
    with pytest.raises(TypeInferenceError, match="batch sizes"):
        call(
            "qnn.batch_matmul",
            np.zeros((2, 5, 6), np.int8),
            np.zeros((3, 7, 6), np.int8),
            np.int32(0),
            np.int32(0),
            F32(1),
            F32(1),
        )
