"""Pooling (nn.max_pool2d, nn.avg_pool2d, nn.global_avg_pool2d) against naive loops, and
image.resize2d against hand-computed cases and TFLite's reference loop replayed in float32."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from op_helpers import attr_error, op, run, small_ints, type_error, type_of

from partita import var
from partita.ops.nn_pool import MaxPool2DAttrs, pool_counts

RNG = np.random.default_rng(0)
ints = small_ints(RNG)


def naive_pool(
    x, kind, pool, strides, padding, dilation=(1, 1), ceil_mode=False, count_include_pad=False
):
    """Data NCHW. Window i starts at i*s - before; ceil mode keeps a partial last window unless
    it starts in the bottom/right padding (PyTorch's rule)."""
    n_, c_, h_, w_ = x.shape
    top, left, bottom, right = padding

    def out_len(size, k, s, d, before, after):
        span = size + before + after - d * (k - 1) - 1
        out = (-(-span // s) if ceil_mode else span // s) + 1
        return out - 1 if ceil_mode and (out - 1) * s >= size + before else out

    oh = out_len(h_, pool[0], strides[0], dilation[0], top, bottom)
    ow = out_len(w_, pool[1], strides[1], dilation[1], left, right)
    out = np.zeros((n_, c_, oh, ow))
    for n, c, i, j in itertools.product(range(n_), range(c_), range(oh), range(ow)):
        taps, count = [], 0
        for a, b in itertools.product(range(pool[0]), range(pool[1])):
            y = i * strides[0] - top + a * dilation[0]
            z = j * strides[1] - left + b * dilation[1]
            if 0 <= y < h_ and 0 <= z < w_:
                taps.append(float(x[n, c, y, z]))
            if count_include_pad and -top <= y < h_ + bottom and -left <= z < w_ + right:
                count += 1
        count = count if count_include_pad else len(taps)
        out[n, c, i, j] = max(taps) if kind == "max" else sum(taps) / count
    return out


NCHW_TO_NHWC = (0, 2, 3, 1)


# ---- pooling -------------------------------------------------------------------------------------


def pool_both_layouts(name, x, expected, **attrs):
    for layout in ("NCHW", "NHWC"):
        xd = x if layout == "NCHW" else x.transpose(NCHW_TO_NHWC)
        got = run(name, xd, layout=layout, **attrs)
        got = got if layout == "NCHW" else got.transpose(0, 3, 1, 2)
        assert got.dtype == x.dtype
        np.testing.assert_allclose(got, expected, rtol=1e-6, err_msg=layout)


POOL_CASES = [  # (H, W, pool, strides, padding, dilation, ceil_mode)
    (6, 6, (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False),
    (7, 5, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False),
    (5, 5, (2, 2), (2, 2), (1, 1, 1, 1), (1, 1), True),  # the last window would start in padding
    (6, 7, (3, 2), (2, 3), (1, 0, 2, 1), (1, 1), True),
    (7, 7, (2, 3), (1, 2), (1, 1, 0, 2), (2, 1), True),
    (5, 6, (3, 3), (3, 3), (0, 0, 0, 0), (1, 1), True),
]


@pytest.mark.parametrize("h,w,pool,strides,padding,dilation,ceil_mode", POOL_CASES)
def test_pools_match_naive_loops(h, w, pool, strides, padding, dilation, ceil_mode):
    x = RNG.standard_normal((2, 3, h, w)).astype(np.float32)
    attrs = dict(
        pool_size=pool, strides=strides, padding=padding, dilation=dilation, ceil_mode=ceil_mode
    )
    pool_both_layouts(
        "nn.max_pool2d",
        x,
        naive_pool(x, "max", pool, strides, padding, dilation, ceil_mode),
        **attrs,
    )
    for include in (False, True):
        expected = naive_pool(x, "avg", pool, strides, padding, dilation, ceil_mode, include)
        pool_both_layouts("nn.avg_pool2d", x, expected, count_include_pad=include, **attrs)


def test_pools_hand_computed():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    got = run("nn.max_pool2d", x, pool_size=2, strides=2)
    np.testing.assert_array_equal(got[0, 0], [[5, 7], [13, 15]])
    got = run("nn.avg_pool2d", x, pool_size=2, strides=2)
    np.testing.assert_array_equal(got[0, 0], [[2.5, 4.5], [10.5, 12.5]])
    # 3x3 windows, padding 1: the corner window holds 0, 1, 4, 5.
    got = run("nn.avg_pool2d", x, pool_size=3, strides=3, padding=1)
    assert got[0, 0, 0, 0] == 2.5
    got = run("nn.avg_pool2d", x, pool_size=3, strides=3, padding=1, count_include_pad=True)
    assert got[0, 0, 0, 0] == np.float32(10 / 9)
    # ceil mode on 5 columns, window 2, stride 2: a last window of one column.
    x5 = np.arange(5, dtype=np.float32).reshape(1, 1, 1, 5)
    got = run("nn.avg_pool2d", x5, pool_size=(1, 2), strides=(1, 2), ceil_mode=True)
    np.testing.assert_array_equal(got[0, 0, 0], [0.5, 2.5, 4])
    # With padding 1 the 4th window would start in the right padding: PyTorch gives 3 outputs.
    got = run("nn.max_pool2d", x5, pool_size=(1, 2), strides=(1, 2), padding=(0, 1), ceil_mode=True)
    np.testing.assert_array_equal(got[0, 0, 0], [0, 2, 4])


def test_max_pool_int8_pads_with_dtype_min():
    x = np.full((1, 2, 2, 1), -128, np.int8)
    x[0, 1, 1, 0] = -100
    got = run("nn.max_pool2d", x, pool_size=2, padding=1, layout="NHWC")
    assert got.dtype == np.int8
    np.testing.assert_array_equal(
        got[0, :, :, 0], [[-128, -128, -128], [-128, -100, -100], [-128, -100, -100]]
    )


def test_pool_counts_helper():
    attrs = MaxPool2DAttrs(pool_size=(3, 3), padding=(1, 1, 1, 1), layout="NHWC")
    np.testing.assert_array_equal(
        pool_counts((1, 3, 3, 1), attrs, False), [[4, 6, 4], [6, 9, 6], [4, 6, 4]]
    )
    np.testing.assert_array_equal(pool_counts((1, 3, 3, 1), attrs, True), np.full((3, 3), 9))


def test_global_avg_pool():
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    got = run("nn.global_avg_pool2d", x)
    assert got.shape == (2, 3, 1, 1)
    np.testing.assert_allclose(
        got[..., 0, 0], [[x[n, c].sum() / 20 for c in range(3)] for n in range(2)], rtol=1e-6
    )
    got = run("nn.global_avg_pool2d", x.transpose(NCHW_TO_NHWC), layout="NHWC")
    np.testing.assert_allclose(
        got[:, 0, 0, :], [[x[n, c].mean() for c in range(3)] for n in range(2)], rtol=1e-6
    )


def test_pool_failures():
    with attr_error("nn.max_pool2d.*pool_size must be positive"):
        op("nn.max_pool2d", var("x", (1, 1, 4, 4)), pool_size=(0, 2))
    with attr_error("nn.avg_pool2d.*padding must have 1, 2 or 4"):
        op("nn.avg_pool2d", var("x", (1, 1, 4, 4)), padding=(1, 1, 1))
    with attr_error("layout.*must be one of"):
        op("nn.global_avg_pool2d", var("x", (1, 1, 4, 4)), layout="HWCN")
    with type_error(
        "nn.max_pool2d", "height padding \\(2, 2\\) must be smaller than the pool window extent 2"
    ):
        type_of("nn.max_pool2d", ((1, 1, 4, 4), "float32"), pool_size=2, padding=2)
    with type_error("nn.max_pool2d", "does not fit the padded width 3"):
        type_of("nn.max_pool2d", ((1, 1, 4, 3), "float32"), pool_size=4)
    with type_error("nn.avg_pool2d", "float16 or float32, got int8"):
        type_of("nn.avg_pool2d", ((1, 1, 4, 4), "int8"))
    with type_error("nn.global_avg_pool2d", "4-D"):
        type_of("nn.global_avg_pool2d", ((1, 4, 4), "float32"))
    with type_error("nn.max_pool2d", "4-D", "\\(4, 4\\)"):
        type_of("nn.max_pool2d", ((4, 4), "float32"))


# ---- image.resize2d ------------------------------------------------------------------------------


def resize_row(values, out_w, **attrs):
    """Resize a single row (1, 1, 1, W) NCHW to width ``out_w``; return the row."""
    x = np.asarray(values, np.float32).reshape(1, 1, 1, -1)
    return run("image.resize2d", x, size=(1, out_w), **attrs)[0, 0, 0]


NEAREST_CASES = [  # TFLite flags and their modes; (in 3 -> out 6), (in 3 -> out 2), (in 2 -> out 3)
    ("asymmetric", "floor", [0, 0, 1, 1, 2, 2], [0, 1], [0, 0, 1]),
    ("tf_half_pixel_for_nn", "floor", [0, 0, 1, 1, 2, 2], [0, 2], [0, 1, 1]),
    ("align_corners", "round", [0, 0, 1, 1, 2, 2], [0, 2], [0, 1, 1]),
    ("half_pixel", "round_prefer_ceil", [0, 0, 1, 1, 2, 2], [0, 2], [0, 1, 1]),
]


@pytest.mark.parametrize("mode,rounding,up6,down2,up3", NEAREST_CASES)
def test_resize_nearest_hand_computed(mode, rounding, up6, down2, up3):
    attrs = dict(
        method="nearest_neighbor", coordinate_transformation_mode=mode, rounding_method=rounding
    )
    np.testing.assert_array_equal(resize_row([0, 1, 2], 6, **attrs), up6)
    np.testing.assert_array_equal(resize_row([0, 1, 2], 2, **attrs), down2)
    np.testing.assert_array_equal(resize_row([0, 1], 3, **attrs), up3)


def test_resize_nearest_rounding_methods():
    # align_corners 3 -> 5 puts coordinates at 0, 0.5, 1, 1.5, 2: only ties differ.
    expected = {
        "round": [0, 1, 1, 2, 2],
        "round_prefer_ceil": [0, 1, 1, 2, 2],
        "round_prefer_floor": [0, 0, 1, 1, 2],
        "floor": [0, 0, 1, 1, 2],
        "ceil": [0, 1, 1, 2, 2],
    }
    for rounding, want in expected.items():
        got = resize_row(
            [0, 1, 2],
            5,
            method="nearest_neighbor",
            rounding_method=rounding,
            coordinate_transformation_mode="align_corners",
        )
        np.testing.assert_array_equal(got, want, err_msg=rounding)
    # asymmetric 4 -> 3: 0, 1.333, 2.667 -> ceil 0, 2, 3
    got = resize_row(
        [0, 1, 2, 3],
        3,
        method="nearest_neighbor",
        rounding_method="ceil",
        coordinate_transformation_mode="asymmetric",
    )
    np.testing.assert_array_equal(got, [0, 2, 3])


def test_resize_linear_hand_computed():
    lin = dict(method="linear")
    np.testing.assert_array_equal(resize_row([0, 10], 4, **lin), [0, 2.5, 7.5, 10])
    np.testing.assert_array_equal(
        resize_row([0, 10], 4, coordinate_transformation_mode="asymmetric"), [0, 5, 10, 10]
    )
    np.testing.assert_array_equal(
        resize_row([0, 10], 3, coordinate_transformation_mode="align_corners"), [0, 5, 10]
    )
    np.testing.assert_array_equal(
        resize_row([0, 10], 1, coordinate_transformation_mode="pytorch_half_pixel"), [0]
    )
    np.testing.assert_array_equal(resize_row([0, 10], 1), [5])  # half_pixel: coordinate 0.5
    x = np.array([[0, 1], [2, 3]], np.float32).reshape(1, 2, 2, 1)
    got = run(
        "image.resize2d",
        x,
        size=(3, 3),
        layout="NHWC",
        coordinate_transformation_mode="align_corners",
    )
    np.testing.assert_array_equal(got[0, :, :, 0], [[0, 0.5, 1], [1, 1.5, 2], [2, 2.5, 3]])


def tflite_bilinear(x, oh, ow, align_corners, half_pixel):
    """TFLite's reference ResizeBilinear loop, one float32 operation at a time (NHWC)."""
    f = np.float32
    n_, h, w, c_ = x.shape

    def scale(i, o):
        return f(i - 1) / f(o - 1) if align_corners and o > 1 else f(i) / f(o)

    def interp(v, s, size):
        scaled = (f(v) + f(0.5)) * s - f(0.5) if half_pixel else f(v) * s
        return scaled, max(int(np.floor(scaled)), 0), min(int(np.ceil(scaled)), size - 1)

    out = np.zeros((n_, oh, ow, c_), np.float32)
    for n, y, z, c in itertools.product(range(n_), range(oh), range(ow), range(c_)):
        iy, y0, y1 = interp(y, scale(h, oh), h)
        ix, x0, x1 = interp(z, scale(w, ow), w)
        dy, dx = iy - f(y0), ix - f(x0)
        out[n, y, z, c] = (
            x[n, y0, x0, c] * (f(1) - dy) * (f(1) - dx)
            + x[n, y1, x0, c] * dy * (f(1) - dx)
            + x[n, y0, x1, c] * (f(1) - dy) * dx
            + x[n, y1, x1, c] * dy * dx
        )
    return out


@pytest.mark.parametrize(
    "align_corners,half_pixel,mode",
    [(False, False, "asymmetric"), (True, False, "align_corners"), (False, True, "half_pixel")],
)
@pytest.mark.parametrize("in_hw,out_hw", [((3, 5), (7, 4)), ((4, 4), (3, 9)), ((2, 3), (1, 1))])
def test_resize_linear_is_bit_exact_with_tflite_loop(
    align_corners, half_pixel, mode, in_hw, out_hw
):
    x = RNG.standard_normal((1, *in_hw, 2)).astype(np.float32)
    expected = tflite_bilinear(x, *out_hw, align_corners, half_pixel)
    got = run("image.resize2d", x, size=out_hw, layout="NHWC", coordinate_transformation_mode=mode)
    np.testing.assert_array_equal(got, expected)
    nchw = run(
        "image.resize2d", x.transpose(0, 3, 1, 2), size=out_hw, coordinate_transformation_mode=mode
    )
    np.testing.assert_array_equal(nchw.transpose(NCHW_TO_NHWC), expected)


def test_resize_nearest_int8_and_types():
    x = RNG.integers(-128, 128, (1, 2, 2, 3)).astype(np.int8)
    got = run(
        "image.resize2d",
        x,
        size=(4, 6),
        method="nearest_neighbor",
        coordinate_transformation_mode="asymmetric",
        rounding_method="floor",
    )
    np.testing.assert_array_equal(got, x.repeat(2, axis=2).repeat(2, axis=3))
    t = type_of(
        "image.resize2d",
        ((1, 8, 8, 3), "float32"),
        size=(16, 4),
        layout="NHWC",
        out_dtype="float16",
    )
    assert (t.shape, t.dtype) == ((1, 16, 4, 3), "float16")


def test_resize_failures():
    with attr_error("image.resize2d.*missing required attribute 'size'"):
        op("image.resize2d", var("x", (1, 1, 4, 4)))
    with attr_error("size must be two positive ints"):
        op("image.resize2d", var("x", (1, 1, 4, 4)), size=(0, 2))
    with attr_error("coordinate_transformation_mode.*must be one of"):
        op(
            "image.resize2d",
            var("x", (1, 1, 4, 4)),
            size=(2, 2),
            coordinate_transformation_mode="tf_crop_and_resize",
        )
    with type_error("image.resize2d", "linear resize needs float data, got int8"):
        type_of("image.resize2d", ((1, 1, 4, 4), "int8"), size=(2, 2))
    with type_error("image.resize2d", "4-D"):
        type_of("image.resize2d", ((1, 4, 4), "float32"), size=(2, 2))
    with type_error("image.resize2d", "out_dtype int8 does not suit float32"):
        type_of("image.resize2d", ((1, 1, 4, 4), "float32"), size=(2, 2), out_dtype="int8")
