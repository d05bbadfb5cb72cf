"""1-D and 3-D convolutions, ops Relay BYOC pattern tables name (issue 27): ``nn.conv1d``,
``nn.conv3d``, ``nn.conv3d_transpose`` (3-D pooling: nn_pool3d.py).

Each reference is written once for any number of spatial axes, on data in "NC" + spatial order
and kernels in "OI" + spatial ("IO" + spatial for transposed ones): a loop over the kernel taps,
each tap one exact matmul over the channels (float64 or exact int64). Layouts are converted at
the edges. Attribute names and defaults are Relay's (Conv1DAttrs, Conv3DAttrs, ...).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from partita.ir.types import TensorType
from partita.limits import check_shape

from .nn_common import (
    OUT_DTYPES,
    accumulator_dtype,
    cast_result,
    check_non_negative,
    check_positive,
    exact_matmul,
    product_dtype,
    set_fields,
    to_layout,
)
from .registry import Attrs, choice, register_op
from .relations import fail, tensor


def expand_nd(values, n: int, what: str) -> tuple[int, ...]:
    """Relay's expansion of a per-axis attribute: 1 value -> n values; n values stay."""
    values = tuple(values) if isinstance(values, (tuple, list)) else (values,)
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise ValueError(f"{what} must have 1 or {n} values, got {values}")
    return values


def expand_padding_nd(padding, n: int) -> tuple[int, ...]:
    """Relay's padding of n spatial axes: 1 value -> all sides; n values -> (before..., after...)
    equal; 2n values (all befores, then all afters) stay."""
    padding = tuple(padding) if isinstance(padding, (tuple, list)) else (padding,)
    if len(padding) == 1:
        return padding * (2 * n)
    if len(padding) == n:
        return padding * 2
    if len(padding) != 2 * n:
        raise ValueError(
            f"padding must have 1, {n} or {2 * n} values (befores then afters), got {padding}"
        )
    return padding


def _spatial(layout: str) -> str:
    return "".join(a for a in layout if a not in "NCOI")


# ---- attributes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ConvNDAttrs(Attrs):
    strides: tuple[int, ...] = (1,)
    padding: tuple[int, ...] = (0,)
    dilation: tuple[int, ...] = (1,)
    groups: int = 1
    channels: int | None = None
    kernel_size: tuple[int, ...] | None = None

    NDIM = 1

    def __post_init__(self):
        n = self.NDIM
        set_fields(
            self,
            strides=expand_nd(self.strides, n, "strides"),
            dilation=expand_nd(self.dilation, n, "dilation"),
            padding=expand_padding_nd(self.padding, n),
        )
        if self.kernel_size is not None:
            set_fields(self, kernel_size=expand_nd(self.kernel_size, n, "kernel_size"))

    def validate(self):
        check_positive(self.strides, "strides")
        check_positive(self.dilation, "dilation")
        check_non_negative(self.padding, "padding")
        if self.groups < 1:
            raise ValueError(f"groups must be positive, got {self.groups}")
        if self.kernel_size is not None:
            check_positive(self.kernel_size, "kernel_size")
        if self.channels is not None and self.channels < 1:
            raise ValueError(f"channels must be positive, got {self.channels}")


@dataclass(frozen=True)
class Conv1DAttrs(_ConvNDAttrs):
    """Relay's Conv1DAttrs: padding (left, right); kernel O = output channels, I = data
    channels / groups."""

    data_layout: str = choice("NCW", "NCW", "NWC")
    kernel_layout: str = choice("OIW", "OIW", "WIO")
    out_dtype: str = choice("", *OUT_DTYPES)


@dataclass(frozen=True)
class Conv3DAttrs(_ConvNDAttrs):
    """Relay's Conv3DAttrs: padding (front, top, left, back, bottom, right)."""

    strides: tuple[int, ...] = (1, 1, 1)
    padding: tuple[int, ...] = (0, 0, 0)
    dilation: tuple[int, ...] = (1, 1, 1)
    data_layout: str = choice("NCDHW", "NCDHW", "NDHWC")
    kernel_layout: str = choice("OIDHW", "OIDHW", "DHWIO")
    out_dtype: str = choice("", *OUT_DTYPES)
    NDIM = 3


