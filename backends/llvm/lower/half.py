"""float16 arithmetic by widening: a float16 op whose float32 form the backend compiles is
lowered as that form between conversions,

    float16 operand --EWISE cast (exact)--> float32 --the op's float32 kernel(s)--> float32
                    --EWISE cast (round to nearest even)--> float16 result

float16 constants are converted at compile time (exactly), constant weight expressions folded
first (float_conv.const_value), a float16 ``out_dtype`` attribute reads float32, and an input
read by several widened ops is converted once. Results that are not float16 (argmax's indices,
a float32 ``out_dtype``, qnn.quantize's integers) are the float32 form's own.

The interpreter computes these ops on the float16 values (exact in float32) in float32 or
float64 and rounds to float16 once; the widened chain rounds to float32 first. ``WIDENED`` says
per op what that costs (tests/backends/llvm/test_llvm_half.py checks each):

    "exact"    the same bits: argmax compares values, and the float32 form of a linear resize
               or a quantize is the reference's own float32 computation
    "values"   the same values (max, max pooling); only where +0.0 and -0.0 tie for the max
               may the sign differ: numpy's float16 max keeps the first of equal values, its
               float32 max (and so the float32 kernels) the last
    "rounded"  at most one float16 step: the reference's float64 result rounded to float32,
               then to float16, differs from rounding it once only when the float32 value is a
               float16 tie (softmax, layer_norm, batch_norm, sum, mean, avg/global pooling)
    "product"  one float16 step plus the float32 kernel's own error: the float32 product
               kernels sum in float32 FMA chains (|error| <= K * 2**-24 * sum |x * w| for K
               terms; float16 products are exact in float32), so results near 0 after
               cancellation can be further off; the same values whenever those sums are
               exact (a zero's sign aside: an FMA chain over -0.0 products gives -0.0 where
               the reference's sum, from +0.0, gives +0.0; float32 does the same)

Ops elsewhere already take float16 (EWISE, views, gathers, TAKE); everything else stays
refused, and a widened op whose float32 form is refused is refused with that reason.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.errors import LLVMError
from partita.backends.registry import BackendError

from partita.ir import Call, Constant, Tuple, TupleGetItem, TupleType
from partita.ir.types import TensorType
from partita.ops import get_op

from .float_conv import const_value
from .float_ops import lower_item

if TYPE_CHECKING:
    from .context import LowerContext

HALF, WIDE = "float16", "float32"

# op -> how far the widened result may be from the interpreter's (see above)
WIDENED = {
    "nn.conv2d": "product", "nn.conv2d_transpose": "product", "nn.dense": "product",
    "nn.gemm": "product", "nn.batch_matmul": "product", "einsum": "product",
    "nn.softmax": "rounded", "nn.layer_norm": "rounded", "nn.batch_norm": "rounded",
    "sum": "rounded", "mean": "rounded", "nn.avg_pool2d": "rounded",
    "nn.global_avg_pool2d": "rounded",
    "max": "values", "nn.max_pool2d": "values", "argmax": "exact", "image.resize2d": "exact",
    "qnn.quantize": "exact",
}  # fmt: skip


def _touches_half(call) -> bool:
    """Whether a float16 tensor goes into or comes out of ``call``."""
    exprs = [f for a in call.args for f in (a.fields if isinstance(a, Tuple) else [a])]
    out = call.checked_type
    types = [
        *(out.fields if isinstance(out, TupleType) else [out]),
        *(e.checked_type for e in exprs),
    ]
    return any(getattr(t, "dtype", None) == HALF for t in types)


def _takes(call) -> bool:
    """Whether ``call`` is widened: a float16 op of ``WIDENED``; nearest-neighbour resizes
    stay with GATHER (a copy, any dtype)."""
    name = getattr(call.op, "name", None)
    if name not in WIDENED or not _touches_half(call):
        return False
    return name != "image.resize2d" or call.attrs.method == "linear"


def _wide_type(ty):
    if isinstance(ty, TupleType):
        return TupleType([_wide_type(t) for t in ty.fields])
    return TensorType(ty.shape, WIDE) if ty.dtype == HALF else ty


def _wide_attrs(attrs):
    if getattr(attrs, "out_dtype", None) == HALF:
        return dataclasses.replace(attrs, out_dtype=WIDE)
    return attrs


def _wide_arg(low: LowerContext, expr):
    """``expr`` as float32: a float16 constant (or constant expression not computed by any
    kernel: folded weights) converted now, a computed float16 tensor by an EWISE cast
    (once per tensor); other dtypes as they are."""
    if isinstance(expr, Tuple):
        fields = [_wide_arg(low, f) for f in expr.fields]
        return Tuple(fields).with_type(TupleType([f.checked_type for f in fields]))
    if expr.checked_type.dtype != HALF:
        return expr
    memo = low.memo("half_wide")
    if id(expr) in memo:
        return memo[id(expr)]
    value = const_value(low, expr) if not low.has_buffer(expr) else None
    if value is not None:
        wide = Constant(np.ascontiguousarray(np.asarray(value, np.float32)))
        wide = wide.with_type(_wide_type(expr.checked_type))
    else:
        wide = _cast(expr, WIDE)
        low.lower(wide)
    memo[id(expr)] = wide
    return wide


def _cast(expr, dtype: str):
    ty = expr.checked_type
    return Call(get_op("cast"), [expr], {"dtype": dtype}).with_type(TensorType(ty.shape, dtype))


def _finish(low: LowerContext, node, wide, lower_wide) -> None:
    """Lower ``wide`` (the float32 form of ``node``) with ``lower_wide``, round it back to
    float16 if ``node`` is float16, and let ``node`` name the result's buffer."""
    low.keep_alive(wide)
    what = node.op.name if isinstance(node, Call) else node.tuple_value.op.name
    where = what + (f" ({node.span})" if getattr(node, "span", None) is not None else "")
    try:
        lower_wide()
    except BackendError as e:
        raise LLVMError(
            f"llvm cannot compile float16 {where}: it is computed in float32, and "
            f"the float32 form is refused: {e}"
        ) from e
    if not low.has_buffer(wide):
        raise LLVMError(f"llvm cannot compile float16 {where}: its float32 form left no result")
    result = wide
    if node.checked_type.dtype == HALF:
        result = _cast(wide, HALF)
        low.keep_alive(result)
        low.lower(result)
    low.alias(node, result)


