"""Ops Relay BYOC pattern tables name (issue 27): ``left_shift`` / ``right_shift`` (integer
shifts, Relay's broadcasting), ``fixed_point_multiply`` (Relay's int32 Q31 multiply) and
``nn.depth_to_space`` (Relay's DCR and CRD modes, NCHW or NHWC)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from partita.ir.types import TensorType

from .registry import Attrs, choice, register_op
from .relations import broadcast_rel, fail, tensor

_INT = ("int8", "uint8", "int16", "int32", "int64")


def _shift_rel(types, attrs) -> TensorType:
    out = broadcast_rel(types, attrs)
    if out.dtype not in _INT:
        fail(f"shifts take integers, got {out.dtype}")
    return out


@register_op("left_shift", inputs=("lhs", "rhs"), type_rel=_shift_rel, kind="broadcast")
def left_shift(lhs, rhs, attrs):
    """lhs << rhs with numpy broadcasting (bits shifted out of the dtype are lost)."""
    return np.left_shift(lhs, rhs.astype(lhs.dtype)).astype(lhs.dtype)


@register_op("right_shift", inputs=("lhs", "rhs"), type_rel=_shift_rel, kind="broadcast")
def right_shift(lhs, rhs, attrs):
    """lhs >> rhs with numpy broadcasting (arithmetic for signed integers)."""
    return np.right_shift(lhs, rhs.astype(lhs.dtype)).astype(lhs.dtype)


@dataclass(frozen=True)
class DepthToSpaceAttrs(Attrs):
    block_size: int
    layout: str = choice("NCHW", "NCHW", "NHWC")
    mode: str = choice("DCR", "DCR", "CRD")

    def validate(self):
        if self.block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {self.block_size}")


def _depth_to_space_rel(types, attrs) -> TensorType:
    data = tensor(types[0], "data")
    if data.ndim != 4:
        fail(f"data must be 4-D ({attrs.layout}), got {data.shape}")
    b = attrs.block_size
    n, c, h, w = _nchw(data.shape, attrs.layout)
    if c % (b * b):
        fail(f"{c} channels do not divide into blocks of {b}x{b}")
    out = (n, c // (b * b), h * b, w * b)
    return TensorType(
        out if attrs.layout == "NCHW" else (n, h * b, w * b, c // (b * b)), data.dtype
    )


def _nchw(shape, layout):
    return shape if layout == "NCHW" else (shape[0], shape[3], shape[1], shape[2])


@register_op(
    "nn.depth_to_space",
    inputs=("data",),
    attrs=DepthToSpaceAttrs,
    type_rel=_depth_to_space_rel,
    kind="injective",
)
def depth_to_space(data, attrs):
    """Channel blocks become b x b spatial blocks. DCR: input channel (i * b + j) * C' + c goes
    to output channel c at (h * b + i, w * b + j); CRD: input channel c * b * b + i * b + j."""
    b = attrs.block_size
    x = data if attrs.layout == "NCHW" else np.transpose(data, (0, 3, 1, 2))
    n, c, h, w = x.shape
    if attrs.mode == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    y = y.reshape(n, c // (b * b), h * b, w * b)
    return np.ascontiguousarray(y if attrs.layout == "NCHW" else np.transpose(y, (0, 2, 3, 1)))


@dataclass(frozen=True)
class FixedPointMultiplyAttrs(Attrs):
    """``x * multiplier * 2^(shift - 31)``: ``multiplier`` a Q31 number in int32."""

    multiplier: int
    shift: int

    def validate(self):
        if not -(2**31) <= self.multiplier < 2**31:
            raise ValueError(f"multiplier must fit int32, got {self.multiplier}")
        if not -31 <= self.shift <= 31:
            raise ValueError(f"shift must be in [-31, 31], got {self.shift}")


def _fixed_point_multiply_rel(types, attrs) -> TensorType:
    data = tensor(types[0], "data")
    if data.dtype != "int32":
        fail(f"data must be int32, got {data.dtype}")
    return data


@register_op(
    "fixed_point_multiply",
    inputs=("data",),
    attrs=FixedPointMultiplyAttrs,
    type_rel=_fixed_point_multiply_rel,
    kind="elemwise",
)
def fixed_point_multiply(data, attrs):
    """Relay's lowering, step for step. multiplier == 2^30 (0.5) is a plain shift by
    ``shift - 1`` in int32 (a right shift rounds half up). Otherwise in int64: shift left by
    ``shift`` when positive, multiply, add 2^(30 + r) and shift right by 31 + r (r = -shift
    when negative), then wrap to int32."""
    x = data.astype(np.int64)
    if attrs.multiplier == 1 << 30:
        e = attrs.shift - 1
        if e > 0:
            return (x << e).astype(np.int32)
        e = -e
        if e == 0:
            return data.copy()
        wrapped = (x + (1 << (e - 1))).astype(np.int32)  # int32 arithmetic wraps
        return wrapped >> e
    left, right = max(attrs.shift, 0), max(-attrs.shift, 0)
    total = right + 31
    x = (x << left) * np.int64(attrs.multiplier)
    return ((x + (np.int64(1) << (total - 1))) >> total).astype(np.int32)
