"""Reading an ONNX model with the ``onnx`` package: load, check opsets, decode initializers.

Everything that can go wrong with the bytes themselves (corrupt protobuf, unsupported opset,
undecodable initializer, graph inputs without a static shape) is an ONNXFormatError or an
ONNXError naming what is wrong; nothing else escapes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper
from partita.frontends.errors import ONNXError, ONNXFormatError

from partita.limits import check_shape

MIN_OPSET = 13
MAX_OPSET = onnx.defs.onnx_opset_version()
DOMAINS = {"": "ai.onnx", "ai.onnx": "ai.onnx", "com.microsoft": "com.microsoft"}
MAX_FILE_BYTES = 2**31  # protobuf's own limit

# ONNX TensorProto.DataType -> numpy dtype name (the ones partita can hold).
DTYPES = {
    1: "float32",
    2: "uint8",
    3: "int8",
    5: "int16",
    6: "int32",
    7: "int64",
    9: "bool",
    10: "float16",
    11: "float64",
}


@dataclass
class Model:
    """The parts of a ModelProto the converter reads."""

    graph: onnx.GraphProto
    opsets: dict[str, int]
    initializers: dict[str, np.ndarray] = field(default_factory=dict)
    inputs: list[onnx.ValueInfoProto] = field(default_factory=list)


def load(path_or_model) -> onnx.ModelProto:
    """A ModelProto from a path, the file's bytes or a ModelProto."""
    if isinstance(path_or_model, onnx.ModelProto):
        return path_or_model
    if isinstance(path_or_model, (bytes, bytearray, memoryview)):
        return _parse(bytes(path_or_model), "the given bytes")
    if not isinstance(path_or_model, (str, os.PathLike)):
        raise ONNXError(
            f"from_onnx takes a path, bytes or an onnx.ModelProto, not "
            f"{type(path_or_model).__name__}"
        )
    path = os.fspath(path_or_model)
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            raise ONNXFormatError(f"{path!r} is larger than any ONNX protobuf can be")
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ONNXError(f"cannot read the ONNX model {path!r}: {e.strerror or e}") from None
    model = _parse(data, repr(path))
    if any(_external(t) for t in model.graph.initializer):
        try:
            onnx.load_external_data_for_model(model, os.path.dirname(os.path.abspath(path)))
        except Exception as e:  # noqa: BLE001 - onnx raises many kinds here
            raise ONNXFormatError(f"cannot load the external data of {path!r}: {e}") from None
    return model


def _external(t: onnx.TensorProto) -> bool:
    return t.data_location == onnx.TensorProto.EXTERNAL


def _parse(data: bytes, what: str) -> onnx.ModelProto:
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as e:  # noqa: BLE001 - DecodeError and friends from the protobuf runtime
        raise ONNXFormatError(
            f"{what} is not an ONNX model (protobuf decoding failed: {type(e).__name__}: {e})"
        ) from None
    if not model.HasField("graph") or not (model.graph.node or model.graph.output):
        raise ONNXFormatError(f"{what} is not an ONNX model (it has no graph)")
    return model


def read(proto: onnx.ModelProto) -> Model:
    """Check the opsets and decode the initializers of a ModelProto."""
    opsets = _opsets(proto)
    graph = proto.graph
    inits = {}
    for t in graph.initializer:
        inits[t.name] = to_array(t, f"initializer {t.name!r}")
    for t in graph.sparse_initializer:
        raise ONNXFormatError(f"sparse initializer {t.values.name!r} is not supported")
    for i, node in enumerate(graph.node):
        if not any(node.output):  # every ONNX operator has at least one output
            raise ONNXFormatError(
                f"node #{i} ({node.op_type} {node.name!r}) has no outputs; the ONNX spec gives "
                f"every {node.op_type} at least one"
            )
    inputs = [i for i in graph.input if i.name not in inits]
    return Model(graph, opsets, inits, inputs)


def _opsets(proto: onnx.ModelProto) -> dict[str, int]:
    opsets = {}
    for imp in proto.opset_import:
        domain = DOMAINS.get(imp.domain, imp.domain)
        opsets[domain] = int(imp.version)
    if "ai.onnx" not in opsets:
        raise ONNXFormatError("the model imports no version of the default ONNX opset")
    v = opsets["ai.onnx"]
    if not MIN_OPSET <= v <= MAX_OPSET:
        raise ONNXFormatError(
            f"the model uses ONNX opset {v}; partita reads opsets {MIN_OPSET} to "
            f"{MAX_OPSET} (convert older models with "
            f"onnx.version_converter.convert_version)"
        )
    return opsets


def to_array(t: onnx.TensorProto, what: str) -> np.ndarray:
    """A TensorProto's data as a read-only numpy array."""
    if _external(t):
        raise ONNXFormatError(
            f"{what} keeps its data in an external file that was not loaded "
            f"(pass the model's path, not its bytes)"
        )
    if t.data_type not in DTYPES:
        name = (
            onnx.TensorProto.DataType.Name(t.data_type)
            if t.data_type in onnx.TensorProto.DataType.values()
            else str(t.data_type)
        )
        raise ONNXFormatError(f"{what} has data type {name}, which partita does not support")
    try:
        arr = numpy_helper.to_array(t)
    except Exception as e:  # noqa: BLE001 - onnx raises ValueError, TypeError, IndexError...
        raise ONNXFormatError(f"{what} cannot be decoded: {type(e).__name__}: {e}") from None
    want = int(np.prod(t.dims)) if len(t.dims) else 1
    if arr.size != want:
        raise ONNXFormatError(f"{what} declares shape {list(t.dims)} but holds {arr.size} values")
    return np.asarray(arr, dtype=DTYPES[t.data_type])


def input_type(vi: onnx.ValueInfoProto, input_shapes: dict) -> tuple[tuple[int, ...], str]:
    """The static (shape, dtype) of a graph input; dynamic dimensions need ``input_shapes``."""
    tt = vi.type.tensor_type
    if not vi.type.HasField("tensor_type") or tt.elem_type not in DTYPES:
        raise ONNXFormatError(f"graph input {vi.name!r} is not a tensor of a supported type")
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
    if vi.name in input_shapes:
        shape = tuple(int(d) for d in input_shapes[vi.name])
        if tt.HasField("shape") and (
            len(shape) != len(dims)
            or any(isinstance(d, int) and d != s for d, s in zip(dims, shape))
        ):
            raise ONNXError(
                f"input_shapes[{vi.name!r}] = {list(shape)} does not fit the input's "
                f"declared shape {dims}"
            )
        if min(shape, default=1) < 1:
            raise ONNXError(f"input_shapes[{vi.name!r}] = {list(shape)} has a dimension < 1")
        check_shape(shape, 8, f"input_shapes[{vi.name!r}] = {list(shape)}")
        return shape, DTYPES[tt.elem_type]
    if not tt.HasField("shape") or any(not isinstance(d, int) or d <= 0 for d in dims):
        shown = dims if tt.HasField("shape") else "unknown"
        raise ONNXError(
            f"graph input {vi.name!r} has a dynamic shape {shown}; pass "
            f"input_shapes={{{vi.name!r}: (...)}} with static dimensions"
        )
    check_shape(dims, 8, f"graph input {vi.name!r} {dims}")
    return tuple(dims), DTYPES[tt.elem_type]
