"""Converters for the weighted operators: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED and
BATCH_MATMUL.

Quantized, each becomes ``qnn.<op>`` (the exact int32 accumulator), ``nn.bias_add`` of the int32
bias, ``qnn.requantize`` and a ``clip`` for a fused activation. The requantize input scale is the
product input_scale * weight_scale exactly as TFLite's Prepare computes it before taking the
multiplier: in double per channel (PopulateConvolutionQuantizationParams) for int8 convolutions
and per-channel fully connected layers, and rounded to float32 first
(GetQuantizedConvolutionMultipler) for uint8 kernels, per-tensor fully connected layers and
batch matmul.
"""

from __future__ import annotations

import math

import numpy as np

from partita.ir import Constant, Expr

from .context import OpContext, Unsupported
from .int16 import accumulator_dtype, check_16x8_io, is_16x8
from .neon import split_channels
from .reader import Tensor

PADDING = {0: "SAME", 1: "VALID"}


def same_padding(in_size: int, k: int, stride: int, dilation: int, padding: str):
    """TFLite's ComputePaddingWithOffset: (before, after); SAME puts the odd pixel after."""
    extent = (k - 1) * dilation + 1
    if padding == "SAME":
        out = (in_size + stride - 1) // stride
    else:
        out = (in_size + stride - extent) // stride
    total = max((out - 1) * stride + extent - in_size, 0)
    return total // 2, total - total // 2


def window_attrs(ctx: OpContext, in_hw, kernel_hw, dilation=(1, 1)) -> dict:
    """strides, dilation and (top, left, bottom, right) padding from the operator's options."""
    strides = (ctx.opt("StrideH"), ctx.opt("StrideW"))
    padding = PADDING.get(ctx.opt("Padding"))
    if padding is None:
        ctx.fail(f"unknown padding type {ctx.opt('Padding')}")
    if min(strides) < 1 or min(dilation) < 1:
        ctx.fail(f"strides {strides} and dilation {dilation} must be positive")
    (top, bottom), (left, right) = (
        same_padding(n, k, s, d, padding) for n, k, s, d in zip(in_hw, kernel_hw, strides, dilation)
    )
    return dict(strides=strides, dilation=dilation, padding=(top, left, bottom, right))


def weight_array(ctx: OpContext, i: int) -> np.ndarray | None:
    """The constant value of input ``i`` (a weight tensor or a folded DEQUANTIZE), or None."""
    t = ctx.tensor(i)
    if t.data is not None:
        return t.data
    e = ctx.expr(i)
    return e.data if isinstance(e, Constant) else None


def product_scale(ctx: OpContext, x: Tensor, w: Tensor, exact: bool) -> Constant:
    """input_scale * weight_scale (per channel) as a float64 constant: the exact double product,
    or the float32 product TFLite's GetQuantizedConvolutionMultipler takes."""
    s_in = np.float32(x.scale[0])
    if exact:
        scale = np.float64(s_in) * w.scale.astype(np.float64)
    else:
        scale = (s_in * w.scale.astype(np.float32)).astype(np.float64)
    return ctx.const(scale if scale.size > 1 else scale[0], "float64")


def check_quantized_io(ctx: OpContext, *tensors: Tensor) -> None:
    if is_16x8(tensors):
        return check_16x8_io(ctx, tensors)
    for t in tensors:
        if t.dtype not in ("int8", "uint8"):
            raise Unsupported(
                f"{t.type_name} tensor {t.name!r} (quantized operators take int8 and uint8 tensors)"
            )
        if not t.quantized:
            ctx.fail(f"{t.describe()} has no quantization parameters")


def check_conv_weights_and_bias(ctx: OpContext, wt: Tensor) -> None:
    """The setup checks TFLite's conv kernels make (Prepare): CONV_2D's int8 filters must have
    zero point 0 (conv.cc; the depthwise and fully-connected reference kernels take any), and a
    bias slot given as -1 fails in conv and depthwise ("Tensor at index 2 was optional but was
    expected"). partita refuses the same models, with TFLite's reason."""
    zp = wt.zero_point
    conv = ctx.op.name == "CONV_2D"
    if conv and wt.dtype == "int8" and zp is not None and np.any(np.asarray(zp) != 0):
        bad = int(np.asarray(zp).ravel()[np.flatnonzero(np.asarray(zp).ravel())[0]])
        ctx.fail(
            f"{wt.describe()} has zero point {bad}; TFLite requires int8 weights to have zero "
            f"point 0 (the kernel fails to prepare)"
        )
    if len(ctx.op.inputs) > 2 and ctx.op.inputs[2] < 0:
        ctx.fail(
            "the bias input is -1 (optional) in a three-input operator; TFLite's kernel reads it "
            "and fails to prepare ('Tensor at index 2 was optional but was expected')"
        )


