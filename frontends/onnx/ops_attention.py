"""ONNX Runtime's com.microsoft Attention (what onnxruntime.transformers.optimizer fuses BERT's
self-attention into) as plain ops: one dense for Q, K and V, per-head batch matmuls, the
scaled scores plus the mask, softmax, and the heads merged back.

    qkv = input @ weights + bias                       (B, S, 3H)
    scores = scale * Q_h @ K_h^T + mask                (B, N, S, S), scale = 1/sqrt(H/N)
    out = merge_heads(softmax(scores) @ V_h)           (B, S, H)
"""

from __future__ import annotations

import math

import numpy as np

from partita.ir import Expr

from .context import NodeContext, Unsupported

UNSUPPORTED_INPUTS = {4: "past", 5: "attention_bias", 6: "past_sequence_length"}


def attention(ctx: NodeContext) -> Expr:
    """com.microsoft Attention(input, weights, bias[, mask_index]) without past state,
    unidirectional masking, rotary embeddings or unequal Q/K/V sizes."""
    _check(ctx)
    b, s, _ = ctx.shape(0)
    heads = int(ctx.attr("num_heads"))
    w = np.asarray(ctx.value(1, "weights"), np.float32)
    hidden = w.shape[1] // 3
    if w.ndim != 2 or w.shape[1] != 3 * hidden or hidden % heads:
        ctx.fail(
            f"weights {list(w.shape)} are not [input, 3 * hidden] with hidden divisible "
            f"by num_heads={heads}"
        )
    head = hidden // heads
    qkv = ctx.call("nn.dense", ctx.expr(0), ctx.const(np.ascontiguousarray(w.T)))
    if ctx.has_input(2):
        qkv = ctx.call("add", qkv, ctx.expr(2))
    parts = ctx.call("split", qkv, indices_or_sections=(hidden, 2 * hidden), axis=2)
    q, k, v = (_heads(ctx, ctx.item(parts, i), b, s, heads, head) for i in range(3))
    scale = ctx.attr("scale", None)
    scale = float(scale) if scale else 1.0 / math.sqrt(head)
    scores = ctx.call("nn.batch_matmul", q, k, transpose_b=True)
    scores = ctx.call("multiply", scores, ctx.const(np.float32(scale)))
    scores = ctx.call("reshape", scores, newshape=(b, heads, s, s))
    if ctx.has_input(3):
        scores = ctx.call("add", scores, _mask(ctx, b, s))
    probs = ctx.call("nn.softmax", scores, axis=-1)
    probs = ctx.call("reshape", probs, newshape=(b * heads, s, s))
    out = ctx.call("nn.batch_matmul", probs, v, transpose_b=False)
    out = ctx.call("reshape", out, newshape=(b, heads, s, head))
    out = ctx.call("transpose", out, axes=(0, 2, 1, 3))
    return ctx.call("reshape", out, newshape=(b, s, hidden))


def _check(ctx: NodeContext) -> None:
    if ctx.dtype(0) != "float32" or len(ctx.shape(0)) != 3:
        raise Unsupported(f"Attention on {ctx.dtype(0)} input of shape {list(ctx.shape(0))}")
    for i, what in UNSUPPORTED_INPUTS.items():
        if ctx.has_input(i):
            raise Unsupported(f"Attention with a {what} input")
    if ctx.attr("unidirectional", 0) or ctx.attr("do_rotary", 0):
        raise Unsupported("unidirectional or rotary Attention")
    if ctx.attr("qkv_hidden_sizes") is not None:
        raise Unsupported("Attention with qkv_hidden_sizes")
    if ctx.attr("num_heads") is None:
        ctx.fail("num_heads is required")
    if any(o for o in ctx.node.output[1:]):
        raise Unsupported("Attention's present output")


def _heads(ctx: NodeContext, x: Expr, b: int, s: int, heads: int, head: int) -> Expr:
    """(B, S, H) -> (B * N, S, H / N)."""
    x = ctx.call("reshape", x, newshape=(b, s, heads, head))
    x = ctx.call("transpose", x, axes=(0, 2, 1, 3))
    return ctx.call("reshape", x, newshape=(b * heads, s, head))


def _mask(ctx: NodeContext, b: int, s: int) -> Expr:
    """The additive mask (B, 1, 1, S): 0 where a key is attended, mask_filter_value elsewhere.
    mask_index is either [B] (each sequence's end position) or [B, S] (1 keeps, 0 masks)."""
    shape = tuple(ctx.shape(3))
    dtype = ctx.dtype(3)
    if dtype not in ("int32", "int64"):
        ctx.fail(f"mask_index must be int32, got {dtype}")
    fill = ctx.const(np.float32(ctx.attr("mask_filter_value", -10000.0)))
    zero = ctx.const(np.float32(0.0))
    if shape == (b,):
        end = ctx.call("reshape", ctx.expr(3), newshape=(b, 1))
        keep = ctx.call("less", ctx.const(np.arange(s, dtype=dtype)[None]), end)
    elif shape == (b, s):
        keep = ctx.call(
            "logical_not", ctx.call("equal", ctx.expr(3), ctx.const(np.zeros((), dtype)))
        )
    else:
        raise Unsupported(f"mask_index of shape {list(shape)} (supported: [B], [B, S])")
    mask = ctx.call("where", keep, zero, fill)
    return ctx.call("reshape", mask, newshape=(b, 1, 1, s))