@dataclass(frozen=True)
class Conv3DTransposeAttrs(_ConvNDAttrs):
    """Relay's Conv3DTransposeAttrs: kernel "IODHW" = (C, O / groups, KD, KH, KW)."""

    strides: tuple[int, ...] = (1, 1, 1)
    padding: tuple[int, ...] = (0, 0, 0)
    dilation: tuple[int, ...] = (1, 1, 1)
    output_padding: tuple[int, ...] = (0, 0, 0)
    data_layout: str = choice("NCDHW", "NCDHW", "NDHWC")
    kernel_layout: str = choice("IODHW", "IODHW", "DHWOI")
    out_dtype: str = choice("", *OUT_DTYPES)
    NDIM = 3

    def __post_init__(self):
        super().__post_init__()
        set_fields(self, output_padding=expand_nd(self.output_padding, 3, "output_padding"))

    def validate(self):
        super().validate()
        check_non_negative(self.output_padding, "output_padding")
        for op, s, d in zip(self.output_padding, self.strides, self.dilation):
            if op >= max(s, d):
                raise ValueError(
                    f"output_padding {self.output_padding} must be smaller than "
                    f"the stride {self.strides} or the dilation {self.dilation}"
                )


# ---- convolution -----------------------------------------------------------------------------


def canonical_axes(shape, layout: str, letters: str) -> tuple[int, ...]:
    return tuple(shape[layout.index(a)] for a in letters)


def _out_len(size, k, s, d, before, after, axis, data, kernel) -> int:
    extent, padded = d * (k - 1) + 1, size + before + after
    if extent > padded:
        fail(
            f"the kernel's {axis} extent {extent} (size {k}, dilation {d}) does not fit data "
            f"{data}'s padded {axis} {padded} ({size} + padding {before} + {after}) "
            f"(kernel {kernel})"
        )
    return (padded - extent) // s + 1


def conv_nd_out_shape(data_shape, weight_shape, attrs) -> tuple[int, ...]:
    """The output shape (in attrs.data_layout) of an N-d convolution, or fail naming the shapes."""
    dl, kl, g = attrs.data_layout, attrs.kernel_layout, attrs.groups
    sp = _spatial(dl)
    data, kernel = f"{tuple(data_shape)} ({dl})", f"{tuple(weight_shape)} ({kl})"
    if len(data_shape) != len(dl):
        fail(f"data must be {len(dl)}-D ({dl}), got shape {tuple(data_shape)}")
    if len(weight_shape) != len(kl):
        fail(f"kernel must be {len(kl)}-D ({kl}), got shape {tuple(weight_shape)}")
    n, c, *size = canonical_axes(data_shape, dl, "NC" + sp)
    o, i, *k = canonical_axes(weight_shape, kl, "OI" + sp)
    if c % g or o % g:
        fail(f"data {data} and kernel {kernel}: channels {c} and {o} must divide by groups={g}")
    if i != c // g:
        fail(f"kernel {kernel} has {i} input channels, but data {data} has {c} / groups={g}")
    if attrs.channels is not None and attrs.channels != o:
        fail(f"channels={attrs.channels} but kernel {kernel} has {o} output channels")
    if attrs.kernel_size is not None and tuple(attrs.kernel_size) != tuple(k):
        fail(f"kernel_size={tuple(attrs.kernel_size)} but kernel {kernel} is {tuple(k)}")
    nsp = len(sp)
    pads = attrs.padding
    out = [
        _out_len(
            size[j],
            k[j],
            attrs.strides[j],
            attrs.dilation[j],
            pads[j],
            pads[nsp + j],
            sp[j],
            data,
            kernel,
        )
        for j in range(nsp)
    ]
    padded = [n, c] + [size[j] + pads[j] + pads[nsp + j] for j in range(nsp)]
    check_shape(padded, 8, f"its padded input {data}")
    dims = {"N": n, "C": o, **dict(zip(sp, out))}
    return tuple(dims[a] for a in dl)


def tap_slices(tap, strides, dilation, out_sizes):
    return tuple(
        slice(t * d, t * d + (o - 1) * s + 1, s)
        for t, s, d, o in zip(tap, strides, dilation, out_sizes)
    )


