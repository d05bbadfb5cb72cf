"""The command stream: a Program as versioned bytes (the layout is in backends/npu/FORMAT.md).

    encode(program) -> bytes          decode(bytes) -> Program (every field validated)

A truncated, corrupted or foreign stream raises StreamError naming the field at fault; decoding
never executes or unpickles anything.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib

import numpy as np

from partita.errors import PartitaError

from .program import DTYPES, KINDS, MEMORIES, NPUOp, Program, TensorDesc

MAGIC = b"PNPU"
VERSION = 1
HEADER = struct.Struct("<4sHHII")  # magic, version, flags, metadata bytes, data bytes
MAX_BYTES = 1 << 31
ROUNDINGS = ("tflite", "tflite_builtin", "tflite_double", "onnx")
REQUIRED = {
    "CONV": {
        "strides": list,
        "dilation": list,
        "padding": list,
        "explicit_pad": list,
        "pad_value": int,
        "in_zp": int,
        "rounding": str,
        "act_min": int,
        "act_max": int,
        "out_dtype": str,
    },
    "FC": {"in_zp": int, "rounding": str, "act_min": int, "act_max": int, "out_dtype": str},
    "LUT": {"op": str, "in_dtype": str},
    "UNIT": {
        "op": str,
        "attrs": dict,
        "operands": list,
        "act_min": int,
        "act_max": int,
        "out_dtype": str,
    },
}
REQUIRED["DWCONV"] = REQUIRED["CONV"]
ARRAYS = {
    "CONV": ("weights", "w_zp", "out_zp", "rq_zp"),
    "FC": ("weights", "w_zp", "out_zp", "rq_zp"),
    "LUT": ("table",),
    "UNIT": (),
}
ARRAYS["DWCONV"] = ARRAYS["CONV"]


class StreamError(PartitaError):
    """Bytes that are not a valid NPU command stream of this version."""


def encode(program: Program) -> bytes:
    """``program`` as a command stream."""
    data = bytearray()
    ops = []
    stored: dict[tuple, int] = {}  # identical arrays are stored once (an LSTM's 64 KiB tables)
    for op in program.ops:
        arrays = {}
        for name, array in op.arrays.items():
            a = np.ascontiguousarray(array)
            raw = a.tobytes()
            key = (a.dtype.name, hashlib.sha256(raw).digest())
            offset = stored.get(key)
            if offset is None or data[offset : offset + len(raw)] != raw:
                offset = stored[key] = len(data)
                data += raw
            arrays[name] = [a.dtype.name, list(a.shape), offset, a.nbytes]
        ops.append(
            {
                "kind": op.kind,
                "name": op.name,
                "inputs": op.inputs,
                "output": op.output,
                "params": op.params,
                "stripes": op.stripes,
                "arrays": arrays,
            }
        )
    meta = {
        "config": program.config,
        "tensors": [
            [list(t.shape), t.dtype, t.memory, t.address] + ([t.resident] if t.resident else [])
            for t in program.tensors
        ],
        "ops": ops,
        "inputs": program.inputs,
        "outputs": program.outputs,
        "sram_peak": program.sram_peak,
    }
    meta_bytes = json.dumps(meta, separators=(",", ":")).encode()
    body = HEADER.pack(MAGIC, VERSION, 0, len(meta_bytes), len(data)) + meta_bytes + bytes(data)
    return body + struct.pack("<I", zlib.crc32(body))


def _fail(message: str):
    raise StreamError(f"corrupt NPU command stream: {message}")


def _check(cond: bool, message: str) -> None:
    if not cond:
        _fail(message)


def _int(value, what: str, lo: int = 0, hi: int = MAX_BYTES) -> int:
    _check(type(value) is int and lo <= value <= hi, f"{what} must be an integer in [{lo}, {hi}]")
    return value


def decode(blob: bytes) -> Program:
    """The Program in ``blob``; a StreamError says what is wrong."""
    if not isinstance(blob, (bytes, bytearray)) or len(blob) < HEADER.size + 4:
        _fail("too short to hold a header")
    magic, version, _, meta_len, data_len = HEADER.unpack_from(blob)
    _check(magic == MAGIC, f"bad magic {magic!r} (expected {MAGIC!r})")
    _check(version == VERSION, f"version {version}; this partita reads version {VERSION}")
    end = HEADER.size + meta_len + data_len
    _check(len(blob) == end + 4, f"length {len(blob)} does not match the header ({end + 4})")
    (crc,) = struct.unpack_from("<I", blob, end)
    _check(zlib.crc32(blob[:end]) == crc, "checksum mismatch (the stream was modified)")
    try:
        meta = json.loads(blob[HEADER.size : HEADER.size + meta_len])
    except ValueError as exc:
        _fail(f"metadata is not JSON ({exc})")
    data = memoryview(blob)[HEADER.size + meta_len : end]
    _check(isinstance(meta, dict), "metadata must be an object")
    tensors = [_tensor(t, i) for i, t in enumerate(_list(meta.get("tensors"), "tensors"))]
    n = len(tensors)
    ops = [_op(o, i, tensors, data) for i, o in enumerate(_list(meta.get("ops"), "ops"))]
    inputs = [_int(t, "input id", 0, n - 1) for t in _list(meta.get("inputs"), "inputs")]
    outputs = [_int(t, "output id", 0, n - 1) for t in _list(meta.get("outputs"), "outputs")]
    _check(isinstance(meta.get("config"), str), "config must be a string")
    return Program(
        meta["config"], tensors, ops, inputs, outputs, _int(meta.get("sram_peak"), "sram_peak")
    )


def _list(value, what: str) -> list:
    _check(isinstance(value, list), f"{what} must be a list")
    return value


def _tensor(t, i: int) -> TensorDesc:
    _check(
        isinstance(t, list) and len(t) in (4, 5),
        f"tensor {i} must be [shape, dtype, memory, addr] or [..., resident bytes]",
    )
    shape = [_int(d, f"tensor {i} dimension", 1, 1 << 24) for d in _list(t[0], "shape")]
    _check(len(shape) <= 6, f"tensor {i} has rank {len(shape)}")
    _check(t[1] in DTYPES, f"tensor {i} dtype {t[1]!r}")
    _check(t[2] in MEMORIES, f"tensor {i} memory {t[2]!r}")
    desc = TensorDesc(tuple(shape), t[1], t[2], _int(t[3], f"tensor {i} address"))
    _check(desc.nbytes <= MAX_BYTES, f"tensor {i} of {desc.nbytes} bytes")
    if len(t) == 5:
        desc.resident = _int(t[4], f"tensor {i} resident bytes", 1, desc.nbytes)
    return desc


def _op(o, i: int, tensors: list, data: memoryview) -> NPUOp:
    n = len(tensors)
    _check(isinstance(o, dict), f"op {i} must be an object")
    kind = o.get("kind")
    _check(kind in KINDS, f"op {i} kind {kind!r}")
    _check(isinstance(o.get("name"), str), f"op {i} name")
    inputs = [_int(t, f"op {i} input", 0, n - 1) for t in _list(o.get("inputs"), "inputs")]
    output = _int(o.get("output"), f"op {i} output", 0, n - 1)
    params = o.get("params")
    _check(isinstance(params, dict), f"op {i} params")
    for key, typ in REQUIRED[kind].items():
        _check(
            isinstance(params.get(key), typ) and not isinstance(params.get(key), bool),
            f"op {i} ({kind}) parameter {key!r} must be {typ.__name__}",
        )
    for key in ("out_dtype", "in_dtype"):
        if key in params:
            # argmax's indices; the LSTM's recurrent FC and its int32 elementwise steps
            index = ("int32",) if kind in ("UNIT", "FC") and key == "out_dtype" else ()
            _check(
                params[key] in ("int8", "uint8", "int16", *index), f"op {i} {key} {params[key]!r}"
            )
    views = params.get("views")
    if views is not None:
        _check(isinstance(views, list) and len(views) == len(inputs), f"op {i} views")
        for k, v in enumerate(views):
            if v is None:
                continue
            _check(isinstance(v, list) and len(v) == 2, f"op {i} view {k}")
            shape = tensors[inputs[k]].shape
            begin, end = (_list(side, "view") for side in v)
            _check(len(begin) == len(end) == len(shape), f"op {i} view {k} rank")
            for b, e, d in zip(begin, end, shape):
                _check(
                    type(b) is int and type(e) is int and 0 <= b < e <= d, f"op {i} view {k} box"
                )
    arrays = {}
    specs = o.get("arrays")
    _check(isinstance(specs, dict), f"op {i} arrays")
    for name, spec in specs.items():
        _check(isinstance(spec, list) and len(spec) == 4, f"op {i} array {name!r}")
        dtype, shape, offset, nbytes = spec
        _check(dtype in DTYPES + ("int16",), f"op {i} array {name!r} dtype {dtype!r}")
        shape = tuple(
            _int(d, f"op {i} array {name!r} dim", 0, 1 << 24) for d in _list(shape, "shape")
        )
        offset, nbytes = _int(offset, "array offset"), _int(nbytes, "array size")
        _check(offset + nbytes <= len(data), f"op {i} array {name!r} lies outside the data")
        _check(
            nbytes == int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize,
            f"op {i} array {name!r} size does not match its shape",
        )
        arrays[name] = np.frombuffer(data[offset : offset + nbytes], dtype).reshape(shape)
    for name in ARRAYS[kind]:
        _check(name in arrays, f"op {i} ({kind}) lacks array {name!r}")
    if kind in ("CONV", "DWCONV", "FC"):
        rounding = params["rounding"]
        _check(rounding in ROUNDINGS, f"op {i} ({kind}) rounding {rounding!r}")
        needs = ("scale",) if rounding in ("tflite_double", "onnx") else ("multiplier", "shift")
        _check(
            all(name in arrays for name in needs),
            f"op {i} ({kind}) lacks its output-stage scaling ({', '.join(needs)})",
        )
    if "table" in arrays:  # a LUT op's table, or a MAC op's fused activation
        t = arrays["table"]  # 8-bit: 256 entries; int16 (16x8 LOGISTIC / TANH): 65,536
        size = 65536 if t.dtype.name == "int16" else 256
        _check(t.shape == (size,), f"op {i} table must have {size} entries")
        _check(t.dtype.name in ("int8", "uint8", "int16"), f"op {i} table dtype")
    stripes = _int(o.get("stripes"), f"op {i} stripes", 1, 1 << 16)
    return NPUOp(kind, o["name"], inputs, output, params, arrays, stripes)
