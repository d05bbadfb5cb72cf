"""Plain tensor ops that move data without arithmetic: reshape, transpose, squeeze, expand_dims,
concatenate, split and strided_slice (Relay's names, attributes and semantics)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from partita.ir.types import TensorType, TupleType

from .registry import Attrs, choice, register_op
from .relations import fail, same_dtype, tensor, tuple_of_tensors


def checked_axis(axis: int, ndim: int, what: str = "axis") -> int:
    """``axis`` in [-ndim, ndim) made non-negative, or fail (a rank-0 tensor has no axis)."""
    if not -ndim <= axis < ndim:
        fail(f"{what} {axis} is out of range for a tensor of rank {ndim}")
    return axis % ndim


def checked_axes(axes, ndim: int, what: str = "axis") -> list[int]:
    """Each axis made non-negative; out-of-range or repeated axes fail."""
    out = [checked_axis(a, ndim, what) for a in axes]
    if len(set(out)) != len(out):
        fail(f"{what} {tuple(axes)} names an axis twice (rank {ndim})")
    return out


# ---- reshape -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReshapeAttrs(Attrs):
    newshape: tuple[int, ...]

    def validate(self) -> None:
        bad = [d for d in self.newshape if d < -1]
        if bad:
            raise ValueError(
                f"newshape {self.newshape}: {bad[0]} is not a dimension (use -1 to "
                f"infer one dimension, 0 to copy the input's)"
            )
        if self.newshape.count(-1) > 1:
            raise ValueError(f"newshape {self.newshape} has more than one -1")


def reshape_shape(shape: tuple, newshape: tuple) -> tuple:
    """Relay's newshape resolution: 0 copies the input dimension at that position, one -1 is
    inferred from the element count."""
    out = []
    for i, d in enumerate(newshape):
        if d == 0:
            if i >= len(shape):
                fail(
                    f"newshape {newshape} has 0 at position {i}, but the input {shape} has no "
                    f"dimension {i} to copy"
                )
            d = shape[i]
        out.append(d)
    size = math.prod(shape)
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        if known == 0:
            fail(
                f"cannot reshape {shape} to {newshape}: the other dimensions multiply to 0, so "
                f"the -1 is ambiguous"
            )
        if size % known:
            fail(
                f"cannot reshape {shape} ({size} elements) to {newshape}: no size for the -1 "
                f"makes {size} elements"
            )
        out[out.index(-1)] = size // known
    elif math.prod(out) != size:
        fail(f"cannot reshape {shape} ({size} elements) to {newshape} ({math.prod(out)} elements)")
    return tuple(out)


def _reshape_rel(types, attrs) -> TensorType:
    data = tensor(types[0], "data")
    return TensorType(reshape_shape(data.shape, attrs.newshape), data.dtype)


@register_op(
    "reshape", inputs=("data",), attrs=ReshapeAttrs, type_rel=_reshape_rel, kind="injective"
)
def reshape(data, attrs):
    """Row-major reshape to ``newshape``; 0 copies the input dimension at the same position,
    one -1 is inferred (Relay). The element count must not change."""
    return data.reshape(reshape_shape(data.shape, attrs.newshape))


# ---- transpose, squeeze, expand_dims -----------------------------------------------------------


@dataclass(frozen=True)
class TransposeAttrs(Attrs):
    axes: tuple[int, ...] | None = None


def _permutation(ndim: int, axes) -> tuple:
    if not axes:
        return tuple(reversed(range(ndim)))
    if len(axes) != ndim:
        fail(f"axes {axes} must list each of the {ndim} axes of the input once")
    return tuple(checked_axes(axes, ndim, "axes"))


def _transpose_rel(types, attrs) -> TensorType:
    data = tensor(types[0], "data")
    perm = _permutation(data.ndim, attrs.axes)
    return TensorType(tuple(data.shape[a] for a in perm), data.dtype)


@register_op(
    "transpose", inputs=("data",), attrs=TransposeAttrs, type_rel=_transpose_rel, kind="injective"
)
def transpose(data, attrs):
    """Output axis i is input axis axes[i] (negative axes count from the end); None or ()
    reverses the axes (Relay)."""
    return np.transpose(data, _permutation(data.ndim, attrs.axes))


@dataclass(frozen=True)
class SqueezeAttrs(Attrs):
    axis: tuple[int, ...] | None = None


def _squeezed(shape: tuple, axis) -> tuple:
    if axis is None:
        return tuple(d for d in shape if d != 1)
    drop = checked_axes(axis, len(shape))
    for a in drop:
        if shape[a] != 1:
            fail(f"cannot squeeze axis {a} of shape {shape}: its size is {shape[a]}, not 1")
    return tuple(d for i, d in enumerate(shape) if i not in drop)


def _squeeze_rel(types, attrs) -> TensorType:
    data = tensor(types[0], "data")
    return TensorType(_squeezed(data.shape, attrs.axis), data.dtype)


@register_op(
    "squeeze", inputs=("data",), attrs=SqueezeAttrs, type_rel=_squeeze_rel, kind="injective"
)
def squeeze(data, attrs):
    """Drop the listed axes, which must have size 1; None drops every size-1 axis, () none."""
    return data.reshape(_squeezed(data.shape, attrs.axis))


@dataclass(frozen=True)
class ExpandDimsAttrs(Attrs):
    axis: int
    num_newaxis: int = 1

    def validate(self) -> None:
        if self.num_newaxis < 0:
            raise ValueError(f"num_newaxis must be >= 0, got {self.num_newaxis}")


def _expanded(shape: tuple, attrs) -> tuple:
    ndim, axis = len(shape), attrs.axis
    if not -ndim - 1 <= axis <= ndim:
        fail(
            f"axis {axis} is out of range [{-ndim - 1}, {ndim}] for inserting into a tensor "
            f"of rank {ndim}"
        )
    axis = axis if axis >= 0 else axis + ndim + 1
    return shape[:axis] + (1,) * attrs.num_newaxis + shape[axis:]


def _expand_dims_rel(types, attrs) -> TensorType:
    data = tensor(types[0], "data")
    return TensorType(_expanded(data.shape, attrs), data.dtype)


@register_op(
    "expand_dims",
    inputs=("data",),
    attrs=ExpandDimsAttrs,
    type_rel=_expand_dims_rel,
    kind="injective",
)
def expand_dims(data, attrs):
    """Insert ``num_newaxis`` axes of size 1 at ``axis`` in [-ndim-1, ndim]; a negative axis
    counts from the end of the output (-1 appends)."""
    return data.reshape(_expanded(data.shape, attrs))


# ---- concatenate and split ---------------------------------------------------------------------


@dataclass(frozen=True)
class ConcatenateAttrs(Attrs):
    axis: int = 0


def _concatenate_rel(types, attrs) -> TensorType:
    fields = tuple_of_tensors(types[0], "data")
    if not fields:
        fail("data must hold at least one tensor")
    dtype = same_dtype(fields, "the tensors in data")
    shapes = ", ".join(str(f.shape) for f in fields)
    first = fields[0]
    if any(f.ndim != first.ndim for f in fields):
        fail(f"the tensors in data must have one rank, got shapes {shapes}")
    axis = checked_axis(attrs.axis, first.ndim)
    for f in fields:
        if any(d != e for i, (d, e) in enumerate(zip(f.shape, first.shape)) if i != axis):
            fail(f"shapes {shapes} differ outside axis {axis}")
    total = sum(f.shape[axis] for f in fields)
    return TensorType(first.shape[:axis] + (total,) + first.shape[axis + 1 :], dtype)


@register_op(
    "concatenate",
    inputs=("data",),
    attrs=ConcatenateAttrs,
    type_rel=_concatenate_rel,
    kind="injective",
)
def concatenate(data, attrs):
    """Join the tensors of the tuple ``data`` along ``axis``; they share a dtype and all other
    dimensions."""
    return np.concatenate(data, axis=attrs.axis)


@dataclass(frozen=True)
class SplitAttrs(Attrs):
    indices_or_sections: int | tuple[int, ...]
    axis: int = 0

    def validate(self) -> None:
        ios = self.indices_or_sections
        if isinstance(ios, int):
            if ios < 1:
                raise ValueError(f"indices_or_sections must be >= 1 sections, got {ios}")
        elif any(b <= a for a, b in zip((0,) + ios, ios)):
            raise ValueError(f"split indices {ios} must be positive and strictly ascending")


def _split_sizes(shape: tuple, attrs) -> tuple[int, list[int]]:
    axis = checked_axis(attrs.axis, len(shape))
    dim, ios = shape[axis], attrs.indices_or_sections
    if isinstance(ios, int):
        if dim % ios:
            fail(f"cannot split axis {axis} of shape {shape} into {ios} equal sections")
        return axis, [dim // ios] * ios
    if ios and ios[-1] >= dim:
        fail(f"split indices {ios} must be below {dim}, the size of axis {axis} of shape {shape}")
    bounds = (0,) + ios + (dim,)
    return axis, [b - a for a, b in zip(bounds, bounds[1:])]


def _split_rel(types, attrs) -> TupleType:
    data = tensor(types[0], "data")
    axis, sizes = _split_sizes(data.shape, attrs)
    shape = data.shape
    return TupleType(
        [TensorType(shape[:axis] + (n,) + shape[axis + 1 :], data.dtype) for n in sizes]
    )


@register_op("split", inputs=("data",), attrs=SplitAttrs, type_rel=_split_rel, kind="injective")
def split(data, attrs):
    """Split along ``axis`` into a tuple: an int n gives n equal parts (n must divide the axis);
    a tuple gives the strictly ascending indices where parts start, as numpy.split (Relay)."""
    axis, sizes = _split_sizes(data.shape, attrs)
    return tuple(np.split(data, np.cumsum(sizes)[:-1], axis=axis))


# ---- strided_slice -----------------------------------------------------------------------------


@dataclass(frozen=True)
class StridedSliceAttrs(Attrs):
    begin: tuple[int, ...]
    end: tuple[int, ...]
    strides: tuple[int, ...] | None = None
    axes: tuple[int, ...] | None = None
    slice_mode: str = choice("end", "end", "size")

    def validate(self) -> None:
        strides = self.strides or ()
        if len(self.begin) != len(self.end):
            raise ValueError(f"begin {self.begin} and end {self.end} differ in length")
        if 0 in strides:
            raise ValueError(f"strides {strides} contain 0")
        if self.slice_mode == "size" and any(s != 1 for s in strides):
            raise ValueError(f"slice_mode 'size' takes unit strides, got {strides}")
        if self.axes is not None and not (len(self.begin) == len(self.axes) >= len(strides)):
            raise ValueError(
                f"begin and end need one entry per axis in axes {self.axes} "
                f"(strides at most one), got begin {self.begin}, strides {strides}"
            )


def _canonical(index: int, dim: int, stride: int) -> int:
    """TVM's CanonicalizeIndex: negative counts from the end, then clamp to the valid range."""
    if index < 0:
        index += dim
    return min(max(index, -1 if stride < 0 else 0), dim - 1 if stride < 0 else dim)


