"""QuantizeLinear / DequantizeLinear and the QOperator ops (ONNX's QLinearConv, QLinearMatMul,
ConvInteger, MatMulInteger, and ONNX Runtime's com.microsoft contrib ops) as qnn ops with
ONNX Runtime's semantics. Integer accumulators are requantized with the float32 scale ORT
computes: input_scale * weight_scale / output_scale."""

from __future__ import annotations

import numpy as np

from partita.ir import Constant, Expr

from .context import NodeContext, Unsupported, float_scale_product
from .ops_nn import _pool_common, conv_attrs

SEM = "onnx"


def _axis(ctx: NodeContext, rank: int, scale: Constant) -> int:
    """The per-channel axis (only meaningful with per-channel parameters; -1 otherwise)."""
    if ctx.attr("block_size", 0):
        raise Unsupported("blocked quantization (block_size)")
    if scale.data.ndim == 0:
        return -1
    axis = ctx.attr("axis", 1)
    axis = 1 if axis is None else int(axis)
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        ctx.fail(f"axis {ctx.attr('axis')} is out of range for rank {rank}")
    return axis


def quantize_linear(ctx: NodeContext) -> Expr:
    """QuantizeLinear -> qnn.quantize(semantics="onnx"); the zero point's type is the output's."""
    if ctx.dtype(0) != "float32":
        raise Unsupported(f"QuantizeLinear of {ctx.dtype(0)} data")
    scale = ctx.scale(1, "y_scale", per_channel=True)
    axis = _axis(ctx, len(ctx.shape(0)), scale)
    zp = ctx.zero_point(2, "y_zero_point", per_channel=True)
    return ctx.call(
        "qnn.quantize", ctx.expr(0), scale, zp, axis=axis, out_dtype=ctx.zp_dtype(2), semantics=SEM
    )


def dequantize_linear(ctx: NodeContext) -> Expr:
    """DequantizeLinear -> qnn.dequantize (int8/uint8/int16/int32 data)."""
    scale = ctx.scale(1, "x_scale", per_channel=True)
    axis = _axis(ctx, len(ctx.shape(0)), scale)
    zp = ctx.zero_point(2, "x_zero_point", per_channel=True)
    return ctx.call("qnn.dequantize", ctx.expr(0), scale, zp, axis=axis)


def _requantize(ctx, acc, s_in, s_out, zp_out, dtype, axis) -> Expr:
    return ctx.call(
        "qnn.requantize",
        acc,
        s_in,
        ctx.const(0),
        s_out,
        zp_out,
        axis=axis,
        out_dtype=dtype,
        semantics=SEM,
    )


def qlinear_conv(ctx: NodeContext) -> Expr:
    """QLinearConv -> qnn.conv2d [+ int32 bias] -> qnn.requantize (per output channel)."""
    x, w = ctx.expr(0), ctx.expr(3)
    xs, xz = ctx.scale(1, "x_scale"), ctx.zero_point(2, "x_zero_point")
    ws, wz = ctx.scale(4, "w_scale", True), ctx.zero_point(5, "w_zero_point", True)
    ys, yz = ctx.scale(6, "y_scale"), ctx.zero_point(7, "y_zero_point")
    acc = ctx.call("qnn.conv2d", x, w, xz, wz, xs, ws, **conv_attrs(ctx, w.checked_type.shape))
    if ctx.has_input(8):
        acc = ctx.call("nn.bias_add", acc, ctx.expr(8), axis=1)
    return _requantize(ctx, acc, float_scale_product(xs, ws), ys, yz, ctx.zp_dtype(7), 1)


def _dense_weight(ctx: NodeContext, i: int, trans: bool) -> Constant:
    """A constant 2-D B as qnn.dense's (N, K) weight."""
    b = ctx.value(i, "B")
    if b.ndim != 2:
        raise Unsupported(f"B of shape {list(b.shape)} (a 2-D constant is needed)")
    return ctx.const(np.ascontiguousarray(b if trans else b.T))


def qlinear_matmul(ctx: NodeContext) -> Expr:
    """QLinearMatMul with a constant 2-D B -> qnn.dense -> qnn.requantize (per column)."""
    a, b = ctx.expr(0), _dense_weight(ctx, 3, False)
    as_, az = ctx.scale(1, "a_scale"), ctx.zero_point(2, "a_zero_point")
    bs, bz = ctx.scale(4, "b_scale", True), ctx.zero_point(5, "b_zero_point", True)
    ys, yz = ctx.scale(6, "y_scale"), ctx.zero_point(7, "y_zero_point")
    acc = ctx.call("qnn.dense", a, b, az, bz, as_, bs)
    rank = len(acc.checked_type.shape)
    return _requantize(ctx, acc, float_scale_product(as_, bs), ys, yz, ctx.zp_dtype(7), rank - 1)


