"""IR functions as bytes: Relay text plus its constants as .npy arrays, in one .npz blob.

    data = serialize(fn)          # what a backend's to_bytes() can return for IR it keeps
    fn = deserialize(data)        # bit-exact constants; no pickle

A DeserializeError (a ParseError for bad text) names what is wrong with a corrupt blob.
"""

from __future__ import annotations

import io

import numpy as np

from partita.errors import PartitaError
from partita.ir import Function, IRModule

FORMAT = b"partita-ir-npz"
VERSION = 1


class DeserializeError(PartitaError):
    """Bytes that are not a serialized partita function."""


def serialize(fn: Function) -> bytes:
    """``fn`` (with its constants, exactly) as bytes."""
    from partita.text.printer import astext

    text, constants = astext(IRModule({"main": fn}), show_spans=True)
    buf = io.BytesIO()
    np.savez(
        buf,
        format=np.frombuffer(FORMAT, np.uint8),
        version=np.array(VERSION),
        text=np.frombuffer(text.encode(), np.uint8),
        **{f"c{i}": c.data for i, c in enumerate(constants)},
    )
    return buf.getvalue()


def deserialize(data: bytes) -> Function:
    """The function ``serialize`` wrote."""
    from partita.text.parser import parse

    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            if bytes(z["format"]) != FORMAT or int(z["version"]) != VERSION:
                raise DeserializeError(f"not a {FORMAT.decode()} version {VERSION} blob")
            text = bytes(z["text"]).decode()
            count = sum(1 for k in z.files if k[:1] == "c" and k[1:].isdigit())
            constants = [z[f"c{i}"] for i in range(count)]
    except DeserializeError:
        raise
    except Exception as exc:  # zipfile/numpy raise many kinds on corrupt data
        raise DeserializeError(f"corrupt IR blob: {type(exc).__name__}: {exc}") from None
    return parse(text, constants)["main"]
