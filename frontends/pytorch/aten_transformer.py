"""Converters for the float aten ops of transformer encoders exported with torch.export:
embedding, arange, eq, where, layer_norm, gelu, select, and matmul of N-D batches."""

from __future__ import annotations

import math

import numpy as np

from partita.ir import Expr

from .aten_nn import matmul as matmul_2d
from .context import NodeContext, Unsupported, shape_of


def embedding(ctx: NodeContext) -> Expr:
    """aten.embedding(weight, indices, ...) -> take along axis 0 (padding_idx only matters for
    training)."""
    return ctx.call("take", ctx.tensor(0, "weight"), ctx.tensor(1, "indices"), axis=0, mode="fast")


def arange(ctx: NodeContext) -> np.ndarray | Expr:
    """aten.arange(end) / arange.start(_step) with constant bounds -> an int64 or float32
    constant (torch's default dtypes)."""
    nums = [a for a in ctx.args if isinstance(a, (int, float)) and not isinstance(a, bool)]
    if len(nums) != len(ctx.args) or not 1 <= len(nums) <= 3:
        raise Unsupported(f"arange with arguments {ctx.args!r}")
    dtype = np.int64 if all(isinstance(a, int) for a in nums) else np.float32
    if ctx.kwargs.get("dtype") is not None:
        raise Unsupported("arange with an explicit dtype")
    return ctx.const(np.arange(*nums, dtype=dtype))


def eq(ctx: NodeContext) -> Expr:
    """aten.eq.Scalar / eq.Tensor -> equal (bool)."""
    a = ctx.tensor(0, "self")
    b = ctx.arg(1, "other")
    if not isinstance(b, Expr):
        b = ctx.const(np.asarray(b, a.checked_type.dtype))
    return ctx.call("equal", a, b)


def where(ctx: NodeContext) -> Expr:
    """aten.where.self / .Scalar / .ScalarSelf / .ScalarOther: Python numbers become float32
    scalars (or the other operand's dtype)."""
    cond, x, y = ctx.tensor(0, "condition"), ctx.arg(1, "self"), ctx.arg(2, "other")
    like = next((v.checked_type.dtype for v in (x, y) if isinstance(v, Expr)), "float32")
    x, y = (v if isinstance(v, Expr) else ctx.const(np.asarray(v, like)) for v in (x, y))
    return ctx.call("where", cond, x, y)


def layer_norm(ctx: NodeContext) -> Expr:
    """aten.layer_norm(input, normalized_shape, weight, bias, eps) -> nn.layer_norm over the
    last axis (several normalized axes are reshaped into one)."""
    x = ctx.tensor(0, "input")
    axes = ctx.ints(1, "normalized_shape")
    shape = shape_of(x)
    n = math.prod(axes)
    if tuple(shape[len(shape) - len(axes) :]) != axes:
        ctx.fail(f"normalized_shape {list(axes)} is not the end of the input shape {shape}")
    params = []
    for i, name, fill in ((2, "weight", 1.0), (3, "bias", 0.0)):
        p = ctx.tensor(i, name, None)
        p = ctx.const(np.full(n, fill, np.float32)) if p is None else p
        params.append(ctx.call("reshape", p, newshape=(n,)) if len(axes) > 1 else p)
    eps = ctx.number(4, "eps", 1e-5)
    if len(axes) > 1:
        x = ctx.call("reshape", x, newshape=tuple(shape[: len(shape) - len(axes)]) + (n,))
    out = ctx.call("nn.layer_norm", x, *params, axis=-1, epsilon=eps)
    return ctx.call("reshape", out, newshape=tuple(shape)) if len(axes) > 1 else out


def gelu(ctx: NodeContext) -> Expr:
    approximate = ctx.arg(1, "approximate", "none")
    if approximate not in ("none", "tanh"):
        ctx.fail(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return ctx.call("nn.gelu", ctx.tensor(0, "self"), approximate=approximate)


def select(ctx: NodeContext) -> Expr:
    """aten.select.int(self, dim, index) -> take of a scalar index (the axis disappears)."""
    x = ctx.tensor(0, "self")
    dim, index = int(ctx.number(1, "dim")), int(ctx.number(2, "index"))
    rank = len(shape_of(x))
    if not -rank <= dim < rank or not -shape_of(x)[dim] <= index < shape_of(x)[dim]:
        ctx.fail(f"select({dim}, {index}) is out of range for shape {shape_of(x)}")
    return ctx.call("take", x, ctx.const(np.asarray(index, np.int64)), axis=dim % rank)


def matmul(ctx: NodeContext) -> Expr:
    """aten.matmul: 2-D as aten_nn.matmul, a 2-D right operand as nn.dense, N-D batches
    broadcast and flattened into nn.batch_matmul."""
    a, b = ctx.tensor(0, "self"), ctx.tensor(1, "other")
    sa, sb = shape_of(a), shape_of(b)
    if len(sa) == 2 and len(sb) == 2:
        return matmul_2d(ctx)
    if len(sa) < 2 or len(sb) < 2:
        raise Unsupported(f"matmul of shapes {sa} and {sb}")
    if len(sb) == 2:
        return ctx.call("nn.dense", a, ctx.call("transpose", b, axes=(1, 0)))
    try:
        batch = tuple(int(d) for d in np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        ctx.fail(f"matmul batch axes of {sa} and {sb} do not broadcast")
    out = ctx.call(
        "nn.batch_matmul",
        _batched(ctx, a, sa, batch),
        _batched(ctx, b, sb, batch),
        transpose_b=False,
    )
    return ctx.call("reshape", out, newshape=batch + (sa[-2], sb[-1]))


def _batched(ctx: NodeContext, x: Expr, shape: tuple, batch: tuple) -> Expr:
    if math.prod(shape[:-2]) == 1:
        return ctx.call("reshape", x, newshape=(1,) + tuple(shape[-2:]))
    if tuple(shape[:-2]) != batch:
        x = ctx.call("broadcast_to", x, shape=batch + tuple(shape[-2:]))
    return ctx.call("reshape", x, newshape=(math.prod(batch),) + tuple(shape[-2:]))


CONVERTERS = {
    "aten.arange": arange,
    "aten.embedding": embedding,
    "aten.eq": eq,
    "aten.gelu": gelu,
    "aten.layer_norm": layer_norm,
    "aten.matmul": matmul,
    "aten.select": select,
    "aten.where": where,
}
