"""SimplifyExpr: remove calls that do nothing and merge calls that can be one.

    %0 = transpose(%x, axes=[0, 2, 3, 1])
    %1 = transpose(%0, axes=[0, 3, 1, 2])
    %2 = clip(%1, a_min=-128f, a_max=127f)        /* int8 */
    %3 = clip(clip(%2, a_min=0f, a_max=100f), a_min=-5f, a_max=50f)
->
    %3 = clip(%x, a_min=0f, a_max=50f)
"""

from __future__ import annotations

import math

import numpy as np

from partita.ir.module import IRModule
from partita.ir.nodes import Call, Constant, Expr
from partita.ops.registry import Op, get_op

from .infer_type import infer_type
from .infra import module_pass
from .rewrite_util import TypedScopedMutator, is_op, rewrite_module, typed

# At most this many rules fire on one node; each strictly shrinks the graph, so this is a guard.
MAX_REWRITES_PER_NODE = 16


@module_pass("SimplifyExpr", opt_level=0)
def SimplifyExpr(mod: IRModule, ctx) -> IRModule:
    """Apply the rules of ``RULES`` bottom-up until none applies (types are inferred first):
    identity reshape / transpose / cast / clip / requantize are removed, reshape(reshape) and
    transpose(transpose) become one call, clip(clip) becomes one clip with the tighter bounds.

        clip(clip(reshape(%x, newshape=<x's shape>), 0f, 6f), -1f, 1f)  ->  clip(%x, 0f, 1f)
    """
    for fn in mod.functions.values():
        infer_type(fn, mod)
    return rewrite_module(mod, _Simplifier)


class _Simplifier(TypedScopedMutator):
    def rewrite_call(self, call, op, args):
        new = typed(super().rewrite_call(call, op, args), self.mod)
        for _ in range(MAX_REWRITES_PER_NODE):
            if not isinstance(new, Call) or not isinstance(new.op, Op):
                break
            for rule in RULES.get(new.op.name, ()):
                out = rule(new)
                if out is not None:
                    new = typed(out, self.mod)
                    break
            else:
                break
        return new


# ---- rules: each takes a typed call and returns its replacement or None -------------------------


def identity_reshape(call: Call) -> Expr | None:
    """reshape(x) to x's own shape -> x"""
    x = call.args[0]
    return x if x.checked_type == call.checked_type else None


def merge_reshapes(call: Call) -> Expr | None:
    """reshape(reshape(x)) -> reshape(x)"""
    inner = call.args[0]
    if not is_op(inner, "reshape"):
        return None
    # A 0 in newshape copies a dimension of the input, which changes: use the resolved shape.
    newshape = call.attrs.newshape if 0 not in call.attrs.newshape else call.checked_type.shape
    return get_op("reshape")(inner.args[0], newshape=newshape, span=call.span)


def permutation(call: Call) -> tuple[int, ...]:
    """The axes of a typed transpose call, normalised (None or () reverses the axes)."""
    ndim = call.args[0].checked_type.ndim
    axes = call.attrs.axes
    if not axes:
        return tuple(reversed(range(ndim)))
    return tuple(a % ndim for a in axes)


def identity_transpose(call: Call) -> Expr | None:
    """transpose(x, axes=(0, 1, ..., n-1)) -> x"""
    perm = permutation(call)
    return call.args[0] if perm == tuple(range(len(perm))) else None


def merge_transposes(call: Call) -> Expr | None:
    """transpose(transpose(x, p), q) -> transpose(x, p[q]) (then x itself if that is identity)"""
    inner = call.args[0]
    if not is_op(inner, "transpose"):
        return None
    p, q = permutation(inner), permutation(call)
    axes = tuple(p[i] for i in q)
    return get_op("transpose")(inner.args[0], axes=axes, span=call.span)


def identity_cast(call: Call) -> Expr | None:
    """cast(x, dtype) with x already of that dtype -> x"""
    x = call.args[0]
    return x if x.checked_type.dtype == call.attrs.dtype else None


def clip_bounds(dtype: str, a_min: float, a_max: float) -> tuple:
    """The bounds clip really applies to ``dtype`` data: integers use ceil(a_min) and
    floor(a_max) saturated to the dtype's range, floats the bounds rounded to the dtype."""
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)

        def saturate(v, rounding):
            if math.isinf(v):
                return int(info.max) if v > 0 else int(info.min)
            return max(int(info.min), min(int(info.max), rounding(v)))

        return saturate(a_min, math.ceil), saturate(a_max, math.floor)
    with np.errstate(over="ignore"):  # bounds beyond float16's range round to inf, as in clip
        return np.asarray(a_min, dtype).item(), np.asarray(a_max, dtype).item()


def full_range_clip(call: Call) -> Expr | None:
    """clip whose bounds cover every value of the dtype (int8 clip(-128, 127)) -> x"""
    dtype = call.checked_type.dtype
    lo, hi = clip_bounds(dtype, call.attrs.a_min, call.attrs.a_max)
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        whole = lo <= info.min and hi >= info.max
    else:
        whole = lo == -math.inf and hi == math.inf
    return call.args[0] if whole else None


def merge_clips(call: Call) -> Expr | None:
    """clip(clip(x, a, b), c, d) -> clip(x, max(a, c), min(b, d)) when the ranges overlap"""
    inner = call.args[0]
    if not is_op(inner, "clip"):
        return None
    dtype = call.checked_type.dtype
    lo1, hi1 = clip_bounds(dtype, inner.attrs.a_min, inner.attrs.a_max)
    lo2, hi2 = clip_bounds(dtype, call.attrs.a_min, call.attrs.a_max)
    lo, hi = max(lo1, lo2), min(hi1, hi2)
    if lo > hi:
        return None  # disjoint: the result is a constant, which clip alone cannot express
    return get_op("clip")(inner.args[0], a_min=float(lo), a_max=float(hi), span=call.span)


def identity_requantize(call: Call) -> Expr | None:
    """qnn.requantize(x) with equal input and output scales and zero points and the same dtype
    in and out -> x (int32 -> int8 with equal parameters still saturates: not an identity)"""
    x = call.args[0]
    dtype = x.checked_type.dtype
    if dtype != call.checked_type.dtype or dtype not in ("int8", "uint8", "int16"):
        return None  # int32 values may not survive a float32 scale computation exactly
    params = call.args[1:5]
    if not all(isinstance(p, Constant) for p in params):
        return None
    in_scale, in_zp, out_scale, out_zp = (p.data for p in params)
    return x if _same_values(in_scale, out_scale) and _same_values(in_zp, out_zp) else None


def _same_values(a: np.ndarray, b: np.ndarray) -> bool:
    try:
        a, b = np.broadcast_arrays(a.reshape(-1), b.reshape(-1))
    except ValueError:
        return False
    return a.dtype == b.dtype and bool(np.all(a == b))


# Rules by op name, tried in order on every call after its arguments were simplified.
RULES = {
    "reshape": (identity_reshape, merge_reshapes),
    "transpose": (identity_transpose, merge_transposes),
    "cast": (identity_cast,),
    "clip": (full_range_clip, merge_clips),
    "qnn.requantize": (identity_requantize,),
}
