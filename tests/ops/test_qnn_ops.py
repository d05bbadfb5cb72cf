"""qnn.requantize, qnn.conv2d/dense/batch_matmul, qnn.add/subtract/mul and qnn.concatenate.

"tflite" results are checked against scalar Python-int transcriptions of TFLite's reference
kernels (the helpers of test_fixedpoint.py, written from the C++ formulas); "onnx" results
against float32 scalars with an exact (Fraction-based) fused multiply-add; the integer ops
against naive loops. A few golden values were produced by the real runtimes (TFLite's reference
kernels from LiteRT 2.3, ONNX Runtime 1.31 on x86-64 with AVX2) and pin the cases where a
plausible-looking formula differs from what they compute.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fixedpoint import mbqm64_ref, mbqm_ref, quantize_multiplier_ref, rdbpot_ref, srdhm_ref

import partita as P
from partita.errors import AttrError, InterpreterError, TypeInferenceError
from partita.ir import Tuple, const
from partita.ops import get_op

F32, F64 = np.float32, np.float64
RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767),
         "int32": (-(2**31), 2**31 - 1)}


def call(name, *args, **attrs):
    """Interpret ``name`` applied to constants (a tuple argument becomes a Tuple node)."""
    args = [Tuple([const(np.asarray(a)) for a in x]) if isinstance(x, tuple) else
            const(np.asarray(x)) for x in args]
    return P.interpret(get_op(name)(*args, **attrs))[0]


def clamp(v: int, dtype: str) -> int:
    lo, hi = RANGE[dtype]
    return min(max(v, lo), hi)


def rand(rng, dtype, shape):
    lo, hi = RANGE[dtype]
    return rng.integers(lo, hi, shape, endpoint=True).astype(dtype)


def f32_round(r: Fraction) -> F32:
    """The float32 nearest to the exact rational r, ties to even."""
    c = F32(float(r))
    near = [np.nextafter(c, F32(-np.inf)), c, np.nextafter(c, F32(np.inf))]
    return min(near, key=lambda n: (abs(Fraction(float(n)) - r), int(n.view(np.int32)) & 1))


def fma_ref(x, y, z) -> F32:
    return f32_round(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)))


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
        want = requantize_tflite_ref(x[idx], s_in[c], int(zp_in[c]), s_out, int(zp_out),
                                     out_dtype)
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
    got = call("qnn.requantize", x, s_in, np.int32(-3), s_out, np.int32(10), axis=-1,
               out_dtype="uint8", semantics="onnx")
    for (i, c), v in np.ndenumerate(x):
        scale = F32(s_in[c] / s_out)  # one float32 division, as ORT's X * W / Y
        value = F32(F32(int(v) + 3) * scale)  # float32(int) rounds for |v| > 2**24, as MLAS
        assert got[i, c] == clamp(round(float(value)) + 10, "uint8")  # round(): half even


def test_requantize_type_errors():
    x = const(np.zeros((2, 4), np.int32))
    rq = get_op("qnn.requantize")
    with pytest.raises(TypeInferenceError, match=r"qnn.requantize.*input_scale must be a scalar "
                                                  r"or shape \(4,\).*got shape \(3,\)"):
        P.interpret(rq(x, np.ones(3, F32), np.int32(0), F32(1), np.int32(0)))
    with pytest.raises(TypeInferenceError, match="input_scale must be float32 or float64"):
        P.interpret(rq(x, np.float16(1), np.int32(0), F32(1), np.int32(0)))
    with pytest.raises(TypeInferenceError, match="data must be int8, uint8, int16, int32 or "
                                                 "int64, got float32"):
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


@pytest.mark.parametrize("dtype, groups, stride, pad, dil", [
    ("int8", 1, (1, 1), (1, 1, 1, 1), (1, 1)),
    ("uint8", 2, (2, 1), (0, 1, 2, 0), (1, 2)),
    ("int8", 4, (1, 2), (2, 2, 0, 1), (2, 1)),  # depthwise
])
def test_conv2d_matches_naive_loop(dtype, groups, stride, pad, dil):
    rng = np.random.default_rng(groups)
    x = rand(rng, dtype, (2, 4, 7, 6))
    w = rand(rng, "int8", (8, 4 // groups, 3, 2))
    zp_w = rng.integers(-3, 4, 8).astype(np.int32)
    zp_x = 11
    scales = (10 ** rng.uniform(-3, -1, 8)).astype(F32)
    got = call("qnn.conv2d", x, w, np.int32(zp_x), zp_w, F32(0.1), scales, strides=stride,
               padding=pad, dilation=dil, groups=groups, channels=8, kernel_size=(3, 2))
    assert got.dtype == np.int32
    assert np.array_equal(got, conv_ref(x, w, zp_x, zp_w, stride, pad, dil, groups))


def test_conv2d_nhwc_hwio_and_dequantized_float_conv():
    rng = np.random.default_rng(7)
    x, w = rand(rng, "int8", (1, 5, 5, 3)), rand(rng, "int8", (3, 3, 3, 4))  # NHWC, HWIO
    s_x, s_w = F32(0.05), (10 ** rng.uniform(-2, -1, 4)).astype(F32)
    attrs = dict(padding=(1, 1), data_layout="NHWC", kernel_layout="HWIO")
    acc = call("qnn.conv2d", x, w, np.int32(-4), np.int32(0), s_x, s_w, **attrs)
    want = conv_ref(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), -4, [0] * 4, (1, 1),
                    (1, 1, 1, 1), (1, 1), 1).transpose(0, 2, 3, 1)
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
    acc = call("qnn.conv2d", x, w, np.int32(-32768), np.int32(-128), F32(1), F32(1),
               out_dtype="int64")
    assert acc.dtype == np.int64 and acc.item() == 9 * 65535 * 255


def test_conv2d_type_errors_name_op_and_shapes():
    x, w = const(np.zeros((1, 3, 8, 8), np.int8)), const(np.zeros((16, 3, 3, 3), np.int8))
    conv = get_op("qnn.conv2d")
    with pytest.raises(TypeInferenceError, match=r"qnn.conv2d.*kernel_scale must be a scalar or "
                                                  r"shape \(16,\) \(one per output channel of "
                                                  r"kernel \(16, 3, 3, 3\).*got shape \(8,\)"):
        P.interpret(conv(x, w, np.int32(0), np.int32(0), F32(1), np.ones(8, F32)))
    with pytest.raises(TypeInferenceError, match="kernel_zero_point must be a scalar or shape "
                                                 r"\(16,\)"):
        P.interpret(conv(x, w, np.int32(0), np.zeros(3, np.int32), F32(1), F32(1)))
    with pytest.raises(TypeInferenceError, match="data must be int8, uint8 or int16, got "
                                                 "float32"):
        P.interpret(conv(np.zeros((1, 3, 8, 8), F32), w, np.int32(0), np.int32(0), F32(1),
                         F32(1)))
    with pytest.raises(TypeInferenceError, match="input_scale must be a scalar, got shape"):
        P.interpret(conv(x, w, np.int32(0), np.int32(0), np.ones(3, F32), F32(1)))
    with pytest.raises(TypeInferenceError, match="kernel_scale must be float32, got float64"):
        P.interpret(conv(x, w, np.int32(0), np.int32(0), F32(1), np.ones(16)))
    with pytest.raises(TypeInferenceError, match="kernel .* has 3 input channels, but data"):
        P.interpret(conv(np.zeros((1, 4, 8, 8), np.int8), w, np.int32(0), np.int32(0),
                         F32(1), F32(1)))


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
    got = call("qnn.batch_matmul", a.transpose(0, 2, 1), b.transpose(0, 2, 1), np.int32(2),
               np.int32(-1), F32(1), F32(1), transpose_a=True, transpose_b=False)
    assert np.array_equal(got, want)


def test_dense_and_batch_matmul_type_errors():
    with pytest.raises(TypeInferenceError, match=r"qnn.dense.*data \(2, 9\) has 9 input features "
                                                 r"but weight \(4, 10\) has 10"):
        call("qnn.dense", np.zeros((2, 9), np.int8), np.zeros((4, 10), np.int8), np.int32(0),
             np.int32(0), F32(1), F32(1))
    with pytest.raises(TypeInferenceError, match=r"kernel_scale must be a scalar or shape \(4,\) "
                                                 r"\(one per row"):
        call("qnn.dense", np.zeros((2, 10), np.int8), np.zeros((4, 10), np.int8), np.int32(0),
             np.int32(0), F32(1), np.ones(5, F32))
    with pytest.raises(TypeInferenceError, match="has 6 columns but y"):
        call("qnn.batch_matmul", np.zeros((1, 5, 6), np.int8), np.zeros((1, 7, 5), np.int8),
             np.int32(0), np.int32(0), F32(1), F32(1))
    with pytest.raises(TypeInferenceError, match="batch sizes"):
        call("qnn.batch_matmul", np.zeros((2, 5, 6), np.int8), np.zeros((3, 7, 6), np.int8),
             np.int32(0), np.int32(0), F32(1), F32(1))


# ---- add, subtract, mul: tflite ----------------------------------------------------------------


def tflite_add_ref(x1, x2, s1, z1, s2, z2, so, zo, dtype, sign=1):
    """TFLite ADD / SUB (input2 multiplier negated) on Python ints."""
    left = 15 if dtype == "int16" else 20
    twice_max = 2 * max(float(s1), float(s2))
    q1, e1 = quantize_multiplier_ref(float(s1) / twice_max)
    q2, e2 = quantize_multiplier_ref(float(s2) / twice_max)
    qo, eo = quantize_multiplier_ref(twice_max / ((1 << left) * float(so)))
    a = rdbpot_ref(srdhm_ref((int(x1) - z1) * (1 << left), q1), -e1)
    b = rdbpot_ref(srdhm_ref((int(x2) - z2) * (1 << left), sign * q2), -e2)
    return clamp(rdbpot_ref(srdhm_ref(a + b, qo), -eo) + zo, dtype)


def tflite_mul_ref(x1, x2, s1, z1, s2, z2, so, zo, dtype):
    """TFLite MUL: the multiplier's expression is evaluated in float32."""
    q, shift = quantize_multiplier_ref(float(F32(F32(s1) * F32(s2)) / F32(so)))
    return clamp(mbqm_ref((int(x1) - z1) * (int(x2) - z2), q, shift) + zo, dtype)


