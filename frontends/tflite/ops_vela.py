"""Converters for more operators Arm's Vela runs on the Ethos-U NPU: ELU, EXP, LOG, PRELU, ARG_MAX,
REDUCE_MAX, REDUCE_MIN and TILE (RELU_0_TO_1 is one more row of ops_elemwise.relu). Each
reproduces TFLite's reference kernel bit for bit."""

from __future__ import annotations

import numpy as np

from partita.ir import Expr

from .context import OpContext, Unsupported
from .ops_conv import (
    PADDING,
    check_quantized_io,
    product_scale,
    requantize,
    same_padding,
    weight_array,
)
from .ops_pool import reduce_axes


def _lut(ctx: OpContext, qnn_op: str, float_op: str) -> Expr:
    if not ctx.quantized():
        return ctx.call(float_op, ctx.expr(0))
    x, out = ctx.tensor(0), ctx.out()
    check_quantized_io(ctx, x, out)
    if x.dtype != "int8":
        raise Unsupported(f"{ctx.op.name} of {x.dtype} (TFLite's kernel takes int8 and int16)")
    return ctx.call(qnn_op, ctx.expr(0), *ctx.qparams(x), *ctx.qparams(out), semantics="tflite")


def exp(ctx: OpContext) -> Expr:
    """EXP: TFLite's int8 table of expf (qnn.exp)."""
    return _lut(ctx, "qnn.exp", "exp")


def log(ctx: OpContext) -> Expr:
    """LOG: TFLite's int8 table of logf, x <= 0 giving the smallest output (qnn.log)."""
    return _lut(ctx, "qnn.log", "log")


def elu(ctx: OpContext) -> Expr:
    """ELU: TFLite's int8 table of x < 0 ? expf(x) - 1 : x (qnn.elu; the builtin kernel, as
    BUILTIN_REF registers no ELU)."""
    if not ctx.quantized():
        x, zero, one = ctx.expr(0), ctx.const(np.float32(0)), ctx.const(np.float32(1))
        below = ctx.call("subtract", ctx.call("exp", x), one)
        return ctx.call("where", ctx.call("less", x, zero), below, x)
    return _lut(ctx, "qnn.elu", "elu")


def prelu(ctx: OpContext) -> Expr:
    """PRELU(x, alpha), alpha broadcast to x (TFLite's BroadcastPrelu4DSlow: qnn.prelu)."""
    if not ctx.quantized():
        x, alpha = ctx.expr(0), ctx.expr(1)
        zero = ctx.const(np.float32(0))
        pos = ctx.call("maximum", x, zero)
        neg = ctx.call("multiply", ctx.call("minimum", x, zero), alpha)
        return ctx.call("add", pos, neg)
    x, alpha, out = ctx.tensor(0), ctx.tensor(1), ctx.out()
    check_quantized_io(ctx, x, alpha, out)
    if alpha.per_channel:
        raise Unsupported("PRELU with a per-channel quantized alpha")
    return ctx.call(
        "qnn.prelu",
        ctx.expr(0),
        ctx.expr(1),
        *ctx.qparams(x),
        *ctx.qparams(alpha),
        *ctx.qparams(out),
        semantics="tflite",
    )


def reduce_min_max(ctx: OpContext) -> Expr:
    """REDUCE_MAX / REDUCE_MIN over the axes input: TFLite compares the stored values (no
    rescaling, whatever the output's quantization)."""
    axes, keep = reduce_axes(ctx), bool(ctx.opt("KeepDims"))
    if not axes:
        return ctx.expr(0)
    op = "max" if ctx.op.name == "REDUCE_MAX" else "min"
    return ctx.call(op, ctx.expr(0), axis=axes, keepdims=keep)


def arg_max(ctx: OpContext) -> Expr:
    """ARG_MAX along one axis (the first largest value's index), int32 or int64 output."""
    ndim = len(ctx.shape(0))
    axis = int(np.asarray(ctx.constant(1, "the ARG_MAX axis")).reshape(-1)[0])
    if not -ndim <= axis < ndim:
        ctx.fail(f"axis {axis} is out of range for rank {ndim}")
    y = ctx.call("argmax", ctx.expr(0), axis=(axis % ndim,), keepdims=False)
    out = ctx.out().dtype
    if out not in ("int32", "int64"):
        ctx.fail(f"ARG_MAX output type {out} (TFLite's kernel writes int32 or int64)")
    return y if out == "int32" else ctx.call("cast", y, dtype="int64")


