"""qnn.avg_pool2d against independent scalar transcriptions of TFLite's reference kernels
(pooling.h, common.h) and ONNX Runtime's CPU kernels (qlinear_pool.cc, MLAS qlgavgpool.cpp): plain
Python ints and float32 scalars in loops, nothing shared with the implementation. Also the types
and errors of qnn.avg_pool2d and qnn.mean (whose values are in test_qnn_mean.py).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qnn_helpers import RANGE, clamp
from qnn_pool_helpers import F32, mlas_global, random_data, random_params, run
from test_fixedpoint import c_div, mbqm_ref, quantize_multiplier_ref

import partita as P
from partita import get_op, var

# ---- TFLite AVERAGE_POOL_2D (reference_integer_ops / reference_ops), NHWC ------------------------


def requantize(v, s_in, zp_in, s_out, zp_out, dtype):
    """reference_ops::Requantize (TFLite QUANTIZE int8->int8)."""
    m, e = quantize_multiplier_ref(float(F32(s_in)) / float(F32(s_out)))
    return clamp(mbqm_ref(v - zp_in, m, e) + zp_out, dtype)


def tflite_padding(size, k, stride, same):
    """ComputePaddingHeightWidth: (out, pad_before, pad_after)."""
    out = (size + stride - 1) // stride if same else (size - k + stride) // stride
    total = max((out - 1) * stride + k - size, 0)
    return out, total // 2, total - total // 2


def tflite_avg_pool(x, k, stride, pad_top_left, out_hw, dtype):
    n_, h, w, c_ = x.shape
    out = np.zeros((n_, *out_hw, c_), np.int64)
    for b, oy, ox, c in itertools.product(range(n_), range(out_hw[0]), range(out_hw[1]), range(c_)):
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
@given(
    dtype=st.sampled_from(["int8", "uint8"]),
    h=st.integers(1, 7),
    w=st.integers(1, 7),
    k=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    same=st.booleans(),
    layout=st.sampled_from(["NHWC", "NCHW"]),
    seed=st.integers(0, 2**16),
)
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
    out = run(
        "qnn.avg_pool2d",
        data,
        s,
        zp,
        s,
        zp,
        pool_size=k,
        strides=stride,
        padding=(top, left, bottom, right),
        layout=layout,
    )
    out = out if layout == "NHWC" else out.transpose(0, 2, 3, 1)
    np.testing.assert_array_equal(out, expected)


def test_avg_pool_tflite_rounds_half_away_from_zero():
    # Windows of two: 1+2 -> 2, -1-2 -> -2, -1+0 -> -1 (half away), 3+4 -> 4, -3-4 -> -4.
    x = np.array([1, 2, -1, -2, -1, 0, 3, 4, -3, -4], np.int8).reshape(1, 1, 10, 1)
    out = run("qnn.avg_pool2d", x, 0.5, 0, 0.5, 0, pool_size=(1, 2), strides=(1, 2), layout="NHWC")
    assert out.ravel().tolist() == [2, -2, -1, 4, -4]


def test_avg_pool_tflite_differing_params_requantize_after_pooling():
    rng = np.random.default_rng(1)
    for dtype in ("int8", "uint8"):
        x = random_data(rng, (1, 5, 6, 4), dtype)
        s_in, zp_in, s_out, zp_out = random_params(rng, dtype)
        raw = tflite_avg_pool(x, (3, 2), (2, 2), (1, 0), (3, 3), dtype)
        expected = [requantize(int(v), s_in, zp_in, s_out, zp_out, dtype) for v in raw.ravel()]
        out = run(
            "qnn.avg_pool2d",
            x,
            s_in,
            zp_in,
            s_out,
            zp_out,
            pool_size=(3, 2),
            strides=(2, 2),
            padding=(1, 0, 1, 0),
            layout="NHWC",
        )
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
    out = run(
        "qnn.avg_pool2d",
        x,
        0.1,
        4,
        0.1,
        4,
        pool_size=(3, 3),
        padding=(1, 1, 1, 1),
        count_include_pad=True,
    )
    assert out[0, 0].tolist() == [[7, 8, 7], [8, 10, 8], [7, 8, 7]]
    out = run("qnn.avg_pool2d", x, 0.1, 4, 0.1, 4, pool_size=(3, 3), padding=(1, 1, 1, 1))
    assert (out == 10).all()


@pytest.mark.parametrize("semantics", ["tflite", "onnx"])
def test_avg_pool_empty_window_gives_output_zero_point(semantics):
    # Dilation 3 over a 1x1 input padded by 2: every window's taps fall in the padding.
    x = np.array([[[[100]]]], np.uint8)
    out = run(
        "qnn.avg_pool2d",
        x,
        0.1,
        3,
        0.2,
        7,
        pool_size=(2, 2),
        dilation=(3, 3),
        padding=(2, 2, 2, 2),
        semantics=semantics,
    )
    assert out.shape == (1, 1, 2, 2) and (out == 7).all()


# ---- ORT QLinearAveragePool (qlinear_pool.cc + MLAS global average), NCHW ----------------------


def ort_out_size(size, k, stride, before, after, ceil_mode):
    num = size + before + after - k
    out = (-(-num // stride) if ceil_mode else num // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + before:
        out -= 1
    return out


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
            out[b, c, ph, pw] = clamp(int(np.rint(F32(F32(y / F32(s_out)) + F32(zp_out)))), dtype)
    return out


@settings(max_examples=40, deadline=None)
@given(
    dtype=st.sampled_from(["int8", "uint8"]),
    h=st.integers(2, 6),
    w=st.integers(2, 6),
    k=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    pads=st.tuples(*[st.integers(0, 2)] * 4),
    ceil_mode=st.booleans(),
    include_pad=st.booleans(),
    nhwc=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_avg_pool_onnx_matches_qlinear_average_pool(
    dtype, h, w, k, stride, pads, ceil_mode, include_pad, nhwc, seed
):
    pads = tuple(min(p, kk - 1) for p, kk in zip(pads, (k[0], k[1], k[0], k[1])))
    if k[0] > h + pads[0] + pads[2] or k[1] > w + pads[1] + pads[3]:
        return
    rng = np.random.default_rng(seed)
    x = random_data(rng, (1, 3, h, w), dtype)
    params = random_params(rng, dtype)
    expected = ort_avg_pool(x, k, stride, pads, ceil_mode, include_pad, params, dtype)
    data = x.transpose(0, 2, 3, 1) if nhwc else x
    out = run(
        "qnn.avg_pool2d",
        data,
        *params,
        pool_size=k,
        strides=stride,
        padding=pads,
        ceil_mode=ceil_mode,
        count_include_pad=include_pad,
        semantics="onnx",
        layout="NHWC" if nhwc else "NCHW",
    )
    np.testing.assert_array_equal(out.transpose(0, 3, 1, 2) if nhwc else out, expected)


def test_avg_pool_onnx_whole_image_window_takes_the_global_integer_path():
    rng = np.random.default_rng(7)
    for dtype in ("int8", "uint8"):
        x = random_data(rng, (2, 4, 5, 6), dtype)
        params = random_params(rng, dtype)
        out = run("qnn.avg_pool2d", x, *params, pool_size=(5, 6), semantics="onnx")
        expected = [
            [mlas_global([int(v) for v in x[b, c].ravel()], *params, dtype) for c in range(4)]
            for b in range(2)
        ]
        np.testing.assert_array_equal(out[:, :, 0, 0], expected)


def test_avg_pool_onnx_count_include_pad_divides_by_kernel_size_even_past_the_padding():
    # 1x3 input, window 1x2, stride 2, ceil mode: the last window holds one input tap and one tap
    # past the input; ORT divides by 2 anyway: (8 * 0.5) / 2 / 0.5 = 4.
    x = np.array([[[[8, 8, 8]]]], np.int8)
    out = run(
        "qnn.avg_pool2d",
        x,
        0.5,
        0,
        0.5,
        0,
        pool_size=(1, 2),
        strides=(1, 2),
        ceil_mode=True,
        count_include_pad=True,
        semantics="onnx",
    )
    assert out.ravel().tolist() == [8, 4]


def test_avg_pool_within_one_lsb_of_float_math():
    rng = np.random.default_rng(3)
    for dtype, semantics in itertools.product(("int8", "uint8"), ("tflite", "onnx")):
        x = random_data(rng, (1, 2, 6, 6), dtype)
        s_in, zp_in, s_out, zp_out = params = random_params(rng, dtype)
        out = run(
            "qnn.avg_pool2d",
            x,
            *params,
            pool_size=(3, 3),
            strides=(1, 1),
            padding=(1, 1, 1, 1),
            semantics=semantics,
        )
        real = (x.astype(np.float64) - zp_in) * s_in
        windows = np.lib.stride_tricks.sliding_window_view(
            np.pad(real, [(0, 0), (0, 0), (1, 1), (1, 1)], constant_values=np.nan),
            (3, 3),
            axis=(2, 3),
        )
        exact = np.nanmean(windows, axis=(-2, -1)) / s_out + zp_out
        exact = np.clip(exact, *RANGE[dtype])
        assert np.abs(out - exact).max() <= 1.0


# ---- types and errors --------------------------------------------------------------------------


def call_types(name, data_type, scale_shape=(), zp_dtype="int32", **attrs):
    args = [
        var("x", *data_type),
        var("si", scale_shape, "float32"),
        var("zi", (), zp_dtype),
        var("so", (), "float32"),
        var("zo", (), "int32"),
    ]
    return P.infer_type(get_op(name)(*args, **attrs))


def test_inferred_types():
    t = call_types(
        "qnn.avg_pool2d",
        ((1, 8, 8, 4), "uint8"),
        scale_shape=(1,),
        pool_size=(3, 3),
        strides=(2, 2),
        padding=(1, 1, 1, 1),
        layout="NHWC",
    )
    assert t == P.TensorType((1, 4, 4, 4), "uint8")
    t = call_types("qnn.mean", ((1, 4, 8, 8), "int8"), axis=(2, 3), keepdims=True)
    assert t == P.TensorType((1, 4, 1, 1), "int8")
    t = call_types("qnn.mean", ((1, 4, 8, 8), "int8"), axis=(1,), exclude=True)
    assert t == P.TensorType((4,), "int8")


@pytest.mark.parametrize(
    "name,kwargs,pattern",
    [
        (
            "qnn.avg_pool2d",
            dict(data_type=((1, 4, 4, 2), "float32"), pool_size=(2, 2)),
            "data must be int8, uint8 or int16, got float32",
        ),
        ("qnn.avg_pool2d", dict(data_type=((4, 4, 2), "int8"), pool_size=(2, 2)), "must be 4-D"),
        (
            "qnn.avg_pool2d",
            dict(data_type=((1, 2, 4, 4), "int8"), pool_size=(5, 5)),
            "does not fit",
        ),
        (
            "qnn.avg_pool2d",
            dict(data_type=((1, 2, 4, 4), "int8"), scale_shape=(2,)),
            r"input_scale must be a scalar or shape \(1,\), got shape \(2,\)",
        ),
        ("qnn.mean", dict(data_type=((2, 3), "int32")), "must be int8, uint8 or int16, got int32"),
        ("qnn.mean", dict(data_type=((2, 3), "int8"), axis=(2,)), "out of range"),
        ("qnn.mean", dict(data_type=((2, 3), "int8"), axis=(1, -1)), "names an axis twice"),
        ("qnn.mean", dict(data_type=((2, 3), "int8"), scale_shape=(3,)), "input_scale must be"),
        (
            "qnn.mean",
            dict(data_type=((2, 3), "uint8"), zp_dtype="int8"),
            "input_zero_point must be int32, got int8",
        ),
    ],
)
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
