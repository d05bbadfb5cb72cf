"""2-D convolutions: ``nn.conv2d`` and ``nn.conv2d_transpose``, and the reusable pieces qnn builds
on: the attribute schemas, the output-shape helpers (``conv2d_out_shape``,
``conv2d_transpose_out_shape``) and the references (``conv2d_reference``,
``conv2d_transpose_reference``), which take float or integer data and return the accumulator
(float64 or exact int64) so the caller decides how to cast or requantize.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from partita.ir.types import TensorType
from partita.limits import check_shape
from partita.ops.emulation import onnxruntime_mlas as mlas
from partita.ops.emulation import torch_cpu

from .nn_common import (
    OUT_DTYPES,
    accumulator_dtype,
    cast_result,
    check_non_negative,
    check_positive,
    exact_matmul,
    expand_2d,
    expand_padding,
    from_nhwc,
    layout_dims,
    pad_input,
    product_dtype,
    set_fields,
    sliding_windows,
    to_layout,
    to_nhwc,
)
from .registry import Attrs, choice, register_op
from .relations import fail, tensor


@dataclass(frozen=True)
class ConvAttrsBase(Attrs):
    """The attributes conv2d and conv2d_transpose share. strides/dilation expand 1 value to 2;
    padding is normalised to (top, left, bottom, right) (1 or 2 values expand like Relay)."""

    strides: tuple[int, ...] = (1, 1)
    padding: tuple[int, ...] = (0, 0, 0, 0)
    dilation: tuple[int, ...] = (1, 1)
    groups: int = 1
    channels: int | None = None
    kernel_size: tuple[int, ...] | None = None
    data_layout: str = choice("NCHW", "NCHW", "NHWC")

    def __post_init__(self):
        set_fields(
            self,
            strides=expand_2d(self.strides, "strides"),
            dilation=expand_2d(self.dilation, "dilation"),
            padding=expand_padding(self.padding),
        )
        if self.kernel_size is not None:
            set_fields(self, kernel_size=expand_2d(self.kernel_size, "kernel_size"))

    @property
    def out_layout(self) -> str:
        """Relay's ``out_layout``: "" (the output is in ``data_layout``; partita has no other)."""
        return ""

    def validate(self):
        check_positive(self.strides, "strides")
        check_positive(self.dilation, "dilation")
        check_non_negative(self.padding, "padding")
        if self.groups < 1:
            raise ValueError(f"groups must be positive, got {self.groups}")
        if self.kernel_size is not None:
            check_positive(self.kernel_size, "kernel_size")
        if self.channels is not None:
            if self.channels < 1:
                raise ValueError(f"channels must be positive, got {self.channels}")
            if self.channels % self.groups:
                raise ValueError(
                    f"channels={self.channels} is not divisible by groups={self.groups}"
                )


@dataclass(frozen=True)
class Conv2DAttrs(ConvAttrsBase):
    """Relay's Conv2DAttrs (kernel O = output channels, I = data channels / groups), plus
    ``accumulate`` ("exact"; "mlas": ONNX Runtime's float32 summation order, see
    partita/ops/emulation/onnxruntime_mlas.py; "torch_cpu": PyTorch's, see
    partita/ops/emulation/torch_cpu.py) and ``threads`` (the ONNX Runtime thread count MLAS
    splits work for)."""

    kernel_layout: str = choice("OIHW", "OIHW", "HWIO", "HWOI", "OHWI")
    out_dtype: str = choice("", *OUT_DTYPES)
    accumulate: str = choice("exact", *mlas.ACCUMULATE, *torch_cpu.ACCUMULATE)
    threads: int = 1

    def validate(self):
        super().validate()
        mlas.check_threads(self.threads)


@dataclass(frozen=True)
class Conv2DTransposeAttrs(ConvAttrsBase):
    """Relay's Conv2DTransposeAttrs; the kernel's I axis is the data's channels, O is
    output channels / groups (PyTorch's (C_in, C_out/groups, KH, KW) is "IOHW")."""

    kernel_layout: str = choice("IOHW", "IOHW", "OIHW", "HWOI", "HWIO", "OHWI")
    out_dtype: str = choice("", *OUT_DTYPES)
    output_padding: tuple[int, ...] = (0, 0)

    def __post_init__(self):
        super().__post_init__()
        set_fields(self, output_padding=expand_2d(self.output_padding, "output_padding"))

    def validate(self):
        super().validate()
        check_non_negative(self.output_padding, "output_padding")
        for op, s, d in zip(self.output_padding, self.strides, self.dilation):
            if op >= max(s, d):
                raise ValueError(
                    f"output_padding {self.output_padding} must be smaller than "
                    f"the stride {self.strides} or the dilation {self.dilation}"
                )


