"""Plain tensor ops, elementwise part: broadcasting arithmetic, unary math, clip, cast, where.

Shape manipulation lives in ``tensor_transform.py``, reductions in ``tensor_reduce.py``.
Integer arithmetic wraps around in the input dtype, as numpy's does; float16 math is computed in
float32 and rounded back once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from partita.ir.types import DTYPES, TensorType

from .registry import Attrs, register_op
from .relations import RelationError, broadcast_rel, broadcast_shapes, fail, tensor


def _same_dtype(result, like):
    """numpy may promote (int8 + int8 stays int8, but scalars can widen): cast back."""
    return np.asarray(result).astype(like.dtype, copy=False)


def numeric(t: TensorType, what: str = "data") -> TensorType:
    """``t`` if its dtype is a number type (not bool), else fail."""
    if t.dtype == "bool":
        fail(f"{what} must be numeric (int or float), got bool")
    return t


def _arith_rel(types, attrs) -> TensorType:
    """Broadcasting arithmetic: one numeric dtype, broadcast shapes."""
    return numeric(broadcast_rel(types, attrs), "lhs and rhs")


def _numeric_rel(types, attrs) -> TensorType:
    return numeric(tensor(types[0], "data"))


def _float_rel(types, attrs) -> TensorType:
    data = tensor(types[0], "data")
    if data.dtype not in ("float16", "float32"):
        fail(f"data must be float16 or float32, got {data.dtype}")
    return data


# ---- binary broadcasting arithmetic ------------------------------------------------------------


@register_op("add", inputs=("lhs", "rhs"), type_rel=_arith_rel, commutative=True, kind="broadcast")
def add(lhs, rhs, attrs):
    """lhs + rhs with numpy broadcasting (integers wrap around)."""
    return _same_dtype(np.add(lhs, rhs), lhs)


@register_op("subtract", inputs=("lhs", "rhs"), type_rel=_arith_rel, kind="broadcast")
def subtract(lhs, rhs, attrs):
    """lhs - rhs with numpy broadcasting (integers wrap around)."""
    return _same_dtype(np.subtract(lhs, rhs), lhs)


@register_op(
    "multiply", inputs=("lhs", "rhs"), type_rel=_arith_rel, commutative=True, kind="broadcast"
)
def multiply(lhs, rhs, attrs):
    """lhs * rhs with numpy broadcasting (integers wrap around)."""
    return _same_dtype(np.multiply(lhs, rhs), lhs)


@register_op("divide", inputs=("lhs", "rhs"), type_rel=_arith_rel, kind="broadcast")
def divide(lhs, rhs, attrs):
    """lhs / rhs with numpy broadcasting. Floats: IEEE true division (x/0 is ±inf or nan).
    Integers: C division, truncating toward zero; x/0 is defined as 0 and MIN/-1 wraps to MIN.
    """
    if lhs.dtype.kind == "f":
        return _same_dtype(np.true_divide(lhs, rhs), lhs)
    zero = rhs == 0
    safe = np.where(zero, np.ones((), rhs.dtype), rhs)
    q = np.floor_divide(lhs, safe)
    # numpy floors; C truncates: the two differ by one where the division is inexact and the
    # signs differ. (The remainder check wraps consistently, so MIN // -1 needs no special case.)
    inexact = (lhs - q * safe) != 0
    q = q + (inexact & ((lhs < 0) != (safe < 0))).astype(q.dtype)
    return _same_dtype(np.where(zero, np.zeros((), q.dtype), q), lhs)


@register_op(
    "maximum", inputs=("lhs", "rhs"), type_rel=broadcast_rel, commutative=True, kind="broadcast"
)
def maximum(lhs, rhs, attrs):
    """Elementwise max(lhs, rhs) with numpy broadcasting; a nan operand gives nan."""
    return _same_dtype(np.maximum(lhs, rhs), lhs)


@register_op(
    "minimum", inputs=("lhs", "rhs"), type_rel=broadcast_rel, commutative=True, kind="broadcast"
)
def minimum(lhs, rhs, attrs):
    """Elementwise min(lhs, rhs) with numpy broadcasting; a nan operand gives nan."""
    return _same_dtype(np.minimum(lhs, rhs), lhs)


# ---- clip and cast -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ClipAttrs(Attrs):
    a_min: float
    a_max: float

    def validate(self) -> None:
        if not self.a_min <= self.a_max:
            raise ValueError(f"a_min ({self.a_min}) must not exceed a_max ({self.a_max})")


def _int_bounds(dtype: str, a_min: float, a_max: float) -> tuple[int, int]:
    """[ceil(a_min), floor(a_max)] saturated to the range of integer ``dtype``."""
    info = np.iinfo(dtype)

    def saturate(v: float, rounding) -> int:
        if math.isinf(v):
            return info.max if v > 0 else info.min
        return max(info.min, min(info.max, rounding(v)))

    return saturate(a_min, math.ceil), saturate(a_max, math.floor)


def _clip_rel(types, attrs) -> TensorType:
    data = numeric(tensor(types[0], "data"))
    if data.dtype.startswith(("int", "uint")):
        if (
            math.isfinite(attrs.a_min)
            and math.isfinite(attrs.a_max)
            and math.ceil(attrs.a_min) > math.floor(attrs.a_max)
        ):
            fail(
                f"no integer lies in [a_min, a_max] = [{attrs.a_min}, {attrs.a_max}], so "
                f"{data.dtype} data cannot be clipped to it"
            )
    return data


@register_op("clip", inputs=("data",), attrs=ClipAttrs, type_rel=_clip_rel, kind="elemwise")
def clip(data, attrs):
    """min(max(data, a_min), a_max). Floats: the bounds are rounded to the dtype; nan stays nan.
    Integers: the bounds are ceil(a_min) and floor(a_max), saturated to the dtype's range.
    """
    if data.dtype.kind == "f":
        lo, hi = np.asarray(attrs.a_min, data.dtype), np.asarray(attrs.a_max, data.dtype)
    else:
        lo, hi = (
            np.asarray(b, data.dtype)
            for b in _int_bounds(data.dtype.name, attrs.a_min, attrs.a_max)
        )
    return np.asarray(np.minimum(np.maximum(data, lo), hi))


@dataclass(frozen=True)
class CastAttrs(Attrs):
    # float64 exists only for frontends' exact scale constants; graphs never cast to it.
    dtype: str = field(metadata={"choices": tuple(d for d in DTYPES if d != "float64")})


def _cast_rel(types, attrs) -> TensorType:
    return TensorType(tensor(types[0], "data").shape, attrs.dtype)


@register_op("cast", inputs=("data",), attrs=CastAttrs, type_rel=_cast_rel, kind="elemwise")
def cast(data, attrs):
    """Convert to ``dtype`` as numpy's astype: int->int wraps, to float rounds to nearest even,
    to bool is ``!= 0``. float->int truncates toward zero without saturation: out-of-range values
    wrap modulo 2**bits and nan/±inf give 0 (numpy leaves both platform-defined).
    """
    out = np.dtype(attrs.dtype)
    if data.dtype.kind == "f" and out.kind in "iu":
        return _float_to_int(data, out)
    return np.asarray(data.astype(out))


def _float_to_int(data: np.ndarray, out: np.dtype) -> np.ndarray:
    modulus = float(2 ** (8 * out.itemsize))
    # Everything below is exact in float64: the values are integers and fmod is exact.
    x = np.trunc(data.astype(np.float64))
    x = np.where(np.isfinite(x), np.fmod(x, modulus), 0.0)
    if out.kind == "i":
        x = np.where(x >= modulus / 2, x - modulus, x)
        x = np.where(x < -modulus / 2, x + modulus, x)
    else:
        x = np.where(x < 0, x + modulus, x)
    return np.asarray(x.astype(out))


# ---- unary math --------------------------------------------------------------------------------


def _in_float32(data: np.ndarray, fn) -> np.ndarray:
    """fn computed in float32 and rounded back to data's dtype (float16 or float32)."""
    return np.asarray(fn(data.astype(np.float32, copy=False))).astype(data.dtype, copy=False)