def conv_nd_reference(x, w, strides, padding, dilation, groups, pad_value=0, acc_dtype=None):
    """The convolution of ``x`` (N, C, *spatial) with ``w`` (O, C / groups, *kernel) as an
    accumulator (float64, or exact int64 for integers, or ``acc_dtype``) of shape
    (N, O, *out): ``out[n, o, p] = sum_{c, t} pad(x)[n, g*Cg + c, p*s + t*d] * w[o, c, t]``."""
    acc = np.dtype(acc_dtype) if acc_dtype is not None else accumulator_dtype(x.dtype)
    nsp = x.ndim - 2
    widths = [(0, 0), (0, 0)] + [(padding[j], padding[nsp + j]) for j in range(nsp)]
    x = np.pad(x, widths, constant_values=np.asarray(pad_value, x.dtype))
    n, c, *size = x.shape
    o, cg, *k = w.shape
    out_sizes = [(size[j] - dilation[j] * (k[j] - 1) - 1) // strides[j] + 1 for j in range(nsp)]
    m = int(np.prod(out_sizes))
    out = np.zeros((groups, n * m, o // groups), acc)
    xg = x.reshape(n, groups, cg, *size)
    wg = w.reshape(groups, o // groups, cg, *k)
    for tap in np.ndindex(*k):
        xs = xg[(slice(None),) * 3 + tap_slices(tap, strides, dilation, out_sizes)]
        cols = np.moveaxis(xs, 2, -1).transpose(1, 0, *range(2, nsp + 3))
        cols = cols.reshape(groups, n * m, cg)  # (G, N*out, Cg)
        out += exact_matmul(cols, wg[(Ellipsis, *tap)].transpose(0, 2, 1), acc)
    out = out.reshape(groups, n, *out_sizes, o // groups)
    out = out.transpose(1, 0, nsp + 2, *range(2, nsp + 2))  # (N, G, O/G, *out)
    return out.reshape(n, o, *out_sizes)


def _conv_nd_rel(types, attrs):
    data, weight = tensor(types[0], "data"), tensor(types[1], "weight")
    dtype = product_dtype(data, weight, attrs.out_dtype)
    return TensorType(conv_nd_out_shape(data.shape, weight.shape, attrs), dtype)


def _conv_nd(data, weight, attrs):
    sp = _spatial(attrs.data_layout)
    x = to_layout(data, attrs.data_layout, "NC" + sp)
    w = to_layout(weight, attrs.kernel_layout, "OI" + sp)
    acc = conv_nd_reference(x, w, attrs.strides, attrs.padding, attrs.dilation, attrs.groups)
    out = to_layout(acc, "NC" + sp, attrs.data_layout)
    return np.ascontiguousarray(cast_result(out, attrs.out_dtype or data.dtype.name))


@register_op(
    "nn.conv1d",
    inputs=("data", "weight"),
    attrs=Conv1DAttrs,
    type_rel=_conv_nd_rel,
    kind="out_elemwise_fusable",
)
def conv1d(data, weight, attrs):
    """1-D convolution (cross-correlation) with groups, as Relay: ``out[n, o, x] =
    sum_{c, b} pad(data)[n, g*Cg + c, x*s + b*d] * weight[o, c, b]``, g = o // (O / groups),
    zero padding (left, right). Float data accumulates in float64, integer data exactly in
    int64; the sum is cast to out_dtype ("" = data's dtype)."""
    return _conv_nd(data, weight, attrs)


@register_op(
    "nn.conv3d",
    inputs=("data", "weight"),
    attrs=Conv3DAttrs,
    type_rel=_conv_nd_rel,
    kind="out_elemwise_fusable",
)
def conv3d(data, weight, attrs):
    """3-D convolution with groups, as Relay: nn.conv1d's sum over the channel and the
    (depth, row, column) taps, zero padding (front, top, left, back, bottom, right); float64 or
    exact int64 accumulation, cast to out_dtype ("" = data's dtype)."""
    return _conv_nd(data, weight, attrs)


def conv_nd_transpose_out_shape(data_shape, weight_shape, attrs) -> tuple[int, ...]:
    """The output shape of an N-d transposed convolution, or fail: out = (in - 1) * stride -
    pad_before - pad_after + dilation * (k - 1) + output_padding + 1."""
    dl, kl, g = attrs.data_layout, attrs.kernel_layout, attrs.groups
    sp = _spatial(dl)
    data, kernel = f"{tuple(data_shape)} ({dl})", f"{tuple(weight_shape)} ({kl})"
    if len(data_shape) != len(dl):
        fail(f"data must be {len(dl)}-D ({dl}), got shape {tuple(data_shape)}")
    if len(weight_shape) != len(kl):
        fail(f"kernel must be {len(kl)}-D ({kl}), got shape {tuple(weight_shape)}")
    n, c, *size = canonical_axes(data_shape, dl, "NC" + sp)
    i, og, *k = canonical_axes(weight_shape, kl, "IO" + sp)
    if c % g:
        fail(f"data {data} has {c} channels, not divisible by groups={g}")
    if i != c:
        fail(f"kernel {kernel} has {i} input channels, but data {data} has {c} channels")
    if attrs.channels is not None and attrs.channels != og * g:
        fail(f"channels={attrs.channels} but kernel {kernel} gives {og * g} output channels")
    if attrs.kernel_size is not None and tuple(attrs.kernel_size) != tuple(k):
        fail(f"kernel_size={tuple(attrs.kernel_size)} but kernel {kernel} is {tuple(k)}")
    nsp = len(sp)
    pads = attrs.padding
    out = [
        (size[j] - 1) * attrs.strides[j]
        - pads[j]
        - pads[nsp + j]
        + attrs.dilation[j] * (k[j] - 1)
        + attrs.output_padding[j]
        + 1
        for j in range(nsp)
    ]
    if min(out) < 1:
        fail(f"padding {pads} leaves an empty output {tuple(out)} for data {data}, kernel {kernel}")
    dims = {"N": n, "C": og * g, **dict(zip(sp, out))}
    return tuple(dims[a] for a in dl)


def conv_nd_transpose_reference(x, w, attrs, acc_dtype=None):
    """The transposed convolution of ``x`` (N, C, *spatial) with ``w`` (C, O / groups, *kernel)
    as an accumulator (N, O, *out): input position p of channel c adds ``x[n, c, p] *
    w[c, o, t]`` to output (g*Og + o, p*s + t*d - pad_before); output_padding adds positions at
    the end of each axis."""
    acc = np.dtype(acc_dtype) if acc_dtype is not None else accumulator_dtype(x.dtype)
    g, nsp = attrs.groups, x.ndim - 2
    n, c, *size = x.shape
    _, og, *k = w.shape
    s, d, pads = attrs.strides, attrs.dilation, attrs.padding
    full = [
        (size[j] - 1) * s[j] + d[j] * (k[j] - 1) + 1 + attrs.output_padding[j] for j in range(nsp)
    ]
    out = np.zeros((n, g, og, *full), acc)
    m = int(np.prod(size))
    rows = np.moveaxis(x.reshape(n, g, c // g, m), 2, -1).transpose(1, 0, 2, 3)
    rows = rows.reshape(g, n * m, c // g)
    wg = w.reshape(g, c // g, og, *k)
    for tap in np.ndindex(*k):
        part = exact_matmul(rows, wg[(Ellipsis, *tap)], acc)  # (G, N*M, Og)
        part = part.reshape(g, n, *size, og).transpose(1, 0, nsp + 2, *range(2, nsp + 2))
        out[(slice(None),) * 3 + tap_slices(tap, s, d, size)] += part
    crop = tuple(slice(pads[j], full[j] - pads[nsp + j]) for j in range(nsp))
    return out.reshape(n, g * og, *full)[(slice(None), slice(None), *crop)]


def _conv_nd_transpose_rel(types, attrs):
    data, weight = tensor(types[0], "data"), tensor(types[1], "weight")
    dtype = product_dtype(data, weight, attrs.out_dtype)
    return TensorType(conv_nd_transpose_out_shape(data.shape, weight.shape, attrs), dtype)


@register_op(
    "nn.conv3d_transpose",
    inputs=("data", "weight"),
    attrs=Conv3DTransposeAttrs,
    type_rel=_conv_nd_transpose_rel,
    kind="out_elemwise_fusable",
)
def conv3d_transpose(data, weight, attrs):
    """Transposed 3-D convolution, as Relay/PyTorch: each input voxel p of channel c adds
    ``data[n, c, p] * weight[c, o, t]`` to output (g*Og + o, p*stride + t*dilation -
    pad_before); contributions outside the output are dropped, output_padding extends the end
    of each axis. Kernel "IODHW" = (C, Og, KD, KH, KW). float64 or exact int64 accumulation,
    cast to out_dtype ("" = data's dtype)."""
    sp = _spatial(attrs.data_layout)
    x = to_layout(data, attrs.data_layout, "NC" + sp)
    w = to_layout(weight, attrs.kernel_layout, "IO" + sp)
    out = to_layout(conv_nd_transpose_reference(x, w, attrs), "NC" + sp, attrs.data_layout)
    return np.ascontiguousarray(cast_result(out, attrs.out_dtype or data.dtype.name))