def _describe(shape, layout: str) -> str:
    return f"{tuple(shape)} ({layout})"


def _check_rank(shape, layout: str, what: str) -> None:
    if len(shape) != 4:
        fail(f"{what} must be 4-D ({layout}), got shape {tuple(shape)}")


def _out_dim(size, k, stride, dilation, before, after, what) -> int:
    """Output length of one spatial axis of a convolution or pooling, or fail."""
    extent, padded = dilation * (k - 1) + 1, size + before + after
    if extent > padded:
        fail(
            f"the {what} window of extent {extent} (size {k}, dilation {dilation}) does not fit "
            f"the padded input of size {padded} ({size} + padding {before} + {after})"
        )
    return (padded - extent) // stride + 1


def conv_spatial_out(h, w, kh, kw, attrs) -> tuple[int, int]:
    """(OH, OW) of a convolution of an HxW input with a KHxKW kernel under ``attrs``' strides,
    dilation and padding (floor rounding), or fail."""
    (sh, sw), (dh, dw), (top, left, bottom, right) = attrs.strides, attrs.dilation, attrs.padding
    return (
        _out_dim(h, kh, sh, dh, top, bottom, "kernel height"),
        _out_dim(w, kw, sw, dw, left, right, "kernel width"),
    )


def conv2d_out_shape(data_shape, weight_shape, attrs) -> tuple[int, ...]:
    """The output shape (in ``attrs.data_layout``) of a 2-D convolution, or fail naming the shapes.

    The kernel's O axis is the output channels and its I axis data channels / groups, so a
    depthwise kernel with multiplier m is (C * m, 1, KH, KW) in OIHW (groups = C).
    """
    dl, kl, g = attrs.data_layout, attrs.kernel_layout, attrs.groups
    _check_rank(data_shape, dl, "data")
    _check_rank(weight_shape, kl, "kernel")
    n, h, w, c = layout_dims(data_shape, dl)
    o, i, kh, kw = layout_dims(weight_shape, kl, "OIHW")
    data, kernel = _describe(data_shape, dl), _describe(weight_shape, kl)
    if c % g:
        fail(f"data {data} has {c} channels, not divisible by groups={g}")
    if i != c // g:
        hint = (
            " (a depthwise kernel has 1 input channel: O = C * multiplier, I = 1)"
            if g > 1 and g == c
            else ""
        )
        fail(
            f"kernel {kernel} has {i} input channels, but data {data} has {c} channels / "
            f"groups={g} = {c // g}{hint}"
        )
    if o % g:
        fail(f"kernel {kernel} has {o} output channels, not divisible by groups={g}")
    if attrs.channels is not None and attrs.channels != o:
        fail(f"channels={attrs.channels} but kernel {kernel} has {o} output channels")
    if attrs.kernel_size is not None and tuple(attrs.kernel_size) != (kh, kw):
        fail(f"kernel_size={tuple(attrs.kernel_size)} but kernel {kernel} is {kh}x{kw}")
    oh, ow = conv_spatial_out(h, w, kh, kw, attrs)
    top, left, bottom, right = expand_padding(attrs.padding)
    check_shape((n, h + top + bottom, w + left + right, c), 8, f"its padded input {data}")
    return tuple({"N": n, "C": o, "H": oh, "W": ow}[a] for a in dl)