def qgemm(ctx: NodeContext) -> Expr:
    """com.microsoft QGemm: (A - za)(B - zb) + C in int32, requantized with scale
    alpha * a_scale * b_scale / y_scale (float32, ORT's order), or scaled to float32 without
    y_scale."""
    if ctx.attr("transA", 0):
        raise Unsupported("QGemm with transA")
    a, b = ctx.expr(0), _dense_weight(ctx, 3, bool(ctx.attr("transB", 0)))
    as_, az = ctx.scale(1, "a_scale"), ctx.zero_point(2, "a_zero_point")
    bs, bz = ctx.scale(4, "b_scale", True), ctx.zero_point(5, "b_zero_point", True)
    acc = ctx.call("qnn.dense", a, b, az, bz, as_, bs)
    if ctx.has_input(6):
        acc = ctx.call("add", acc, ctx.expr(6))
    alpha = np.float32(ctx.attr("alpha", 1.0))
    scale = ctx.const((alpha * as_.data * bs.data).astype(np.float32))
    if not ctx.has_input(7):
        return ctx.call("qnn.dequantize", acc, scale, ctx.const(0), axis=1)
    ys, yz = ctx.scale(7, "y_scale"), ctx.zero_point(8, "y_zero_point")
    return _requantize(ctx, acc, scale, ys, yz, ctx.zp_dtype(8), 1)


def conv_integer(ctx: NodeContext) -> Expr:
    """ConvInteger -> qnn.conv2d (int32 out; the scales are placeholders of 1)."""
    w = ctx.expr(1)
    one = ctx.const(np.float32(1.0))
    return ctx.call(
        "qnn.conv2d",
        ctx.expr(0),
        w,
        ctx.zero_point(2, "x_zero_point"),
        ctx.zero_point(3, "w_zero_point", True),
        one,
        one,
        **conv_attrs(ctx, w.checked_type.shape),
    )


def matmul_integer(ctx: NodeContext) -> Expr:
    """MatMulInteger with a constant 2-D B -> qnn.dense (int32 out)."""
    one = ctx.const(np.float32(1.0))
    return ctx.call(
        "qnn.dense",
        ctx.expr(0),
        _dense_weight(ctx, 1, False),
        ctx.zero_point(2, "a_zero_point"),
        ctx.zero_point(3, "b_zero_point", True),
        one,
        one,
    )


def qlinear_binary(ctx: NodeContext) -> Expr:
    """com.microsoft QLinearAdd / QLinearMul -> qnn.add / qnn.mul (semantics "onnx")."""
    name = {"QLinearAdd": "qnn.add", "QLinearMul": "qnn.mul"}[ctx.op_type]
    return ctx.call(
        name,
        ctx.expr(0),
        ctx.expr(3),
        ctx.scale(1, "A_scale"),
        ctx.zero_point(2, "A_zero_point"),
        ctx.scale(4, "B_scale"),
        ctx.zero_point(5, "B_zero_point"),
        ctx.scale(6, "C_scale"),
        ctx.zero_point(7, "C_zero_point"),
        semantics=SEM,
    )


def _unary_params(ctx: NodeContext) -> list:
    return [
        ctx.expr(0),
        ctx.scale(1, "X_scale"),
        ctx.zero_point(2, "X_zero_point"),
        ctx.scale(3, "Y_scale"),
        ctx.zero_point(4, "Y_zero_point"),
    ]


def qlinear_global_avg_pool(ctx: NodeContext) -> Expr:
    """com.microsoft QLinearGlobalAveragePool -> qnn.mean over the spatial axes, kept."""
    rank = len(ctx.shape(0))
    axes = tuple(range(1, rank - 1)) if ctx.attr("channels_last", 0) else tuple(range(2, rank))
    return ctx.call("qnn.mean", *_unary_params(ctx), axis=axes, keepdims=True, semantics=SEM)


def qlinear_avg_pool(ctx: NodeContext) -> Expr:
    """com.microsoft QLinearAveragePool (NCHW) -> qnn.avg_pool2d."""
    if ctx.attr("channels_last", 0):
        raise Unsupported("QLinearAveragePool with channels_last")
    return ctx.call(
        "qnn.avg_pool2d",
        *_unary_params(ctx),
        **_pool_common(ctx),
        count_include_pad=bool(ctx.attr("count_include_pad", 0)),
        semantics=SEM,
    )


def qlinear_sigmoid(ctx: NodeContext) -> Expr:
    return ctx.call("qnn.sigmoid", *_unary_params(ctx), semantics=SEM)


def qlinear_leaky_relu(ctx: NodeContext) -> Expr:
    return ctx.call(
        "qnn.leaky_relu", *_unary_params(ctx), alpha=float(ctx.attr("alpha", 0.01)), semantics=SEM
    )


def qlinear_concat(ctx: NodeContext) -> Expr:
    """com.microsoft QLinearConcat(Y_scale, Y_zero_point, (X, X_scale, X_zero_point)...)."""
    n = len(ctx.node.input) - 2
    if n <= 0 or n % 3:
        ctx.fail(f"has {len(ctx.node.input)} inputs; expected 2 + 3 per concatenated tensor")
    idx = range(2, 2 + n, 3)
    data = ctx.tuple([ctx.expr(i) for i in idx])
    scales = ctx.tuple([ctx.scale(i + 1, "X_scale") for i in idx])
    zps = ctx.tuple([ctx.zero_point(i + 2, "X_zero_point") for i in idx])
    return ctx.call(
        "qnn.concatenate",
        data,
        scales,
        zps,
        ctx.scale(0, "Y_scale"),
        ctx.zero_point(1, "Y_zero_point"),
        axis=int(ctx.attr("axis", 0)),
        semantics=SEM,
    )
