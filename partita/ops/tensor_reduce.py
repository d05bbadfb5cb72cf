"""Plain reductions: sum, mean, max and argmax (Relay's attributes and semantics).

``axis`` None or () reduces every axis (Relay); ``exclude`` reduces the axes *not* listed;
``keepdims`` keeps reduced axes with size 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from partita.ir.types import TensorType

from .registry import Attrs, register_op
from .relations import fail, tensor
from .tensor import numeric
from .tensor_transform import checked_axes


@dataclass(frozen=True)
class ReduceAttrs(Attrs):
    axis: tuple[int, ...] | None = None
    keepdims: bool = False
    exclude: bool = False


@dataclass(frozen=True)
class ArgReduceAttrs(Attrs):
    axis: tuple[int, ...] | None = None
    keepdims: bool = False
    exclude: bool = False
    select_last_index: bool = False


def reduce_axes(ndim: int, attrs) -> tuple[int, ...]:
    """The sorted, non-negative axes a reduction runs over."""
    if not attrs.axis:
        return tuple(range(ndim))
    axes = checked_axes(attrs.axis, ndim)
    if attrs.exclude:
        return tuple(i for i in range(ndim) if i not in axes)
    return tuple(sorted(axes))


def reduced_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_type(data: TensorType, attrs, dtype: str | None = None) -> TensorType:
    axes = reduce_axes(data.ndim, attrs)
    return TensorType(reduced_shape(data.shape, axes, attrs.keepdims), dtype or data.dtype)


def _nonempty(data: TensorType, attrs, op: str) -> TensorType:
    """max and argmax have no value over an empty axis."""
    axes = reduce_axes(data.ndim, attrs)
    out = _reduce_type(data, attrs)
    if out.size and any(data.shape[a] == 0 for a in axes):
        fail(f"{op} over an empty axis of shape {data.shape} (axes {axes}) has no value")
    return out


def _sum_rel(types, attrs) -> TensorType:
    return _reduce_type(numeric(tensor(types[0], "data")), attrs)


def _mean_rel(types, attrs) -> TensorType:
    data = tensor(types[0], "data")
    if data.dtype not in ("float16", "float32", "int32", "int64"):
        fail(
            f"mean needs float16, float32, int32 or int64 data, got {data.dtype} (for quantized "
            f"data use qnn.mean, or cast to int32 first, as Relay's TFLite MEAN does)"
        )
    return _reduce_type(data, attrs)


def _max_rel(types, attrs) -> TensorType:
    return _nonempty(tensor(types[0], "data"), attrs, "max")


def _argmax_rel(types, attrs) -> TensorType:
    out = _nonempty(tensor(types[0], "data"), attrs, "argmax")
    return TensorType(out.shape, "int32")


@register_op("sum", inputs=("data",), attrs=ReduceAttrs, type_rel=_sum_rel, kind="reduce")
def sum_(data, attrs):
    """Sum over ``axis`` (None or (): all axes; ``exclude``: all but those; ``keepdims`` keeps
    them with size 1), in the input dtype. Integers wrap (the exact sum modulo 2**bits); floats
    accumulate in float64 and round once. An empty sum is 0."""
    axes = reduce_axes(data.ndim, attrs)
    acc = np.float64 if data.dtype.kind == "f" else np.int64
    out = np.sum(data, axis=axes, dtype=acc, keepdims=attrs.keepdims)
    return np.asarray(out).astype(data.dtype)


@register_op("mean", inputs=("data",), attrs=ReduceAttrs, type_rel=_mean_rel, kind="reduce")
def mean(data, attrs):
    """Arithmetic mean over the reduced axes (as in sum). float16/float32: accumulated in
    float64, rounded once; the mean of nothing is nan. int32/int64 (Relay's integer mean, what
    TVM's TFLite frontend builds MEAN from): the sum in the data's dtype (wrapping, as sum),
    divided by the count truncating toward zero (C's ``/``); the mean of nothing is 0."""
    axes = reduce_axes(data.ndim, attrs)
    count = math.prod(data.shape[a] for a in axes)
    if data.dtype.kind == "i":
        total = np.asarray(sum_(data, attrs)).astype(np.int64)
        if count == 0:
            return np.zeros_like(total, data.dtype)
        quotient = np.abs(total) // count * np.sign(total)
        return quotient.astype(data.dtype)
    total = np.sum(data, axis=axes, dtype=np.float64, keepdims=attrs.keepdims)
    with np.errstate(invalid="ignore"):
        return np.asarray(total / np.float64(count)).astype(data.dtype)


@register_op("max", inputs=("data",), attrs=ReduceAttrs, type_rel=_max_rel, kind="reduce")
def max_(data, attrs):
    """Largest element over the reduced axes (as in sum; any dtype; nan wins, as in numpy).
    Reducing over an empty axis fails the type relation."""
    axes = reduce_axes(data.ndim, attrs)
    return np.asarray(np.max(data, axis=axes, keepdims=attrs.keepdims))


@register_op("argmax", inputs=("data",), attrs=ArgReduceAttrs, type_rel=_argmax_rel, kind="reduce")
def argmax(data, attrs):
    """int32 index of the largest element over the reduced axes (as in sum), a row-major index
    into the reduced axes taken together (TVM). Ties go to the first index, or the last with
    ``select_last_index``; nan counts as the largest."""
    axes = reduce_axes(data.ndim, attrs)
    kept = [i for i in range(data.ndim) if i not in axes]
    count = math.prod(data.shape[a] for a in axes)
    flat = np.transpose(data, kept + list(axes)).reshape([data.shape[i] for i in kept] + [count])
    if attrs.select_last_index:
        index = count - 1 - np.argmax(flat[..., ::-1], axis=-1)
    else:
        index = np.argmax(flat, axis=-1)
    return np.asarray(index, dtype=np.int32).reshape(
        reduced_shape(data.shape, axes, attrs.keepdims)
    )