def lower_half(low: LowerContext, call) -> bool:
    """``call`` widened as above on ``low`` (a context.LowerContext), or False (not a float16 op
    of ``WIDENED``)."""
    if not isinstance(call, Call) or not _takes(call):
        return False
    args = [_wide_arg(low, a) for a in call.args]
    wide = Call(call.op, args, _wide_attrs(call.attrs), call.span)
    wide = wide.with_type(_wide_type(call.checked_type))
    _finish(low, call, wide, lambda: low.lower(wide))
    return True


def lower_tuple_item(low: LowerContext, item) -> bool:
    """A field of a tuple-valued op (float_ops.lower_item), ``nn.batch_norm(...).0`` of
    float16 data widened (fields 1 and 2 are copies of its inputs, any dtype)."""
    call = item.tuple_value
    if not (
        isinstance(call, Call)
        and getattr(call.op, "name", "") == "nn.batch_norm"
        and item.index == 0
        and _takes(call)
    ):
        return lower_item(low, item)
    args = [_wide_arg(low, a) for a in call.args]
    wide_call = Call(call.op, args, call.attrs, call.span)
    wide_call = wide_call.with_type(_wide_type(call.checked_type))
    wide = TupleGetItem(wide_call, 0).with_type(_wide_type(item.checked_type))
    _finish(low, item, wide, lambda: lower_item(low, wide))
    return True
