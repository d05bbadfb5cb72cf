"""Quantized ops (``qnn.*``). Scales and zero points are arguments; per-channel ones carry an axis.

Ops whose integer result depends on the runtime's algorithm carry ``semantics``: "tflite"
reproduces TFLite's reference integer kernels bit for bit, "onnx" reproduces ONNX Runtime.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.types import TensorType
from .registry import Attrs, choice, register_op
from .relations import fail, float_only, normalize_axis, scalar_or_channel, tensor

INT_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767),
             "int32": (-(2**31), 2**31 - 1)}


def _channels(t: TensorType, axis: int) -> int:
    return t.shape[normalize_axis(axis, t.ndim)] if t.ndim else 1


def _broadcast_param(p: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """Reshape a per-channel parameter so that it broadcasts along ``axis`` of a rank-ndim tensor."""
    if p.ndim == 0 or p.size == 1:
        return p.reshape(())
    shape = [1] * ndim
    shape[axis % ndim] = p.size
    return p.reshape(shape)


@dataclass(frozen=True)
class QuantizeAttrs(Attrs):
    axis: int = -1
    out_dtype: str = choice("int8", "int8", "uint8", "int16", "int32")
    semantics: str = choice("tflite", "tflite", "onnx")


def _quantize_rel(types, attrs):
    data = float_only(tensor(types[0], "data"))
    channels = _channels(data, attrs.axis)
    scalar_or_channel(types[1], "output_scale", "float32", channels)
    scalar_or_channel(types[2], "output_zero_point", "int32", channels)
    return TensorType(data.shape, attrs.out_dtype)


@register_op("qnn.quantize", inputs=("data", "output_scale", "output_zero_point"),
             attrs=QuantizeAttrs, type_rel=_quantize_rel, kind="elemwise")
def quantize(data, output_scale, output_zero_point, attrs):
    """float -> out_dtype: clip(round(data / scale) + zero_point).

    "tflite": float32 division, round half away from zero (TfLiteRound).
    "onnx": float32 division, round half to even (QuantizeLinear).
    """
    axis = attrs.axis % data.ndim if data.ndim else 0
    scale = _broadcast_param(output_scale.astype(np.float32), data.ndim, axis)
    zp = _broadcast_param(output_zero_point.astype(np.int64), data.ndim, axis)
    q = data.astype(np.float32) / scale
    if attrs.semantics == "tflite":
        q = q.astype(np.float64)  # exact, so adding 0.5 cannot round up
        q = np.sign(q) * np.floor(np.abs(q) + 0.5)
    else:
        q = np.rint(q)
    lo, hi = INT_RANGE[attrs.out_dtype]
    q = np.clip(np.nan_to_num(q, nan=0.0), lo - 1, hi + 1).astype(np.int64) + zp
    return np.clip(q, lo, hi).astype(attrs.out_dtype)


@dataclass(frozen=True)
class DequantizeAttrs(Attrs):
    axis: int = -1


def _dequantize_rel(types, attrs):
    data = tensor(types[0], "data")
    if data.dtype not in INT_RANGE:
        fail(f"data must be int8, uint8, int16 or int32, got {data.dtype}")
    channels = _channels(data, attrs.axis)
    scalar_or_channel(types[1], "input_scale", "float32", channels)
    scalar_or_channel(types[2], "input_zero_point", "int32", channels)
    return TensorType(data.shape, "float32")


@register_op("qnn.dequantize", inputs=("data", "input_scale", "input_zero_point"),
             attrs=DequantizeAttrs, type_rel=_dequantize_rel, kind="elemwise")
def dequantize(data, input_scale, input_zero_point, attrs):
    """int -> float32: (data - zero_point) * scale, one float32 rounding (as TFLite and ONNX)."""
    axis = attrs.axis % data.ndim if data.ndim else 0
    scale = _broadcast_param(input_scale.astype(np.float64), data.ndim, axis)
    zp = _broadcast_param(input_zero_point.astype(np.int64), data.ndim, axis)
    return ((data.astype(np.int64) - zp) * scale).astype(np.float32)