def binary_case(seed, dtype, mul=False):
    rng = np.random.default_rng(seed)
    lhs, rhs = rand(rng, dtype, (2, 3, 4)), rand(rng, dtype, (3, 1))
    s1, s2, so = (F32(10 ** rng.uniform(-3, 0)) for _ in range(3))
    if mul:
        so = F32(s1 * s2 * 10 ** rng.uniform(-0.5, 2) * (256 if dtype == "int16" else 1))
    lo, hi = RANGE[dtype]
    z1, z2, zo = (0, 0, 0) if dtype == "int16" else rng.integers(lo, hi, 3, endpoint=True)
    return lhs, rhs, s1, int(z1), s2, int(z2), so, int(zo)


def run_binary(op, lhs, rhs, s1, z1, s2, z2, so, zo, **attrs):
    return call(op, lhs, rhs, s1, np.int32(z1), s2, np.int32(z2), so, np.int32(zo), **attrs)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["int8", "uint8", "int16"]),
       st.sampled_from(["qnn.add", "qnn.subtract", "qnn.mul"]))
def test_binary_tflite_matches_scalar_reference(seed, dtype, op):
    case = binary_case(seed, dtype, mul=op == "qnn.mul")
    lhs, rhs, s1, z1, s2, z2, so, zo = case
    got = run_binary(op, *case)
    assert got.dtype == dtype and got.shape == (2, 3, 4)
    for idx in np.ndindex(*got.shape):
        x1, x2 = lhs[idx], rhs[idx[1], 0]
        if op == "qnn.mul":
            want = tflite_mul_ref(x1, x2, s1, z1, s2, z2, so, zo, dtype)
        else:
            want = tflite_add_ref(x1, x2, s1, z1, s2, z2, so, zo, dtype,
                                  -1 if op == "qnn.subtract" else 1)
        assert got[idx] == want, (idx, x1, x2)
        # Sanity: within one step of the real-valued result wherever it is not saturated.
        r1, r2 = float(s1) * (int(x1) - z1), float(s2) * (int(x2) - z2)
        real = {"qnn.add": r1 + r2, "qnn.subtract": r1 - r2, "qnn.mul": r1 * r2}[op]
        exact = real / float(so) + zo
        if RANGE[dtype][0] < exact < RANGE[dtype][1]:
            assert abs(int(got[idx]) - exact) <= 1.0


