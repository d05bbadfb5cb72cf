"""Converters for elementwise operators: arithmetic, activations, softmax, QUANTIZE and
DEQUANTIZE.

Quantized arithmetic and activations map to the qnn op of the same meaning with TFLite's
semantics; a fused activation becomes a clip on the integer result.
"""

from __future__ import annotations

import numpy as np

from partita.ir import Constant, Expr

from .context import INT_RANGES, OpContext, Unsupported, quantized_activation_range
from .neon import split_flat
from .ops_conv import check_quantized_io

QNN_BINARY = {"ADD": "qnn.add", "SUB": "qnn.subtract", "MUL": "qnn.mul"}
FLOAT_BINARY = {"ADD": "add", "SUB": "subtract", "MUL": "multiply"}


def binary(ctx: OpContext) -> Expr:
    """ADD, SUB, MUL with numpy broadcasting and a fused activation."""
    name, out = ctx.op.name, ctx.out()
    if not ctx.quantized():
        return ctx.activation(ctx.call(FLOAT_BINARY[name], ctx.expr(0), ctx.expr(1)), out)
    lhs, rhs = ctx.tensor(0), ctx.tensor(1)
    check_quantized_io(ctx, lhs, rhs, out)
    y = ctx.call(
        QNN_BINARY[name],
        ctx.expr(0),
        ctx.expr(1),
        *ctx.qparams(lhs),
        *ctx.qparams(rhs),
        *ctx.qparams(out),
        out_dtype=out.dtype,
        semantics=ctx.sem(QNN_BINARY[name]),
    )
    return ctx.activation(y, out)


def min_max(ctx: OpContext) -> Expr:
    """MAXIMUM, MINIMUM: TFLite compares the stored values whatever their quantization."""
    op = "maximum" if ctx.op.name == "MAXIMUM" else "minimum"
    return ctx.call(op, ctx.expr(0), ctx.expr(1))


QNN_UNARY = {"LOGISTIC": "qnn.sigmoid", "TANH": "qnn.tanh", "HARD_SWISH": "qnn.hardswish"}
FLOAT_UNARY = {"LOGISTIC": "sigmoid", "TANH": "tanh", "HARD_SWISH": "nn.hardswish"}


def unary(ctx: OpContext) -> Expr:
    """LOGISTIC, TANH, HARD_SWISH."""
    name = ctx.op.name
    if not ctx.quantized():
        return ctx.call(FLOAT_UNARY[name], ctx.expr(0))
    return _quantized_activation(ctx, QNN_UNARY[name])


def leaky_relu(ctx: OpContext) -> Expr:
    """LEAKY_RELU. 16x8 (int16, zero points 0): reference_ops::QuantizeLeakyRelu, two
    multipliers (s_in / s_out for v >= 0, s_in * alpha / s_out below). The optimized int16
    kernel (optimized_integer_ops::QuantizeLeakyRelu) is the same scalar loop unless built with
    AVX2, which TFLite's x86 wheels are not (the builtin outputs of the 16x8 test models equal
    BUILTIN_REF's): both kernel sets are the reference arithmetic."""
    alpha = float(ctx.opt("Alpha"))
    if not ctx.quantized():
        return ctx.call("nn.leaky_relu", ctx.expr(0), alpha=alpha)
    if ctx.tensor(0).dtype == "int16":
        return _quantized_activation(ctx, "qnn.leaky_relu", alpha=alpha, semantics="tflite")
    return _quantized_activation(ctx, "qnn.leaky_relu", alpha=alpha)


def softmax(ctx: OpContext) -> Expr:
    """SOFTMAX over the last axis, softmax(beta * x)."""
    beta = float(ctx.opt("Beta"))
    if not ctx.quantized():
        x = ctx.expr(0)
        if beta != 1.0:
            x = ctx.call("multiply", x, ctx.const(np.float32(beta)))
        return ctx.call("nn.softmax", x, axis=-1)
    if ctx.tensor(0).dtype == "int16":  # 16x8: both kernel sets run the reference kernel
        return _quantized_activation(ctx, "qnn.softmax", axis=-1, beta=beta, semantics="tflite")
    return _quantized_activation(ctx, "qnn.softmax", axis=-1, beta=beta)


def _quantized_activation(ctx: OpContext, op: str, **attrs) -> Expr:
    x, out = ctx.tensor(0), ctx.out()
    check_quantized_io(ctx, x, out)
    attrs.setdefault("semantics", ctx.sem(op))
    return ctx.call(op, ctx.expr(0), *ctx.qparams(x), *ctx.qparams(out), **attrs)


RELU_RANGES = {
    "RELU": (0.0, None),
    "RELU6": (0.0, 6.0),
    "RELU_N1_TO_1": (-1.0, 1.0),
    "RELU_0_TO_1": (0.0, 1.0),
}


def abs_(ctx: OpContext) -> Expr:
    """ABS. Quantized (TFLite's AbsEvalQuantized): |q - zp_in| rescaled by the float32 quotient
    s_in / s_out with TFLite's fixed-point multiplier (exactly 1 when the scales are equal, the
    kernel's no-rescale case), + zp_out, clamped: cast -> subtract -> abs -> qnn.requantize."""
    if not ctx.quantized():
        return ctx.call("abs", ctx.expr(0))
    x, out = ctx.tensor(0), ctx.out()
    check_quantized_io(ctx, x, out)
    (s_in, zp_in), (s_out, zp_out) = ctx.qparams(x), ctx.qparams(out)
    ratio = np.float64(np.float32(s_in.data) / np.float32(s_out.data))
    v = ctx.call("cast", ctx.expr(0), dtype="int32")
    v = ctx.call("abs", ctx.call("subtract", v, ctx.const(int(zp_in.data))))
    return ctx.call(
        "qnn.requantize",
        v,
        ctx.const(ratio, "float64"),
        ctx.const(0),
        ctx.const(1.0),
        zp_out,
        out_dtype=out.dtype,
        semantics="tflite",
    )


