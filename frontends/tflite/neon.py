"""The position dependence of TFLite's optimized ("builtin") kernels.

On x86 TFLite builds its NEON code through NEON_2_SSE, so the optimized kernels process whole
blocks of 8 or 16 values with the NEON arithmetic (roundings that break ties upward, float32
multiply-adds) and the leftover values with the scalar reference arithmetic. Which values are
leftovers depends on their position: the tail of the flattened tensor (QUANTIZE, DEQUANTIZE) or
the last channels (DEPTHWISE_CONV_2D's output stage). These helpers split a tensor at that
boundary, convert each part with its own arithmetic and join the parts again.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from partita.ir import Expr

from .context import OpContext

Part = Callable[[Expr, slice], Expr]


def split_flat(ctx: OpContext, x: Expr, block: int, vector: Part, scalar: Part) -> Expr:
    """vector(head) ++ scalar(tail) over the flattened ``x``; the head is the largest multiple
    of ``block`` values. Each part function gets the expression and the slice it covers."""
    shape = x.checked_type.shape
    n = math.prod(shape)
    k = n // block * block
    if k == n:
        return vector(x, slice(0, n))
    if k == 0:
        return scalar(x, slice(0, n))
    flat = ctx.call("reshape", x, newshape=(n,))
    head = vector(ctx.call("strided_slice", flat, begin=(0,), end=(k,)), slice(0, k))
    tail = scalar(ctx.call("strided_slice", flat, begin=(k,), end=(n,)), slice(k, n))
    joined = ctx.call("concatenate", ctx.tuple([head, tail]), axis=0)
    return ctx.call("reshape", joined, newshape=shape)


def split_channels(ctx: OpContext, x: Expr, block: int, vector: Part, scalar: Part) -> Expr:
    """vector(first channels) ++ scalar(last C mod block channels) along the last axis."""
    shape = x.checked_type.shape
    c = shape[-1]
    k = c // block * block
    if k == c:
        return vector(x, slice(0, c))
    if k == 0:
        return scalar(x, slice(0, c))
    axis = len(shape) - 1
    head = ctx.call("strided_slice", x, begin=(0,), end=(k,), axes=(axis,))
    tail = ctx.call("strided_slice", x, begin=(k,), end=(c,), axes=(axis,))
    parts = [vector(head, slice(0, k)), scalar(tail, slice(k, c))]
    return ctx.call("concatenate", ctx.tuple(parts), axis=axis)
