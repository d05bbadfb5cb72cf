"""Neural-network ops (``nn.*``): activations, bias_add, dense, batch_matmul, softmax and pad.

Convolutions live in nn_conv.py, pooling in nn_pool.py, resize in nn_image.py; the layout,
padding and accumulation helpers they share (and qnn reuses) in nn_common.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from partita.errors import PartitaError
from partita.ir.types import TensorType
from partita.ops.emulation import onnxruntime_mlas as mlas

from .float32_math import softmax32
from .nn_common import OUT_DTYPES, cast_result, exact_matmul, product_dtype
from .registry import Attrs, choice, register_op
from .relations import fail, float_only, identity_rel, normalize_axis, tensor


@register_op("nn.relu", inputs=("data",), type_rel=identity_rel, kind="elemwise")
def relu(data, attrs):
    """max(data, 0)."""
    return np.maximum(data, np.zeros((), data.dtype))


@dataclass(frozen=True)
class LeakyReluAttrs(Attrs):
    alpha: float = 0.01


def _float_rel(types, attrs):
    return float_only(tensor(types[0], "data"))


@register_op(
    "nn.leaky_relu", inputs=("data",), attrs=LeakyReluAttrs, type_rel=_float_rel, kind="elemwise"
)
def leaky_relu(data, attrs):
    """Float data: data where data > 0, else data * alpha (one multiply in data's dtype)."""
    return np.where(data > 0, data, data * data.dtype.type(attrs.alpha))


@register_op("nn.hardswish", inputs=("data",), type_rel=_float_rel, kind="elemwise")
def hardswish(data, attrs):
    """Float data: data * min(max(data + 3, 0), 6) / 6, each step in data's dtype (TFLite's
    float reference order)."""
    t = data.dtype.type
    return (data * np.minimum(np.maximum(data + t(3), t(0)), t(6))) / t(6)


@dataclass(frozen=True)
class SoftmaxAttrs(Attrs):
    axis: int = -1


def _softmax_rel(types, attrs):
    data = float_only(tensor(types[0], "data"))
    if data.ndim == 0:
        fail("softmax needs a tensor of rank >= 1, got a scalar")
    normalize_axis(attrs.axis, data.ndim)
    return data


@register_op(
    "nn.softmax", inputs=("data",), attrs=SoftmaxAttrs, type_rel=_softmax_rel, kind="opaque"
)
def softmax(data, attrs):
    """Float data: exp(x - max(x)) / sum(exp(x - max(x))) along ``axis``. float32: the explicit
    float32 algorithm of float32_math.softmax32 (its exp32, a float64 sum in a fixed order, one
    float32 reciprocal and multiply); other dtypes: computed in float64 (subtracting the max
    keeps exp from overflowing) and cast to data's dtype."""
    if data.dtype == np.float32:
        return softmax32(data, attrs.axis)
    x = data.astype(np.float64)
    e = np.exp(x - x.max(axis=attrs.axis, keepdims=True))
    return (e / e.sum(axis=attrs.axis, keepdims=True)).astype(data.dtype)


@dataclass(frozen=True)
class BiasAddAttrs(Attrs):
    axis: int = 1


def _bias_add_rel(types, attrs):
    data, bias = tensor(types[0], "data"), tensor(types[1], "bias")
    axis = normalize_axis(attrs.axis, data.ndim)
    if bias.ndim != 1 or bias.shape[0] != data.shape[axis]:
        fail(
            f"bias must have shape ({data.shape[axis]},) (axis {attrs.axis} of data "
            f"{data.shape}), got {bias.shape}"
        )
    if bias.dtype != data.dtype:
        fail(f"bias dtype {bias.dtype} differs from data dtype {data.dtype}")
    return data


@register_op(
    "nn.bias_add",
    inputs=("data", "bias"),
    attrs=BiasAddAttrs,
    type_rel=_bias_add_rel,
    kind="broadcast",
)
def bias_add(data, bias, attrs):
    """data + bias, the 1-D bias broadcast along ``axis`` (integers wrap around)."""
    shape = [1] * data.ndim
    shape[attrs.axis % data.ndim] = bias.shape[0]
    return (data + bias.reshape(shape)).astype(data.dtype)


@dataclass(frozen=True)
class DenseAttrs(Attrs):
    """Relay's DenseAttrs, plus ``accumulate`` ("exact"; "mlas": ONNX Runtime's MLAS float32
    order, "mlas_packed": the same with the weight prepacked as a constant) and ``threads``
    (the ONNX Runtime thread count MLAS splits the product for; see
    partita/ops/emulation/onnxruntime_mlas.py)."""

    units: int | None = None
    out_dtype: str = choice("", *OUT_DTYPES)
    accumulate: str = choice("exact", *mlas.GEMM_ACCUMULATE)
    threads: int = 1

    def validate(self):
        mlas.check_threads(self.threads)


def dense_out_shape(data_shape, weight_shape, units: int | None = None) -> tuple[int, ...]:
    """The output shape of dense: data [..., K] and weight [units, K] give [..., units]."""
    if len(weight_shape) != 2:
        fail(f"weight must be 2-D [units, in_features], got shape {tuple(weight_shape)}")
    if len(data_shape) < 1:
        fail("data must have rank >= 1, got a scalar")
    if data_shape[-1] != weight_shape[1]:
        fail(
            f"data {tuple(data_shape)} has {data_shape[-1]} features, but weight "
            f"{tuple(weight_shape)} expects {weight_shape[1]}"
        )
    if units is not None and units != weight_shape[0]:
        fail(f"units={units} but weight {tuple(weight_shape)} has {weight_shape[0]} rows")
    return (*data_shape[:-1], weight_shape[0])


def _dense_rel(types, attrs):
    data, weight = tensor(types[0], "data"), tensor(types[1], "weight")
    dtype = product_dtype(data, weight, attrs.out_dtype)
    mlas.require_float32(attrs, dtype, "data, weight and result")
    return TensorType(dense_out_shape(data.shape, weight.shape, attrs.units), dtype)


@register_op(
    "nn.dense",
    inputs=("data", "weight"),
    attrs=DenseAttrs,
    type_rel=_dense_rel,
    kind="out_elemwise_fusable",
)
def dense(data, weight, attrs):
    """out[..., u] = sum_k data[..., k] * weight[u, k] (weight [units, in_features], as Relay),
    accumulated in float64 or exactly in int64, cast to out_dtype ("" = data's dtype).
    accumulate="mlas" (float32): ONNX Runtime's MlasGemm with the weight as transposed B and
    the leading axes of data flattened into M, on ``threads`` threads ("mlas_packed": B
    prepacked, FMA chains in K blocks of 256)."""
    if attrs.accumulate != "exact":
        a = data.reshape(1, -1, data.shape[-1])
        out = mlas.sgemm(
            a,
            weight.T[None],
            trans_b=True,
            threads=attrs.threads,
            packed=attrs.accumulate == "mlas_packed",
        )
        return out.reshape(*data.shape[:-1], weight.shape[0])
    acc = exact_matmul(data.reshape(-1, data.shape[-1]), weight.T)
    return cast_result(
        acc.reshape(*data.shape[:-1], weight.shape[0]), attrs.out_dtype or data.dtype.name
    )


@dataclass(frozen=True)
class BatchMatmulAttrs(Attrs):
    """Relay's BatchMatmulAttrs, plus ``accumulate`` and ``threads`` as DenseAttrs."""

    out_dtype: str = choice("", *OUT_DTYPES)
    transpose_a: bool = False
    transpose_b: bool = True
    accumulate: str = choice("exact", *mlas.ACCUMULATE)
    threads: int = 1

    def validate(self):
        mlas.check_threads(self.threads)
        if self.accumulate == "mlas" and self.transpose_a:
            raise ValueError('accumulate="mlas" does not support transpose_a')


def _batch_matmul_rel(types, attrs):
    x, y = tensor(types[0], "x"), tensor(types[1], "y")
    dtype = product_dtype(x, y, attrs.out_dtype, ("x", "y"))
    if x.ndim != 3 or y.ndim != 3:
        fail(f"x and y must be 3-D, got shapes {x.shape} and {y.shape}")
    (bx, m, kx) = (x.shape[0], x.shape[2], x.shape[1]) if attrs.transpose_a else x.shape
    (by, ky, n) = (y.shape[0], y.shape[2], y.shape[1]) if attrs.transpose_b else y.shape
    if kx != ky:
        fail(
            f"x {x.shape} (transpose_a={attrs.transpose_a}) has {kx} columns but y {y.shape} "
            f"(transpose_b={attrs.transpose_b}) has {ky} rows"
        )
    if bx != by and 1 not in (bx, by):
        fail(f"batch sizes {bx} of x {x.shape} and {by} of y {y.shape} do not broadcast")
    mlas.require_float32(attrs, dtype, "x, y and result")
    if attrs.accumulate == "mlas" and bx != by:
        fail(f'accumulate="mlas" needs equal batch sizes, got x {x.shape} and y {y.shape}')
    return TensorType((max(bx, by) if min(bx, by) else 0, m, n), dtype)


@register_op(
    "nn.batch_matmul",
    inputs=("x", "y"),
    attrs=BatchMatmulAttrs,
    type_rel=_batch_matmul_rel,
    kind="out_elemwise_fusable",
)
def batch_matmul(x, y, attrs):
    """out[b] = op(x[b]) @ op(y[b]) with op = transpose where transpose_a / transpose_b say
    (Relay's default: y is [batch, N, K]); a batch of 1 broadcasts. Accumulated in float64 or
    exactly in int64, cast to out_dtype ("" = x's dtype). accumulate="mlas" (float32, equal
    batches, no transpose_a): ONNX Runtime's MlasGemmBatch on ``threads`` threads."""
    if attrs.accumulate == "mlas":
        b = y.transpose(0, 2, 1) if attrs.transpose_b else y
        return mlas.sgemm(x, b, trans_b=attrs.transpose_b, threads=attrs.threads)
    a = x.transpose(0, 2, 1) if attrs.transpose_a else x
    b = y.transpose(0, 2, 1) if attrs.transpose_b else y
    return cast_result(exact_matmul(a, b), attrs.out_dtype or x.dtype.name)


@dataclass(frozen=True)
class GemmAttrs(Attrs):
    """nn.gemm: ``transpose_b`` says the weight is [N, K] (as nn.dense) rather than [K, N];
    ``accumulate`` and ``threads`` as DenseAttrs."""

    transpose_b: bool = True
    accumulate: str = choice("exact", *mlas.GEMM_ACCUMULATE)
    threads: int = 1

    def validate(self):
        mlas.check_threads(self.threads)


def _gemm_rel(types, attrs):
    data, weight = tensor(types[0], "data"), tensor(types[1], "weight")
    bias = float_only(tensor(types[2], "bias"), "bias")
    dtype = product_dtype(data, weight, "")
    if dtype != bias.dtype or not dtype.startswith("float"):
        fail(
            f"data, weight and bias must share one float dtype, got {data.dtype}, "
            f"{weight.dtype} and {bias.dtype}"
        )
    mlas.require_float32(attrs, dtype, "data, weight and bias")
    if data.ndim < 2:
        fail(f"data must have rank >= 2, got shape {data.shape}")
    w_shape = weight.shape if attrs.transpose_b else tuple(reversed(weight.shape))
    out = dense_out_shape(data.shape, w_shape)
    rows = int(np.prod(data.shape[:-1]))
    try:
        np.broadcast_shapes(bias.shape, (rows, out[-1]))
    except ValueError:
        fail(
            f"bias {bias.shape} does not broadcast to the ({rows}, {out[-1]}) product of data "
            f"{data.shape} and weight {weight.shape}"
        )
    if data.ndim > 2 and bias.ndim > 1:
        fail(f"with data of rank {data.ndim} the bias must be a scalar or [N], got {bias.shape}")
    return TensorType(out, dtype)


@register_op(
    "nn.gemm",
    inputs=("data", "weight", "bias"),
    attrs=GemmAttrs,
    type_rel=_gemm_rel,
    kind="out_elemwise_fusable",
)
def gemm(data, weight, bias, attrs):
    """ONNX Gemm with alpha = beta = 1: out = A @ W + bias, A = data with its leading axes
    flattened into rows, W = weight.T if transpose_b else weight, bias broadcast to the product.
    "exact": the sum and the bias in float64, rounded once. "mlas" (float32): ONNX Runtime's
    MlasGemm with C preloaded with the bias (beta = 1) on ``threads`` threads; "mlas_packed":
    the same with the weight prepacked (FMA chains in K blocks of 256, from C)."""
    a = data.reshape(-1, data.shape[-1])
    w = weight.T if attrs.transpose_b else weight
    c = np.broadcast_to(bias, (a.shape[0], w.shape[1]))
    if attrs.accumulate != "exact":
        out = mlas.sgemm(
            a[None],
            w[None],
            np.array(c, np.float32)[None],
            attrs.transpose_b,
            attrs.threads,
            packed=attrs.accumulate == "mlas_packed",
        )[0]
    else:
        out = (exact_matmul(a, w) + c.astype(np.float64)).astype(data.dtype)
    return out.reshape(*data.shape[:-1], w.shape[1])


@dataclass(frozen=True)
class PadAttrs(Attrs):
    pad_width: tuple[tuple[int, int], ...] = ()
    pad_mode: str = choice("constant", "constant", "edge", "reflect")

    def validate(self):
        for pair in self.pad_width:
            if len(pair) != 2:
                raise ValueError(f"pad_width must hold (before, after) pairs, got {pair}")
            if min(pair) < 0:
                raise ValueError(f"pad_width must be non-negative, got {self.pad_width}")


def _pad_rel(types, attrs):
    data, value = tensor(types[0], "data"), tensor(types[1], "pad_value")
    if value.ndim != 0:
        fail(f"pad_value must be a scalar, got shape {value.shape}")
    if len(attrs.pad_width) != data.ndim:
        fail(
            f"pad_width has {len(attrs.pad_width)} pairs but data {data.shape} has rank {data.ndim}"
        )
    for axis, ((before, after), size) in enumerate(zip(attrs.pad_width, data.shape)):
        if attrs.pad_mode == "reflect" and max(before, after) > size - 1:
            fail(
                f"reflect padding ({before}, {after}) of axis {axis} needs at most size - 1 = "
                f"{size - 1} (data {data.shape})"
            )
        if attrs.pad_mode == "edge" and size == 0 and before + after:
            fail(f"edge padding of the empty axis {axis} of data {data.shape}")
    shape = [s + b + a for s, (b, a) in zip(data.shape, attrs.pad_width)]
    return TensorType(shape, data.dtype)


def _pad_scalar(value: np.ndarray, dtype: np.dtype):
    """pad_value converted to data's dtype; a value that does not fit is an error, not a wrap."""
    converted = value.astype(dtype)
    if dtype.kind in "iu" and not (np.isfinite(value) and converted == value):
        raise PartitaError(f"pad_value {value} is not representable in {dtype}")
    return converted


@register_op(
    "nn.pad", inputs=("data", "pad_value"), attrs=PadAttrs, type_rel=_pad_rel, kind="injective"
)
def pad(data, pad_value, attrs):
    """Pad each axis i by pad_width[i] = (before, after): "constant" fills with the scalar
    pad_value (converted to data's dtype; it must be representable), "edge" repeats the border
    value, "reflect" mirrors without repeating the border (pad <= size - 1)."""
    if attrs.pad_mode == "constant":
        fill = _pad_scalar(np.asarray(pad_value), data.dtype)
        return np.pad(data, attrs.pad_width, mode="constant", constant_values=fill)
    return np.pad(data, attrs.pad_width, mode=attrs.pad_mode)
