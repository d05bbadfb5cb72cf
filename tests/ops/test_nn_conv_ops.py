"""nn.conv2d and nn.conv2d_transpose against naive loop references written here (7 loops; the
scatter definition), in every data/kernel layout, plus precise failures for bad attributes and
shapes and the helpers qnn reuses."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from op_helpers import attr_error, op, run, small_ints, type_error, type_of

import partita as P
from partita import const, var
from partita.ops.nn_common import pad_input
from partita.ops.nn_conv import Conv2DAttrs, conv2d_out_shape, conv2d_reference

RNG = np.random.default_rng(0)
ints = small_ints(RNG)


def naive_conv2d(x, w, strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1):
    """Data NCHW, kernel OIHW (I = C / groups): the 7-loop definition."""
    n_, c_, h_, w_ = x.shape
    o_, cg, kh, kw = w.shape
    (sh, sw), (dh, dw), (top, left, bottom, right) = strides, dilation, padding
    oh = (h_ + top + bottom - dh * (kh - 1) - 1) // sh + 1
    ow = (w_ + left + right - dw * (kw - 1) - 1) // sw + 1
    og = o_ // groups
    xs, ws = x.tolist(), w.tolist()
    out = np.zeros((n_, o_, oh, ow), dtype=object)
    for n, o, y, z in itertools.product(range(n_), range(o_), range(oh), range(ow)):
        acc = 0
        for c in range(cg):
            for a in range(kh):
                for b in range(kw):
                    iy, ix = y * sh + a * dh - top, z * sw + b * dw - left
                    if 0 <= iy < h_ and 0 <= ix < w_:
                        acc += xs[n][(o // og) * cg + c][iy][ix] * ws[o][c][a][b]
        out[n, o, y, z] = acc
    return out


def naive_conv2d_transpose(x, w, strides, padding, dilation, groups, output_padding):
    """Data NCHW, kernel IOHW (O = out channels / groups): scatter every input pixel."""
    n_, c_, h_, w_ = x.shape
    _, og, kh, kw = w.shape
    (sh, sw), (dh, dw), (top, left, bottom, right) = strides, dilation, padding
    oh = (h_ - 1) * sh - top - bottom + dh * (kh - 1) + output_padding[0] + 1
    ow = (w_ - 1) * sw - left - right + dw * (kw - 1) + output_padding[1] + 1
    cg = c_ // groups
    out = np.zeros((n_, og * groups, oh, ow), dtype=object)
    xs, ws = x.tolist(), w.tolist()
    for n, c, i, j, o, a, b in itertools.product(
        range(n_), range(c_), range(h_), range(w_), range(og), range(kh), range(kw)
    ):
        y, z = i * sh + a * dh - top, j * sw + b * dw - left
        if 0 <= y < oh and 0 <= z < ow:
            out[n, (c // cg) * og + o, y, z] += xs[n][c][i][j] * ws[c][o][a][b]
    return out


NCHW_TO_NHWC = (0, 2, 3, 1)
OIHW_TO = {"OIHW": (0, 1, 2, 3), "HWIO": (2, 3, 1, 0), "HWOI": (2, 3, 0, 1), "OHWI": (0, 2, 3, 1)}
IOHW_TO = {
    "IOHW": (0, 1, 2, 3),
    "OIHW": (1, 0, 2, 3),
    "HWOI": (2, 3, 1, 0),
    "HWIO": (2, 3, 0, 1),
    "OHWI": (1, 2, 3, 0),
}


def conv_all_layouts(name, x, w, expected, kernel_perms, **attrs):
    """Run ``name`` in every data/kernel layout and compare with ``expected`` (NCHW)."""
    for data_layout, (kernel_layout, perm) in itertools.product(
        ("NCHW", "NHWC"), kernel_perms.items()
    ):
        xd = x if data_layout == "NCHW" else x.transpose(NCHW_TO_NHWC)
        got = run(
            name,
            xd,
            w.transpose(perm),
            data_layout=data_layout,
            kernel_layout=kernel_layout,
            **attrs,
        )
        if data_layout == "NHWC":
            got = got.transpose(0, 3, 1, 2)
        np.testing.assert_array_equal(
            got, expected.astype(got.dtype), err_msg=f"{data_layout}/{kernel_layout}"
        )


# ---- nn.conv2d -----------------------------------------------------------------------------------

CONV_CASES = [  # (C, O, K, strides, padding, dilation, groups)
    (3, 4, (3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    (3, 4, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),
    (2, 3, (3, 2), (1, 2), (2, 0, 1, 1), (1, 1), 1),
    (2, 2, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1),
    (4, 6, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 2),
    (4, 4, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 4),  # depthwise
    (3, 6, (3, 3), (2, 1), (1, 0, 1, 2), (1, 2), 3),  # depthwise, multiplier 2
]


@pytest.mark.parametrize("c,o,k,strides,padding,dilation,groups", CONV_CASES)
def test_conv2d_matches_naive_loops_in_every_layout(c, o, k, strides, padding, dilation, groups):
    x, w = ints((2, c, 6, 7)), ints((o, c // groups, *k))
    expected = naive_conv2d(x, w, strides, padding, dilation, groups)
    conv_all_layouts(
        "nn.conv2d",
        x,
        w,
        expected,
        OIHW_TO,
        strides=strides,
        padding=padding,
        dilation=dilation,
        groups=groups,
    )


def test_conv2d_depthwise_multiplier_order():
    # Output channel c * m + j reads input channel c (TFLite's depthwise order).
    x = np.stack([np.full((3, 3), 1.0), np.full((3, 3), 10.0)])[None].astype(np.float32)
    w = np.array([1, 2, 3, 4], np.float32).reshape(4, 1, 1, 1)
    got = run("nn.conv2d", x, w, groups=2)
    np.testing.assert_array_equal(got[0, :, 0, 0], [1, 2, 30, 40])


def test_conv2d_hand_computed():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    w = np.ones((1, 1, 2, 2), np.float32)
    got = run("nn.conv2d", x, w, strides=2)
    np.testing.assert_array_equal(got[0, 0], [[10, 18], [42, 50]])
    got = run("nn.conv2d", x, w, padding=1, strides=3)  # (1,) expands to all four sides
    np.testing.assert_array_equal(got[0, 0], [[0, 5], [20, 50]])


def test_conv2d_padding_expands_like_relay():
    x = var("x", (1, 1, 4, 4))
    w = const(np.ones((1, 1, 1, 1), np.float32))
    assert op("nn.conv2d", x, w, padding=(1, 2)).attrs.padding == (1, 2, 1, 2)
    assert op("nn.conv2d", x, w, padding=3).attrs.padding == (3, 3, 3, 3)
    assert op("nn.conv2d", x, w, strides=2).attrs.strides == (2, 2)
    assert P.infer_type(op("nn.conv2d", x, w, padding=(1, 2))).shape == (1, 1, 6, 8)


def test_conv2d_integer_is_exact_int64_then_cast():
    x = RNG.integers(-128, 128, (1, 3, 5, 5)).astype(np.int8)
    w = RNG.integers(-128, 128, (4, 3, 3, 3)).astype(np.int8)
    got = run("nn.conv2d", x, w, padding=1, out_dtype="int32")
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, naive_conv2d(x, w, padding=(1, 1, 1, 1)).astype(np.int64))
    # Values too large for exact float64 sums take the int64 path; int64 results wrap to int32.
    big_x = np.full((1, 2, 1, 1), 2**30 + 1, np.int32)
    big_w = np.full((1, 2, 1, 1), 2**30 + 3, np.int32)
    exact = 2 * (2**30 + 1) * (2**30 + 3)
    assert run("nn.conv2d", big_x, big_w, out_dtype="int64")[0, 0, 0, 0] == exact
    wrapped = (exact + 2**31) % 2**32 - 2**31
    assert run("nn.conv2d", big_x, big_w, out_dtype="int32")[0, 0, 0, 0] == wrapped


def test_conv2d_float_accumulates_in_float64():
    # float32 accumulation would lose the 1: 1e8 + 1 - 1e8.
    x = np.array([1e8, 1, -1e8], np.float32).reshape(1, 3, 1, 1)
    w = np.ones((1, 3, 1, 1), np.float32)
    assert run("nn.conv2d", x, w)[0, 0, 0, 0] == 1.0


def test_conv2d_mobilenet_sized_depthwise_spot_checks():
    x = RNG.integers(-128, 128, (1, 112, 112, 32)).astype(np.int8)
    w = RNG.integers(-128, 128, (3, 3, 32, 1)).astype(np.int8)
    got = run(
        "nn.conv2d",
        x,
        w,
        padding=1,
        groups=32,
        data_layout="NHWC",
        kernel_layout="HWOI",
        out_dtype="int32",
    )
    assert got.shape == (1, 112, 112, 32)
    xp = np.pad(x.astype(np.int64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    for y, z, c in [(0, 0, 0), (111, 111, 31), (50, 7, 13), (0, 111, 5)]:
        expected = sum(
            int(xp[0, y + a, z + b, c]) * int(w[a, b, c, 0]) for a in range(3) for b in range(3)
        )
        assert got[0, y, z, c] == expected


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 3),
    st.integers(1, 2),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 2),
    st.integers(1, 2),
    st.integers(1, 2),
    st.integers(1, 2),
    st.lists(st.integers(0, 2), min_size=4, max_size=4),
    st.sampled_from(list(OIHW_TO)),
    st.booleans(),
)
def test_conv2d_random_attrs(groups, cg, og, kh, kw, s, d, mult, padding, kernel_layout, nhwc):
    c, o = groups * cg, groups * og * mult
    x, w = ints((1, c, 7, 6)), ints((o, cg, kh, kw))
    expected = naive_conv2d(x, w, (s, 1), padding, (d, 1), groups)
    xd = x.transpose(NCHW_TO_NHWC) if nhwc else x
    got = run(
        "nn.conv2d",
        xd,
        w.transpose(OIHW_TO[kernel_layout]),
        strides=(s, 1),
        padding=padding,
        dilation=(d, 1),
        groups=groups,
        kernel_layout=kernel_layout,
        data_layout="NHWC" if nhwc else "NCHW",
    )
    got = got.transpose(0, 3, 1, 2) if nhwc else got
    np.testing.assert_array_equal(got, expected.astype(np.float32))


def test_conv2d_types():
    t = type_of(
        "nn.conv2d",
        ((1, 224, 224, 3), "int8"),
        ((3, 3, 3, 16), "int8"),
        strides=2,
        padding=(0, 0, 1, 1),
        data_layout="NHWC",
        kernel_layout="HWIO",
        out_dtype="int32",
    )
    assert (t.shape, t.dtype) == ((1, 112, 112, 16), "int32")
    t = type_of(
        "nn.conv2d",
        ((1, 8, 5, 5), "float16"),
        ((16, 1, 3, 3), "float16"),
        groups=8,
        channels=16,
        kernel_size=3,
    )
    assert (t.shape, t.dtype) == ((1, 16, 3, 3), "float16")


@pytest.mark.parametrize(
    "attrs,pattern",
    [
        ({"padding": (1, 2, 3)}, "padding must have 1, 2 or 4 values"),
        ({"padding": (-1,)}, "padding must be non-negative"),
        ({"strides": (0, 1)}, "strides must be positive"),
        ({"dilation": (1, 2, 3)}, "dilation must have 1 or 2 values"),
        ({"groups": 0}, "groups must be positive"),
        ({"channels": 6, "groups": 4}, "channels=6 is not divisible by groups=4"),
        ({"data_layout": "NCWH"}, "data_layout.*must be one of"),
        ({"kernel_layout": "IOHW"}, "kernel_layout.*must be one of"),
        ({"out_dtype": "float64"}, "out_dtype.*must be one of"),
        ({"groups": 1.5}, "groups.*must be an int"),
        ({"bogus": 1}, "unknown attribute 'bogus'"),
    ],
)
def test_conv2d_bad_attrs(attrs, pattern):
    with attr_error("nn.conv2d.*" + pattern):
        op("nn.conv2d", var("x", (1, 4, 8, 8)), var("w", (4, 4, 3, 3)), **attrs)


@pytest.mark.parametrize(
    "data,weight,attrs,patterns",
    [
        (
            (1, 4, 8, 8),
            (8, 3, 3, 3),
            {},
            [
                "kernel \\(8, 3, 3, 3\\) \\(OIHW\\) has 3 input channels",
                "data \\(1, 4, 8, 8\\) \\(NCHW\\) has 4 channels",
            ],
        ),
        ((1, 6, 8, 8), (6, 3, 3, 3), {"groups": 4}, ["6 channels, not divisible by groups=4"]),
        ((1, 4, 8, 8), (6, 2, 3, 3), {"groups": 4}, ["depthwise kernel has 1 input channel"]),
        (
            (1, 4, 8, 8),
            (6, 1, 3, 3),
            {"groups": 4},
            ["kernel \\(6, 1, 3, 3\\) \\(OIHW\\) has 6 output", "not divisible by groups=4"],
        ),
        ((1, 4, 8, 8), (8, 4, 3, 3), {"channels": 16}, ["channels=16 but kernel"]),
        ((1, 4, 8, 8), (8, 4, 3, 3), {"kernel_size": (5, 5)}, ["kernel_size=\\(5, 5\\)", "3x3"]),
        ((1, 4, 2, 8), (8, 4, 3, 3), {}, ["extent 3", "padded input of size 2"]),
        ((1, 4, 8, 8), (8, 4, 3, 3), {"dilation": 4}, ["extent 9"]),
        ((4, 8, 8), (8, 4, 3, 3), {}, ["data must be 4-D", "\\(4, 8, 8\\)"]),
        ((1, 4, 8, 8), (8, 4, 3), {}, ["kernel must be 4-D"]),
    ],
)
def test_conv2d_bad_shapes(data, weight, attrs, patterns):
    with type_error("nn.conv2d", *patterns):
        type_of("nn.conv2d", (data, "float32"), (weight, "float32"), **attrs)


@pytest.mark.parametrize(
    "dtypes,attrs,pattern",
    [
        (("float32", "int8"), {}, "both float or both integer"),
        (("float32", "float16"), {}, "same float dtype"),
        (("int8", "int8"), {"out_dtype": "float32"}, "out_dtype float32 does not suit integer"),
        (("float32", "float32"), {"out_dtype": "int32"}, "out_dtype int32 does not suit float"),
    ],
)
def test_conv2d_bad_dtypes(dtypes, attrs, pattern):
    with type_error("nn.conv2d", pattern):
        type_of("nn.conv2d", ((1, 4, 8, 8), dtypes[0]), ((4, 4, 3, 3), dtypes[1]), **attrs)


def test_conv2d_helpers_for_qnn():
    # pad_value fills the padding (qnn passes the input zero point); int64 accumulator out.
    attrs = Conv2DAttrs(padding=(1, 1, 1, 1), data_layout="NHWC", kernel_layout="HWIO")
    x = RNG.integers(-128, 128, (1, 4, 4, 2)).astype(np.int8)
    w = RNG.integers(-128, 128, (3, 3, 2, 3)).astype(np.int8)
    acc = conv2d_reference(x, w, attrs, pad_value=-5)
    assert acc.dtype == np.int64 and acc.shape == conv2d_out_shape(x.shape, w.shape, attrs)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-5)
    np.testing.assert_array_equal(pad_input(x, (1,), "NHWC", -5), xp)
    expected = naive_conv2d(xp.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1))
    np.testing.assert_array_equal(acc, expected.transpose(0, 2, 3, 1).astype(np.int64))


# ---- nn.conv2d_transpose -------------------------------------------------------------------------

TRANSPOSE_CASES = [  # (C, O/groups, K, strides, padding, dilation, groups, output_padding)
    (2, 3, (3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, (0, 0)),
    (2, 2, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, (1, 1)),
    (3, 2, (2, 3), (2, 1), (0, 1, 1, 0), (1, 2), 1, (1, 0)),
    (4, 1, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 4, (0, 1)),
    (4, 3, (2, 2), (3, 2), (2, 0, 0, 1), (2, 1), 2, (2, 1)),
]


@pytest.mark.parametrize("c,og,k,strides,padding,dilation,groups,output_padding", TRANSPOSE_CASES)
def test_conv2d_transpose_matches_scatter(
    c, og, k, strides, padding, dilation, groups, output_padding
):
    x, w = ints((2, c, 4, 3)), ints((c, og, *k))
    expected = naive_conv2d_transpose(x, w, strides, padding, dilation, groups, output_padding)
    conv_all_layouts(
        "nn.conv2d_transpose",
        x,
        w,
        expected,
        IOHW_TO,
        strides=strides,
        padding=padding,
        dilation=dilation,
        groups=groups,
        output_padding=output_padding,
    )


def test_conv2d_transpose_hand_computed_and_types():
    x = np.array([[1, 2], [3, 4]], np.float32).reshape(1, 1, 2, 2)
    w = np.ones((1, 1, 2, 2), np.float32)
    got = run("nn.conv2d_transpose", x, w, strides=2)
    np.testing.assert_array_equal(
        got[0, 0], [[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]]
    )
    got = run("nn.conv2d_transpose", x, w)  # stride 1: overlapping windows add up
    np.testing.assert_array_equal(got[0, 0], [[1, 3, 2], [4, 10, 6], [3, 7, 4]])
    t = type_of(
        "nn.conv2d_transpose",
        ((1, 7, 7, 8), "int8"),
        ((16, 3, 3, 8), "int8"),
        strides=2,
        padding=1,
        output_padding=1,
        data_layout="NHWC",
        kernel_layout="OHWI",
        out_dtype="int32",
    )
    assert (t.shape, t.dtype) == ((1, 14, 14, 16), "int32")


def test_conv2d_transpose_failures():
    with attr_error("output_padding.*smaller than the stride"):
        op(
            "nn.conv2d_transpose",
            var("x", (1, 2, 4, 4)),
            var("w", (2, 2, 3, 3)),
            output_padding=2,
            strides=2,
        )
    with type_error(
        "nn.conv2d_transpose",
        "kernel \\(3, 2, 3, 3\\) \\(IOHW\\) has 3 input",
        "data \\(1, 2, 4, 4\\)",
    ):
        type_of("nn.conv2d_transpose", ((1, 2, 4, 4), "float32"), ((3, 2, 3, 3), "float32"))
    with type_error("nn.conv2d_transpose", "channels=5 but kernel"):
        type_of(
            "nn.conv2d_transpose", ((1, 2, 4, 4), "float32"), ((2, 2, 3, 3), "float32"), channels=5
        )
    with type_error("nn.conv2d_transpose", "empty output"):
        type_of(
            "nn.conv2d_transpose", ((1, 2, 1, 1), "float32"), ((2, 2, 1, 1), "float32"), padding=1
        )