def test_binary_tflite_hand_computed():
    one, zero = F32(1), 0
    a, b = np.array([1, 100, -7], np.int8), np.array([3, 100, -128], np.int8)
    args = (one, zero, one, zero, one, zero)
    assert run_binary("qnn.add", a, b, *args).tolist() == [4, 127, -128]
    assert run_binary("qnn.subtract", a, b, *args).tolist() == [-2, 0, 121]
    # 0.125 * x1 * x2 + 3 = 3.375, 1253, 115; the first rounds twice (TFLite's double
    # rounding): SRDHM(3, 2**30) = 1.5 -> 2, then 2 / 4 = 0.5 -> 1, so 4 and not 3.
    assert run_binary("qnn.mul", a, b, F32(0.5), 0, F32(0.25), 0, F32(1), 3).tolist() == \
        [4, 127, 115]


def test_subtract_is_not_the_negated_sum():
    # (-4 * 0.65 - -128 * 0.45) / 2 = 27.5 exactly. TFLite's fixed-point path rounds this tie
    # up and the mirrored -27.5 toward zero (SRDHM's nudge), so b - a is not -(a - b).
    a, b = np.array([-4], np.int8), np.array([-128], np.int8)
    ab = run_binary("qnn.subtract", a, b, F32(0.65), 0, F32(0.45), 0, F32(2.0), 0)
    ba = run_binary("qnn.subtract", b, a, F32(0.45), 0, F32(0.65), 0, F32(2.0), 0)
    assert (ab.tolist(), ba.tolist()) == ([28], [-27])
    assert ab[0] == tflite_add_ref(-4, -128, F32(0.65), 0, F32(0.45), 0, F32(2.0), 0, "int8", -1)


