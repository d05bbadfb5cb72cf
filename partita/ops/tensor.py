"""Plain tensor ops: elementwise arithmetic, shape manipulation, reductions."""

from __future__ import annotations

import numpy as np

from .registry import register_op
from .relations import broadcast_rel


def _same_dtype(result, like):
    """numpy may promote (int8 + int8 stays int8, but scalars can widen): cast back."""
    return np.asarray(result).astype(like.dtype, copy=False)


@register_op("add", inputs=("lhs", "rhs"), type_rel=broadcast_rel, commutative=True,
             kind="broadcast")
def add(lhs, rhs, attrs):
    """lhs + rhs with numpy broadcasting (integers wrap around)."""
    return _same_dtype(np.add(lhs, rhs), lhs)


@register_op("subtract", inputs=("lhs", "rhs"), type_rel=broadcast_rel, kind="broadcast")
def subtract(lhs, rhs, attrs):
    """lhs - rhs with numpy broadcasting (integers wrap around)."""
    return _same_dtype(np.subtract(lhs, rhs), lhs)
