"""Types: TensorType(shape, dtype), TupleType(fields) and RefType(value) (a mutable cell)."""

from __future__ import annotations

import numpy as np

from partita.errors import PartitaError

# float64 is here for one reason: TFLite computes requantization multipliers from the exact double
# product input_scale * weight_scale, which float32 cannot hold; frontends bind that product as a
# float64 scale constant so that the "tflite" semantics stay bit-exact.
DTYPES = ("int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64", "bool")


def check_dtype(dtype) -> str:
    """Normalise a dtype (str or numpy dtype) to one of DTYPES, or raise PartitaError."""
    name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    if name not in DTYPES:
        raise PartitaError(f"unsupported dtype {name!r}; partita supports {', '.join(DTYPES)}")
    return name


class Type:
    """Base class of types."""

    __slots__ = ()


class TensorType(Type):
    """A tensor of static ``shape`` (tuple of ints) and ``dtype`` (one of DTYPES)."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise PartitaError(f"negative dimension in shape {shape}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", check_dtype(dtype))

    def __setattr__(self, name, value):
        raise AttributeError("TensorType is immutable")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def concrete_shape(self) -> tuple[int, ...]:
        """Relay's ``TensorType.concrete_shape``: every shape here is static."""
        return self.shape

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __eq__(self, other):
        return (
            isinstance(other, TensorType)
            and self.shape == other.shape
            and self.dtype == other.dtype
        )

    def __hash__(self):
        return hash((self.shape, self.dtype))

    def __repr__(self):
        return f"Tensor[{_shape_str(self.shape)}, {self.dtype}]"

    __str__ = __repr__


_INTERNED: dict = {}
_INTERNED_MAX = 1 << 16  # distinct (shape, dtype) pairs kept; past it the table starts again


def interned_tensor_type(shape: tuple, dtype: str) -> TensorType:
    """The TensorType of ``shape`` (a tuple of ints) and ``dtype``, one object per pair: a
    constant's type comes from here, so equal types are the same object and InferType's memo
    finds them by identity (hashing a TensorType runs Python code; an id hashes in C). Only a
    speed-up: equality never relies on it."""
    key = (shape, dtype)
    found = _INTERNED.get(key)
    if found is None:
        found = TensorType(shape, dtype)
        if len(_INTERNED) >= _INTERNED_MAX:
            _INTERNED.clear()
        _INTERNED[key] = found
    return found


class TupleType(Type):
    """A tuple of types (the result of split, or the inputs of concatenate)."""

    __slots__ = ("fields",)

    def __init__(self, fields):
        fields = tuple(fields)
        for f in fields:
            if not isinstance(f, Type):
                raise PartitaError(f"TupleType field {f!r} is not a type")
        object.__setattr__(self, "fields", fields)

    def __setattr__(self, name, value):
        raise AttributeError("TupleType is immutable")

    def __eq__(self, other):
        return isinstance(other, TupleType) and self.fields == other.fields

    def __hash__(self):
        return hash(self.fields)

    def __repr__(self):
        inner = ", ".join(repr(f) for f in self.fields)
        return f"({inner},)" if len(self.fields) == 1 else f"({inner})"

    __str__ = __repr__


class RefType(Type):
    """The type of a mutable reference (``ref(v)``) to a value of type ``value``."""

    __slots__ = ("value",)

    def __init__(self, value: Type):
        if not isinstance(value, Type):
            raise PartitaError(f"RefType of {value!r}, which is not a type")
        object.__setattr__(self, "value", value)

    def __setattr__(self, name, value):
        raise AttributeError("RefType is immutable")

    def __eq__(self, other):
        return isinstance(other, RefType) and self.value == other.value

    def __hash__(self):
        return hash(("ref", self.value))

    def __repr__(self):
        return f"ref({self.value!r})"

    __str__ = __repr__


def _shape_str(shape) -> str:
    if len(shape) == 1:
        return f"({shape[0]},)"
    return "(" + ", ".join(str(d) for d in shape) + ")"