def test_mul_tflite_golden_float32_multiplier():
    # From TFLite's reference MUL: a multiplier computed in double would give 27.
    args = (F32(0.2618977), -45, F32(0.0014611053), 123, F32(0.006358189), -127)
    got = run_binary("qnn.mul", np.array([-120], np.int8), np.array([89], np.int8), *args)
    assert got.tolist() == [26]


def test_add_tflite_refuses_too_small_output_scale():
    with pytest.raises(InterpreterError, match=r"qnn.add.*output multiplier in \(0, 1\)"):
        run_binary("qnn.add", np.zeros(2, np.int8), np.zeros(2, np.int8), F32(1), 0, F32(1), 0,
                   F32(1e-7), 0)


def test_binary_per_channel_params():
    rng = np.random.default_rng(9)
    lhs, rhs = rand(rng, "int8", (2, 3)), rand(rng, "int8", (2, 3))
    s1 = np.array([0.1, 0.2, 0.3], F32)
    z2 = np.array([1, -1], np.int32)
    got = call("qnn.add", lhs, rhs, s1, np.int32(0), F32(0.2), z2, F32(0.4), np.int32(0),
               rhs_axis=0)
    for i, j in np.ndindex(2, 3):
        want = tflite_add_ref(lhs[i, j], rhs[i, j], s1[j], 0, F32(0.2), int(z2[i]), F32(0.4), 0,
                              "int8")
        assert got[i, j] == want


# ---- add, subtract, mul: onnx ------------------------------------------------------------------


