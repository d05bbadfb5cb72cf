"""Converters for float aten elementwise, activation and shape ops (torch.export and TorchScript
share aten's schemas)."""

from __future__ import annotations

import numpy as np

from partita.ir import Expr

from .context import NodeContext, Unsupported, shape_of

FLOAT_MAX = float(np.finfo(np.float32).max)


def _operand(ctx: NodeContext, i: int, name: str, like: Expr) -> Expr:
    """A tensor operand, or a Python number as a scalar constant of ``like``'s dtype."""
    v = ctx.arg(i, name)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return ctx.const(np.asarray(v, dtype=like.checked_type.dtype))
    return ctx.tensor(i, name)


def binary(op: str):
    """aten.add/sub(a, b, alpha=1), aten.mul/div(a, b): numpy broadcasting, scalars allowed."""

    def convert(ctx: NodeContext) -> Expr:
        a = ctx.arg(0, "self")
        if not isinstance(a, Expr):
            ctx.fail(f"self must be a tensor, got {a!r}")
        b = _operand(ctx, 1, "other", a)
        alpha = ctx.number(2, "alpha", 1) if op in ("add", "subtract") else 1
        if alpha != 1:
            b = ctx.call("multiply", b, ctx.const(np.asarray(alpha, b.checked_type.dtype)))
        if ctx.arg(2, "rounding_mode", None) is not None and op == "divide":
            raise Unsupported("div with a rounding_mode")
        return ctx.call(op, a, b)

    return convert


def unary(op: str, **attrs):
    def convert(ctx: NodeContext) -> Expr:
        return ctx.call(op, ctx.tensor(0, "self"), **attrs)

    return convert


def identity(ctx: NodeContext) -> Expr:
    """dropout (inference), clone, contiguous, detach, alias: the input itself."""
    return ctx.tensor(0, "input")


def clamp(lo_default: float | None, hi_default: float | None, fixed: bool = False):
    """aten.clamp(x, min, max), aten.hardtanh(x, min_val=-1, max_val=1); ``fixed``: the
    defaults are the bounds (aten.relu6(x))."""

    def convert(ctx: NodeContext) -> Expr:
        lo = lo_default if fixed else ctx.arg(1, "min", lo_default)
        hi = hi_default if fixed else ctx.arg(2, "max", hi_default)
        if isinstance(lo, Expr) or isinstance(hi, Expr):
            raise Unsupported("clamp with tensor bounds")
        return ctx.call(
            "clip",
            ctx.tensor(0, "self"),
            a_min=-FLOAT_MAX if lo is None else float(lo),
            a_max=FLOAT_MAX if hi is None else float(hi),
        )

    return convert


def hardsigmoid(ctx: NodeContext) -> Expr:
    """relu6(x + 3) / 6, as aten computes it."""
    x = ctx.tensor(0, "self")
    t = ctx.call("clip", ctx.call("add", x, ctx.const(3.0)), a_min=0.0, a_max=6.0)
    return ctx.call("divide", t, ctx.const(6.0))


def silu(ctx: NodeContext) -> Expr:
    x = ctx.tensor(0, "self")
    return ctx.call("multiply", x, ctx.call("sigmoid", x))


def leaky_relu(ctx: NodeContext) -> Expr:
    return ctx.call(
        "nn.leaky_relu", ctx.tensor(0, "self"), alpha=ctx.number(1, "negative_slope", 0.01)
    )


def softmax(ctx: NodeContext) -> Expr:
    """aten.softmax.int(x, dim) / aten._softmax(x, dim, half_to_float)."""
    return ctx.call("nn.softmax", ctx.tensor(0, "self"), axis=int(ctx.number(1, "dim")))


def mean(ctx: NodeContext) -> Expr:
    """aten.mean.dim(x, dim, keepdim=False)."""
    dims = ctx.arg(1, "dim", None)
    axis = None if dims is None else ctx.ints(1, "dim")
    return ctx.call(
        "mean", ctx.tensor(0, "self"), axis=axis, keepdims=bool(ctx.arg(2, "keepdim", False))
    )


def flatten(ctx: NodeContext) -> Expr:
    """aten.flatten.using_ints(x, start_dim=0, end_dim=-1)."""
    x = ctx.tensor(0, "input")
    shape = shape_of(x)
    n = max(len(shape), 1)
    start = int(ctx.number(1, "start_dim", 0)) % n
    end = int(ctx.number(2, "end_dim", -1)) % n
    if start > end:
        ctx.fail(f"flatten: start_dim {start} comes after end_dim {end}")
    new = shape[:start] + (int(np.prod(shape[start : end + 1])),) + shape[end + 1 :]
    return ctx.call("reshape", x, newshape=new)


