"""Dynamic int8 (onnxruntime.quantization.quantize_dynamic and the ops ONNX Runtime fuses it
into): DynamicQuantizeLinear, MatMulInteger with a computed zero point, and the com.microsoft
DynamicQuantizeMatMul and MatMulIntegerToFloat.

    DynamicQuantizeLinear(x)             -> qnn.dynamic_quantize(x): (uint8 x, scale, zero point)
    MatMulInteger(A, B, zp_a, zp_b)      -> qnn.dense(A, B^T, int32(zp_a), zp_b): int32
    DynamicQuantizeMatMul(A, B, s_b, ..) -> float32(qnn.dense(q(A), B^T)) * (s_a * s_b) [+ bias]

The integer parts are exact (bit-exact with ONNX Runtime); the float scaling is one float32
multiply (and add) per element, as ONNX Runtime does it.
"""

from __future__ import annotations

import numpy as np

from partita.ir import Expr

from .context import NodeContext, Unsupported
from .ops_quant import _dense_weight


def dynamic_quantize_linear(ctx: NodeContext) -> list[Expr]:
    if ctx.dtype(0) != "float32":
        raise Unsupported(f"DynamicQuantizeLinear of {ctx.dtype(0)} data")
    t = ctx.call("qnn.dynamic_quantize", ctx.expr(0))
    return [ctx.item(t, i) for i in range(3)]


def _zero_point(ctx: NodeContext, i: int, what: str, per_channel: bool = False) -> Expr:
    """A zero-point input as int32: a constant as ctx.zero_point, a computed scalar (the
    output of DynamicQuantizeLinear) cast."""
    if not ctx.has_input(i) or ctx.is_const(i):
        return ctx.zero_point(i, what, per_channel)
    if tuple(ctx.shape(i)) not in ((), (1,)):
        raise Unsupported(f"a computed {what} of shape {list(ctx.shape(i))}")
    zp = ctx.call("cast", ctx.expr(i), dtype="int32")
    return ctx.call("reshape", zp, newshape=()) if ctx.shape(i) else zp


def _scale(ctx: NodeContext, i: int, what: str, per_channel: bool = False) -> Expr:
    """A float32 scale input: a constant as ctx.scale, else the computed scalar."""
    if ctx.is_const(i):
        return ctx.scale(i, what, per_channel)
    if tuple(ctx.shape(i)) not in ((), (1,)) or ctx.dtype(i) != "float32":
        raise Unsupported(f"a computed {what} of shape {list(ctx.shape(i))}")
    s = ctx.expr(i)
    return ctx.call("reshape", s, newshape=()) if ctx.shape(i) else s


def _integer_matmul(ctx: NodeContext, a: Expr, zp_a: Expr, b_index: int, zp_b: Expr) -> Expr:
    """(A - zp_a) @ (B - zp_b) in int32 with a constant 2-D B."""
    for i, dtype in ((0, a.checked_type.dtype), (b_index, ctx.dtype(b_index))):
        if dtype not in ("int8", "uint8"):
            raise Unsupported(f"{ctx.op_type} input {i} of type {dtype}")
    one = ctx.const(np.float32(1.0))
    return ctx.call("qnn.dense", a, _dense_weight(ctx, b_index, False), zp_a, zp_b, one, one)


def matmul_integer(ctx: NodeContext) -> Expr:
    """MatMulInteger(A, B[, a_zero_point[, b_zero_point]]) with a constant 2-D B -> qnn.dense
    (int32); a_zero_point may be computed (DynamicQuantizeLinear's)."""
    zp_a = _zero_point(ctx, 2, "a_zero_point")
    zp_b = _zero_point(ctx, 3, "b_zero_point", per_channel=True)
    return _integer_matmul(ctx, ctx.expr(0), zp_a, 1, zp_b)


def _to_float(ctx: NodeContext, acc: Expr, a_scale: Expr, b_scale: Expr, bias: int) -> Expr:
    """float32(acc) * (a_scale * b_scale) [+ input ``bias``]."""
    scale = ctx.call("multiply", a_scale, b_scale)
    out = ctx.call("multiply", ctx.call("cast", acc, dtype="float32"), scale)
    if ctx.has_input(bias):
        out = ctx.call("add", out, ctx.expr(bias))
    return out


def dynamic_quantize_matmul(ctx: NodeContext) -> Expr:
    """com.microsoft DynamicQuantizeMatMul(A, B, b_scale[, b_zero_point[, bias]])."""
    if ctx.dtype(0) != "float32":
        raise Unsupported(f"DynamicQuantizeMatMul of {ctx.dtype(0)} data")
    q = ctx.call("qnn.dynamic_quantize", ctx.expr(0))
    zp_a = ctx.call("cast", ctx.item(q, 2), dtype="int32")
    zp_b = _zero_point(ctx, 3, "b_zero_point", per_channel=True)
    acc = _integer_matmul(ctx, ctx.item(q, 0), zp_a, 1, zp_b)
    return _to_float(ctx, acc, ctx.item(q, 1), _scale(ctx, 2, "b_scale", True), 4)


def matmul_integer_to_float(ctx: NodeContext) -> Expr:
    """com.microsoft MatMulIntegerToFloat(A, B, a_scale, b_scale[, a_zp[, b_zp[, bias]]])."""
    zp_a = _zero_point(ctx, 4, "a_zero_point")
    zp_b = _zero_point(ctx, 5, "b_zero_point", per_channel=True)
    acc = _integer_matmul(ctx, ctx.expr(0), zp_a, 1, zp_b)
    return _to_float(ctx, acc, _scale(ctx, 2, "a_scale"), _scale(ctx, 3, "b_scale", True), 6)
