"""2-D pooling: ``nn.max_pool2d``, ``nn.avg_pool2d``, ``nn.global_avg_pool2d``, and the helpers
qnn pooling reuses: ``pool_out_shape``, ``pool_windows`` (the padded windows as a view) and
``pool_counts`` (how many taps of each window an average divides by).

Window (i, j) covers input rows ``i*sh - top + a*dh`` for a < KH (likewise columns). With
ceil_mode a last, partial window is added where floor mode would drop it, except that a window
starting in the bottom/right padding is never added (PyTorch and ONNX); its taps beyond the
padding are ignored like padding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from partita.ir.types import TensorType
from partita.limits import check_shape
from partita.ops.emulation import onnxruntime_mlas as mlas
from partita.ops.emulation import torch_cpu

from .nn_common import (
    FLOAT_DTYPES,
    INT_DTYPES,
    check_non_negative,
    check_positive,
    expand_2d,
    expand_padding,
    from_nhwc,
    layout_dims,
    pad_input,
    set_fields,
    sliding_windows,
    to_layout,
    to_nhwc,
)
from .registry import Attrs, choice, register_op
from .relations import fail, float_only, tensor


@dataclass(frozen=True)
class PoolAttrsBase(Attrs):
    """The attributes max and average pooling share (Relay's MaxPool2DAttrs). pool_size,
    strides and dilation expand 1 value to 2; padding becomes (top, left, bottom, right)."""

    pool_size: tuple[int, ...] = (1, 1)
    strides: tuple[int, ...] = (1, 1)
    dilation: tuple[int, ...] = (1, 1)
    padding: tuple[int, ...] = (0, 0, 0, 0)
    layout: str = choice("NCHW", "NCHW", "NHWC")
    ceil_mode: bool = False

    def __post_init__(self):
        set_fields(
            self,
            pool_size=expand_2d(self.pool_size, "pool_size"),
            strides=expand_2d(self.strides, "strides"),
            dilation=expand_2d(self.dilation, "dilation"),
            padding=expand_padding(self.padding),
        )

    def validate(self):
        check_positive(self.pool_size, "pool_size")
        check_positive(self.strides, "strides")
        check_positive(self.dilation, "dilation")
        check_non_negative(self.padding, "padding")


@dataclass(frozen=True)
class MaxPool2DAttrs(PoolAttrsBase):
    """Relay's MaxPool2DAttrs."""


@dataclass(frozen=True)
class AvgPool2DAttrs(PoolAttrsBase):
    """Relay's AvgPool2DAttrs: count_include_pad divides by the window's taps inside the padded
    input instead of those inside the input."""

    count_include_pad: bool = False


@dataclass(frozen=True)
class GlobalPool2DAttrs(Attrs):
    """Relay's GlobalPool2DAttrs, plus ``accumulate`` ("exact", "mlas" or "torch_cpu")."""

    layout: str = choice("NCHW", "NCHW", "NHWC")
    accumulate: str = choice("exact", *mlas.ACCUMULATE, *torch_cpu.ACCUMULATE)


def pool_dim(size, k, stride, dilation, before, after, ceil_mode, what) -> int:
    extent, padded = dilation * (k - 1) + 1, size + before + after
    if before >= extent or after >= extent:
        fail(
            f"{what} padding ({before}, {after}) must be smaller than the pool window extent "
            f"{extent} (size {k}, dilation {dilation})"
        )
    if extent > padded:
        fail(
            f"the pool window of extent {extent} does not fit the padded {what} {padded} "
            f"({size} + padding {before} + {after})"
        )
    if not ceil_mode:
        return (padded - extent) // stride + 1
    out = (padded - extent + stride - 1) // stride + 1
    if (out - 1) * stride >= size + before:  # the last window would start in the padding
        out -= 1
    return out


def pool_out_dims(h: int, w: int, attrs) -> tuple[int, int]:
    """(OH, OW) of pooling an HxW input under ``attrs`` (pool_size, strides, dilation, padding,
    ceil_mode), or fail naming the sizes."""
    (kh, kw), (sh, sw), (dh, dw) = attrs.pool_size, attrs.strides, attrs.dilation
    top, left, bottom, right = attrs.padding
    return (
        pool_dim(h, kh, sh, dh, top, bottom, attrs.ceil_mode, "height"),
        pool_dim(w, kw, sw, dw, left, right, attrs.ceil_mode, "width"),
    )


def pool_out_shape(data_shape, attrs) -> tuple[int, ...]:
    """The output shape (in ``attrs.layout``) of a 2-D pooling, or fail."""
    if len(data_shape) != 4:
        fail(f"data must be 4-D ({attrs.layout}), got shape {tuple(data_shape)}")
    n, h, w, c = layout_dims(data_shape, attrs.layout)
    oh, ow = pool_out_dims(h, w, attrs)
    (_, _), (eb, er) = _ceil_overhang(h, w, attrs)
    top, left, bottom, right = attrs.padding
    padded = (n, h + top + bottom + eb, w + left + right + er, c)
    check_shape(padded, 8, f"its padded input {tuple(data_shape)}")  # windows read a copy
    return tuple({"N": n, "C": c, "H": oh, "W": ow}[a] for a in attrs.layout)


def _ceil_overhang(h: int, w: int, attrs) -> tuple[tuple[int, int], tuple[int, int]]:
    """(OH, OW) and the rows/columns past the bottom/right padding that ceil mode's last
    windows read."""
    out = pool_out_dims(h, w, attrs)
    top, left, bottom, right = attrs.padding
    extra = tuple(
        max(0, (o - 1) * s + d * (k - 1) + 1 - (size + before + after))
        for size, o, k, s, d, before, after in zip(
            (h, w),
            out,
            attrs.pool_size,
            attrs.strides,
            attrs.dilation,
            (top, left),
            (bottom, right),
        )
    )
    return out, extra


def pool_windows(data: np.ndarray, attrs, pad_value) -> np.ndarray:
    """The pooling windows of 4-D ``data`` (layout ``attrs.layout``) as a read-only view of shape
    (N, OH, OW, C, KH, KW); padding (and ceil mode's overhang) reads ``pad_value``."""
    x = to_nhwc(data, attrs.layout)
    (oh, ow), (eb, er) = _ceil_overhang(x.shape[1], x.shape[2], attrs)
    top, left, bottom, right = attrs.padding
    x = pad_input(x, (top, left, bottom + eb, right + er), "NHWC", pad_value)
    return sliding_windows(x, attrs.pool_size, attrs.strides, attrs.dilation)[:, :oh, :ow]


def pool_counts(data_shape, attrs, count_include_pad: bool) -> np.ndarray:
    """(OH, OW) int64: the taps of each window inside the input (or, with count_include_pad,
    inside the explicitly padded input; ceil mode's overhang never counts)."""
    _, h, w, _ = layout_dims(data_shape, attrs.layout)
    (oh, ow), (eb, er) = _ceil_overhang(h, w, attrs)
    mask = np.ones((1, h, w, 1), np.int64)
    mask = pad_input(mask, attrs.padding, "NHWC", 1 if count_include_pad else 0)
    mask = pad_input(mask, (0, 0, eb, er), "NHWC", 0)
    windows = sliding_windows(mask, attrs.pool_size, attrs.strides, attrs.dilation)
    return windows.sum(axis=(-2, -1))[0, :oh, :ow, 0]


def _max_pool_rel(types, attrs):
    data = tensor(types[0], "data")
    if data.dtype not in FLOAT_DTYPES + INT_DTYPES:
        fail(f"data must be a float or integer tensor, got {data.dtype}")
    return TensorType(pool_out_shape(data.shape, attrs), data.dtype)


def _lowest(dtype: np.dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


@register_op(
    "nn.max_pool2d", inputs=("data",), attrs=MaxPool2DAttrs, type_rel=_max_pool_rel, kind="opaque"
)
def max_pool2d(data, attrs):
    """2-D max pooling: ``out[n, c, i, j] = max_{a, b} pad(data)[n, c, i*sh + a*dh - top,
    j*sw + b*dw - left]`` where padding counts as -inf (the dtype's minimum for integers, so
    int8 pools quantized values as they are). Padding must be smaller than the window extent."""
    windows = pool_windows(data, attrs, _lowest(data.dtype))
    return from_nhwc(windows.max(axis=(-2, -1)), attrs.layout).astype(data.dtype)


def _avg_pool_rel(types, attrs):
    data = float_only(tensor(types[0], "data"))
    return TensorType(pool_out_shape(data.shape, attrs), data.dtype)


@register_op(
    "nn.avg_pool2d", inputs=("data",), attrs=AvgPool2DAttrs, type_rel=_avg_pool_rel, kind="opaque"
)
def avg_pool2d(data, attrs):
    """2-D average pooling of float data: the float64 sum of each window's taps inside the input
    divided by their number (count_include_pad: by the taps inside the padded input; ceil mode's
    overhang never counts), cast to data's dtype. A window with no counted tap gives 0."""
    windows = pool_windows(data, attrs, 0)
    sums = windows.sum(axis=(-2, -1), dtype=np.float64)
    counts = pool_counts(data.shape, attrs, attrs.count_include_pad)[None, :, :, None]
    out = sums / np.maximum(counts, 1)
    return from_nhwc(out, attrs.layout).astype(data.dtype)


def _global_pool_rel(types, attrs):
    data = float_only(tensor(types[0], "data"))
    if data.ndim != 4:
        fail(f"data must be 4-D ({attrs.layout}), got shape {data.shape}")
    shape = list(data.shape)
    shape[attrs.layout.index("H")] = shape[attrs.layout.index("W")] = 1
    mlas.require_float32(attrs, data.dtype, "data")
    return TensorType(shape, data.dtype)


@register_op(
    "nn.global_avg_pool2d",
    inputs=("data",),
    attrs=GlobalPool2DAttrs,
    type_rel=_global_pool_rel,
    kind="reduce",
)
def global_avg_pool2d(data, attrs):
    """The mean over H and W (kept as size-1 axes) of float data, summed in float64 and cast
    to data's dtype. accumulate="mlas" (float32): as ONNX Runtime's MlasPool global kernel,
    4 float32 lanes over the pixels in row-major order, (l0 + l2) + (l1 + l3), the leftover
    pixels added in order, then divided by H * W in float32. "torch_cpu" (float32): as
    PyTorch 2.13's CPU mean, ATen's cascade sum over the pixels (8-float vectors, 4 interleaved
    accumulators, leftover pixels then the lanes added in order), / float32(H * W)."""
    if attrs.accumulate != "exact":
        emulate = mlas if attrs.accumulate == "mlas" else torch_cpu
        out = emulate.global_avg_pool_nchw(to_layout(data, attrs.layout, "NCHW"))
        return np.ascontiguousarray(to_layout(out, "NCHW", attrs.layout))
    axes = (attrs.layout.index("H"), attrs.layout.index("W"))
    return data.mean(axis=axes, dtype=np.float64, keepdims=True).astype(data.dtype)