def slice_plan(shape: tuple, attrs) -> list[tuple[int, int, int]]:
    """(start, length, stride) per axis of ``shape`` for strided_slice."""
    ndim = len(shape)
    strides = attrs.strides or ()
    n = max(len(attrs.begin), len(strides)) if attrs.axes is None else len(attrs.axes)
    axes = checked_axes(attrs.axes, ndim, "axes") if attrs.axes is not None else range(n)
    if n > ndim:
        fail(f"begin {attrs.begin} and strides {strides} slice {n} axes of shape {shape}")
    plan = [(0, d, 1) for d in shape]
    for i, axis in enumerate(axes):
        dim = shape[axis]
        s = strides[i] if i < len(strides) else 1
        if i < len(attrs.begin):
            b = _canonical(attrs.begin[i], dim, s)
        else:
            b = 0 if s > 0 else dim - 1
        if i >= len(attrs.end):
            e = dim if s > 0 else -1
        elif attrs.slice_mode == "size":
            e = dim if attrs.end[i] < 0 else min(b + attrs.end[i], dim)
        else:
            e = _canonical(attrs.end[i], dim, s)
        length = max(0, -(-(e - b) // s))
        plan[axis] = (b, length, s)
    return plan


def _strided_slice_rel(types, attrs) -> TensorType:
    data = tensor(types[0], "data")
    return TensorType([n for _, n, _ in slice_plan(data.shape, attrs)], data.dtype)


@register_op(
    "strided_slice",
    inputs=("data",),
    attrs=StridedSliceAttrs,
    type_rel=_strided_slice_rel,
    kind="injective",
)
def strided_slice(data, attrs):
    """data[begin:end:strides] per axis (Relay). Without ``axes``, begin/end/strides cover the
    leading axes (strides padded with 1). Negative indices count from the end; indices clamp to
    the axis; an empty range gives size 0. slice_mode "size": end[i] is a size, -1 = to the end."""
    index = []
    for start, length, stride in slice_plan(data.shape, attrs):
        stop = start + length * stride
        index.append(slice(start, stop if stop >= 0 else None, stride) if length else slice(0, 0))
    return data[tuple(index)]
