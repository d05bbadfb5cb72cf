"""3-D pooling, named by Relay BYOC pattern tables (issue 27): ``nn.max_pool3d`` and
``nn.avg_pool3d``, the rules of 2-D pooling (partita/ops/nn_pool.py) per axis, written as a loop
over the window's taps on NCDHW data (layouts converted at the edges). Attribute names and
defaults are Relay's."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from partita.ir.types import TensorType
from partita.limits import check_shape

from .nn_common import (
    FLOAT_DTYPES,
    INT_DTYPES,
    check_non_negative,
    check_positive,
    set_fields,
    to_layout,
)
from .nn_nd import canonical_axes, expand_nd, expand_padding_nd, tap_slices
from .nn_pool import pool_dim
from .registry import Attrs, choice, register_op
from .relations import fail, float_only, tensor


@dataclass(frozen=True)
class MaxPool3DAttrs(Attrs):
    """Relay's MaxPool3DAttrs: padding (front, top, left, back, bottom, right)."""

    pool_size: tuple[int, ...] = (1, 1, 1)
    strides: tuple[int, ...] = (1, 1, 1)
    dilation: tuple[int, ...] = (1, 1, 1)
    padding: tuple[int, ...] = (0, 0, 0)
    layout: str = choice("NCDHW", "NCDHW", "NDHWC")
    ceil_mode: bool = False

    def __post_init__(self):
        set_fields(
            self,
            pool_size=expand_nd(self.pool_size, 3, "pool_size"),
            strides=expand_nd(self.strides, 3, "strides"),
            dilation=expand_nd(self.dilation, 3, "dilation"),
            padding=expand_padding_nd(self.padding, 3),
        )

    def validate(self):
        check_positive(self.pool_size, "pool_size")
        check_positive(self.strides, "strides")
        check_positive(self.dilation, "dilation")
        check_non_negative(self.padding, "padding")


@dataclass(frozen=True)
class AvgPool3DAttrs(MaxPool3DAttrs):
    """Relay's AvgPool3DAttrs: count_include_pad divides by the taps inside the padded input."""

    count_include_pad: bool = False


# ---- pooling ---------------------------------------------------------------------------------


def pool3d_out_shape(data_shape, attrs) -> tuple[int, ...]:
    """The output shape (in attrs.layout) of a 3-D pooling, or fail (the rules of 2-D pooling,
    per axis: padding smaller than the window extent, ceil mode never starting a window in the
    end padding)."""
    if len(data_shape) != 5:
        fail(f"data must be 5-D ({attrs.layout}), got shape {tuple(data_shape)}")
    n, c, *size = canonical_axes(data_shape, attrs.layout, "NCDHW")
    out = _pool3d_dims(size, attrs)
    padded = [s + attrs.padding[j] + attrs.padding[3 + j] for j, s in enumerate(size)]
    check_shape([n, c, *padded], 8, f"its padded input {tuple(data_shape)}")
    dims = {"N": n, "C": c, **dict(zip("DHW", out))}
    return tuple(dims[a] for a in attrs.layout)


def _pool3d_dims(size, attrs) -> list[int]:
    p = attrs.padding
    return [
        pool_dim(
            size[j],
            attrs.pool_size[j],
            attrs.strides[j],
            attrs.dilation[j],
            p[j],
            p[3 + j],
            attrs.ceil_mode,
            "DHW"[j] + " axis",
        )
        for j in range(3)
    ]


def _pool3d_taps(x, attrs, pad_value):
    """(out sizes, [each tap's strided view]) of NCDHW ``x`` padded with ``pad_value`` (and
    ceil mode's overhang past the end padding)."""
    size, p = x.shape[2:], attrs.padding
    out = _pool3d_dims(size, attrs)
    widths = [(0, 0), (0, 0)]
    for j in range(3):
        need = (out[j] - 1) * attrs.strides[j] + attrs.dilation[j] * (attrs.pool_size[j] - 1) + 1
        widths.append((p[j], max(p[3 + j], need - size[j] - p[j])))
    x = np.pad(x, widths, constant_values=np.asarray(pad_value, x.dtype))
    views = [
        x[(slice(None), slice(None), *tap_slices(tap, attrs.strides, attrs.dilation, out))]
        for tap in np.ndindex(*attrs.pool_size)
    ]
    return views


def _max_pool3d_rel(types, attrs):
    data = tensor(types[0], "data")
    if data.dtype not in FLOAT_DTYPES + INT_DTYPES:
        fail(f"data must be a float or integer tensor, got {data.dtype}")
    return TensorType(pool3d_out_shape(data.shape, attrs), data.dtype)


@register_op(
    "nn.max_pool3d",
    inputs=("data",),
    attrs=MaxPool3DAttrs,
    type_rel=_max_pool3d_rel,
    kind="opaque",
)
def max_pool3d(data, attrs):
    """3-D max pooling: the max over each window's taps ``pad(data)[n, c, p*s + t*d -
    pad_before]``; padding counts as -inf (the dtype's minimum for integers). Ceil mode as
    nn.max_pool2d's."""
    lowest = -np.inf if data.dtype.kind == "f" else np.iinfo(data.dtype).min
    x = to_layout(data, attrs.layout, "NCDHW")
    out = np.maximum.reduce(_pool3d_taps(x, attrs, lowest))
    return np.ascontiguousarray(to_layout(out, "NCDHW", attrs.layout).astype(data.dtype))


def _avg_pool3d_rel(types, attrs):
    data = float_only(tensor(types[0], "data"))
    return TensorType(pool3d_out_shape(data.shape, attrs), data.dtype)


@register_op(
    "nn.avg_pool3d",
    inputs=("data",),
    attrs=AvgPool3DAttrs,
    type_rel=_avg_pool3d_rel,
    kind="opaque",
)
def avg_pool3d(data, attrs):
    """3-D average pooling of float data: the float64 sum of each window's taps inside the input
    divided by their number (count_include_pad: inside the padded input; ceil mode's overhang
    never counts), cast to data's dtype. A window with no counted tap gives 0."""
    x = to_layout(data, attrs.layout, "NCDHW").astype(np.float64)
    sums = np.add.reduce(_pool3d_taps(x, attrs, 0.0))
    inside = np.ones((1, 1) + x.shape[2:], np.int64)
    if attrs.count_include_pad:
        p = attrs.padding
        inside = np.pad(
            inside, [(0, 0), (0, 0)] + [(p[j], p[3 + j]) for j in range(3)], constant_values=1
        )
        counts = _count_taps(inside, attrs, x.shape[2:])
    else:
        counts = np.add.reduce(_pool3d_taps(inside, attrs, 0))
    out = sums / np.maximum(counts, 1)
    return np.ascontiguousarray(to_layout(out, "NCDHW", attrs.layout).astype(data.dtype))


def _count_taps(padded_mask, attrs, size):
    """Taps inside the explicitly padded input: the mask (ones over the padded input) pooled
    without further padding, but with the output sizes of the padded pooling."""
    out = _pool3d_dims(size, attrs)
    need = [
        (out[j] - 1) * attrs.strides[j] + attrs.dilation[j] * (attrs.pool_size[j] - 1) + 1
        for j in range(3)
    ]
    extra = [(0, 0), (0, 0)] + [(0, max(0, need[j] - padded_mask.shape[2 + j])) for j in range(3)]
    mask = np.pad(padded_mask, extra)
    return np.add.reduce(
        [
            mask[(slice(None), slice(None), *tap_slices(tap, attrs.strides, attrs.dilation, out))]
            for tap in np.ndindex(*attrs.pool_size)
        ]
    )
