"""Quantized ops (``qnn.*``). Scales and zero points are arguments; per-channel ones carry an axis.

Ops whose integer result depends on the runtime's algorithm carry ``semantics``: "tflite"
reproduces TFLite's reference integer kernels bit for bit, "onnx" reproduces ONNX Runtime's CPU
kernels (MLAS), "fbgemm" (qnn.requantize) PyTorch's x86 quantized kernels. Scales are float32
constants (qnn.requantize's input_scale may be float64: the exact product input_scale *
weight_scale TFLite computes its conv multipliers from), zero points int32 constants (float32
for qnn.requantize "fbgemm": a bias fraction).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from partita.ir.types import TensorType
from partita.ops.emulation import pytorch_x86, x86_int8
from partita.ops.emulation.tflite_fixedpoint import (
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_int64,
    multiply_by_quantized_multiplier_upward,
    quantize_multiplier_array,
    saturate,
    scale_round_half_away_double,
    wrap_int32,
)

from .nn_common import exact_matmul, layout_dims, pad_input, sliding_windows, to_layout, to_nhwc
from .nn_conv import ConvAttrsBase, conv2d_out_shape, conv2d_reference
from .registry import Attrs, choice, register_op
from .relations import fail, float_only, normalize_axis, scalar_or_channel, tensor

INT_RANGE = {
    "int8": (-128, 127),
    "uint8": (0, 255),
    "int16": (-32768, 32767),
    "int32": (-(2**31), 2**31 - 1),
}
QUANTIZED_DTYPES = ("int8", "uint8", "int16")


def _channels(t: TensorType, axis: int) -> int:
    return t.shape[normalize_axis(axis, t.ndim)] if t.ndim else 1


def _broadcast_param(p: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """Reshape a per-channel parameter to broadcast along ``axis`` of a rank-ndim tensor."""
    if p.ndim == 0 or p.size == 1:
        return p.reshape(())
    shape = [1] * ndim
    shape[axis % ndim] = p.size
    return p.reshape(shape)


def quantized(t, what: str, dtypes=QUANTIZED_DTYPES) -> TensorType:
    """``t`` as a tensor of one of ``dtypes``, or fail."""
    t = tensor(t, what)
    if t.dtype not in dtypes:
        fail(f"{what} must be {_one_of(dtypes)}, got {t.dtype}")
    return t


def scalar_param(t, what: str, dtype: str) -> TensorType:
    """A per-tensor quantization parameter: a scalar or shape (1,) of ``dtype``."""
    t = tensor(t, what)
    if t.dtype != dtype:
        fail(f"{what} must be {dtype}, got {t.dtype}")
    if t.size != 1 or t.ndim > 1:
        fail(f"{what} must be a scalar, got shape {t.shape}")
    return t


def channel_param(t, what: str, dtype: str, channels: int, whose: str) -> TensorType:
    """A per-tensor or per-channel parameter with ``channels`` entries; ``whose`` says what the
    channels are, for the error message."""
    t = tensor(t, what)
    if t.dtype != dtype:
        fail(f"{what} must be {dtype}, got {t.dtype}")
    if t.ndim == 0 or t.shape == (1,) or t.shape == (channels,):
        return t
    fail(f"{what} must be a scalar or shape ({channels},) (one per {whose}), got shape {t.shape}")


def _one_of(options) -> str:
    options = list(options)
    return ", ".join(options[:-1]) + " or " + options[-1] if len(options) > 1 else options[0]


def _scalar(p: np.ndarray) -> int:
    return int(np.asarray(p).reshape(-1)[0])


@dataclass(frozen=True)
class QuantizeAttrs(Attrs):
    axis: int = -1
    out_dtype: str = choice("int8", "int8", "uint8", "int16", "int32")
    semantics: str = choice("tflite", "tflite", "onnx", "fbgemm")


def _quantize_rel(types, attrs):
    data = float_only(tensor(types[0], "data"))
    channels = _channels(data, attrs.axis)
    scalar_or_channel(types[1], "output_scale", "float32", channels)
    scalar_or_channel(types[2], "output_zero_point", "int32", channels)
    return TensorType(data.shape, attrs.out_dtype)


@register_op(
    "qnn.quantize",
    inputs=("data", "output_scale", "output_zero_point"),
    attrs=QuantizeAttrs,
    type_rel=_quantize_rel,
    kind="elemwise",
)
def quantize(data, output_scale, output_zero_point, attrs):
    """float -> out_dtype: saturate(round(data / scale) + zero_point), per channel along axis.

    "tflite" (TFLite's reference QUANTIZE): float32 division, round half away from zero
    (TfLiteRound). "onnx" (QuantizeLinear, MLAS): float32 division, round half to even.
    "fbgemm" (PyTorch's quantize_per_tensor on x86, fbgemm's vectorised Quantize): one fused
    multiply-add in float32, ``fma(data, float32(1 / scale), zero_point)``, rounded half to even.
    """
    axis = attrs.axis % data.ndim if data.ndim else 0
    scale = _broadcast_param(output_scale.astype(np.float32), data.ndim, axis)
    zp = _broadcast_param(output_zero_point.astype(np.int64), data.ndim, axis)
    if attrs.semantics == "fbgemm":
        inverse = (np.float32(1) / scale).astype(np.float64)
        # x * inverse + zp is exact in float64 (24 + 24 bits, small integer zp), so one rounding
        # to float32 is the FMA's.
        fused = (data.astype(np.float32).astype(np.float64) * inverse + zp).astype(np.float32)
        q = np.clip(np.nan_to_num(np.rint(fused), nan=0.0), -(2.0**40), 2.0**40)
        return saturate(q.astype(np.int64), attrs.out_dtype)
    q = data.astype(np.float32) / scale
    if attrs.semantics == "tflite":
        q = q.astype(np.float64)  # exact, so adding 0.5 cannot round up
        q = np.sign(q) * np.floor(np.abs(q) + 0.5)
    else:
        q = np.rint(q)
    # The zero point goes in before the saturating clamp; 2**40 only keeps the cast defined.
    q = np.clip(np.nan_to_num(q, nan=0.0), -(2.0**40), 2.0**40).astype(np.int64) + zp
    return saturate(q, attrs.out_dtype)


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


@register_op(
    "qnn.dequantize",
    inputs=("data", "input_scale", "input_zero_point"),
    attrs=DequantizeAttrs,
    type_rel=_dequantize_rel,
    kind="elemwise",
)
def dequantize(data, input_scale, input_zero_point, attrs):
    """int -> float32: (data - zero_point) * scale, one float32 rounding (as TFLite and ONNX)."""
    axis = attrs.axis % data.ndim if data.ndim else 0
    scale = _broadcast_param(input_scale.astype(np.float64), data.ndim, axis)
    zp = _broadcast_param(input_zero_point.astype(np.int64), data.ndim, axis)
    return ((data.astype(np.int64) - zp) * scale).astype(np.float32)


# ---- requantize --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RequantizeAttrs(Attrs):
    axis: int = -1
    out_dtype: str = choice("int8", "int8", "uint8", "int16", "int32")
    semantics: str = choice(
        "tflite", "tflite", "tflite_builtin", "tflite_double", "onnx", "fbgemm", "onednn"
    )


def _requantize_rel(types, attrs):
    data = quantized(types[0], "data", ("int8", "uint8", "int16", "int32", "int64"))
    n = _channels(data, attrs.axis)
    in_scale = tensor(types[1], "input_scale")
    if in_scale.dtype not in ("float32", "float64"):
        fail(f"input_scale must be float32 or float64, got {in_scale.dtype}")
    whose = f"channel of data {data.shape} along axis {attrs.axis}"
    channel_param(in_scale, "input_scale", in_scale.dtype, n, whose)
    zp_dtype = "int32"
    if attrs.semantics in ("fbgemm", "onednn") and tensor(
        types[2], "input_zero_point"
    ).dtype == "float32":
        zp_dtype = "float32"  # the float bias (fbgemm's fraction, oneDNN's), see the docstring
    channel_param(types[2], "input_zero_point", zp_dtype, n, whose)
    channel_param(types[3], "output_scale", "float32", n, whose)
    channel_param(types[4], "output_zero_point", "int32", n, whose)
    return TensorType(data.shape, attrs.out_dtype)


@register_op(
    "qnn.requantize",
    inputs=("data", "input_scale", "input_zero_point", "output_scale", "output_zero_point"),
    attrs=RequantizeAttrs,
    type_rel=_requantize_rel,
    kind="elemwise",
)
def requantize(data, input_scale, input_zero_point, output_scale, output_zero_point, attrs):
    """Rescale integers to out_dtype: ``q_out = saturate(round((data - zp_in) * s_in / s_out)
    + zp_out)``; every parameter may be per channel along ``axis``.

    "tflite" (TFLite's QUANTIZE and the conv/FC output stage): m = float64(s_in) / float64(s_out)
    per channel, (q, shift) = QuantizeMultiplier(m), out = MultiplyByQuantizedMultiplier(data -
    zp_in, q, shift) + zp_out, clamped to out_dtype. int64 data (16x8 accumulators) uses
    TFLite's int64 MultiplyByQuantizedMultiplier (15-bit multiplier). For a conv, pass s_in as
    the float64 product input_scale * filter_scale, as TFLite computes it.
    "tflite_builtin" (TFLite's optimized x86 int8 conv, depthwise and fully connected kernels):
    the same (q, shift), both roundings breaking ties upward as their NEON code does:
    (wrap32((data - zp_in) * 2**(shift + r)) * q + 2**30 + 2**(30 + r)) >> (31 + r) with
    r = max(-shift, 1).
    "tflite_double" (TFLite's reference int8 FULLY_CONNECTED): round half away from zero of
    float64(data - zp_in) * m, one double product.
    "onnx" (MLAS requantize, as in QLinearConv / QLinearMatMul): scale = float32(s_in) /
    float32(s_out) in float32 (ORT's X_scale * W_scale / Y_scale: pass s_in = the float32 product),
    v = float32(data - zp_in) * scale in float32, round half to even, + zp_out, saturated.
    "fbgemm" (PyTorch's x86 ReQuantizeOutput): the same with v = float32(float32(data) - zp_in),
    where input_zero_point may be float32: -(fbgemm's float bias b / s_in minus the int32 bias
    already added to data), which makes it exact for |data| < 2**24 (see _fbgemm_requantize).
    "onednn" (oneDNN's int8 convolution, PyTorch's x86 engine on AVX512-VNNI CPUs): input_scale
    is oneDNN's float32 src x weight scale, input_zero_point the negated float32 bias, added
    after the scale: rint((float32(data) * s - zp_in) * inv + zp_out), inv = onednn_inverse.
    """
    nd, axis = data.ndim, attrs.axis
    zp_in = _broadcast_param(input_zero_point.astype(np.int64), nd, axis)
    zp_out = _broadcast_param(output_zero_point.astype(np.int64), nd, axis)
    if attrs.semantics in ("fbgemm", "onednn"):
        s = _broadcast_param(input_scale.astype(np.float32), nd, axis)
        z = _broadcast_param(input_zero_point.astype(np.float32), nd, axis)
        if attrs.semantics == "fbgemm":
            s_out = _broadcast_param(output_scale.astype(np.float32), nd, axis)
            y = pytorch_x86.fbgemm_output(data, s, z, s_out)
        else:
            y = pytorch_x86.onednn_output(data, s, z, output_scale.reshape(-1)[0], zp_out)
            zp_out = 0
        return saturate(y + zp_out, attrs.out_dtype)
    x = data.astype(np.int64) - zp_in
    real = _broadcast_param(input_scale.astype(np.float64), nd, axis) / _broadcast_param(
        output_scale.astype(np.float64), nd, axis
    )
    if attrs.semantics == "tflite_double":
        y = scale_round_half_away_double(x, real)
    elif attrs.semantics != "onnx":
        q, shift = quantize_multiplier_array(real)
        if data.dtype == np.int64:
            y = multiply_by_quantized_multiplier_int64(x, q, shift)
        elif attrs.semantics == "tflite_builtin":
            y = multiply_by_quantized_multiplier_upward(wrap_int32(x), q, shift)
        else:
            y = multiply_by_quantized_multiplier(x, q, shift)
    else:
        scale = _broadcast_param(input_scale.astype(np.float32), nd, axis) / _broadcast_param(
            output_scale.astype(np.float32), nd, axis
        )
        y = round_half_even_to_int(x.astype(np.float32) * scale)
    return saturate(y + zp_out, attrs.out_dtype)


def round_half_even_to_int(v: np.ndarray) -> np.ndarray:
    """float -> int64, round half to even; values beyond +-2**40 (and inf) clamp there first,
    which saturation to any partita integer type cannot tell apart."""
    v = np.nan_to_num(np.asarray(v), nan=0.0)
    return np.rint(np.clip(v, -(2.0**40), 2.0**40)).astype(np.int64)


# ---- conv2d, dense, batch_matmul ---------------------------------------------------------------


def offset_by_zero_point(x: np.ndarray, zero_point: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """``x - zero_point`` exactly, in int64 (per-channel zero points along ``axis``)."""
    return x.astype(np.int64) - _broadcast_param(zero_point.astype(np.int64), ndim, axis)


@dataclass(frozen=True)
class QnnConv2DAttrs(ConvAttrsBase):
    """nn.conv2d's attributes; out_dtype is the accumulator type. ``accumulate``: "exact", or
    (int8 weight) the int8 kernels of x86 CPUs without VNNI, which saturate adjacent pairs of
    products to int16 (partita/ops/emulation/x86_int8.py): "vpmaddubsw" pairs along the NHWC
    im2col order (kernel row, kernel column, input channel: ONNX Runtime, fbgemm),
    "vpmaddubsw_tap" pairs channels within each kernel tap (oneDNN). int8 data enter them as
    uint8 data + 128, as ONNX Runtime rewrites int8 QDQ activations."""

    kernel_layout: str = choice("OIHW", "OIHW", "HWIO", "HWOI", "OHWI")
    out_dtype: str = choice("int32", "int32", "int64")
    accumulate: str = choice("exact", *x86_int8.INT_ACCUMULATE)


def _check_pair_accumulate(data: TensorType, weight: TensorType, attrs) -> None:
    if attrs.accumulate != "exact" and (
        data.dtype not in ("uint8", "int8") or weight.dtype != "int8"
    ):
        fail(
            f"accumulate={attrs.accumulate!r} reproduces uint8 (or int8 + 128) x int8 kernels, "
            f"got data {data.dtype} and weight {weight.dtype}"
        )


def _as_uint8(data: np.ndarray, zero_point: int) -> tuple[np.ndarray, int]:
    """int8 data as the uint8 data (+ 128) and zero point ONNX Runtime's kernels see."""
    if data.dtype == np.int8:
        return data.astype(np.int64) + 128, zero_point + 128
    return data, zero_point


def mac_params(types, channels: int, whose: str) -> None:
    """The four quantization operands of a qnn conv / dense (types[2:6]): scalar input zero
    point and scale, per-tensor or per-``whose`` kernel zero point and scale."""
    scalar_param(types[2], "input_zero_point", "int32")
    channel_param(types[3], "kernel_zero_point", "int32", channels, whose)
    scalar_param(types[4], "input_scale", "float32")
    channel_param(types[5], "kernel_scale", "float32", channels, whose)


def _qnn_conv2d_rel(types, attrs):
    data, weight = quantized(types[0], "data"), quantized(types[1], "weight")
    _check_pair_accumulate(data, weight, attrs)
    shape = conv2d_out_shape(data.shape, weight.shape, attrs)
    o = layout_dims(weight.shape, attrs.kernel_layout, "O")[0]
    cg = layout_dims(weight.shape, attrs.kernel_layout, "I")[0]
    if attrs.accumulate == "vpmaddubsw_tap" and attrs.groups != 1 and cg % 2:
        fail('accumulate="vpmaddubsw_tap" pads an odd channel count only for groups=1')
    whose = f"output channel of kernel {weight.shape} ({attrs.kernel_layout})"
    mac_params(types, o, whose)
    return TensorType(shape, attrs.out_dtype)


@register_op(
    "qnn.conv2d",
    inputs=(
        "data",
        "weight",
        "input_zero_point",
        "kernel_zero_point",
        "input_scale",
        "kernel_scale",
    ),
    attrs=QnnConv2DAttrs,
    type_rel=_qnn_conv2d_rel,
    kind="out_elemwise_fusable",
)
def qnn_conv2d(data, weight, input_zero_point, kernel_zero_point, input_scale, kernel_scale, attrs):
    """Quantized 2-D convolution, the exact integer accumulator of nn.conv2d on offset values:
    ``out = conv2d(data - zp_in, weight - zp_w)`` (zp_w per output channel or scalar), padding
    with the input zero point (padded taps add 0), summed exactly and wrapped to out_dtype. The
    scales only type the result: the result's scale is input_scale * kernel_scale. int8/uint8
    data take out_dtype int32; int16 data take int64, like TFLite's 16x8 kernels."""
    x = offset_by_zero_point(data, input_zero_point, data.ndim, 0)
    w = offset_by_zero_point(weight, kernel_zero_point, 4, attrs.kernel_layout.index("O"))
    out = conv2d_reference(x, w, attrs, pad_value=0)
    if attrs.accumulate != "exact":
        out = out + _conv_pair_saturation(data, weight, int(_scalar(input_zero_point)), attrs)
    return out.astype(attrs.out_dtype)


def _conv_pair_saturation(data, weight, zp_in: int, attrs) -> np.ndarray:
    """x86_int8.pair_saturation of a convolution, K in NHWC im2col order (kernel row, kernel
    column, input channel of the group), padding holding the input zero point; "vpmaddubsw_tap"
    first pads an odd channel count with a zero channel, so that pairs stay within a tap."""
    data, zp_in = _as_uint8(data, zp_in)
    x = pad_input(to_nhwc(data, attrs.data_layout), attrs.padding, "NHWC", zp_in)
    w = to_layout(weight, attrs.kernel_layout, "OIHW")
    if attrs.accumulate == "vpmaddubsw_tap" and w.shape[1] % 2:  # groups == 1 (type relation)
        x = np.concatenate([x.astype(np.int64), np.zeros(x.shape[:3] + (1,), np.int64)], 3)
        w = np.concatenate([w.astype(np.int64), np.zeros((w.shape[0], 1) + w.shape[2:],
                                                         np.int64)], 1)
    o, cg, kh, kw = w.shape
    g = attrs.groups
    windows = sliding_windows(x, (kh, kw), attrs.strides, attrs.dilation)
    n, oh, ow = windows.shape[:3]
    wmat = w.reshape(g, o // g, cg, kh, kw).transpose(0, 3, 4, 2, 1)
    wmat = wmat.reshape(g, kh * kw * cg, o // g)
    out = np.empty((n, oh, ow, o), np.int64)
    for b in range(n):
        cols = windows[b].reshape(oh * ow, g, cg, kh, kw).transpose(1, 0, 3, 4, 2)
        cols = cols.reshape(g, oh * ow, kh * kw * cg)
        fix = x86_int8.pair_saturation(cols, wmat)  # (G, OH*OW, O/G)
        out[b] = fix.transpose(1, 0, 2).reshape(oh, ow, o)
    return out if attrs.data_layout == "NHWC" else out.transpose(0, 3, 1, 2)


@dataclass(frozen=True)
class QnnDenseAttrs(Attrs):
    """``accumulate`` as QnnConv2DAttrs' (K in order)."""

    units: int | None = None
    out_dtype: str = choice("int32", "int32", "int64")
    accumulate: str = choice("exact", *x86_int8.INT_ACCUMULATE)


def _qnn_dense_rel(types, attrs):
    data, weight = quantized(types[0], "data"), quantized(types[1], "weight")
    _check_pair_accumulate(data, weight, attrs)
    if data.ndim < 1 or weight.ndim != 2:
        fail(
            f"data must have rank >= 1 and weight must be 2-D (units, in), got {data.shape} and "
            f"{weight.shape}"
        )
    units, k = weight.shape
    if data.shape[-1] != k:
        fail(
            f"data {data.shape} has {data.shape[-1]} input features but weight {weight.shape} "
            f"has {k}"
        )
    if attrs.units is not None and attrs.units != units:
        fail(f"units={attrs.units} but weight {weight.shape} has {units} rows")
    whose = f"row (unit) of weight {weight.shape}"
    mac_params(types, units, whose)
    return TensorType(data.shape[:-1] + (units,), attrs.out_dtype)


@register_op(
    "qnn.dense",
    inputs=(
        "data",
        "weight",
        "input_zero_point",
        "kernel_zero_point",
        "input_scale",
        "kernel_scale",
    ),
    attrs=QnnDenseAttrs,
    type_rel=_qnn_dense_rel,
    kind="out_elemwise_fusable",
)
def qnn_dense(data, weight, input_zero_point, kernel_zero_point, input_scale, kernel_scale, attrs):
    """Quantized dense, weight (units, in): ``out[..., u] = sum_k (data[..., k] - zp_in) *
    (weight[u, k] - zp_w[u])`` summed exactly and wrapped to out_dtype (zp_w scalar or one per
    unit); the result's scale is input_scale * kernel_scale."""
    x = offset_by_zero_point(data, input_zero_point, data.ndim, 0)
    w = offset_by_zero_point(weight, kernel_zero_point, 2, 0)
    out = exact_matmul(x, w.T)
    if attrs.accumulate != "exact":  # "vpmaddubsw_tap" is "vpmaddubsw": a dense has one tap
        out = out + x86_int8.pair_saturation(_as_uint8(data, 0)[0], weight.T)
    return out.astype(attrs.out_dtype)


@dataclass(frozen=True)
class QnnBatchMatmulAttrs(Attrs):
    transpose_a: bool = False
    transpose_b: bool = True
    out_dtype: str = choice("int32", "int32", "int64")


def _qnn_batch_matmul_rel(types, attrs):
    x, y = quantized(types[0], "x"), quantized(types[1], "y")
    if x.ndim != 3 or y.ndim != 3:
        fail(f"x and y must be 3-D (batch, rows, columns), got {x.shape} and {y.shape}")
    (bx, m, kx) = (x.shape[0], x.shape[2], x.shape[1]) if attrs.transpose_a else x.shape
    (by, n, ky) = y.shape if attrs.transpose_b else (y.shape[0], y.shape[2], y.shape[1])
    if kx != ky:
        fail(
            f"x {x.shape} (transpose_a={attrs.transpose_a}) has {kx} columns but y {y.shape} "
            f"(transpose_b={attrs.transpose_b}) has {ky} rows"
        )
    if bx != by and 1 not in (bx, by):
        fail(f"batch sizes of x {x.shape} and y {y.shape} differ and neither is 1")
    for i, what in enumerate(("x_zero_point", "y_zero_point")):
        scalar_param(types[2 + i], what, "int32")
    for i, what in enumerate(("x_scale", "y_scale")):
        scalar_param(types[4 + i], what, "float32")
    return TensorType((max(bx, by), m, n), attrs.out_dtype)


@register_op(
    "qnn.batch_matmul",
    inputs=("x", "y", "x_zero_point", "y_zero_point", "x_scale", "y_scale"),
    attrs=QnnBatchMatmulAttrs,
    type_rel=_qnn_batch_matmul_rel,
    kind="out_elemwise_fusable",
)
def qnn_batch_matmul(x, y, x_zero_point, y_zero_point, x_scale, y_scale, attrs):
    """Quantized batch matmul: ``out[b] = (x[b] - zp_x) @ (y[b] - zp_y)`` with x (B, M, K) (or
    (B, K, M) if transpose_a) and y (B, K, N) (or (B, N, K) if transpose_b, the default), a batch
    of 1 broadcast; summed exactly and wrapped to out_dtype."""
    a = offset_by_zero_point(x, x_zero_point, 3, 0)
    b = offset_by_zero_point(y, y_zero_point, 3, 0)
    if attrs.transpose_a:
        a = a.transpose(0, 2, 1)
    if attrs.transpose_b:
        b = b.transpose(0, 2, 1)
    return exact_matmul(a, b).astype(attrs.out_dtype)