def ort_add_ref(a, sa, za, b, sb, zb, sc, zc, dtype):
    """MLAS QLinearAdd (AVX2): fixed part and both terms fused multiply-adds in float32."""
    ra, rb = F32(F32(sa) / F32(sc)), F32(F32(sb) / F32(sc))
    fixed = F32(F32(zc) - fma_ref(ra, F32(za), F32(rb * F32(zb))))
    v = fma_ref(F32(int(a)), ra, fma_ref(F32(int(b)), rb, fixed))
    return clamp(round(float(v)), dtype)


def dq(x, s, z):
    return F32(F32(int(x) - z) * F32(s))


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["int8", "uint8", "int16"]))
def test_binary_onnx_matches_float32_formulas(seed, dtype):
    lhs, rhs, s1, z1, s2, z2, so, zo = case = binary_case(seed, dtype)
    add = run_binary("qnn.add", *case, semantics="onnx")
    sub = run_binary("qnn.subtract", *case, semantics="onnx")
    mul_case = binary_case(seed, dtype, mul=True)
    mul = run_binary("qnn.mul", *mul_case, semantics="onnx")
    ms1, mz1, ms2, mz2, mso, mzo = mul_case[2:]
    for idx in np.ndindex(2, 3, 4):
        x1, x2 = lhs[idx], rhs[idx[1], 0]
        # rhs (3, 1) is broadcast along the innermost axis: ORT hands it over as the scalar B.
        d = dq(x1, s1, z1) - dq(x2, s2, z2)
        assert sub[idx] == clamp(round(float(F32(d) / so)) + zo, dtype)
        if dtype == "int16":
            want = clamp(round(float(F32(dq(x1, s1, z1) + dq(x2, s2, z2)) / so)) + zo, dtype)
            assert add[idx] == want
            prod = F32(dq(x1, ms1, mz1) * dq(x2, ms2, mz2))
            assert mul[idx] == clamp(round(float(prod / mso)) + mzo, dtype)
        else:
            assert add[idx] == ort_add_ref(x1, s1, z1, x2, s2, z2, so, zo, dtype)
            scale = F32(F32(ms1 * ms2) / mso)
            p = F32((int(x1) - mz1) * (int(x2) - mz2))
            assert mul[idx] == clamp(round(float(F32(F32(p * scale) + F32(mzo)))), dtype)


def test_add_onnx_goldens_from_onnxruntime():
    # lhs spans, rhs is the per-span scalar; fma(b, r_b, f) is one rounding: unfused gives -109.
    got = run_binary("qnn.add", np.array([13, 0], np.int8), np.array([59], np.int8),
                     F32(0.010052932), 99, F32(0.06940681), 47, F32(0.0012419751), -83,
                     semantics="onnx")
    assert got[0] == -108
    # lhs is the scalar, so ORT swaps the roles; the fixed part is fma(r_a, zp_a, r_b * zp_b).
    # The exact result is 159.4999956; ORT's float32 arithmetic lands on 159.5 -> 160.
    got = run_binary("qnn.add", np.array([108], np.uint8), np.array([238, 0], np.uint8),
                     F32(0.30187356), 172, F32(0.6563733), 216, F32(0.88721657), 165,
                     semantics="onnx")
    assert got[0] == 160


def test_binary_type_errors():
    add = get_op("qnn.add")
    i8, u8 = const(np.zeros((2, 3), np.int8)), const(np.zeros((2, 3), np.uint8))
    p = [const(F32(1)), const(np.int32(0))]
    with pytest.raises(TypeInferenceError, match="qnn.add.*lhs and rhs must share one dtype, got "
                                                 "int8 and uint8"):
        P.interpret(add(i8, u8, *p, *p, *p))
    with pytest.raises(TypeInferenceError, match=r"lhs_scale must be a scalar or shape \(3,\) "
                                                 r"\(one per channel of lhs \(2, 3\)"):
        P.interpret(add(i8, i8, np.ones(2, F32), np.int32(0), *p, *p))
    with pytest.raises(TypeInferenceError, match="output_scale must be a scalar"):
        P.interpret(add(i8, i8, *p, *p, np.ones(3, F32), np.int32(0)))
    with pytest.raises(TypeInferenceError, match="do not broadcast"):
        P.interpret(add(i8, const(np.zeros((4,), np.int8)), *p, *p, *p))
    with pytest.raises(TypeInferenceError, match="lhs must be int8, uint8 or int16, got int32"):
        P.interpret(add(np.zeros(3, np.int32), np.zeros(3, np.int32), *p, *p, *p))


