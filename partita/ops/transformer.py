"""Ops that transformer encoders need: ``take`` (embeddings, the gathers of exported shape code),
``equal`` / ``less`` / ``logical_not`` (attention masks), ``broadcast_to``, ``erf``,
``nn.gelu``, ``nn.layer_norm`` and ``qnn.dynamic_quantize`` (ONNX's DynamicQuantizeLinear).

Float math is computed in float64 and rounded to the data's dtype once, except float32 erf and
GELU: explicit float32 algorithms (float32_math.py), as nn.softmax's float32 exp.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from partita.ir.types import TensorType, TupleType

from .float32_math import erf32, gelu32
from .nn_norm import NormAttrs
from .registry import Attrs, NoAttrs, choice, register_op
from .relations import compare_rel, fail, float_only, normalize_axis, tensor

INDEX_DTYPES = ("int32", "int64")


# ---- take --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TakeAttrs(Attrs):
    """Relay's take: ``mode`` "wrap" takes indices modulo the axis size (so ONNX's negative
    indices count from the end), "clip" clamps them into range, "fast" requires them in range."""

    axis: int = 0
    mode: str = choice("wrap", "wrap", "clip", "fast")


def _take_rel(types, attrs) -> TensorType:
    data, indices = tensor(types[0], "data"), tensor(types[1], "indices")
    if indices.dtype not in INDEX_DTYPES:
        fail(f"indices must be int32 or int64, got {indices.dtype}")
    axis = normalize_axis(attrs.axis, data.ndim)
    if data.shape[axis] == 0:
        fail(f"cannot take from the empty axis {axis} of data {data.shape}")
    return TensorType(data.shape[:axis] + indices.shape + data.shape[axis + 1 :], data.dtype)


@register_op(
    "take", inputs=("data", "indices"), attrs=TakeAttrs, type_rel=_take_rel, kind="injective"
)
def take(data, indices, attrs):
    """out = data[..., indices, ...] along ``axis`` (numpy.take): the indices' shape replaces the
    axis. "wrap": index mod size; "clip": clamped to [0, size - 1]; "fast": an index out of
    [-size, size) is an error."""
    axis = attrs.axis % data.ndim
    n = data.shape[axis]
    idx = indices.astype(np.int64)
    if attrs.mode == "fast":
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(
                f"take: an index in [{idx.min()}, {idx.max()}] is out of range for "
                f"axis {axis} of size {n}"
            )
        idx = np.where(idx < 0, idx + n, idx)
    if attrs.mode == "wrap":
        # numpy's own "wrap" adds the size to a negative index until it is not negative: a
        # huge negative int64 index (a random token id) takes forever, np.mod does not
        idx = np.mod(idx, n)
    return np.take(data, idx, axis=axis, mode="clip")


# ---- comparisons and masks ---------------------------------------------------------------------


@register_op(
    "equal", inputs=("lhs", "rhs"), type_rel=compare_rel, commutative=True, kind="broadcast"
)
def equal(lhs, rhs, attrs):
    """lhs == rhs with numpy broadcasting -> bool."""
    return np.asarray(np.equal(lhs, rhs))


@register_op("less", inputs=("lhs", "rhs"), type_rel=compare_rel, kind="broadcast")
def less(lhs, rhs, attrs):
    """lhs < rhs with numpy broadcasting -> bool."""
    return np.asarray(np.less(lhs, rhs))


@register_op("greater", inputs=("lhs", "rhs"), type_rel=compare_rel, kind="broadcast")
def greater(lhs, rhs, attrs):
    """lhs > rhs with numpy broadcasting -> bool."""
    return np.asarray(np.greater(lhs, rhs))


def _bool_rel(types, attrs) -> TensorType:
    data = tensor(types[0], "data")
    if data.dtype != "bool":
        fail(f"data must be bool, got {data.dtype}")
    return data


@register_op("logical_not", inputs=("data",), type_rel=_bool_rel, kind="elemwise")
def logical_not(data, attrs):
    """not data (bool)."""
    return np.asarray(np.logical_not(data))


@dataclass(frozen=True)
class BroadcastToAttrs(Attrs):
    shape: tuple[int, ...]


def _broadcast_to_rel(types, attrs) -> TensorType:
    data = tensor(types[0], "data")
    shape = tuple(attrs.shape)
    if (
        min(shape, default=0) < 0
        or len(shape) < data.ndim
        or any(d != s and d != 1 for d, s in zip(reversed(data.shape), reversed(shape)))
    ):
        fail(f"data {data.shape} does not broadcast to {shape}")
    return TensorType(shape, data.dtype)


@register_op(
    "broadcast_to",
    inputs=("data",),
    attrs=BroadcastToAttrs,
    type_rel=_broadcast_to_rel,
    kind="broadcast",
)
def broadcast_to(data, attrs):
    """data repeated along its size-1 (and new leading) axes to ``shape`` (numpy.broadcast_to)."""
    return np.ascontiguousarray(np.broadcast_to(data, attrs.shape))


# ---- float activations and normalization -------------------------------------------------------


def _float_rel(types, attrs) -> TensorType:
    return float_only(tensor(types[0], "data"))


_ERF = np.frompyfunc(math.erf, 1, 1)


def _erf64(x: np.ndarray) -> np.ndarray:
    return _ERF(x.astype(np.float64)).astype(np.float64)


@register_op("erf", inputs=("data",), type_rel=_float_rel, kind="elemwise")
def erf(data, attrs):
    """The error function: float32 data by float32_math.erf32's explicit float32 algorithm
    (within 2 ulp of erf), other dtypes computed in float64 (C's erf) and rounded once."""
    if data.dtype == np.float32:
        return erf32(data)
    return _erf64(data).astype(data.dtype)


@dataclass(frozen=True)
class GeluAttrs(Attrs):
    """``approximate``: "none" (x * Phi(x), with erf) or "tanh" (0.5 x (1 + tanh(sqrt(2/pi)
    (x + 0.044715 x^3))), ORT's FastGelu and ONNX's Gelu(approximate="tanh"))."""

    approximate: str = choice("none", "none", "tanh")


@register_op("nn.gelu", inputs=("data",), attrs=GeluAttrs, type_rel=_float_rel, kind="elemwise")
def gelu(data, attrs):
    """GELU. approximate "none" of float32: float32_math.gelu32 ((x * 0.5) * (1 + erf32(x *
    (1 / sqrt 2))), float32 steps); otherwise computed in float64 and rounded once."""
    if attrs.approximate == "none" and data.dtype == np.float32:
        return gelu32(data)
    x = data.astype(np.float64)
    if attrs.approximate == "tanh":
        y = 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    else:
        y = 0.5 * x * (1.0 + _erf64(x / math.sqrt(2.0)))
    return y.astype(data.dtype)


@dataclass(frozen=True)
class LayerNormAttrs(NormAttrs):
    """Relay's LayerNormAttrs: normalize over ``axis``; gamma (``scale``) and beta (``center``)
    are 1-D, the size of that axis."""


def _layer_norm_rel(types, attrs) -> TensorType:
    data = float_only(tensor(types[0], "data"))
    axis = normalize_axis(attrs.axis, data.ndim)
    for i, what in ((1, "gamma"), (2, "beta")):
        t = tensor(types[i], what)
        if t.shape != (data.shape[axis],) or t.dtype != data.dtype:
            fail(
                f"{what} must be {data.dtype} of shape ({data.shape[axis]},) for data "
                f"{data.shape} normalized over axis {axis}, got {t.dtype} {t.shape}"
            )
    return data


@register_op(
    "nn.layer_norm",
    inputs=("data", "gamma", "beta"),
    attrs=LayerNormAttrs,
    type_rel=_layer_norm_rel,
    kind="opaque",
)
def layer_norm(data, gamma, beta, attrs):
    """(x - mean) / sqrt(var + epsilon) * gamma + beta over ``axis`` (biased variance),
    computed in float64 and rounded to data's dtype once."""
    axis = attrs.axis % data.ndim
    x = data.astype(np.float64)
    mean = x.mean(axis=axis, keepdims=True)
    var = np.square(x - mean).mean(axis=axis, keepdims=True)
    y = (x - mean) / np.sqrt(var + np.float64(np.float32(attrs.epsilon)))
    shape = [1] * data.ndim
    shape[axis] = -1
    if attrs.scale:
        y = y * gamma.astype(np.float64).reshape(shape)
    if attrs.center:
        y = y + beta.astype(np.float64).reshape(shape)
    return y.astype(data.dtype)


# ---- dynamic quantization ----------------------------------------------------------------------


def _dynamic_quantize_rel(types, attrs) -> TupleType:
    data = tensor(types[0], "data")
    if data.dtype != "float32":
        fail(f"data must be float32, got {data.dtype}")
    return TupleType(
        [TensorType(data.shape, "uint8"), TensorType((), "float32"), TensorType((), "uint8")]
    )


@register_op(
    "qnn.dynamic_quantize",
    inputs=("data",),
    attrs=NoAttrs,
    type_rel=_dynamic_quantize_rel,
    kind="opaque",
)
def dynamic_quantize(data, attrs):
    """ONNX's DynamicQuantizeLinear -> (uint8 data, scale, zero point): the range [min(x, 0),
    max(x, 0)] over the whole tensor, scale = (max - min) / 255 in float32 (1 if the range is
    empty), zero point = round_half_even(clamp(-min / scale, 0, 255)), data =
    saturate(round_half_even(x / scale) + zero point), as ONNX Runtime's CPU kernel."""
    x = data.astype(np.float32)
    seen = x[~np.isnan(x)]  # MLAS's range scan never takes a NaN
    lo = np.float32(min(float(seen.min()), 0.0)) if seen.size else np.float32(0)
    hi = np.float32(max(float(seen.max()), 0.0)) if seen.size else np.float32(0)
    scale = np.float32(1.0) if hi == lo else np.float32((hi - lo) / np.float32(255.0))
    with np.errstate(invalid="ignore"):
        zp = np.rint(_ort_clamp(np.float32(0) - lo / scale))
        q = np.rint(x / scale) + zp
    q = np.clip(np.nan_to_num(q, nan=0.0), 0, 255).astype(np.uint8)
    return (q, np.asarray(scale, np.float32), np.asarray(zp, np.uint8))


def _ort_clamp(v: np.float32) -> np.float32:
    """ONNX Runtime's ``std::max(0.f, std::min(255.f, v))``: a NaN (``-(-inf) / inf`` when the
    range reaches -inf) gives 255, as ``std::min`` returns its first operand when the compare
    fails."""
    t = v if v < 255 else np.float32(255)
    return t if 0 < t else np.float32(0)
