"""Elementwise ONNX ops: arithmetic with broadcasting, activations, Clip, Cast."""

from __future__ import annotations

import numpy as np

from partita.ir import Expr

from .context import NodeContext, Unsupported
from .reader import DTYPES

BINARY = {
    "Add": "add",
    "Sub": "subtract",
    "Mul": "multiply",
    "Div": "divide",
    "Max": "maximum",
    "Min": "minimum",
}
UNARY = {
    "Relu": "nn.relu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Exp": "exp",
    "Sqrt": "sqrt",
    "Neg": "negative",
    "Abs": "abs",
    "Floor": "floor",
}
FLOAT_ONLY = {"sigmoid", "tanh", "exp", "sqrt", "floor"}


def binary(ctx: NodeContext) -> Expr:
    """Add/Sub/Mul/Div/Max/Min with numpy (multidirectional) broadcasting; Max/Min of two."""
    n = len([i for i in ctx.node.input if i])
    if n != 2:
        raise Unsupported(f"{ctx.op_type} of {n} inputs")
    if ctx.dtype(0) != ctx.dtype(1):
        ctx.fail(f"inputs have different types {ctx.dtype(0)} and {ctx.dtype(1)}")
    return ctx.call(BINARY[ctx.op_type], ctx.expr(0), ctx.expr(1))


def unary(ctx: NodeContext) -> Expr:
    name = UNARY[ctx.op_type]
    if name in FLOAT_ONLY and ctx.dtype(0) != "float32":
        raise Unsupported(f"{ctx.op_type} on {ctx.dtype(0)} data")
    return ctx.call(name, ctx.expr(0))


def identity(ctx: NodeContext) -> Expr:
    """Identity, and Dropout in inference (its mask output is not supported)."""
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        raise Unsupported("the mask output of Dropout")
    return ctx.expr(0)


def clip(ctx: NodeContext) -> Expr:
    """Clip(x, min, max) with constant bounds -> clip (a missing bound is the dtype's limit)."""
    lo = float(ctx.value(1, "min").reshape(())) if ctx.has_input(1) else -np.inf
    hi = float(ctx.value(2, "max").reshape(())) if ctx.has_input(2) else np.inf
    dtype = ctx.dtype(0)
    if dtype != "float32":
        info = np.iinfo(dtype)
        lo, hi = max(lo, info.min), min(hi, info.max)
    else:
        big = float(np.finfo(np.float32).max)
        lo, hi = max(lo, -big), min(hi, big)
    return ctx.call("clip", ctx.expr(0), a_min=lo, a_max=hi)


def leaky_relu(ctx: NodeContext) -> Expr:
    _float_only(ctx)
    return ctx.call("nn.leaky_relu", ctx.expr(0), alpha=float(ctx.attr("alpha", 0.01)))


def hard_sigmoid(ctx: NodeContext) -> Expr:
    """HardSigmoid: max(0, min(1, alpha * x + beta)), in float32 one step at a time."""
    _float_only(ctx)
    return _hard_sigmoid(ctx, ctx.expr(0), ctx.attr("alpha", 0.2), ctx.attr("beta", 0.5))


def _hard_sigmoid(ctx: NodeContext, x: Expr, alpha: float, beta: float) -> Expr:
    y = ctx.call("multiply", x, ctx.const(np.float32(alpha)))
    y = ctx.call("add", y, ctx.const(np.float32(beta)))
    return ctx.call("clip", y, a_min=0.0, a_max=1.0)


def hard_swish(ctx: NodeContext) -> Expr:
    """HardSwish: x * HardSigmoid(x) with alpha = 1/6, beta = 0.5 (ONNX's definition)."""
    _float_only(ctx)
    x = ctx.expr(0)
    return ctx.call("multiply", x, _hard_sigmoid(ctx, x, 1.0 / 6.0, 0.5))


def _float_only(ctx: NodeContext) -> None:
    if ctx.dtype(0) != "float32":
        raise Unsupported(f"{ctx.op_type} on {ctx.dtype(0)} data")


def cast(ctx: NodeContext) -> Expr:
    to = int(ctx.attr("to", 0))
    if to not in DTYPES:
        raise Unsupported(f"Cast to ONNX type {to}")
    return ctx.call("cast", ctx.expr(0), dtype=DTYPES[to])