def relu(ctx: OpContext) -> Expr:
    """RELU, RELU6, RELU_N1_TO_1. Quantized (TFLite's QuantizedReluX): rescale by the float32
    quotient s_in / s_out (the requantize carries it as its input scale, with output scale 1),
    then clamp to round(bound / s_out) + zp_out."""
    lo, hi = RELU_RANGES[ctx.op.name]
    if not ctx.quantized():
        if hi is None:
            return ctx.call("nn.relu", ctx.expr(0))
        return ctx.call("clip", ctx.expr(0), a_min=lo, a_max=hi)
    x, out = ctx.tensor(0), ctx.out()
    check_quantized_io(ctx, x, out)
    (s_in, zp_in), (s_out, zp_out) = ctx.qparams(x), ctx.qparams(out)
    ratio = np.float64(np.float32(s_in.data) / np.float32(s_out.data))
    y = ctx.call(
        "qnn.requantize",
        ctx.expr(0),
        ctx.const(ratio, "float64"),
        zp_in,
        ctx.const(np.float32(1.0)),
        zp_out,
        out_dtype=out.dtype,
        semantics="tflite",
    )
    a_min, a_max = quantized_activation_range(out, lo, hi, out.dtype)
    return ctx.call("clip", y, a_min=a_min, a_max=a_max)


def quantize(ctx: OpContext) -> Expr:
    """QUANTIZE: float -> int (qnn.quantize) or int -> int (qnn.requantize, TFLite's Requantize
    with the double quotient s_in / s_out)."""
    x, out = ctx.tensor(0), ctx.out()
    if out.dtype not in INT_RANGES or not out.quantized:
        raise Unsupported(f"QUANTIZE to {out.type_name}")
    axis = out.quantized_dimension if out.per_channel else -1
    scale, zp = ctx.scale(out, True), ctx.zero_point(out, True)
    if x.dtype == "float32":
        exact = ctx.call(
            "qnn.quantize",
            ctx.expr(0),
            scale,
            zp,
            axis=axis,
            out_dtype=out.dtype,
            semantics="tflite",
        )
        if ctx.semantics != "tflite_builtin" or out.per_channel:
            return exact
        tail = lambda e, _: ctx.call("qnn.quantize", e, scale, zp, out_dtype=out.dtype)  # noqa: E731
        return split_flat(ctx, ctx.expr(0), 8, lambda e, _: _quantize_neon(ctx, e, out), tail)
    check_quantized_io(ctx, x, out)
    params = (*ctx.qparams(x), *ctx.qparams(out))

    def stage(sem: str):
        return lambda e, _: ctx.call(
            "qnn.requantize", e, *params, out_dtype=out.dtype, semantics=sem
        )

    if ctx.semantics == "tflite_builtin" and x.dtype != "int16":  # optimized Requantize: 16-value
        # NEON blocks (int16 -> int16 has no optimized form: the reference arithmetic)
        return split_flat(ctx, ctx.expr(0), 16, stage("tflite_builtin"), stage("tflite"))
    return stage("tflite")(ctx.expr(0), None)


def _quantize_neon(ctx: OpContext, e: Expr, out) -> Expr:
    """optimized_ops::AffineQuantize's NEON blocks: x * float32(1 / s), rounded half to even
    (vcvtnq), + zp, saturated; the scalar tail divides and rounds half away."""
    inverse = np.float32(np.float32(1.0) / np.float32(out.scale[0]))
    y = ctx.call("multiply", e, ctx.const(inverse))
    return ctx.call(
        "qnn.quantize",
        y,
        ctx.const(np.float32(1.0)),
        ctx.const(np.int32(out.zero_point[0])),
        out_dtype=out.dtype,
        semantics="onnx",
    )


def dequantize(ctx: OpContext) -> Expr:
    """DEQUANTIZE: int -> float32 (qnn.dequantize) or float16 -> float32 (a cast); a constant
    input (float16 or int8 weights) is folded into a float32 constant."""
    x = ctx.tensor(0)
    if x.dtype == "float16":
        if x.data is not None:
            return ctx.const(x.data.astype(np.float32))
        return ctx.call("cast", ctx.expr(0), dtype="float32")
    if x.dtype not in INT_RANGES or not x.quantized:
        raise Unsupported(f"DEQUANTIZE of {x.type_name}")
    axis = x.quantized_dimension if x.per_channel else -1
    scale, zp = ctx.scale(x, True), ctx.zero_point(x, True)
    y = ctx.call("qnn.dequantize", ctx.expr(0), scale, zp, axis=axis)
    if isinstance(y.args[0], Constant):
        return ctx.const(y.op.impl(*(a.data for a in y.args), y.attrs))
    if ctx.semantics != "tflite_builtin" or x.per_channel:
        return y
    return split_flat(
        ctx,
        ctx.expr(0),
        8,
        lambda e, _: _dequantize_neon(ctx, e, x),
        lambda e, _: ctx.call("qnn.dequantize", e, scale, zp),
    )


def _dequantize_neon(ctx: OpContext, e: Expr, x) -> Expr:
    """optimized_ops::Dequantize's NEON blocks: float(q) * s + float(-zp * s) in float32, two
    roundings (the scalar tail rounds the exact (q - zp) * s once)."""
    s = np.float32(x.scale[0])
    offset = np.float32(np.float32(-int(x.zero_point[0])) * s)
    y = ctx.call("multiply", ctx.call("cast", e, dtype="float32"), ctx.const(s))
    return ctx.call("add", y, ctx.const(offset))