def reverse_v2(ctx: OpContext) -> Expr:
    """REVERSE_V2(x, axis): the stored values in reverse order (one axis, as TFLite's kernel)."""
    ndim = len(ctx.shape(0))
    axes = [int(a) for a in np.asarray(ctx.constant(1, "REVERSE_V2's axis")).reshape(-1)]
    if len(axes) != 1 or not -ndim <= axes[0] < ndim:
        raise Unsupported(f"REVERSE_V2 over axes {axes} (TFLite's kernel takes one axis)")
    return ctx.call("reverse", ctx.expr(0), axis=axes[0] % ndim)


def tile(ctx: OpContext) -> Expr:
    """TILE(x, multiples): quantization passes through (TFLite copies the stored values)."""
    reps = tuple(int(r) for r in np.asarray(ctx.constant(1, "TILE's multiples")).reshape(-1))
    if len(reps) != len(ctx.shape(0)):
        ctx.fail(f"{len(reps)} multiples for a rank-{len(ctx.shape(0))} input")
    return ctx.call("tile", ctx.expr(0), reps=reps)


def transpose_conv(ctx: OpContext) -> Expr:
    """TRANSPOSE_CONV(output_shape, filter (O, KH, KW, I), input[, bias]): qnn.conv2d_transpose
    (NHWC, OHWI) with TFLite's padding (ComputePaddingHeightWidth on the output size, the odd
    pixel after), the bias, TFLite's per-channel requantization (the double product of the
    scales, as CONV_2D) and the fused activation. The reference kernel's scatter-accumulation is
    the same exact int32 sum."""
    shape = tuple(int(v) for v in np.asarray(ctx.constant(0, "the output shape")).reshape(-1))
    w = weight_array(ctx, 1)
    if w is None:
        raise Unsupported("a non-constant filter")
    x, wt, out = ctx.tensor(2), ctx.tensor(1), ctx.out()
    in_shape = ctx.shape(2)
    if w.ndim != 4 or len(in_shape) != 4 or len(shape) != 4 or w.shape[3] != in_shape[3]:
        ctx.fail(f"filter {list(w.shape)}, input {list(in_shape)}, output shape {list(shape)}")
    padding = PADDING.get(ctx.opt("Padding"))
    strides = (int(ctx.opt("StrideH")), int(ctx.opt("StrideW")))
    if padding is None or min(strides) < 1:
        ctx.fail(f"padding {ctx.opt('Padding')}, strides {strides}")
    pads, extra = [], []
    for n_in, n_out, k, s in zip(in_shape[1:3], shape[1:3], w.shape[1:3], strides):
        before, _ = same_padding(n_out, k, s, 1, padding)
        after = (n_in - 1) * s + k - before - n_out
        if not -s < after:
            ctx.fail(f"output size {n_out} is not reachable from input {n_in} (kernel {k})")
        pads.append((before, max(after, 0)))
        extra.append(max(-after, 0))
    (top, bottom), (left, right) = pads
    attrs = dict(
        strides=strides,
        padding=(top, left, bottom, right),
        output_padding=tuple(extra),
        data_layout="NHWC",
        kernel_layout="OHWI",
    )
    if not (x.quantized and x.dtype in ("int8", "uint8")):
        y = ctx.call("nn.conv2d_transpose", ctx.expr(2), ctx.const(w), **attrs)
        if ctx.has_input(3):
            y = ctx.call("nn.bias_add", y, ctx.expr(3), axis=3)
        return ctx.activation(y, out)
    check_quantized_io(ctx, x, wt, out)
    acc = ctx.call(
        "qnn.conv2d_transpose",
        ctx.expr(2),
        ctx.const(w),
        ctx.zero_point(x),
        ctx.zero_point(wt, True),
        ctx.scale(x),
        ctx.scale(wt, True),
        out_dtype="int32",
        **attrs,
    )
    if ctx.has_input(3):
        acc = ctx.call("nn.bias_add", acc, ctx.expr(3), axis=3)
    scale = product_scale(ctx, x, wt, True)
    return requantize(ctx, acc, scale, out, 3)  # builtin: the optimized rounding, as CONV_2D


CONVERTERS = {
    "ARG_MAX": (arg_max, "ArgMaxOptions"),
    "ELU": (elu, None),
    "EXP": (exp, None),
    "LOG": (log, None),
    "PRELU": (prelu, None),
    "REDUCE_MAX": (reduce_min_max, "ReducerOptions"),
    "REDUCE_MIN": (reduce_min_max, "ReducerOptions"),
    "REVERSE_V2": (reverse_v2, None),
    "TILE": (tile, None),
    "TRANSPOSE_CONV": (transpose_conv, "TransposeConvOptions"),
}