def requantize(
    ctx: OpContext,
    acc: Expr,
    in_scale: Constant,
    out: Tensor,
    axis: int,
    reference: str = "tflite",
    neon_block: int | None = None,
    builtin: str = "tflite_builtin",
) -> Expr:
    """The int32 accumulator to out's dtype, then the fused activation. ``reference`` is the
    requantize semantics of the reference kernel; the optimized kernels round upward, the
    depthwise one only on whole blocks of ``neon_block`` channels (see neon.py); ``builtin``
    overrides that for kernels that keep the scalar arithmetic."""
    s_out, zp_out = ctx.qparams(out)

    def stage(sem: str):
        def part(x: Expr, channels: slice) -> Expr:
            scale = (
                in_scale
                if in_scale.data.ndim == 0
                else ctx.const(in_scale.data[channels], "float64")
            )
            return ctx.call(
                "qnn.requantize",
                x,
                scale,
                ctx.const(0, "int32"),
                s_out,
                zp_out,
                axis=axis,
                out_dtype=out.dtype,
                semantics=sem,
            )

        return part

    if ctx.semantics != "tflite_builtin":
        y = stage(reference)(acc, slice(None))
    elif neon_block:
        y = split_channels(ctx, acc, neon_block, stage(builtin), stage("tflite"))
    else:
        y = stage(builtin)(acc, slice(None))
    return ctx.activation(y, out)


def add_bias(ctx: OpContext, y: Expr, axis: int) -> Expr:
    if not ctx.has_input(2):
        return y
    return ctx.call("nn.bias_add", y, ctx.expr(2), axis=axis)


def conv2d(ctx: OpContext) -> Expr:
    """CONV_2D: filter (O, KH, KW, I), NHWC data."""
    w = weight_array(ctx, 1)
    if w is None:
        raise Unsupported("a non-constant filter")
    if w.ndim != 4:
        ctx.fail(f"the filter must be 4-D (O, KH, KW, I), got {list(w.shape)}")
    dilation = (ctx.opt("DilationHFactor"), ctx.opt("DilationWFactor"))
    shape = ctx.shape(0)
    if len(shape) != 4:
        ctx.fail(f"the input must be 4-D NHWC, got {list(shape)}")
    groups = shape[3] // w.shape[3] if w.shape[3] and shape[3] % w.shape[3] == 0 else 1
    attrs = window_attrs(ctx, shape[1:3], w.shape[1:3], dilation)
    return _conv(ctx, w, "OHWI", groups, attrs)


def depthwise_conv2d(ctx: OpContext) -> Expr:
    """DEPTHWISE_CONV_2D: filter (1, KH, KW, C*m) becomes HWOI (KH, KW, C*m, 1), groups = C."""
    w = weight_array(ctx, 1)
    if w is None:
        raise Unsupported("a non-constant filter")
    shape = ctx.shape(0)
    if w.ndim != 4 or w.shape[0] != 1 or len(shape) != 4:
        ctx.fail(
            f"expected a (1, KH, KW, C*m) filter and 4-D NHWC data, got "
            f"{list(w.shape)} and {list(shape)}"
        )
    c, cm = shape[3], w.shape[3]
    if c == 0 or cm % c:
        ctx.fail(f"the filter's {cm} channels are not a multiple of the input's {c}")
    dilation = (ctx.opt("DilationHFactor"), ctx.opt("DilationWFactor"))
    attrs = window_attrs(ctx, shape[1:3], w.shape[1:3], dilation)
    hwoi = w.reshape(w.shape[1], w.shape[2], cm, 1)
    return _conv(ctx, hwoi, "HWOI", c, attrs)


def _conv(ctx: OpContext, w: np.ndarray, layout: str, groups: int, attrs: dict) -> Expr:
    x, wt, out = ctx.tensor(0), ctx.tensor(1), ctx.out()
    attrs = dict(attrs, groups=groups, data_layout="NHWC", kernel_layout=layout)
    if not ctx.quantized():
        y = ctx.call("nn.conv2d", ctx.expr(0), ctx.const(w), **attrs)
        return ctx.activation(add_bias(ctx, y, 3), out)
    check_quantized_io(ctx, x, wt, out)
    check_conv_weights_and_bias(ctx, wt)
    acc = ctx.call(
        "qnn.conv2d",
        ctx.expr(0),
        ctx.const(w),
        ctx.zero_point(x),
        ctx.zero_point(wt, True),
        ctx.scale(x),
        ctx.scale(wt, True),
        **attrs,
        out_dtype=accumulator_dtype(x),
    )
    acc = add_bias(ctx, acc, 3)
    # int8 kernels take per-channel multipliers of the double product; uint8 kernels the scalar
    # multiplier of the float32 product.
    block = 8 if layout == "HWOI" else None  # optimized_ops::Quantize: 8-channel NEON blocks
    exact = x.dtype in ("int8", "int16")
    return requantize(ctx, acc, product_scale(ctx, x, wt, exact), out, 3, neon_block=block)