def reshape(ctx: NodeContext) -> Expr:
    """aten.view / aten.reshape / aten._unsafe_view(x, shape) (-1 infers one dimension)."""
    return ctx.call("reshape", ctx.tensor(0, "self"), newshape=ctx.ints(1, "shape"))


def permute(ctx: NodeContext) -> Expr:
    return ctx.call("transpose", ctx.tensor(0, "self"), axes=ctx.ints(1, "dims"))


def transpose(ctx: NodeContext) -> Expr:
    """aten.transpose.int(x, dim0, dim1) and aten.t(x)."""
    x = ctx.tensor(0, "self")
    n = len(shape_of(x))
    if n < 2:
        return x
    d0, d1 = (
        (int(ctx.number(1, "dim0")) % n, int(ctx.number(2, "dim1")) % n)
        if len(ctx.args) > 1
        else (0, 1)
    )
    axes = list(range(n))
    axes[d0], axes[d1] = axes[d1], axes[d0]
    return ctx.call("transpose", x, axes=tuple(axes))


def unsqueeze(ctx: NodeContext) -> Expr:
    x = ctx.tensor(0, "self")
    dim = int(ctx.number(1, "dim"))
    return ctx.call("expand_dims", x, axis=dim if dim >= 0 else dim + len(shape_of(x)) + 1)


def squeeze(ctx: NodeContext) -> Expr:
    """aten.squeeze.dim / .dims: only size-1 axes are dropped, as PyTorch does."""
    x = ctx.tensor(0, "self")
    dims = ctx.arg(1, "dim", None)
    shape = shape_of(x)
    if dims is None:
        return ctx.call("squeeze", x, axis=None)
    dims = ctx.ints(1, "dim")
    axes = tuple(d % len(shape) for d in dims if shape[d % len(shape)] == 1) if shape else ()
    return ctx.call("squeeze", x, axis=axes)


def cat(ctx: NodeContext) -> Expr:
    """aten.cat(tensors, dim=0)."""
    xs = ctx.arg(0, "tensors")
    if not isinstance(xs, (list, tuple)) or not all(isinstance(x, Expr) for x in xs):
        ctx.fail(f"tensors must be a list of tensors, got {xs!r}")
    return ctx.call("concatenate", ctx.tuple(list(xs)), axis=int(ctx.number(1, "dim", 0)))


def pad(ctx: NodeContext) -> Expr:
    """aten.constant_pad_nd(x, pad, value=0) / aten.pad(x, pad, mode="constant", value):
    ``pad`` lists (before, after) pairs from the last axis backwards."""
    x = ctx.tensor(0, "self")
    pads = ctx.ints(1, "pad")
    value = ctx.arg(2, "value", 0.0)
    if ctx.target.startswith("aten.pad"):
        if ctx.arg(2, "mode", "constant") != "constant":
            raise Unsupported(f"pad mode {ctx.arg(2, 'mode')!r}")
        value = ctx.arg(3, "value", 0.0)
    n = len(shape_of(x))
    if len(pads) % 2 or len(pads) > 2 * n:
        ctx.fail(f"pad must list (before, after) pairs for at most {n} axes, got {list(pads)}")
    width = [(0, 0)] * n
    for i in range(len(pads) // 2):
        width[n - 1 - i] = (pads[2 * i], pads[2 * i + 1])
    if min(pads, default=0) < 0:
        raise Unsupported("negative padding (cropping)")
    value = ctx.const(np.asarray(value or 0.0, x.checked_type.dtype))
    return ctx.call("nn.pad", x, value, pad_width=tuple(width))


def getitem(ctx: NodeContext):
    """operator.getitem on a multi-output node (its outputs arrive as a Python list)."""
    seq, i = ctx.arg(0, "seq"), ctx.arg(1, "index")
    if isinstance(seq, Expr):
        return ctx.item(seq, int(i))
    if (
        not isinstance(seq, (list, tuple))
        or not isinstance(i, int)
        or not -len(seq) <= i < len(seq)
    ):
        ctx.fail(f"cannot index {type(seq).__name__} with {i!r}")
    if seq[i] is None:
        raise Unsupported(
            f"output {i} of its input node (pooling indices or batch norm "
            f"statistics) has no equivalent"
        )
    return seq[i]