@register_op("exp", inputs=("data",), type_rel=_float_rel, kind="elemwise")
def exp(data, attrs):
    """e**data (float16/float32, computed in float32)."""
    return _in_float32(data, np.exp)


@register_op("log", inputs=("data",), type_rel=_float_rel, kind="elemwise")
def log(data, attrs):
    """Natural logarithm (float16/float32, computed in float32); log(0) is -inf."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _in_float32(data, np.log)


@register_op("sqrt", inputs=("data",), type_rel=_float_rel, kind="elemwise")
def sqrt(data, attrs):
    """Square root (float16/float32, computed in float32); negative inputs give nan."""
    return _in_float32(data, np.sqrt)


@register_op("rsqrt", inputs=("data",), type_rel=_float_rel, kind="elemwise")
def rsqrt(data, attrs):
    """1 / sqrt(data), computed in float32 as two correctly rounded steps; rsqrt(0) = inf."""
    return _in_float32(data, lambda x: np.float32(1) / np.sqrt(x))


@register_op("tanh", inputs=("data",), type_rel=_float_rel, kind="elemwise")
def tanh(data, attrs):
    """Hyperbolic tangent (float16/float32, computed in float32)."""
    return _in_float32(data, np.tanh)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))  # never overflows
    one = np.float32(1)
    return np.where(x >= 0, one / (one + e), e / (one + e))


@register_op("sigmoid", inputs=("data",), type_rel=_float_rel, kind="elemwise")
def sigmoid(data, attrs):
    """1 / (1 + exp(-data)), computed in float32 as e/(1+e) with e = exp(-|data|) for negative
    inputs so that nothing overflows."""
    return _in_float32(data, _sigmoid)


@register_op("floor", inputs=("data",), type_rel=_float_rel, kind="elemwise")
def floor(data, attrs):
    """Largest integer <= data, as a float of the same dtype."""
    return _in_float32(data, np.floor)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    t = np.trunc(x)
    # x - t is exact (the fraction of a float is representable), so the tie test is exact too.
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


@register_op("round", inputs=("data",), type_rel=_float_rel, kind="elemwise")
def round_(data, attrs):
    """Round to the nearest integer, halves away from zero (TVM's round; not numpy's half to
    even): round(2.5) = 3, round(-2.5) = -3. The result keeps the float dtype."""
    return _in_float32(data, _round_half_away)


@register_op("negative", inputs=("data",), type_rel=_numeric_rel, kind="elemwise")
def negative(data, attrs):
    """-data for any numeric dtype; integers wrap (-MIN is MIN, unsigned -x is 2**bits - x)."""
    return np.asarray(np.negative(data))


@register_op("abs", inputs=("data",), type_rel=_numeric_rel, kind="elemwise")
def abs_(data, attrs):
    """|data| for any numeric dtype; integers wrap (abs(MIN) is MIN)."""
    return np.asarray(np.abs(data))


# ---- where -------------------------------------------------------------------------------------


def _where_rel(types, attrs) -> TensorType:
    cond = tensor(types[0], "condition")
    x, y = tensor(types[1], "x"), tensor(types[2], "y")
    if cond.dtype != "bool":
        fail(f"condition must be bool, got {cond.dtype}")
    if x.dtype != y.dtype:
        fail(f"x and y must share one dtype, got {x.dtype} and {y.dtype}")
    try:
        shape = broadcast_shapes(cond.shape, broadcast_shapes(x.shape, y.shape))
    except RelationError:
        fail(f"condition {cond.shape}, x {x.shape} and y {y.shape} do not broadcast")
    return TensorType(shape, x.dtype)


@register_op("where", inputs=("condition", "x", "y"), type_rel=_where_rel, kind="broadcast")
def where(condition, x, y, attrs):
    """x where condition is true, else y; all three broadcast together (numpy.where)."""
    return np.asarray(np.where(condition, x, y))
