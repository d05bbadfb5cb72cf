"""Converters for the operators of int8 transformer encoders from TFLiteConverter: GATHER
(embeddings), CAST / LESS / SELECT(_V2) / NEG (masks and index arithmetic), GELU, and the
layer-norm pieces SQUARED_DIFFERENCE and RSQRT."""

from __future__ import annotations

from partita.ir import Expr

from .context import OpContext, Unsupported
from .ops_conv import check_quantized_io

TYPES = {0: "float32", 2: "int32", 3: "uint8", 4: "int64", 6: "bool", 9: "int8", 7: "int16"}


def gather(ctx: OpContext) -> Expr:
    """GATHER(params, indices) along the axis option (batch_dims 0) -> take; the quantization
    parameters pass through (TFLite requires them equal)."""
    if int(ctx.options.get("BatchDims", 0) or 0):
        raise Unsupported("GATHER with batch_dims")
    rank = len(ctx.shape(0))
    axis = int(ctx.options.get("Axis", 0) or 0)
    if not -rank <= axis < rank:
        ctx.fail(f"axis {axis} is out of range for rank {rank}")
    return ctx.call("take", ctx.expr(0), ctx.expr(1), axis=axis % rank, mode="fast")


def cast(ctx: OpContext) -> Expr:
    """CAST between plain (unquantized) types."""
    out = ctx.out()
    if ctx.tensor(0).quantized and ctx.tensor(0).dtype in ("int8", "uint8", "int16"):
        raise Unsupported("CAST of a quantized tensor")
    return ctx.call("cast", ctx.expr(0), dtype=out.dtype)


def less(ctx: OpContext) -> Expr:
    """LESS of plain values (quantized operands with different parameters are unsupported)."""
    a, b = ctx.tensor(0), ctx.tensor(1)
    if (
        a.quantized
        and a.dtype in ("int8", "uint8")
        and (list(a.scale) != list(b.scale) or list(a.zero_point) != list(b.zero_point))
    ):
        raise Unsupported("LESS of quantized operands with different parameters")
    return ctx.call("less", ctx.expr(0), ctx.expr(1))


def select(ctx: OpContext) -> Expr:
    """SELECT / SELECT_V2(condition, x, y) -> where (stored values; TFLite requires equal
    quantization parameters for x, y and the output)."""
    return ctx.call("where", ctx.expr(0), ctx.expr(1), ctx.expr(2))


def neg(ctx: OpContext) -> Expr:
    """NEG. Quantized (int8): TFLite negates the stored values and ignores both tensors'
    quantization (-128 stays -128: the int8 negation wraps), so a plain ``negative``."""
    if ctx.quantized():
        x, out = ctx.tensor(0), ctx.out()
        if x.dtype != "int8" or out.dtype != x.dtype:
            raise Unsupported(f"quantized NEG of {x.dtype} to {out.dtype}")
    return ctx.call("negative", ctx.expr(0))


def gelu(ctx: OpContext) -> Expr:
    approximate = bool(ctx.options.get("Approximate", False))
    if not ctx.quantized():
        return ctx.call("nn.gelu", ctx.expr(0), approximate="tanh" if approximate else "none")
    x, out = ctx.tensor(0), ctx.out()
    check_quantized_io(ctx, x, out)
    return ctx.call(
        "qnn.gelu",
        ctx.expr(0),
        *ctx.qparams(x),
        *ctx.qparams(out),
        approximate=approximate,
        semantics=ctx.sem("qnn.gelu"),
    )


def rsqrt(ctx: OpContext) -> Expr:
    if not ctx.quantized():
        return ctx.call("rsqrt", ctx.expr(0))
    x, out = ctx.tensor(0), ctx.out()
    check_quantized_io(ctx, x, out)
    return ctx.call(
        "qnn.rsqrt", ctx.expr(0), *ctx.qparams(x), *ctx.qparams(out), semantics=ctx.sem("qnn.rsqrt")
    )


def squared_difference(ctx: OpContext) -> Expr:
    if not ctx.quantized():
        d = ctx.call("subtract", ctx.expr(0), ctx.expr(1))
        return ctx.call("multiply", d, d)
    a, b, out = ctx.tensor(0), ctx.tensor(1), ctx.out()
    check_quantized_io(ctx, a, b, out)
    return ctx.call(
        "qnn.squared_difference",
        ctx.expr(0),
        ctx.expr(1),
        *ctx.qparams(a),
        *ctx.qparams(b),
        *ctx.qparams(out),
        semantics=ctx.sem("qnn.squared_difference"),
    )


CONVERTERS = {
    "CAST": (cast, None),
    "GATHER": (gather, "GatherOptions"),
    "GELU": (gelu, "GeluOptions"),
    "LESS": (less, None),
    "NEG": (neg, None),
    "RSQRT": (rsqrt, None),
    "SELECT": (select, None),
    "SELECT_V2": (select, None),
    "SQUARED_DIFFERENCE": (squared_difference, None),
}
