"""Plain tensor ops TFLite models use that the Ethos-U NPU runs: min (REDUCE_MIN, the partner of
tensor_reduce's max) and tile (TILE). Relay's attributes and semantics."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from partita.ir.types import TensorType

from .registry import Attrs, register_op
from .relations import fail, tensor
from .tensor_reduce import ReduceAttrs, reduce_axes, reduced_shape


def _min_rel(types, attrs) -> TensorType:
    data = tensor(types[0], "data")
    axes = reduce_axes(data.ndim, attrs)
    out = TensorType(reduced_shape(data.shape, axes, attrs.keepdims), data.dtype)
    if out.size and any(data.shape[a] == 0 for a in axes):
        fail(f"min over an empty axis of shape {data.shape} (axes {axes}) has no value")
    return out


@register_op("min", inputs=("data",), attrs=ReduceAttrs, type_rel=_min_rel, kind="reduce")
def min_(data, attrs):
    """Smallest element over the reduced axes (as max; any dtype; nan wins, as in numpy).
    Reducing over an empty axis fails the type relation."""
    axes = reduce_axes(data.ndim, attrs)
    return np.asarray(np.min(data, axis=axes, keepdims=attrs.keepdims))


@dataclass(frozen=True)
class TileAttrs(Attrs):
    reps: tuple[int, ...]

    def validate(self):
        if any(int(r) < 0 for r in self.reps):
            raise ValueError(f"reps must be non-negative, got {self.reps}")


def _tile_rel(types, attrs) -> TensorType:
    data = tensor(types[0], "data")
    reps = tuple(int(r) for r in attrs.reps)
    if len(reps) < data.ndim:  # numpy/Relay: missing leading reps are 1
        reps = (1,) * (data.ndim - len(reps)) + reps
    shape = (1,) * (len(reps) - data.ndim) + tuple(data.shape)
    if len(shape) != len(reps):
        fail(f"tile: {len(reps)} reps for a rank-{data.ndim} tensor")
    return TensorType(tuple(s * r for s, r in zip(shape, reps)), data.dtype)


@register_op("tile", inputs=("data",), attrs=TileAttrs, type_rel=_tile_rel, kind="injective")
def tile(data, attrs):
    """The data repeated reps[i] times along axis i (numpy.tile; a shorter reps pads with 1s on
    the left, a longer one adds leading axes)."""
    return np.tile(data, tuple(int(r) for r in attrs.reps))


@dataclass(frozen=True)
class DilateAttrs(Attrs):
    strides: tuple[int, ...]
    dilation_value: float = 0.0

    def validate(self):
        if any(int(s) < 1 for s in self.strides):
            raise ValueError(f"strides must be positive, got {self.strides}")


def _dilate_rel(types, attrs) -> TensorType:
    data = tensor(types[0], "data")
    if len(attrs.strides) != data.ndim:
        fail(f"nn.dilate: {len(attrs.strides)} strides for a rank-{data.ndim} tensor")
    shape = tuple((d - 1) * int(s) + 1 if d else 0 for d, s in zip(data.shape, attrs.strides))
    return TensorType(shape, data.dtype)


@register_op(
    "nn.dilate", inputs=("data",), attrs=DilateAttrs, type_rel=_dilate_rel, kind="injective"
)
def dilate(data, attrs):
    """Relay's nn.dilate: strides[i] - 1 copies of dilation_value between neighbours along axis
    i (a transposed convolution's zero insertion; for quantized data the value is the input's
    zero point)."""
    shape = tuple((d - 1) * int(s) + 1 if d else 0 for d, s in zip(data.shape, attrs.strides))
    out = np.full(shape, attrs.dilation_value, data.dtype)
    out[tuple(slice(None, None, int(s)) for s in attrs.strides)] = data
    return out


@dataclass(frozen=True)
class ReverseAttrs(Attrs):
    axis: int


def _reverse_rel(types, attrs) -> TensorType:
    data = tensor(types[0], "data")
    if not -data.ndim <= attrs.axis < data.ndim:
        fail(f"reverse: axis {attrs.axis} is out of range for rank {data.ndim}")
    return data


@register_op(
    "reverse", inputs=("data",), attrs=ReverseAttrs, type_rel=_reverse_rel, kind="injective"
)
def reverse(data, attrs):
    """The data in reverse order along ``axis`` (Relay's reverse; TFLite's REVERSE_V2)."""
    return np.flip(data, axis=attrs.axis).copy()
