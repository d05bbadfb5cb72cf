"""Attention heads without TRANSPOSE kernels: a product writes its output in the order the
transpose (0, 2, 1, 3) that alone reads it would (BERT's heads: [1, S, heads, H] <-> [1, heads,
S, H]), and that transpose (with the reshapes around it) is absorbed.

- FDENSE (Q and V's projections, [S, heads * H] -> [heads, S, H]): params "out_heads" = H;
  gemm.py dense_rows writes row m, column n at (n // H) * M * H + m * H + n % H, so each 16-float
  vector (H a multiple of 16) stays in one head's row.
- FBMM (the attention's output, [heads, S, H] -> [S, heads, H]): params "out_heads" = True;
  batch b's row m at m * B * N + b * N.

Each output element is the same sum as before, stored elsewhere: the same bits."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .ewise_tree import absorb_reshapes

if TYPE_CHECKING:
    from .context import LowerContext

SWAP = [0, 2, 1, 3]


def _transpose(low: LowerContext, node):
    """The transpose (0, 2, 1, 3) of a 4-D float32 ``node`` (leading 1) that alone reads it."""
    t = low.only_user(node, "transpose")
    if t is None or [int(a) for a in (t.attrs.axes or [])] != SWAP:
        return None
    shape = [int(d) for d in node.checked_type.shape]
    if len(shape) != 4 or shape[0] != 1 or node.checked_type.dtype != "float32":
        return None
    return t


def dense_heads(low: LowerContext, last, params: dict):
    """The node an FDENSE's output ends at, its transpose absorbed (params "out_heads") when
    ``last`` ([1, M, heads, H], H a multiple of 16 dividing 64: a column chunk's panels start
    at a head's first column) is read by one."""
    t = _transpose(low, last)
    if t is None or params.get("residual") or "out_pad" in params or params.get("bias") == "mn":
        return last
    _, m, heads, h = (int(d) for d in last.checked_type.shape)
    if m != params["M"] or heads * h != params["N"] or h % 16 or 64 % h:
        return last
    params["out_heads"] = h
    low.absorb(t)
    return absorb_reshapes(low, t)


def bmm_heads(low: LowerContext, last, params: dict):
    """The node an FBMM's output ends at, its transpose absorbed (params "out_heads") when
    ``last`` ([1, B, M, N]) is read by one (the vector kernel only)."""
    t = _transpose(low, last)
    if t is None or not params.get("vec"):
        return last
    _, b, m, n = (int(d) for d in last.checked_type.shape)
    if (b, m, n) != (params["B"], params["M"], params["N"]):
        return last
    params["out_heads"] = True
    low.absorb(t)
    return absorb_reshapes(low, t)