def conv2d_reference(
    data: np.ndarray, weight: np.ndarray, attrs, pad_value=0, acc_dtype=None
) -> np.ndarray:
    """The convolution of ``data`` (attrs.data_layout) with ``weight`` (attrs.kernel_layout) as an
    accumulator array in data_layout: float64 for float data, exact int64 for integer data
    (or ``acc_dtype``). Padding is filled with ``pad_value`` (qnn: the input zero point)."""
    acc = np.dtype(acc_dtype) if acc_dtype is not None else accumulator_dtype(data.dtype)
    g = attrs.groups
    x = pad_input(to_nhwc(data, attrs.data_layout), attrs.padding, "NHWC", pad_value)
    w = to_layout(weight, attrs.kernel_layout, "OIHW")
    o, cg, kh, kw = w.shape
    k = cg * kh * kw
    windows = sliding_windows(x, (kh, kw), attrs.strides, attrs.dilation)
    n, oh, ow = windows.shape[:3]
    wmat = w.reshape(g, o // g, k).transpose(0, 2, 1)  # (G, Cg*KH*KW, O/G)
    out = np.empty((n, oh, ow, o), acc)
    for b in range(n):  # one image at a time bounds the im2col buffer
        cols = windows[b].reshape(oh * ow, g, k).transpose(1, 0, 2)  # (G, OH*OW, K)
        out[b] = exact_matmul(cols, wmat, acc).transpose(1, 0, 2).reshape(oh, ow, o)
    return from_nhwc(out, attrs.data_layout)


def _conv2d_rel(types, attrs):
    data, weight = tensor(types[0], "data"), tensor(types[1], "weight")
    dtype = product_dtype(data, weight, attrs.out_dtype)
    mlas.require_float32(attrs, dtype, "data, weight and result")
    out = TensorType(conv2d_out_shape(data.shape, weight.shape, attrs), dtype)
    if attrs.accumulate == "torch_cpu":
        _check_torch_cpu(data.shape, weight.shape, attrs)
    return out


def _check_torch_cpu(data_shape, weight_shape, attrs) -> None:
    """The convolutions whose PyTorch CPU path torch_cpu.py reproduces: depthwise ones, and
    those PyTorch does not hand to oneDNN (groups 1, batch 1, <= 20480 input values, a kernel
    no larger than 3 in some axis) with K <= MAX_K; dilation 1 (dilated ones take others)."""
    n, h, w, c = layout_dims(data_shape, attrs.data_layout)
    o, i, kh, kw = layout_dims(weight_shape, attrs.kernel_layout, "OIHW")
    if tuple(attrs.dilation) == (1, 1) and (
        attrs.groups == c == o
        or (
            attrs.groups == 1
            and n == 1
            and h * w * c <= 20480
            and min(kh, kw) <= 3
            and i * kh * kw <= torch_cpu.MAX_K
        )
    ):
        return
    fail(
        f'accumulate="torch_cpu" reproduces undilated depthwise convolutions and PyTorch\'s '
        f"MKL path (groups 1, batch 1, at most 20480 input values, a kernel side <= 3) summing "
        f"at most {torch_cpu.MAX_K} products, not data "
        f"{tuple(data_shape)} with kernel {tuple(weight_shape)} and groups={attrs.groups}, "
        f"which PyTorch runs with oneDNN"
    )


def conv2d_mlas(data: np.ndarray, weight: np.ndarray, attrs) -> np.ndarray:
    """nn.conv2d with accumulate="mlas": MLAS's float32 convolution in any layout."""
    nchw = to_layout(data, attrs.data_layout, "NCHW")
    oihw = to_layout(weight, attrs.kernel_layout, "OIHW")
    out = mlas.conv2d_nchw(
        nchw, oihw, attrs.strides, attrs.padding, attrs.dilation, attrs.groups, attrs.threads
    )
    return to_layout(out, "NCHW", attrs.data_layout)


@register_op(
    "nn.conv2d",
    inputs=("data", "weight"),
    attrs=Conv2DAttrs,
    type_rel=_conv2d_rel,
    kind="out_elemwise_fusable",
)
def conv2d(data, weight, attrs):
    """2-D convolution (cross-correlation) with groups, as Relay:
    ``out[n, o, y, x] = sum_{c, a, b} pad(data)[n, g*Cg + c, y*sh + a*dh, x*sw + b*dw] *
    weight[o, c, a, b]`` with g = o // (O / groups), Cg = C / groups, zero padding
    (top, left, bottom, right). Depthwise: groups = C, kernel (C * multiplier, 1, KH, KW) in
    OIHW, output channel c * multiplier + m reads input channel c. Float data accumulates in
    float64, integer data exactly in int64; the sum is cast to out_dtype ("" = data's dtype).
    accumulate="mlas" (float32 only) sums as ONNX Runtime's MlasConv does with ``threads``
    threads: im2col, K-blocked FMA chains or the M=1 kernels
    (partita/ops/emulation/onnxruntime_mlas.py).
    accumulate="torch_cpu" (float32) sums as PyTorch 2.13's CPU conv2d: depthwise as oneDNN's
    jit_dw (one FMA chain over the taps), else im2col + MKL SGEMM (FMA chains over (channel,
    row, column), K <= 320; partita/ops/emulation/torch_cpu.py)."""
    if attrs.accumulate == "mlas":
        return conv2d_mlas(data, weight, attrs)
    if attrs.accumulate == "torch_cpu":
        nchw = to_layout(data, attrs.data_layout, "NCHW")
        oihw = to_layout(weight, attrs.kernel_layout, "OIHW")
        out = torch_cpu.conv2d_nchw(
            nchw, oihw, attrs.strides, attrs.padding, attrs.dilation, attrs.groups
        )
        return np.ascontiguousarray(to_layout(out, "NCHW", attrs.data_layout))
    return cast_result(conv2d_reference(data, weight, attrs), attrs.out_dtype or data.dtype.name)


def conv2d_transpose_out_shape(data_shape, weight_shape, attrs) -> tuple[int, ...]:
    """The output shape (in ``attrs.data_layout``) of a transposed 2-D convolution, or fail:
    out = (in - 1) * stride - pad_before - pad_after + dilation * (k - 1) + output_padding + 1."""
    dl, kl, g = attrs.data_layout, attrs.kernel_layout, attrs.groups
    _check_rank(data_shape, dl, "data")
    _check_rank(weight_shape, kl, "kernel")
    n, h, w, c = layout_dims(data_shape, dl)
    i, og, kh, kw = layout_dims(weight_shape, kl, "IOHW")
    data, kernel = _describe(data_shape, dl), _describe(weight_shape, kl)
    if c % g:
        fail(f"data {data} has {c} channels, not divisible by groups={g}")
    if i != c:
        fail(f"kernel {kernel} has {i} input channels, but data {data} has {c} channels")
    if attrs.channels is not None and attrs.channels != og * g:
        fail(
            f"channels={attrs.channels} but kernel {kernel} gives {og} x groups={g} = "
            f"{og * g} output channels"
        )
    if attrs.kernel_size is not None and tuple(attrs.kernel_size) != (kh, kw):
        fail(f"kernel_size={tuple(attrs.kernel_size)} but kernel {kernel} is {kh}x{kw}")
    dims = []
    for size, k, s, d, before, after, op in zip(
        (h, w),
        (kh, kw),
        attrs.strides,
        attrs.dilation,
        attrs.padding[:2],
        attrs.padding[2:],
        attrs.output_padding,
    ):
        dims.append((size - 1) * s - before - after + d * (k - 1) + op + 1)
    if min(dims) < 1:
        fail(
            f"padding {attrs.padding} leaves an empty output ({dims[0]}x{dims[1]}) for data "
            f"{data} and kernel {kernel}"
        )
    return tuple({"N": n, "C": og * g, "H": dims[0], "W": dims[1]}[a] for a in dl)


def conv2d_transpose_reference(
    data: np.ndarray, weight: np.ndarray, attrs, acc_dtype=None
) -> np.ndarray:
    """The transposed convolution of ``data`` with ``weight`` as an accumulator array (float64 or
    exact int64, or ``acc_dtype``) in data_layout: every input pixel scatters
    ``data[n, i, j, c] * weight[c, o, a, b]`` to ``(i*sh + a*dh - top, j*sw + b*dw - left)``."""
    acc = np.dtype(acc_dtype) if acc_dtype is not None else accumulator_dtype(data.dtype)
    g = attrs.groups
    x = to_nhwc(data, attrs.data_layout)
    w = to_layout(weight, attrs.kernel_layout, "IOHW")
    c, og, kh, kw = w.shape
    n, h, wd, _ = x.shape
    (sh, sw), (dh, dw) = attrs.strides, attrs.dilation
    top, left, bottom, right = attrs.padding
    full_h = (h - 1) * sh + dh * (kh - 1) + 1 + attrs.output_padding[0]
    full_w = (wd - 1) * sw + dw * (kw - 1) + 1 + attrs.output_padding[1]
    full = np.zeros((n, full_h, full_w, og * g), acc)
    rows = x.reshape(n * h * wd, g, c // g).transpose(1, 0, 2)  # (G, N*H*W, Cg)
    wg = w.reshape(g, c // g, og, kh, kw)
    for a in range(kh):
        for b in range(kw):
            part = exact_matmul(rows, wg[..., a, b], acc).transpose(1, 0, 2)
            full[
                :, a * dh : a * dh + (h - 1) * sh + 1 : sh, b * dw : b * dw + (wd - 1) * sw + 1 : sw
            ] += part.reshape(n, h, wd, og * g)
    return from_nhwc(full[:, top : full_h - bottom, left : full_w - right], attrs.data_layout)


def _conv2d_transpose_rel(types, attrs):
    data, weight = tensor(types[0], "data"), tensor(types[1], "weight")
    dtype = product_dtype(data, weight, attrs.out_dtype)
    return TensorType(conv2d_transpose_out_shape(data.shape, weight.shape, attrs), dtype)


@register_op(
    "nn.conv2d_transpose",
    inputs=("data", "weight"),
    attrs=Conv2DTransposeAttrs,
    type_rel=_conv2d_transpose_rel,
    kind="out_elemwise_fusable",
)
def conv2d_transpose(data, weight, attrs):
    """Transposed 2-D convolution, as Relay/PyTorch: each input pixel (i, j) of channel c adds
    ``data[n, c, i, j] * weight[c, o, a, b]`` to output (g*Og + o, i*sh + a*dh - top,
    j*sw + b*dw - left), g = c // (C / groups); contributions outside the output are dropped and
    output_padding adds rows/columns at the bottom/right. Kernel "IOHW" = (C, Og, KH, KW).
    Accumulates in float64 or exactly in int64, then casts to out_dtype ("" = data's dtype)."""
    return cast_result(
        conv2d_transpose_reference(data, weight, attrs), attrs.out_dtype or data.dtype.name
    )
