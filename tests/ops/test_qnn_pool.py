"""qnn.avg_pool2d and qnn.mean against independent scalar transcriptions of TFLite's reference
kernels (pooling.h, reduce.h, integer_ops/mean.h, common.h) and ONNX Runtime's CPU kernels
(qlinear_pool.cc, MLAS qlgavgpool.cpp, QuantizeLinear): plain Python ints and float32 scalars in
loops, nothing shared with the implementation."""

import itertools
import math
from fractions import Fraction
from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import partita as P
from partita import get_op, var

F32 = np.float32
RANGE = {"int8": (-128, 127), "uint8": (0, 255)}
INT32_MIN = -(2**31)


# ---- scalar TFLite arithmetic (common.h / gemmlowp), Python ints -------------------------------


def c_div(a, b):
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def wrap32(x):
    return (x + 2**31) % 2**32 - 2**31


def std_round(x):
    """std::round: half away from zero."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def quantize_multiplier(real):
    if real == 0:
        return 0, 0
    frac, exp = math.frexp(real)
    q = std_round(frac * 2**31)
    if q == 2**31:
        q, exp = q // 2, exp + 1
    return (0, 0) if exp < -31 else (q, exp)


def srdhm(a, b):
    if a == b == INT32_MIN:
        return 2**31 - 1
    ab = a * b
    return c_div(ab + (2**30 if ab >= 0 else 1 - 2**30), 2**31)


def rdpot(x, exponent):
    mask = (1 << exponent) - 1
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if (x & mask) > threshold else 0)


def mbqm(x, multiplier, shift):
    """MultiplyByQuantizedMultiplier(int32 x, multiplier, shift), double rounding."""
    left, right = max(shift, 0), max(-shift, 0)
    return rdpot(srdhm(wrap32(x * (1 << left)), multiplier), right)


def clamp(v, dtype):
    lo, hi = RANGE[dtype]
    return min(max(v, lo), hi)


def requantize(v, s_in, zp_in, s_out, zp_out, dtype):
    """reference_ops::Requantize (TFLite QUANTIZE int8->int8)."""
    m, e = quantize_multiplier(float(F32(s_in)) / float(F32(s_out)))
    return clamp(mbqm(v - zp_in, m, e) + zp_out, dtype)


# ---- running the ops -----------------------------------------------------------------------------


def run(name, data, s_in, zp_in, s_out, zp_out, **attrs):
    call = get_op(name)(data, F32(s_in), np.int32(zp_in), F32(s_out), np.int32(zp_out), **attrs)
    ty = P.infer_type(call)
    (out,) = P.interpret(call)
    assert (out.shape, out.dtype.name) == (ty.shape, ty.dtype)
    return out


def random_data(rng, shape, dtype):
    lo, hi = RANGE[dtype]
    return rng.integers(lo, hi + 1, shape).astype(dtype)


def random_params(rng, dtype, same=False):
    lo, hi = RANGE[dtype]
    s_in, zp_in = float(F32(rng.uniform(0.005, 0.2))), int(rng.integers(lo, hi + 1))
    if same:
        return s_in, zp_in, s_in, zp_in
    return s_in, zp_in, float(F32(s_in * rng.uniform(0.3, 3.0))), int(rng.integers(lo, hi + 1))


# ---- TFLite AVERAGE_POOL_2D (reference_integer_ops / reference_ops), NHWC ------------------------


def tflite_padding(size, k, stride, same):
    """ComputePaddingHeightWidth: (out, pad_before, pad_after)."""
    out = (size + stride - 1) // stride if same else (size - k + stride) // stride
    total = max((out - 1) * stride + k - size, 0)
    return out, total // 2, total - total // 2


def tflite_avg_pool(x, k, stride, pad_top_left, out_hw, dtype):
    n_, h, w, c_ = x.shape
    out = np.zeros((n_, *out_hw, c_), np.int64)
    for b, oy, ox, c in itertools.product(range(n_), range(out_hw[0]), range(out_hw[1]),
                                          range(c_)):
        y0, x0 = oy * stride[0] - pad_top_left[0], ox * stride[1] - pad_top_left[1]
        acc = count = 0
        for fy in range(max(0, -y0), min(k[0], h - y0)):
            for fx in range(max(0, -x0), min(k[1], w - x0)):
                acc += int(x[b, y0 + fy, x0 + fx, c])
                count += 1
        acc = c_div(acc + count // 2, count) if acc > 0 else c_div(acc - count // 2, count)
        out[b, oy, ox, c] = clamp(acc, dtype)
    return out


@settings(max_examples=40, deadline=None)
@given(dtype=st.sampled_from(["int8", "uint8"]), h=st.integers(1, 7), w=st.integers(1, 7),
       k=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       stride=st.tuples(st.integers(1, 3), st.integers(1, 3)), same=st.booleans(),
       layout=st.sampled_from(["NHWC", "NCHW"]), seed=st.integers(0, 2**16))
def test_avg_pool_tflite_matches_reference_kernel(dtype, h, w, k, stride, same, layout, seed):
    if not same and (k[0] > h or k[1] > w):
        return
    rng = np.random.default_rng(seed)
    x = random_data(rng, (2, h, w, 3), dtype)
    oh, top, bottom = tflite_padding(h, k[0], stride[0], same)
    ow, left, right = tflite_padding(w, k[1], stride[1], same)
    expected = tflite_avg_pool(x, k, stride, (top, left), (oh, ow), dtype)
    s, zp, _, _ = random_params(rng, dtype)
    data = x if layout == "NHWC" else x.transpose(0, 3, 1, 2)
    out = run("qnn.avg_pool2d", data, s, zp, s, zp, pool_size=k, strides=stride,
              padding=(top, left, bottom, right), layout=layout)
    out = out if layout == "NHWC" else out.transpose(0, 2, 3, 1)
    np.testing.assert_array_equal(out, expected)


def test_avg_pool_tflite_rounds_half_away_from_zero():
    # Windows of two: 1+2 -> 2, -1-2 -> -2, -1+0 -> -1 (half away), 3+4 -> 4, -3-4 -> -4.
    x = np.array([1, 2, -1, -2, -1, 0, 3, 4, -3, -4], np.int8).reshape(1, 1, 10, 1)
    out = run("qnn.avg_pool2d", x, 0.5, 0, 0.5, 0, pool_size=(1, 2), strides=(1, 2),
              layout="NHWC")
    assert out.ravel().tolist() == [2, -2, -1, 4, -4]


def test_avg_pool_tflite_differing_params_requantize_after_pooling():
    rng = np.random.default_rng(1)
    for dtype in ("int8", "uint8"):
        x = random_data(rng, (1, 5, 6, 4), dtype)
        s_in, zp_in, s_out, zp_out = random_params(rng, dtype)
        raw = tflite_avg_pool(x, (3, 2), (2, 2), (1, 0), (3, 3), dtype)
        expected = [requantize(int(v), s_in, zp_in, s_out, zp_out, dtype) for v in raw.ravel()]
        out = run("qnn.avg_pool2d", x, s_in, zp_in, s_out, zp_out, pool_size=(3, 2),
                  strides=(2, 2), padding=(1, 0, 1, 0), layout="NHWC")
        np.testing.assert_array_equal(out.ravel(), expected)


def test_avg_pool_tflite_scales_within_1e6_count_as_equal():
    # TFLite's Prepare treats |s_in - s_out| <= 1e-6 as equal and never rescales: with scales
    # 1e-6 and 1.5e-6 the raw average passes through (a rescale would divide it by 1.5).
    x = np.full((1, 2, 2, 1), 90, np.int8)
    out = run("qnn.avg_pool2d", x, 1e-6, 0, 1.5e-6, 0, pool_size=(2, 2), layout="NHWC")
    assert out.ravel().tolist() == [90]
    out = run("qnn.avg_pool2d", x, 1e-3, 0, 1.5e-3, 0, pool_size=(2, 2), layout="NHWC")
    assert out.ravel().tolist() == [60]


def test_avg_pool_tflite_count_include_pad_counts_padding_as_zero_point():
    # All 10 with zero point 4, 3x3 window, padding 1: a corner window has 4 taps of 10 and 5 of
    # padding (4 each): 60 / 9 -> 7; an edge window 6 taps and 3 pads: 72 / 9 = 8; the centre 10.
    x = np.full((1, 1, 3, 3), 10, np.int8)
    out = run("qnn.avg_pool2d", x, 0.1, 4, 0.1, 4, pool_size=(3, 3), padding=(1, 1, 1, 1),
              count_include_pad=True)
    assert out[0, 0].tolist() == [[7, 8, 7], [8, 10, 8], [7, 8, 7]]
    out = run("qnn.avg_pool2d", x, 0.1, 4, 0.1, 4, pool_size=(3, 3), padding=(1, 1, 1, 1))
    assert (out == 10).all()


@pytest.mark.parametrize("semantics", ["tflite", "onnx"])
def test_avg_pool_empty_window_gives_output_zero_point(semantics):
    # Dilation 3 over a 1x1 input padded by 2: every window's taps fall in the padding.
    x = np.array([[[[100]]]], np.uint8)
    out = run("qnn.avg_pool2d", x, 0.1, 3, 0.2, 7, pool_size=(2, 2), dilation=(3, 3),
              padding=(2, 2, 2, 2), semantics=semantics)
    assert out.shape == (1, 1, 2, 2) and (out == 7).all()


# ---- ORT QLinearAveragePool (qlinear_pool.cc + MLAS global average), NCHW ----------------------


def ort_out_size(size, k, stride, before, after, ceil_mode):
    num = size + before + after - k
    out = (-(-num // stride) if ceil_mode else num // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + before:
        out -= 1
    return out


def mlas_global(values, s_in, zp_in, s_out, zp_out, dtype):
    acc = wrap32(sum(values) - zp_in * len(values))
    scale = F32(s_in) / (F32(s_out) * F32(len(values)))
    return clamp(int(np.rint(F32(F32(acc) * scale))) + zp_out, dtype)


def ort_avg_pool(x, k, stride, pads, ceil_mode, include_pad, params, dtype):
    s_in, zp_in, s_out, zp_out = params
    n_, c_, h, w = x.shape
    top, left, bottom, right = pads
    oh = ort_out_size(h, k[0], stride[0], top, bottom, ceil_mode)
    ow = ort_out_size(w, k[1], stride[1], left, right, ceil_mode)
    out = np.zeros((n_, c_, oh, ow), np.int64)
    for b, c in itertools.product(range(n_), range(c_)):
        if (k[0], k[1]) == (h, w) and not any(pads):
            out[b, c, 0, 0] = mlas_global([int(v) for v in x[b, c].ravel()], *params, dtype)
            continue
        xf = [[F32(s_in) * F32(int(v) - zp_in) for v in row] for row in x[b, c]]
        for ph, pw in itertools.product(range(oh), range(ow)):
            h0, w0 = ph * stride[0] - top, pw * stride[1] - left
            h1, w1 = min(h0 + k[0], h), min(w0 + k[1], w)
            h0, w0 = max(h0, 0), max(w0, 0)
            y = F32(0.0)
            for i in range(h0, h1):
                for j in range(w0, w1):
                    y = F32(y + xf[i][j])
            y = F32(y / F32(k[0] * k[1] if include_pad else (h1 - h0) * (w1 - w0)))
            out[b, c, ph, pw] = clamp(int(np.rint(F32(F32(y / F32(s_out)) + F32(zp_out)))),
                                      dtype)
    return out


@settings(max_examples=40, deadline=None)
@given(dtype=st.sampled_from(["int8", "uint8"]), h=st.integers(2, 6), w=st.integers(2, 6),
       k=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       pads=st.tuples(*[st.integers(0, 2)] * 4), ceil_mode=st.booleans(),
       include_pad=st.booleans(), nhwc=st.booleans(), seed=st.integers(0, 2**16))
def test_avg_pool_onnx_matches_qlinear_average_pool(dtype, h, w, k, stride, pads, ceil_mode,
                                                    include_pad, nhwc, seed):
    pads = tuple(min(p, kk - 1) for p, kk in zip(pads, (k[0], k[1], k[0], k[1])))
    if k[0] > h + pads[0] + pads[2] or k[1] > w + pads[1] + pads[3]:
        return
    rng = np.random.default_rng(seed)
    x = random_data(rng, (1, 3, h, w), dtype)
    params = random_params(rng, dtype)
    expected = ort_avg_pool(x, k, stride, pads, ceil_mode, include_pad, params, dtype)
    data = x.transpose(0, 2, 3, 1) if nhwc else x
    out = run("qnn.avg_pool2d", data, *params, pool_size=k, strides=stride, padding=pads,
              ceil_mode=ceil_mode, count_include_pad=include_pad, semantics="onnx",
              layout="NHWC" if nhwc else "NCHW")
    np.testing.assert_array_equal(out.transpose(0, 3, 1, 2) if nhwc else out, expected)


def test_avg_pool_onnx_whole_image_window_takes_the_global_integer_path():
    rng = np.random.default_rng(7)
    for dtype in ("int8", "uint8"):
        x = random_data(rng, (2, 4, 5, 6), dtype)
        params = random_params(rng, dtype)
        out = run("qnn.avg_pool2d", x, *params, pool_size=(5, 6), semantics="onnx")
        expected = [[mlas_global([int(v) for v in x[b, c].ravel()], *params, dtype)
                     for c in range(4)] for b in range(2)]
        np.testing.assert_array_equal(out[:, :, 0, 0], expected)


def test_avg_pool_onnx_count_include_pad_divides_by_kernel_size_even_past_the_padding():
    # 1x3 input, window 1x2, stride 2, ceil mode: the last window holds one input tap and one tap
    # past the input; ORT divides by 2 anyway: (8 * 0.5) / 2 / 0.5 = 4.
    x = np.array([[[[8, 8, 8]]]], np.int8)
    out = run("qnn.avg_pool2d", x, 0.5, 0, 0.5, 0, pool_size=(1, 2), strides=(1, 2),
              ceil_mode=True, count_include_pad=True, semantics="onnx")
    assert out.ravel().tolist() == [8, 4]


def test_avg_pool_within_one_lsb_of_float_math():
    rng = np.random.default_rng(3)
    for dtype, semantics in itertools.product(("int8", "uint8"), ("tflite", "onnx")):
        x = random_data(rng, (1, 2, 6, 6), dtype)
        s_in, zp_in, s_out, zp_out = params = random_params(rng, dtype)
        out = run("qnn.avg_pool2d", x, *params, pool_size=(3, 3), strides=(1, 1),
                  padding=(1, 1, 1, 1), semantics=semantics)
        real = (x.astype(np.float64) - zp_in) * s_in
        windows = np.lib.stride_tricks.sliding_window_view(
            np.pad(real, [(0, 0), (0, 0), (1, 1), (1, 1)], constant_values=np.nan), (3, 3),
            axis=(2, 3))
        exact = np.nanmean(windows, axis=(-2, -1)) / s_out + zp_out
        exact = np.clip(exact, *RANGE[dtype])
        assert np.abs(out - exact).max() <= 1.0


# ---- TFLite MEAN -------------------------------------------------------------------------------


def groups(x, axes, keepdims):
    """{output index: [values]} of a reduction over ``axes``, in row-major order."""
    out = {}
    for idx in itertools.product(*map(range, x.shape)):
        key = tuple(0 if d in axes else i for d, i in enumerate(idx) if keepdims or d not in axes)
        out.setdefault(key, []).append(int(x[idx]))
    return out


def reduce_with(fn, x, axes, keepdims):
    shape = [1 if d in axes else n for d, n in enumerate(x.shape) if keepdims or d not in axes]
    out = np.zeros(shape, np.int64)
    for key, values in groups(x, axes, keepdims).items():
        out[key] = fn(values)
    return out


def floor_log2(n):
    k = 0
    while (2 << k) <= n:
        k += 1
    return k


def tflite_mean(values, s_in, zp_in, s_out, zp_out, dtype):
    """reference_ops::QuantizedMeanOrSum (integer rescale, TFLite >= 2.13)."""
    n = len(values)
    m, e = quantize_multiplier(float(F32(s_in)) / float(F32(s_out)))
    k = min(floor_log2(n), 32, 31 + e)
    m, e = (m << k) // n, e - k
    return clamp(mbqm(wrap32(wrap32(sum(values)) - zp_in * n), m, e) + zp_out, dtype)


AXES_CASES = [((2, 3, 4, 5), (1, 2), True), ((2, 3, 4, 5), (1, 2), False),
              ((2, 3, 4, 5), (2, 1), True), ((2, 3, 4, 5), (-3, -2), True),
              ((2, 3, 4, 5), (0, 3), False), ((2, 3, 4, 5), None, False),
              ((3, 7), (1,), True), ((3, 7), (0,), False), ((17,), (0,), False),
              ((1, 2, 3, 2), (2, 3), True), ((2, 1, 1, 3), (1, 2), True)]


@pytest.mark.parametrize("shape,axis,keepdims", AXES_CASES)
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_mean_tflite_matches_quantized_mean_or_sum(shape, axis, keepdims, dtype):
    rng = np.random.default_rng(len(shape) * 10 + (0 if axis is None else len(axis)))
    x = random_data(rng, shape, dtype)
    axes = tuple(range(x.ndim)) if axis is None else tuple(a % x.ndim for a in axis)
    for same in (False, True):
        params = random_params(rng, dtype, same)
        expected = reduce_with(partial(tflite_mean, s_in=params[0], zp_in=params[1],
                                       s_out=params[2], zp_out=params[3], dtype=dtype),
                               x, axes, keepdims)
        out = run("qnn.mean", x, *params, axis=axis, keepdims=keepdims)
        np.testing.assert_array_equal(out, expected)


def test_mean_tflite_hand_computed():
    x = np.array([[1, 2, 3, 4], [1, 2, 4, 0]], np.int8)
    # n = 4: M = 2**30, e = 1 -> k = 2, M' = 2**30, e' = -1: 10 -> 2.5 -> 3 (half away), 7 -> 2.
    out = run("qnn.mean", x, 0.5, 0, 0.5, 0, axis=(1,))
    assert out.tolist() == [3, 2]
    # n = 3 ([1, 2, 4]): k = 1, M' = 2**31 // 3, e' = 0: SRDHM(7, M') = 2.
    out = run("qnn.mean", x[1:, :3], 0.5, 0, 0.5, 0, axis=(1,))
    assert out.tolist() == [2]


def test_mean_tflite_reduce_nothing_copies_and_large_counts_clamp_the_shift():
    x = np.array([[5, -7]], np.int8)
    # exclude over every axis reduces nothing: TFLite's ReduceIsCopy ignores the quantization.
    out = run("qnn.mean", x, 0.1, 3, 0.7, -4, axis=(0, 1), exclude=True)
    assert out.tolist() == [[5, -7]]
    # A scale ratio of 2**-30 gives e = -29, so k is clamped to 31 + e = 2 (< log2(64) = 6).
    x = np.full((64,), 100, np.int8)
    params = (2.0**-30, 0, 1.0, 0)
    assert run("qnn.mean", x, *params).item() == tflite_mean([100] * 64, *params, "int8")


# ---- TFLite MEAN before 2.13 (EvalMeanReferenceOps) --------------------------------------------


def legacy_4d_int8(values, s_in, zp_in, s_out, zp_out):
    """reference_integer_ops::Mean."""
    n = len(values)
    m, e = quantize_multiplier(float(F32(s_in)) / float(F32(s_out)))
    acc = mbqm(wrap32(sum(v - zp_in for v in values)), m, e)
    acc = c_div(acc + n // 2, n) if acc > 0 else c_div(acc - n // 2, n)
    return clamp(acc + zp_out, "int8")


def legacy_4d_uint8(values, s_in, zp_in, s_out, zp_out):
    """reference_ops::Mean for uint8 (float-derived bias and multiplier)."""
    n = len(values)
    bias = zp_out - int(F32(F32(F32(zp_in) * F32(s_in)) / F32(s_out)))
    m, e = quantize_multiplier(float(F32(F32(s_in) / F32(F32(n) * F32(s_out)))))
    return clamp(mbqm(sum(values), m, e) + bias, "uint8")


def legacy_float(values, s_in, zp_in, s_out, zp_out, dtype):
    """QuantizedMeanOrSum with the float rescale (compute_sum = false)."""
    scale = F32(F32(s_in) / F32(s_out))
    bias = F32(F32(F32(-zp_in) * scale) + F32(0.5))
    mean = F32(F32(sum(values)) / F32(len(values)))
    r = F32(std_round(float(F32(F32(mean * scale) + bias))) + F32(zp_out))
    return int(min(max(r, F32(RANGE[dtype][0])), F32(RANGE[dtype][1])))


def legacy_expected(x, axis, keepdims, params, dtype):
    axes = tuple(a % x.ndim for a in axis)
    if keepdims and x.ndim == 4 and axis in ((1, 2), (2, 1)):
        fn = (lambda v: legacy_4d_int8(v, *params)) if dtype == "int8" else (
            lambda v: legacy_4d_uint8(v, *params))
    elif params[1] == params[3] and F32(params[0]) == F32(params[2]):
        fn = lambda v: c_div(sum(v), len(v))  # noqa: E731
    else:
        fn = lambda v: legacy_float(v, *params, dtype)  # noqa: E731
    return reduce_with(fn, x, axes, keepdims)


@pytest.mark.parametrize("shape,axis,keepdims", [c for c in AXES_CASES if c[1] is not None])
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_mean_tflite_legacy_takes_each_path_under_its_conditions(shape, axis, keepdims, dtype):
    rng = np.random.default_rng(sum(shape) + len(axis))
    x = random_data(rng, shape, dtype)
    for same in (False, True):
        params = random_params(rng, dtype, same)
        out = run("qnn.mean", x, *params, axis=axis, keepdims=keepdims,
                  semantics="tflite_legacy")
        np.testing.assert_array_equal(out, legacy_expected(x, axis, keepdims, params, dtype))


def test_mean_tflite_legacy_paths_differ_where_tflite_changed():
    # Same scale and zero point: legacy truncates (10 / 4 -> 2), the current kernel rounds (3).
    x = np.array([[1, 2, 3, 4]], np.int8)
    assert run("qnn.mean", x, 0.5, 0, 0.5, 0, axis=(1,), semantics="tflite_legacy").item() == 2
    assert run("qnn.mean", x, 0.5, 0, 0.5, 0, axis=(1,)).item() == 3
    # The float path's extra +0.5 before rounding (zero points differ, so legacy takes it): mean
    # 2.125 -> round(2.625) = 3, plus 1; the current kernel: RDPOT(SRDHM(17, 2**30), 2) = 2, plus 1.
    x = np.array([[2, 2, 2, 2, 2, 2, 2, 3]], np.int8)
    assert run("qnn.mean", x, 0.5, 0, 0.5, 1, axis=(1,), semantics="tflite_legacy").item() == 4
    assert run("qnn.mean", x, 0.5, 0, 0.5, 1, axis=(1,)).item() == 3
    # The current kernel rounds twice (SRDHM, then RoundingDivideByPOT): 9 / 4 = 2.25 -> 4.5 -> 5,
    # then 5 / 2 -> 3.
    assert run("qnn.mean", np.array([2, 2, 2, 3], np.int8), 0.5, 0, 0.5, 0).item() == 3


# ---- ONNX Runtime ------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,axis", [((2, 3, 4, 5), (2, 3)), ((2, 4, 5, 3), (1, 2)),
                                        ((1, 2, 3, 2, 2), (2, 3, 4))])
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_mean_onnx_spatial_axes_match_qlinear_global_average_pool(shape, axis, dtype):
    rng = np.random.default_rng(sum(shape))
    x = random_data(rng, shape, dtype)
    params = random_params(rng, dtype)
    for keepdims in (True, False):
        out = run("qnn.mean", x, *params, axis=axis, keepdims=keepdims, semantics="onnx")
        expected = reduce_with(lambda v: mlas_global(v, *params, dtype), x, axis, keepdims)
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("shape,axis", [((2, 3, 4, 5), (1,)), ((2, 3, 4, 5), (0, 3)),
                                        ((2, 3, 9), (2,)), ((6, 7), (1,)), ((40,), None)])
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_mean_onnx_elsewhere_is_dequantize_mean_quantize(shape, axis, dtype):
    # DequantizeLinear -> ReduceMean (float32) -> QuantizeLinear: exact wherever the exact mean is
    # not within float32 summation error of a rounding tie.
    rng = np.random.default_rng(sum(shape) + 1)
    x = random_data(rng, shape, dtype)
    s_in, zp_in, s_out, zp_out = params = random_params(rng, dtype)
    axes = tuple(range(x.ndim)) if axis is None else axis
    out = run("qnn.mean", x, *params, axis=axis, semantics="onnx")

    def exact(values):
        deq = [Fraction(float(F32(F32(s_in) * F32(v - zp_in)))) for v in values]
        return sum(deq) / len(deq) / Fraction(float(F32(s_out)))

    for key, values in groups(x, axes, False).items():
        value = exact(values)
        if abs(value - math.floor(value) - Fraction(1, 2)) > Fraction(1, 10**4):
            assert out[key] == clamp(round(value) + zp_out, dtype), (key, value)


def test_mean_within_one_lsb_of_float_math():
    rng = np.random.default_rng(11)
    for dtype, semantics, axis, keepdims in itertools.product(
            ("int8", "uint8"), ("tflite", "tflite_legacy", "onnx"), ((1, 2), (3,)), (True, False)):
        x = random_data(rng, (2, 5, 6, 3), dtype)
        s_in, zp_in, s_out, zp_out = params = random_params(rng, dtype)
        out = run("qnn.mean", x, *params, axis=axis, keepdims=keepdims, semantics=semantics)
        real = ((x.astype(np.float64) - zp_in) * s_in).mean(axis=axis, keepdims=keepdims)
        exact = np.clip(real / s_out + zp_out, *RANGE[dtype])
        # TFLite <= 2.12's uint8 4-D path truncates its zero-point bias: up to 1.5 LSB off.
        legacy_4d = (semantics, dtype, keepdims, axis) == ("tflite_legacy", "uint8", True, (1, 2))
        assert np.abs(out - exact).max() <= (1.5 if legacy_4d else 1.0), (dtype, semantics, axis)


def test_mean_onnx_empty_reduction_gives_zero_point():
    x = np.zeros((2, 0, 3), np.int8)
    out = run("qnn.mean", x, 0.1, 0, 0.1, 5, axis=(1,), semantics="onnx")
    assert out.shape == (2, 3) and (out == 5).all()
    out = run("qnn.mean", x, 0.1, 0, 0.1, 5, axis=(1,))
    assert out.shape == (2, 3) and (out == 0).all()  # TFLite fills T() when the input is empty


# ---- types and errors --------------------------------------------------------------------------


def call_types(name, data_type, scale_shape=(), zp_dtype="int32", **attrs):
    args = [var("x", *data_type), var("si", scale_shape, "float32"), var("zi", (), zp_dtype),
            var("so", (), "float32"), var("zo", (), "int32")]
    return P.infer_type(get_op(name)(*args, **attrs))


def test_inferred_types():
    t = call_types("qnn.avg_pool2d", ((1, 8, 8, 4), "uint8"), scale_shape=(1,), pool_size=(3, 3),
                   strides=(2, 2), padding=(1, 1, 1, 1), layout="NHWC")
    assert t == P.TensorType((1, 4, 4, 4), "uint8")
    t = call_types("qnn.mean", ((1, 4, 8, 8), "int8"), axis=(2, 3), keepdims=True)
    assert t == P.TensorType((1, 4, 1, 1), "int8")
    t = call_types("qnn.mean", ((1, 4, 8, 8), "int8"), axis=(1,), exclude=True)
    assert t == P.TensorType((4,), "int8")


@pytest.mark.parametrize("name,kwargs,pattern", [
    ("qnn.avg_pool2d", dict(data_type=((1, 4, 4, 2), "float32"), pool_size=(2, 2)),
     "data must be int8 or uint8, got float32"),
    ("qnn.avg_pool2d", dict(data_type=((4, 4, 2), "int8"), pool_size=(2, 2)), "must be 4-D"),
    ("qnn.avg_pool2d", dict(data_type=((1, 2, 4, 4), "int8"), pool_size=(5, 5)),
     "does not fit"),
    ("qnn.avg_pool2d", dict(data_type=((1, 2, 4, 4), "int8"), scale_shape=(2,)),
     r"input_scale must be a scalar or shape \(1,\), got shape \(2,\)"),
    ("qnn.mean", dict(data_type=((2, 3), "int16")), "data must be int8 or uint8, got int16"),
    ("qnn.mean", dict(data_type=((2, 3), "int8"), axis=(2,)), "out of range"),
    ("qnn.mean", dict(data_type=((2, 3), "int8"), axis=(1, -1)), "names an axis twice"),
    ("qnn.mean", dict(data_type=((2, 3), "int8"), scale_shape=(3,)), "input_scale must be"),
    ("qnn.mean", dict(data_type=((2, 3), "uint8"), zp_dtype="int8"),
     "input_zero_point must be int32, got int8"),
])
def test_type_errors_name_the_op(name, kwargs, pattern):
    with pytest.raises(P.TypeInferenceError, match=f"(?s){name}.*{pattern}"):
        call_types(name, **kwargs)


def test_bad_attributes():
    with pytest.raises(P.AttrError, match="semantics"):
        call_types("qnn.avg_pool2d", ((1, 2, 4, 4), "int8"), semantics="tflite_legacy")
    with pytest.raises(P.AttrError, match="pool_size must be positive"):
        call_types("qnn.avg_pool2d", ((1, 2, 4, 4), "int8"), pool_size=(0, 2))
    with pytest.raises(P.AttrError, match="semantics"):
        call_types("qnn.mean", ((1, 2), "int8"), semantics="torch")
