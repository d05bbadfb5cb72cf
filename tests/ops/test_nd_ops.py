"""nn.conv1d, nn.conv3d, nn.conv3d_transpose, nn.max_pool3d, nn.avg_pool3d and
qnn.conv2d_transpose against PyTorch's CPU ops (small-integer data, so every sum is exact and
the bits must agree), in every layout, with precise type errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from op_helpers import assert_same, attr_error, run, small_ints, type_error, type_of

from partita import TensorType

F = torch.nn.functional
ints = small_ints(np.random.default_rng(27))


def _torch(fn, *arrays, **kw):
    return fn(*[torch.from_numpy(a) for a in arrays], **kw).numpy()


@pytest.mark.parametrize(
    "strides,padding,dilation,groups", [(1, 0, 1, 1), (2, 1, 2, 2), (3, 2, 1, 4)]
)
def test_conv1d_matches_torch(strides, padding, dilation, groups):
    x, w = ints((2, 8, 11)), ints((12, 8 // groups, 3))
    got = run("nn.conv1d", x, w, strides=strides, padding=padding, dilation=dilation, groups=groups)
    want = _torch(F.conv1d, x, w, stride=strides, padding=padding, dilation=dilation, groups=groups)
    assert_same(got, want)


def test_conv1d_asymmetric_padding_nwc_wio_and_int8():
    x, w = ints((1, 7, 3)), ints((3, 3, 5))  # NWC, WIO
    got = run("nn.conv1d", x, w, padding=(2, 1), data_layout="NWC", kernel_layout="WIO")
    xp = np.pad(x.transpose(0, 2, 1), [(0, 0), (0, 0), (2, 1)])
    want = _torch(F.conv1d, xp, np.ascontiguousarray(w.transpose(2, 1, 0)))
    assert_same(got, np.ascontiguousarray(want.transpose(0, 2, 1)))
    xi, wi = x.astype(np.int8), w.astype(np.int8)
    got = run(
        "nn.conv1d",
        xi,
        wi,
        padding=(2, 1),
        data_layout="NWC",
        kernel_layout="WIO",
        out_dtype="int32",
    )
    assert_same(got, np.ascontiguousarray(want.transpose(0, 2, 1)).astype(np.int32))


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_conv3d_matches_torch(layout):
    x, w = ints((2, 4, 5, 6, 7)), ints((6, 2, 3, 2, 3))
    want = _torch(F.conv3d, x, w, stride=(1, 2, 1), padding=1, dilation=(1, 1, 2), groups=2)
    if layout == "NDHWC":
        x, w, want = (
            x.transpose(0, 2, 3, 4, 1),
            w.transpose(2, 3, 4, 1, 0),
            want.transpose(0, 2, 3, 4, 1),
        )
    got = run(
        "nn.conv3d",
        np.ascontiguousarray(x),
        np.ascontiguousarray(w),
        strides=(1, 2, 1),
        padding=1,
        dilation=(1, 1, 2),
        groups=2,
        data_layout=layout,
        kernel_layout="OIDHW" if layout == "NCDHW" else "DHWIO",
    )
    assert_same(got, np.ascontiguousarray(want))


def test_conv3d_six_paddings_are_befores_then_afters():
    x, w = ints((1, 2, 3, 4, 5)), ints((3, 2, 2, 2, 2))
    got = run("nn.conv3d", x, w, padding=(1, 0, 2, 0, 1, 1))
    xp = np.pad(x, [(0, 0), (0, 0), (1, 0), (0, 1), (2, 1)])
    assert_same(got, _torch(F.conv3d, xp, w))


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_conv3d_transpose_matches_torch(layout):
    x, w = ints((2, 4, 3, 4, 5)), ints((4, 3, 3, 2, 3))
    kw = dict(stride=(2, 1, 2), padding=1, output_padding=(1, 0, 1), groups=2, dilation=1)
    want = _torch(F.conv_transpose3d, x, w, **kw)
    kl = "IODHW"
    if layout == "NDHWC":
        x, w, want = (
            x.transpose(0, 2, 3, 4, 1),
            w.transpose(2, 3, 4, 1, 0),
            want.transpose(0, 2, 3, 4, 1),
        )
        kl = "DHWOI"
    got = run(
        "nn.conv3d_transpose",
        np.ascontiguousarray(x),
        np.ascontiguousarray(w),
        strides=(2, 1, 2),
        padding=1,
        output_padding=(1, 0, 1),
        groups=2,
        data_layout=layout,
        kernel_layout=kl,
    )
    assert_same(got, np.ascontiguousarray(want))


def test_conv3d_transpose_dilated():
    x, w = ints((1, 2, 3, 3, 3)), ints((2, 2, 2, 2, 2))
    got = run("nn.conv3d_transpose", x, w, strides=2, dilation=2, padding=(1, 0, 0, 0, 1, 1))
    full = _torch(F.conv_transpose3d, x, w, stride=2, dilation=2)
    assert_same(got, np.ascontiguousarray(full[:, :, 1:, :-1, :-1]))


@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_pool3d_matches_torch(ceil_mode, layout):
    x = ints((2, 3, 5, 6, 7), -50, 50)
    kw = dict(kernel_size=(2, 3, 2), stride=2, padding=1, ceil_mode=ceil_mode)
    results = {
        "nn.max_pool3d": (_torch(F.max_pool3d, x, **kw), {}),
        "nn.avg_pool3d": (
            _torch(F.avg_pool3d, x.astype(np.float64), count_include_pad=False, **kw),
            {},
        ),
        "avg_incl": (
            _torch(F.avg_pool3d, x.astype(np.float64), count_include_pad=True, **kw),
            {"count_include_pad": True},
        ),
    }
    data = x if layout == "NCDHW" else np.ascontiguousarray(x.transpose(0, 2, 3, 4, 1))
    for name, (want, extra) in results.items():
        op = "nn.avg_pool3d" if name == "avg_incl" else name
        d = data.astype(np.float32) if op == "nn.avg_pool3d" else data
        got = run(
            op,
            d,
            pool_size=(2, 3, 2),
            strides=2,
            padding=1,
            ceil_mode=ceil_mode,
            layout=layout,
            **extra,
        )
        if layout == "NDHWC":
            want = want.transpose(0, 2, 3, 4, 1)
        # float64 torch means, rounded once to float32, as the reference rounds them
        assert_same(got, np.ascontiguousarray(want).astype(np.float32))


def test_max_pool3d_int8_pads_with_the_minimum():
    x = np.full((1, 1, 2, 2, 2), -128, np.int8)
    got = run("nn.max_pool3d", x, pool_size=2, padding=1)
    assert_same(got, np.full((1, 1, 3, 3, 3), -128, np.int8))


def test_nd_types_and_errors():
    t = type_of(
        "nn.conv1d",
        ((1, 10, 4), "int8"),
        ((3, 4, 3), "int8"),
        data_layout="NWC",
        kernel_layout="WIO",
        out_dtype="int32",
        padding=1,
    )
    assert t == TensorType((1, 10, 3), "int32")
    with type_error("kernel", "has 3 input channels, but data", "has 4 / groups=1"):
        type_of("nn.conv3d", ((1, 4, 3, 3, 3), "float32"), ((2, 3, 1, 1, 1), "float32"))
    with type_error("kernel's D extent 5", "does not fit"):
        type_of("nn.conv3d", ((1, 1, 3, 3, 3), "float32"), ((1, 1, 5, 1, 1), "float32"))
    with type_error("data must be 5-D"):
        type_of("nn.max_pool3d", ((1, 3, 3, 3), "float32"))
    with type_error("float"):
        type_of("nn.avg_pool3d", ((1, 1, 3, 3, 3), "int8"))
    with type_error("kernel", "has 3 input channels, but data", "has 2 channels"):
        type_of("nn.conv3d_transpose", ((1, 2, 3, 3, 3), "float32"), ((3, 1, 1, 1, 1), "float32"))
    with attr_error("padding must have 1, 3 or 6 values"):
        type_of(
            "nn.conv3d", ((1, 1, 3, 3, 3), "float32"), ((1, 1, 1, 1, 1), "float32"), padding=(1, 1)
        )
    with attr_error("output_padding"):
        type_of(
            "nn.conv3d_transpose",
            ((1, 1, 3, 3, 3), "float32"),
            ((1, 1, 1, 1, 1), "float32"),
            output_padding=1,
        )


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_qnn_conv2d_transpose_is_the_exact_offset_sum(per_channel, layout):
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (2, 4, 5, 6), dtype=np.int8)
    w = rng.integers(-128, 128, (4, 3, 3, 3), dtype=np.int8)  # IOHW, groups 2 -> 6 outputs
    zp_w = rng.integers(-5, 6, 6).astype(np.int32) if per_channel else np.int32(3)
    zp_x = np.int32(-7)
    w_off = w.astype(np.int64).reshape(2, 2, 3, 3, 3) - np.asarray(zp_w).reshape(
        (2, 1, 3, 1, 1) if per_channel else ()
    )
    want = _torch(
        F.conv_transpose2d,
        x.astype(np.float64) - zp_x,
        w_off.reshape(4, 3, 3, 3).astype(np.float64),
        stride=2,
        padding=1,
        output_padding=1,
        groups=2,
    )
    kl = "IOHW"
    if layout == "NHWC":
        x, w, want = x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), want.transpose(0, 2, 3, 1)
        kl = "HWOI"
    scale = np.full(6, 0.5, np.float32) if per_channel else np.float32(0.5)
    got = run(
        "qnn.conv2d_transpose",
        np.ascontiguousarray(x),
        np.ascontiguousarray(w),
        zp_x,
        np.asarray(zp_w, np.int32),
        np.float32(0.1),
        np.asarray(scale),
        strides=2,
        padding=1,
        output_padding=1,
        groups=2,
        data_layout=layout,
        kernel_layout=kl,
    )
    assert_same(got, np.ascontiguousarray(want).astype(np.int32))


def test_qnn_conv2d_transpose_types_and_errors():
    args = (((1, 4, 5, 5), "int8"), ((4, 2, 3, 3), "int8"), ((), "int32"))
    t = type_of("qnn.conv2d_transpose", *args, ((), "int32"), ((), "float32"), ((), "float32"))
    assert t == TensorType((1, 2, 7, 7), "int32")
    with type_error("kernel_zero_point must be a scalar or shape \\(2,\\)", "output channel"):
        type_of("qnn.conv2d_transpose", *args, ((3,), "int32"), ((), "float32"), ((), "float32"))
    with type_error("data must be"):
        type_of(
            "qnn.conv2d_transpose",
            ((1, 4, 5, 5), "float32"),
            *args[1:],
            ((), "int32"),
            ((), "float32"),
            ((), "float32"),
        )