def fully_connected(ctx: OpContext) -> Expr:
    """FULLY_CONNECTED: weight (units, K); the input is flattened to (size / K, K)."""
    if ctx.opt("WeightsFormat") != 0:
        raise Unsupported("shuffled weights (weights_format != DEFAULT)")
    shape, w_shape = ctx.shape(0), ctx.shape(1)
    if len(w_shape) != 2 or w_shape[1] == 0 or math.prod(shape) % w_shape[1]:
        ctx.fail(f"the weights {list(w_shape)} do not fit the input {list(shape)}")
    units, k = w_shape
    x, wt, out = ctx.tensor(0), ctx.tensor(1), ctx.out()
    data = ctx.expr(0)
    batch = math.prod(shape) // k
    if tuple(shape) != (batch, k):
        data = ctx.call("reshape", data, newshape=(batch, k))
    if not ctx.quantized():
        if wt.quantized and wt.dtype != "float32":
            raise Unsupported("hybrid quantization (float input, integer weights)")
        y = ctx.activation(add_bias(ctx, ctx.call("nn.dense", data, ctx.expr(1)), 1), out)
    else:
        check_quantized_io(ctx, x, wt, out)
        acc = ctx.call(
            "qnn.dense",
            data,
            ctx.expr(1),
            ctx.zero_point(x),
            ctx.zero_point(wt, True),
            ctx.scale(x),
            ctx.scale(wt, True),
            out_dtype=accumulator_dtype(x),
        )
        acc = add_bias(ctx, acc, 1)
        scale, reference = _fc_output_stage(ctx, x, wt)
        # 16x8: TFLite's optimized kernel set runs the reference int16 kernel
        builtin = reference if x.dtype == "int16" else "tflite_builtin"
        y = requantize(ctx, acc, scale, out, 1, reference, builtin=builtin)
    want = tuple(shape[:-1]) + (units,) if ctx.opt("KeepNumDims") else (batch, units)
    return y if want == (batch, units) else ctx.call("reshape", y, newshape=want)


def _fc_output_stage(ctx: OpContext, x: Tensor, w: Tensor):
    """(input scale, reference semantics) of FULLY_CONNECTED: the int8 reference kernel rounds
    the double product acc * (s_in * s_w / s_out) once; the optimized kernels take the
    multiplier of the double product per channel, of the float32 product per tensor; uint8
    kernels take the float32 product and TFLite's fixed-point multiply."""
    if x.dtype == "int16":  # 16x8: the reference int16 kernel, whichever kernel set
        return product_scale(ctx, x, w, exact=True), "tflite_double"
    if x.dtype != "int8":
        return product_scale(ctx, x, w, exact=False), "tflite"
    if ctx.semantics == "tflite_builtin":
        return product_scale(ctx, x, w, exact=w.per_channel), "tflite"
    return product_scale(ctx, x, w, exact=True), "tflite_double"


def batch_matmul(ctx: OpContext) -> Expr:
    """BATCH_MATMUL: rank 2-5 operands, batch dimensions equal or 1 on one side."""
    xs, ys = ctx.shape(0), ctx.shape(1)
    if not (2 <= len(xs) <= 5 and 2 <= len(ys) <= 5):
        ctx.fail(f"operands must have rank 2 to 5, got {list(xs)} and {list(ys)}")
    bx, by = _batch_dims(xs, ys)
    out_batch = tuple(max(a, b) for a, b in zip(bx, by))
    nx, ny = math.prod(bx), math.prod(by)
    if not (bx == by or nx == 1 or ny == 1):
        raise Unsupported(f"batch broadcasting of {list(xs)} and {list(ys)}")
    a = ctx.call("reshape", ctx.expr(0), newshape=(nx,) + tuple(xs[-2:]))
    b = ctx.call("reshape", ctx.expr(1), newshape=(ny,) + tuple(ys[-2:]))
    adj = dict(transpose_a=bool(ctx.opt("AdjX")), transpose_b=bool(ctx.opt("AdjY")))
    x, yt, out = ctx.tensor(0), ctx.tensor(1), ctx.out()
    if not ctx.quantized():
        y = ctx.call("nn.batch_matmul", a, b, **adj)
    else:
        check_quantized_io(ctx, x, yt, out)
        acc = ctx.call(
            "qnn.batch_matmul",
            a,
            b,
            ctx.zero_point(x),
            ctx.zero_point(yt),
            ctx.scale(x),
            ctx.scale(yt),
            **adj,
        )
        # Both kernel sets requantize BATCH_MATMUL with the scalar fixed-point multiply.
        y = requantize(ctx, acc, product_scale(ctx, x, yt, exact=False), out, -1, builtin="tflite")
    m, n = y.checked_type.shape[1:]
    return ctx.call("reshape", y, newshape=out_batch + (m, n))


def _batch_dims(xs, ys):
    rank = max(len(xs), len(ys)) - 2
    bx = (1,) * (rank - len(xs) + 2) + tuple(xs[:-2])
    by = (1,) * (rank - len(ys) + 2) + tuple(ys[:-2])
    return bx, by
