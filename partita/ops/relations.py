"""Type relations shared by many ops. A relation takes the argument types and the attributes and
returns the result type, or raises RelationError with the reason; InferType adds the op, its span
and the argument types to the message."""

from __future__ import annotations

from partita.errors import TypeInferenceError
from partita.ir.types import TensorType, TupleType, Type


class RelationError(TypeInferenceError):
    """A type relation's refusal (the reason only; InferType adds where)."""


def fail(message: str):
    raise RelationError(message)


def tensor(t: Type, what: str = "argument") -> TensorType:
    """``t`` as a TensorType, or fail."""
    if not isinstance(t, TensorType):
        fail(f"{what} must be a tensor, got {t}")
    return t


def tuple_of_tensors(t: Type, what: str = "argument") -> list[TensorType]:
    if not isinstance(t, TupleType):
        fail(f"{what} must be a tuple of tensors, got {t}")
    return [tensor(f, f"{what} field") for f in t.fields]


def broadcast_shapes(a: tuple, b: tuple) -> tuple:
    """numpy broadcasting of two static shapes, or fail naming both."""
    out = []
    for i in range(max(len(a), len(b))):
        x = a[len(a) - 1 - i] if i < len(a) else 1
        y = b[len(b) - 1 - i] if i < len(b) else 1
        if x != y and x != 1 and y != 1:
            fail(f"shapes {a} and {b} do not broadcast")
        out.append(max(x, y) if x != 0 and y != 0 else 0)
    return tuple(reversed(out))


def same_dtype(types, what="arguments") -> str:
    dtypes = {tensor(t).dtype for t in types}
    if len(dtypes) != 1:
        fail(f"{what} must share one dtype, got {', '.join(sorted(dtypes))}")
    return dtypes.pop()


def identity_rel(types, attrs) -> TensorType:
    """The result has the first argument's type."""
    return tensor(types[0], "data")


def broadcast_rel(types, attrs) -> TensorType:
    """Broadcasting binary op: same dtype, broadcast shapes."""
    a, b = tensor(types[0], "lhs"), tensor(types[1], "rhs")
    return TensorType(broadcast_shapes(a.shape, b.shape), same_dtype([a, b]))


def compare_rel(types, attrs) -> TensorType:
    """Broadcasting comparison: bool result."""
    t = broadcast_rel(types, attrs)
    return TensorType(t.shape, "bool")


def float_only(t: TensorType, what="data") -> TensorType:
    if not t.dtype.startswith("float"):
        fail(f"{what} must be float16 or float32, got {t.dtype}")
    return t


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    if not -ndim <= axis < max(ndim, 1):
        fail(f"{what} {axis} is out of range for a tensor of rank {ndim}")
    return axis % ndim if ndim else 0


def scalar_or_channel(t: Type, what: str, dtype: str, channels: int | None = None) -> TensorType:
    """A quantization parameter: a scalar (or shape (1,)) or, per channel, shape (channels,)."""
    t = tensor(t, what)
    if t.dtype != dtype:
        fail(f"{what} must be {dtype}, got {t.dtype}")
    if t.ndim == 0 or t.shape == (1,):
        return t
    if t.ndim == 1 and (channels is None or t.shape[0] == channels):
        return t
    want = f"a scalar or shape ({channels},)" if channels is not None else "a scalar or 1-D"
    fail(f"{what} must be {want}, got shape {t.shape}")