def test_binary_out_dtype_and_commutativity_flags():
    assert get_op("qnn.add").commutative and get_op("qnn.mul").commutative
    assert not get_op("qnn.subtract").commutative
    got = run_binary("qnn.add", np.array([-100], np.int8), np.array([-100], np.int8), F32(1), 0,
                     F32(1), 0, F32(1), 0, out_dtype="int16")
    assert got.dtype == np.int16 and got.tolist() == [-200]


# ---- concatenate -------------------------------------------------------------------------------


def test_concatenate_copies_equal_params_and_rescales_others():
    a = np.array([[10, 11]], np.uint8)
    b = np.array([[10, 11]], np.uint8)
    scales, zps = (F32(0.5), F32(1.0)), (np.int32(10), np.int32(0))
    # a: scale 0.5 * (1 / 1) = 0.5, bias -5: 10 -> 0, 11 -> 0.5 (half away: 1, half even: 0).
    got = call("qnn.concatenate", (a, b), scales, zps, F32(1.0), np.int32(0), axis=0)
    assert got.tolist() == [[0, 1], [10, 11]]
    got = call("qnn.concatenate", (a, b), scales, zps, F32(1.0), np.int32(0), axis=0,
               semantics="onnx")
    assert got.tolist() == [[0, 0], [10, 11]]


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["int8", "uint8"]))
def test_concatenate_matches_float32_formulas(seed, dtype):
    rng = np.random.default_rng(seed)
    xs = tuple(rand(rng, dtype, (2, k)) for k in (3, 4))
    ss = tuple(F32(10 ** rng.uniform(-3, 0)) for _ in xs)
    lo, hi = RANGE[dtype]
    zs = tuple(np.int32(rng.integers(lo, hi, endpoint=True)) for _ in xs)
    so, zo = F32(10 ** rng.uniform(-3, 0)), int(rng.integers(lo, hi, endpoint=True))
    tfl = call("qnn.concatenate", xs, ss, zs, so, np.int32(zo), axis=1)
    ort = call("qnn.concatenate", xs, ss, zs, so, np.int32(zo), axis=1, semantics="onnx")
    col = 0
    for x, s, z in zip(xs, ss, zs):
        scale = F32(s * F32(F32(1) / so))
        bias = F32(F32(-int(z)) * scale)
        for (i, j), v in np.ndenumerate(x):
            t = F32(F32(F32(int(v)) * scale) + bias)
            away = int(np.sign(t) * np.floor(abs(float(t)) + 0.5))
            assert tfl[i, col + j] == clamp(away + zo, dtype)
            assert ort[i, col + j] == clamp(round(float(F32(dq(v, s, int(z)) / so))) + zo, dtype)
        col += x.shape[1]


def test_concatenate_type_errors():
    xs = (np.zeros((2, 3), np.int8), np.zeros((2, 4), np.int8))
    with pytest.raises(TypeInferenceError, match="input_scales has 1 entries but data has 2"):
        call("qnn.concatenate", xs, (F32(1),), (np.int32(0), np.int32(0)), F32(1), np.int32(0),
             axis=1)
    with pytest.raises(TypeInferenceError, match="differ outside axis"):
        call("qnn.concatenate", xs, (F32(1), F32(1)), (np.int32(0), np.int32(0)), F32(1),
             np.int32(0), axis=0)
    with pytest.raises(TypeInferenceError, match="data field 1 must be int8, uint8 or int16"):
        call("qnn.concatenate", (xs[0], np.zeros((2, 4), F32)), (F32(1), F32(1)),
             (np.int32(0), np.int32(0)), F32(1), np.int32(0), axis=1)
