"""Views: ops that move elements without computing new ones.

    reshape, squeeze, expand_dims     COPY (the element order is kept)
    transpose (any dtype)             TRANSPOSE
    strided_slice                     an EWISE copy at an affine index map (float_ops.lower_view)
"""

from __future__ import annotations

import numpy as np
from partita.backends.llvm.kinds import Kind

from partita.ir import Call

from .context import SPLIT_COPY, LowerContext
from .float_ops import lower_view
from .registry import CORE, lowers


@lowers("strided_slice", priority=CORE + 1)
def lower_strided_slice(low: LowerContext, call: Call) -> bool:
    """strided_slice: an EWISE copy at an affine index map (float_ops.lower_view)."""
    lower_view(low, call, call)
    return True


@lowers("reshape", "squeeze", "expand_dims", priority=CORE + 2)
def lower_copy(low: LowerContext, call: Call) -> bool:
    """A view that keeps the element order: COPY."""
    low.emit(Kind.COPY, call, [low.src(call.args[0])])
    return True


@lowers("transpose", priority=CORE + 3)
def lower_transpose(low: LowerContext, call: Call) -> bool:
    """transpose of any dtype: TRANSPOSE."""
    params = {"perm": _perm(call)}
    if low.threads > 1 and int(np.prod([int(d) for d in call.checked_type.shape])) >= SPLIT_COPY:
        params["threads"] = 2  # the first axis longer than 1 in chunks (scalar.py first_axis)
    low.emit(Kind.TRANSPOSE, call, [low.src(call.args[0])], params)
    return True


def _perm(call: Call) -> list[int]:
    rank = len(call.args[0].checked_type.shape)
    axes = call.attrs.axes
    return [a % rank for a in axes] if axes is not None else list(range(rank))[::-1]
