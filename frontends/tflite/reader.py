"""Read a TFLite flatbuffer with the ``tflite`` package into validated plain records.

Everything the converters need is read here, once, under one guard: a truncated or corrupt file
raises TFLiteFormatError naming what was being read, never a struct.error or an IndexError. Counts
and shapes are checked against the file size before anything is iterated or allocated, so a
mutated length cannot make the reader loop or allocate for long.
"""

from __future__ import annotations

import inspect
import math
import struct
from dataclasses import dataclass, field
from functools import cache

import numpy as np
import tflite
from partita.frontends.errors import TFLiteFormatError
from tflite.utils import BUILTIN_OPCODE2NAME

MAX_ELEMENTS = 2**31 - 1  # TFLite sizes tensors with int
MAX_RANK = 8
DTYPES = {
    0: "float32",
    1: "float16",
    2: "int32",
    3: "uint8",
    4: "int64",
    6: "bool",
    7: "int16",
    9: "int8",
    10: "float64",
}
TYPE_NAMES = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
OPTION_CLASSES = {v: k for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_")}
_EXPECTED = (
    struct.error,
    IndexError,
    ValueError,
    TypeError,
    OverflowError,
    AttributeError,
    UnicodeDecodeError,
    KeyError,
    MemoryError,
)


@dataclass(frozen=True, eq=False)
class Tensor:
    """One tensor of the subgraph: shape, dtype, quantization and constant data (or None)."""

    index: int
    name: str
    shape: tuple[int, ...]
    signature: tuple[int, ...]
    type_name: str
    dtype: str | None
    data: np.ndarray | None = None
    scale: np.ndarray | None = None
    zero_point: np.ndarray | None = None
    quantized_dimension: int = 0

    @property
    def quantized(self) -> bool:
        return self.scale is not None

    @property
    def per_channel(self) -> bool:
        return self.scale is not None and self.scale.size > 1

    def describe(self) -> str:
        return f"tensor #{self.index} {self.name!r} {list(self.shape)} {self.type_name}"


@dataclass(frozen=True, eq=False)
class Operator:
    """One operator: builtin name, tensor indices (-1 = omitted optional input) and options."""

    index: int
    name: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options_type: str
    options: dict = field(default_factory=dict)
    intermediates: tuple[int, ...] = ()  # the integer LSTM's gate and hidden quantization


@dataclass(frozen=True, eq=False)
class Model:
    """The main subgraph of a TFLite model."""

    tensors: tuple[Tensor, ...]
    operators: tuple[Operator, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    description: str


def read_model(buf: bytes) -> Model:
    """Parse and validate ``buf``; raise TFLiteFormatError on anything malformed."""
    if len(buf) < 8:
        raise TFLiteFormatError(f"not a TFLite model: {len(buf)} bytes is too short")
    if buf[4:8] != b"TFL3":
        raise TFLiteFormatError(
            f"not a TFLite model: the file identifier is {bytes(buf[4:8])!r}, expected b'TFL3'"
        )
    reader = _Reader(buf)
    try:
        return reader.read()
    except TFLiteFormatError:
        raise
    except _EXPECTED as e:
        raise TFLiteFormatError(
            f"corrupt TFLite file: cannot read {reader.where} ({type(e).__name__}: {e})"
        ) from None
    except RecursionError:
        raise TFLiteFormatError(f"corrupt TFLite file: cannot read {reader.where}") from None


class _Reader:
    def __init__(self, buf: bytes):
        self.buf, self.where = buf, "the model header"

    def read(self) -> Model:
        m = tflite.Model.GetRootAs(self.buf, 0)
        if m.Version() != 3:
            raise TFLiteFormatError(f"unsupported TFLite schema version {m.Version()} (expected 3)")
        self.where = "the operator codes"
        codes = [_op_name(m.OperatorCodes(i)) for i in range(self.count(m.OperatorCodesLength()))]
        if self.count(m.SubgraphsLength()) == 0:
            raise TFLiteFormatError("the model has no subgraph")
        self.where = "subgraph 0"
        g = m.Subgraphs(0)
        self.buffers = self.count(m.BuffersLength())
        for b in range(self.buffers):  # touch every buffer table: a cut file fails here
            self.where = f"buffer {b}"
            buffer = m.Buffers(b)
            buffer.DataLength(), buffer.Offset(), buffer.Size()
        tensors = tuple(
            self.tensor(m, g.Tensors(i), i) for i in range(self.count(g.TensorsLength()))
        )
        n = len(tensors)
        inputs = self.indices(g.InputsAsNumpy(), n, "the subgraph inputs")
        outputs = self.indices(g.OutputsAsNumpy(), n, "the subgraph outputs")
        ops = tuple(
            self.operator(g.Operators(i), i, codes, n)
            for i in range(self.count(g.OperatorsLength()))
        )
        desc = m.Description()
        return Model(tensors, ops, inputs, outputs, _text(desc) if desc else "")

    def count(self, n: int, elem_bytes: int = 4) -> int:
        """A vector length, refused if the vector could not fit in the file."""
        if n < 0 or n * elem_bytes > len(self.buf):
            raise TFLiteFormatError(
                f"corrupt TFLite file: {self.where} claims {n} entries, more "
                f"than a file of {len(self.buf)} bytes can hold"
            )
        return n

    def indices(self, arr, n: int, what: str, optional: bool = False) -> tuple[int, ...]:
        out = tuple(int(i) for i in _vector(arr))
        low = -1 if optional else 0
        for i in out:
            if not low <= i < n:
                raise TFLiteFormatError(
                    f"corrupt TFLite file: {what} refer to tensor {i}, but "
                    f"the subgraph has {n} tensors"
                )
        return out

    def tensor(self, m, t, i: int) -> Tensor:
        self.where = f"tensor #{i}"
        name = _text(t.Name()) if t.Name() is not None else f"tensor_{i}"
        self.where = f"tensor #{i} {name!r}"
        code = t.Type()
        type_name = TYPE_NAMES.get(code, f"type {code}")
        shape = tuple(int(d) for d in _vector(t.ShapeAsNumpy()))
        signature = tuple(int(d) for d in _vector(t.ShapeSignatureAsNumpy())) or shape
        _check_shape(shape, f"tensor #{i} {name!r}")
        if t.Sparsity() is not None:
            raise TFLiteFormatError(
                f"tensor #{i} {name!r} is sparse; sparse tensors are not supported"
            )
        dtype = DTYPES.get(code)
        data = self.data(m, t.Buffer(), shape, dtype, f"tensor #{i} {name!r} ({type_name})")
        base = Tensor(i, name, shape, signature, type_name, dtype, data)
        return _with_quantization(base, t.Quantization())

    def data(self, m, b: int, shape, dtype, what: str) -> np.ndarray | None:
        if not 0 <= b < self.buffers:
            raise TFLiteFormatError(
                f"corrupt TFLite file: {what} uses buffer {b}, but the model "
                f"has {self.buffers} buffers"
            )
        if b == 0:
            return None  # buffer 0 is the empty sentinel
        buffer = m.Buffers(b)
        raw = _vector(buffer.DataAsNumpy())
        if buffer.Offset() > 1:  # data stored after the flatbuffer (models over 2 GB)
            start, size = buffer.Offset(), buffer.Size()
            if start + size > len(self.buf):
                raise TFLiteFormatError(f"{what}: buffer {b} lies past the end of the file")
            raw = np.frombuffer(self.buf, np.uint8, size, start)
        if raw.size == 0:
            return None
        if dtype is None:
            raise TFLiteFormatError(f"{what} holds constant data of an unsupported type")
        itemsize = np.dtype(dtype).itemsize
        want = math.prod(shape) * itemsize
        if raw.size != want:
            raise TFLiteFormatError(
                f"{what}: the shape {list(shape)} needs {want} bytes but "
                f"buffer {b} holds {raw.size}"
            )
        return np.frombuffer(raw, np.dtype(dtype).newbyteorder("<")).reshape(shape)

    def operator(self, op, i: int, codes: list[str], n: int) -> Operator:
        self.where = f"operator #{i}"
        code = op.OpcodeIndex()
        if not 0 <= code < len(codes):
            raise TFLiteFormatError(
                f"corrupt TFLite file: operator #{i} uses opcode {code}, but "
                f"the model has {len(codes)}"
            )
        name = codes[code]
        self.where = f"operator #{i} {name}"
        inputs = self.indices(op.InputsAsNumpy(), n, f"the inputs of operator #{i} {name}", True)
        outputs = self.indices(op.OutputsAsNumpy(), n, f"the outputs of operator #{i} {name}")
        kind = op.BuiltinOptionsType()
        cls = OPTION_CLASSES.get(kind, f"options type {kind}")
        options = {}
        if kind != 0 and cls in vars(tflite) and op.BuiltinOptions() is not None:
            table = op.BuiltinOptions()
            options = read_options(cls, table.Bytes, table.Pos)
        inter = op.IntermediatesAsNumpy() if op.IntermediatesLength() else ()
        inter = self.indices(inter, n, f"the intermediates of operator #{i} {name}", True)
        return Operator(i, name, inputs, outputs, cls, options, inter)


def _op_name(code) -> str:
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    if builtin == tflite.BuiltinOperator.CUSTOM:
        custom = code.CustomCode()
        return f"CUSTOM({_text(custom) if custom else '?'})"
    return BUILTIN_OPCODE2NAME.get(builtin, f"BUILTIN_{builtin}")


def _check_shape(shape, what: str) -> None:
    if len(shape) > MAX_RANK:
        raise TFLiteFormatError(f"{what} has rank {len(shape)}; at most {MAX_RANK} is supported")
    if any(d < 0 for d in shape):
        raise TFLiteFormatError(f"{what} has a negative dimension in its shape {list(shape)}")
    if math.prod(shape) > MAX_ELEMENTS:
        raise TFLiteFormatError(
            f"{what} has an absurd shape {list(shape)} "
            f"({math.prod(shape)} elements; at most {MAX_ELEMENTS})"
        )


# A zero point is a value of the tensor's own type (TFLite's quantization spec).
_ZERO_POINT_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}


def _with_quantization(t: Tensor, q) -> Tensor:
    if q is None or q.ScaleLength() == 0:
        return t
    scale = _vector(q.ScaleAsNumpy()).astype(np.float32)
    zp = _vector(q.ZeroPointAsNumpy()).astype(np.int64)
    what = t.describe()
    if zp.size == 0:
        zp = np.zeros(scale.size, np.int64)
    if zp.size != scale.size:
        raise TFLiteFormatError(f"{what} has {scale.size} scales but {zp.size} zero points")
    if not np.all(np.isfinite(scale)) or np.any(scale < 0):
        raise TFLiteFormatError(f"{what} has a negative or non-finite scale {scale.min()}")
    dim = q.QuantizedDimension()
    if scale.size > 1 and not (0 <= dim < len(t.shape) and t.shape[dim] == scale.size):
        raise TFLiteFormatError(
            f"{what} has {scale.size} per-channel scales along dimension "
            f"{dim}, which does not match its shape"
        )
    if np.any(np.abs(zp) > 2**31 - 1):
        raise TFLiteFormatError(f"{what} has a zero point outside the int32 range")
    lo, hi = _ZERO_POINT_RANGES.get(t.dtype, (-(2**31), 2**31 - 1))
    if np.any((zp < lo) | (zp > hi)):
        bad = int(zp[(zp < lo) | (zp > hi)][0])
        raise TFLiteFormatError(
            f"{what} has zero point {bad}, outside its type's range [{lo}, {hi}]"
        )
    return Tensor(
        t.index, t.name, t.shape, t.signature, t.type_name, t.dtype, t.data, scale, zp, dim
    )


def _vector(arr) -> np.ndarray:
    """A flatbuffer vector read with *AsNumpy (which returns 0 for an absent vector)."""
    return arr if isinstance(arr, np.ndarray) else np.zeros(0, np.int32)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


# An empty flatbuffer table (a 4-byte vtable with no fields): every accessor gives its default.
_EMPTY_TABLE = struct.pack("<HHi", 4, 4, 4)


def read_options(cls_name: str, buf=None, pos: int = 4) -> dict:
    """Every scalar and vector field of a builtin options table as a dict (CamelCase keys);
    without ``buf``, the defaults of ``cls_name``."""
    obj = getattr(tflite, cls_name)()
    obj.Init(buf if buf is not None else _EMPTY_TABLE, pos)
    out = {}
    for name, is_vector in _option_fields(cls_name):
        value = getattr(obj, name + "AsNumpy" if is_vector else name)()
        out[name] = tuple(_vector(value).tolist()) if is_vector else value
    return out


@cache
def _option_fields(cls_name: str) -> tuple[tuple[str, bool], ...]:
    cls = getattr(tflite, cls_name)
    fields = []
    for name, fn in vars(cls).items():
        if name.startswith("_") or name in ("Init",) or not callable(fn):
            continue
        if name.endswith(("AsNumpy", "Length", "IsNone", "BufferHasIdentifier")):
            continue
        if name.startswith("GetRootAs"):
            continue
        params = inspect.signature(fn).parameters
        if len(params) == 1:
            fields.append((name, False))
        elif len(params) == 2 and hasattr(cls, name + "AsNumpy"):
            fields.append((name, True))
    return tuple(fields)
