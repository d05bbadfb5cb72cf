"""One byte layout for a compiled region (``CompiledRegion.to_bytes``), shared by the backends:

    [u32 little-endian n] [n bytes: a JSON header] [the arrays' raw bytes, in order] [payload]

The header is the backend's dict; ``"consts"`` in it lists each array as ``[dtype, shape]`` (C
order; absent: no arrays); the payload is what the backend keeps opaque (object code, a command
stream). ``tensor_types`` / ``parse_tensor_types`` spell input and output types in a header.
A saved executable (partita/runtime/writer.py) stores each region's blob as one member of its
zip, beside a JSON manifest with the file's format version.
"""

from __future__ import annotations

import json
import math

import numpy as np


class BlobError(ValueError):
    """Bytes that are not a region blob (truncated, or a header that is not JSON)."""


def pack_region(header: dict, arrays=(), payload: bytes = b"") -> bytes:
    """The blob of ``header`` (a JSON-able dict), ``arrays`` (their specs go into ``header``
    as ``"consts"`` when given) and ``payload``."""
    arrays = [np.ascontiguousarray(a) for a in arrays]
    if arrays and "consts" not in header:
        header = {**header, "consts": [[str(a.dtype), list(a.shape)] for a in arrays]}
    meta = json.dumps(header).encode()
    return len(meta).to_bytes(4, "little") + meta + b"".join(a.tobytes() for a in arrays) + payload


def unpack_region(data: bytes) -> tuple[dict, list[np.ndarray], bytes]:
    """``(header, arrays, payload)`` of a blob made by ``pack_region`` (BlobError if not)."""
    if len(data) < 4:
        raise BlobError("truncated region: no header length")
    n = int.from_bytes(data[:4], "little")
    if 4 + n > len(data):
        raise BlobError("truncated region header")
    try:
        header = json.loads(data[4 : 4 + n])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BlobError(f"region header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise BlobError("region header is not a JSON object")
    arrays, at = [], 4 + n
    for dtype, shape in header.get("consts", []):
        count = math.prod(shape)
        size = count * np.dtype(dtype).itemsize
        if at + size > len(data):
            raise BlobError("truncated constants")
        arrays.append(np.frombuffer(data, dtype, count, at).reshape(shape).copy())
        at += size
    return header, arrays, bytes(data[at:])


def tensor_types(types) -> list:
    """TensorTypes as JSON: ``[[shape...], dtype]`` each."""
    return [[[int(d) for d in t.shape], str(t.dtype)] for t in types]


def parse_tensor_types(items) -> list:
    """The inverse of ``tensor_types``."""
    from partita.ir import TensorType

    return [TensorType(tuple(int(d) for d in shape), dtype) for shape, dtype in items]


__all__ = ["BlobError", "pack_region", "parse_tensor_types", "tensor_types", "unpack_region"]
