"""The ONNX ops of transformer encoders (BERT-family exports, legacy and dynamo exporters):
Gather, Equal/Less/Greater/Not/Where, Expand, ReduceSum, Pow, Erf, Gelu, LayerNormalization,
MatMul on batches of any rank, and ONNX Runtime's fused contrib ops that its transformer
optimizer emits (Attention, SkipLayerNormalization, BiasGelu, FastGelu, Gelu).

Shape-driven subgraphs (Shape -> Gather -> Range / ConstantOfShape / Concat) are folded before
they get here once the input shapes are fixed; see frontend.py.
"""

from __future__ import annotations

import math

import numpy as np

from partita.ir import Expr

from .context import NodeContext, Unsupported
from .ops_nn import matmul as matmul_2d

FLOAT = ("float32",)


def _float(ctx: NodeContext, i: int = 0) -> None:
    if ctx.dtype(i) not in FLOAT:
        raise Unsupported(f"{ctx.op_type} on {ctx.dtype(i)} data")


def _axis(ctx: NodeContext, axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        ctx.fail(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def gather(ctx: NodeContext) -> Expr:
    """Gather -> take (mode "wrap": ONNX's negative indices count from the end)."""
    if ctx.dtype(1) not in ("int32", "int64"):
        ctx.fail(f"indices must be int32 or int64, got {ctx.dtype(1)}")
    axis = _axis(ctx, int(ctx.attr("axis", 0)), len(ctx.shape(0)))
    if ctx.is_const(1):
        idx = ctx.value(1, "indices")
        n = ctx.shape(0)[axis]
        if idx.size and (idx.min() < -n or idx.max() >= n):
            ctx.fail(
                f"an index in [{idx.min()}, {idx.max()}] is out of range for axis {axis} "
                f"of size {n}"
            )
    return ctx.call("take", ctx.expr(0), ctx.expr(1), axis=axis, mode="wrap")


COMPARE = {"Equal": ("equal", False), "Less": ("less", False), "Greater": ("less", True)}


def compare(ctx: NodeContext) -> Expr:
    """Equal / Less / Greater (as less with swapped operands) -> bool."""
    name, swap = COMPARE[ctx.op_type]
    if ctx.dtype(0) != ctx.dtype(1):
        ctx.fail(f"inputs have different types {ctx.dtype(0)} and {ctx.dtype(1)}")
    a, b = ctx.expr(0), ctx.expr(1)
    return ctx.call(name, *((b, a) if swap else (a, b)))


def logical_not(ctx: NodeContext) -> Expr:
    return ctx.call("logical_not", ctx.expr(0))


def where(ctx: NodeContext) -> Expr:
    return ctx.call("where", ctx.expr(0), ctx.expr(1), ctx.expr(2))


def expand(ctx: NodeContext) -> Expr:
    """Expand with a constant shape -> broadcast_to (ONNX broadcasts both ways: a 1 in the
    target keeps the input's dimension)."""
    target = tuple(int(d) for d in ctx.value(1, "shape").reshape(-1))
    try:
        shape = np.broadcast_shapes(tuple(ctx.shape(0)), target)
    except ValueError:
        ctx.fail(f"input {list(ctx.shape(0))} does not broadcast with shape {list(target)}")
    if tuple(shape) == tuple(ctx.shape(0)):
        return ctx.expr(0)
    return ctx.call("broadcast_to", ctx.expr(0), shape=tuple(int(d) for d in shape))


def reduce_sum(ctx: NodeContext) -> Expr:
    """ReduceSum (axes as input from opset 13) -> sum."""
    rank = len(ctx.shape(0))
    if ctx.opset >= 13:
        axes = ctx.value(1, "axes").reshape(-1).tolist() if ctx.has_input(1) else []
    else:
        axes = list(ctx.ints("axes", ()))
    if not axes:
        if ctx.attr("noop_with_empty_axes", 0):
            return ctx.expr(0)
        axes = list(range(rank))
    axes = tuple(sorted(_axis(ctx, int(a), rank) for a in axes))
    return ctx.call("sum", ctx.expr(0), axis=axes, keepdims=bool(ctx.attr("keepdims", 1)))


def power(ctx: NodeContext) -> Expr:
    """Pow with a constant exponent of 1, 2 or 0.5 (the decomposed LayerNorm's variance)."""
    _float(ctx)
    if not ctx.is_const(1) or ctx.value(1, "Y").size != 1:
        raise Unsupported("Pow with an exponent that is not a constant scalar")
    y = float(ctx.value(1, "Y").reshape(()))
    x = ctx.expr(0)
    if y == 1.0:
        return x
    if y == 2.0:
        return ctx.call("multiply", x, x)
    if y == 0.5:
        return ctx.call("sqrt", x)
    raise Unsupported(f"Pow with exponent {y}")


def erf(ctx: NodeContext) -> Expr:
    _float(ctx)
    return ctx.call("erf", ctx.expr(0))


def gelu(ctx: NodeContext) -> Expr:
    """Gelu (opset 20; com.microsoft Gelu has no attribute) -> nn.gelu."""
    _float(ctx)
    approx = ctx.attr("approximate", "none")
    if approx not in ("none", "tanh"):
        ctx.fail(f"approximate {approx!r} is not an ONNX value")
    return ctx.call("nn.gelu", ctx.expr(0), approximate=approx)


def bias_gelu(ctx: NodeContext) -> Expr:
    """com.microsoft BiasGelu(A, B) -> nn.gelu(A + B)."""
    _float(ctx)
    return ctx.call("nn.gelu", ctx.call("add", ctx.expr(0), ctx.expr(1)))


def fast_gelu(ctx: NodeContext) -> Expr:
    """com.microsoft FastGelu(X[, bias]) -> nn.gelu(X + bias, approximate="tanh")."""
    _float(ctx)
    x = ctx.expr(0)
    if ctx.has_input(1):
        x = ctx.call("add", x, ctx.expr(1))
    return ctx.call("nn.gelu", x, approximate="tanh")


def _single_output(ctx: NodeContext) -> None:
    if any(o for o in ctx.node.output[1:]):
        raise Unsupported(f"the extra outputs of {ctx.op_type} (mean, inverse std dev, sum)")


def layer_norm(ctx: NodeContext) -> Expr:
    """LayerNormalization over the last axes -> nn.layer_norm (over one axis: a normalization
    over several trailing axes is reshaped to one)."""
    _float(ctx)
    _single_output(ctx)
    shape = ctx.shape(0)
    axis = _axis(ctx, int(ctx.attr("axis", -1)), len(shape))
    eps = float(ctx.attr("epsilon", 1e-5))
    norm = int(np.prod(shape[axis:]))
    gamma = _norm_param(ctx, 1, norm, 1.0)
    beta = _norm_param(ctx, 2, norm, 0.0)
    x = ctx.expr(0)
    if axis != len(shape) - 1:
        x = ctx.call("reshape", x, newshape=tuple(shape[:axis]) + (norm,))
    out = ctx.call("nn.layer_norm", x, gamma, beta, axis=-1, epsilon=eps)
    if axis != len(shape) - 1:
        out = ctx.call("reshape", out, newshape=tuple(shape))
    return out


def _norm_param(ctx: NodeContext, i: int, size: int, default: float) -> Expr:
    """Scale or bias input ``i`` as a 1-D constant of ``size`` values."""
    if not ctx.has_input(i):
        return ctx.const(np.full(size, default, np.float32))
    v = np.asarray(ctx.value(i, "scale" if i == 1 else "bias"), np.float32)
    if v.size != size:
        ctx.fail(f"input {i} has {v.size} values; the normalized axes hold {size}")
    return ctx.const(v.reshape(size))


def skip_layer_norm(ctx: NodeContext) -> Expr:
    """com.microsoft SkipLayerNormalization(input, skip, gamma[, beta[, bias]]) ->
    nn.layer_norm(input + skip [+ bias]) over the last axis."""
    _float(ctx)
    _single_output(ctx)
    size = ctx.shape(0)[-1]
    s = ctx.call("add", ctx.expr(0), ctx.expr(1))
    if ctx.has_input(4):
        s = ctx.call("add", s, ctx.expr(4))
    eps = float(ctx.attr("epsilon", 1e-12))
    return ctx.call(
        "nn.layer_norm",
        s,
        _norm_param(ctx, 2, size, 1.0),
        _norm_param(ctx, 3, size, 0.0),
        axis=-1,
        epsilon=eps,
    )


def matmul(ctx: NodeContext) -> Expr:
    """MatMul of N-D batches: leading axes broadcast, flattened into nn.batch_matmul's batch
    and reshaped back; 2-D B and 3-D cases as ops_nn.matmul."""
    sa, sb = tuple(ctx.shape(0)), tuple(ctx.shape(1))
    if len(sb) == 2 or (len(sa) == 3 and len(sb) == 3) or len(sa) < 2 or len(sb) < 2:
        return matmul_2d(ctx)
    _float(ctx)
    return _batch_matmul(ctx, ctx.expr(0), sa, ctx.expr(1), sb)


def _batch_matmul(ctx: NodeContext, a: Expr, sa: tuple, b: Expr, sb: tuple) -> Expr:
    try:
        batch = tuple(int(d) for d in np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        ctx.fail(f"MatMul batch axes of {list(sa)} and {list(sb)} do not broadcast")
    n = int(np.prod(batch))
    a = _batched(ctx, a, sa, batch, n)
    b = _batched(ctx, b, sb, batch, n)
    out = ctx.call("nn.batch_matmul", a, b, transpose_b=False)
    return ctx.call("reshape", out, newshape=batch + (sa[-2], sb[-1]))


def fused_matmul(ctx: NodeContext) -> Expr:
    """com.microsoft FusedMatMul: alpha * op(A) @ op(B), op transposing the last two axes
    where transA / transB say (transBatchA/B unsupported)."""
    _float(ctx)
    if ctx.attr("transBatchA", 0) or ctx.attr("transBatchB", 0):
        raise Unsupported("FusedMatMul with transBatchA or transBatchB")
    args = []
    for i, flag in ((0, "transA"), (1, "transB")):
        x, s = ctx.expr(i), tuple(ctx.shape(i))
        if len(s) < 2:
            raise Unsupported(f"FusedMatMul of a rank-{len(s)} input")
        if ctx.attr(flag, 0):
            perm = tuple(range(len(s) - 2)) + (len(s) - 1, len(s) - 2)
            x, s = ctx.call("transpose", x, axes=perm), s[:-2] + (s[-1], s[-2])
        args += [x, s]
    a, sa, b, sb = args
    if len(sb) == 2:
        out = ctx.call("nn.dense", a, ctx.call("transpose", b, axes=(1, 0)))
    else:
        out = _batch_matmul(ctx, a, sa, b, sb)
    alpha = float(ctx.attr("alpha", 1.0))
    return out if alpha == 1.0 else ctx.call("multiply", out, ctx.const(np.float32(alpha)))


def _batched(ctx: NodeContext, x: Expr, shape: tuple, batch: tuple, n: int) -> Expr:
    """``x`` broadcast to the common batch axes and reshaped to (n, rows, cols)."""
    if tuple(shape[:-2]) != batch and math.prod(shape[:-2]) != 1:
        x = ctx.call("broadcast_to", x, shape=batch + tuple(shape[-2:]))
    if math.prod(shape[:-2]) == 1:
        n = 1  # nn.batch_matmul broadcasts a batch of 1
    return ctx.call("reshape", x, newshape=(n,) + tuple(shape[-2:]))


ONNX = {
    "Equal": compare,
    "Erf": erf,
    "Expand": expand,
    "Gather": gather,
    "Gelu": gelu,
    "Greater": compare,
    "LayerNormalization": layer_norm,
    "Less": compare,
    "MatMul": matmul,
    "Not": logical_not,
    "Pow": power,
    "ReduceSum": reduce_sum,
    "Where": where,
}
