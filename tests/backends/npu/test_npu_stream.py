"""The command stream: round trip, and every corruption refused with a StreamError."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from partita.backends.npu.stream import HEADER, StreamError, decode, encode
from partita.frontends import from_tflite

import partita as P

NET = Path(__file__).resolve().parents[2] / "models" / "tflite" / "nets" / "resnet_mini_64.tflite"


@pytest.fixture(scope="module")
def region():
    return P.build(from_tflite(str(NET)), "npu, ref").steps[0].region


def test_round_trip(region):
    again = decode(encode(region.program))
    assert encode(again) == region.stream
    assert [op.kind for op in again.ops] == [op.kind for op in region.program.ops]


def test_random_byte_flips_and_truncations_are_refused(region):
    rng = np.random.default_rng(0)
    stream = region.stream
    for _ in range(300):
        data = bytearray(stream)
        for _ in range(rng.integers(1, 4)):
            data[rng.integers(0, len(data))] ^= 1 << int(rng.integers(0, 8))
        if bytes(data) == stream:
            continue
        with pytest.raises(StreamError):
            decode(bytes(data))
    for cut in (0, 5, HEADER.size, len(stream) // 2, len(stream) - 1):
        with pytest.raises(StreamError):
            decode(stream[:cut])


def resign(meta: dict, data: bytes) -> bytes:
    """A stream with edited metadata and a valid checksum: the field checks must catch it."""
    meta_bytes = json.dumps(meta).encode()
    body = HEADER.pack(b"PNPU", 1, 0, len(meta_bytes), len(data)) + meta_bytes + data
    return body + struct.pack("<I", zlib.crc32(body))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda m: m["ops"][0].update(kind="GEMM"), "kind 'GEMM'"),
        (lambda m: m["ops"][0].update(output=10**6), "output must be an integer"),
        (lambda m: m["ops"][0]["params"].pop("in_zp"), "parameter 'in_zp'"),
        (lambda m: m["ops"][0]["arrays"]["weights"].__setitem__(2, 10**9), "outside the data"),
        (lambda m: m["ops"][0]["arrays"]["weights"].__setitem__(1, [7, 7]), "does not match"),
        (lambda m: m["tensors"][0].__setitem__(1, "complex64"), "dtype 'complex64'"),
        (lambda m: m["tensors"][0].__setitem__(0, [0, 3]), "dimension"),
        (lambda m: m.update(inputs="x"), "inputs must be a list"),
        (lambda m: m["ops"][0]["params"].update(out_dtype="float32"), "out_dtype"),
        (lambda m: m["ops"][0]["params"].update(rounding="banker"), "rounding 'banker'"),
        (
            lambda m: m["ops"][0]["params"].update(rounding="onnx"),
            r"lacks its output-stage scaling \(scale\)",
        ),
        (lambda m: m["ops"][0]["arrays"].pop("shift"), r"\(multiplier, shift\)"),
        (lambda m: m["ops"][0]["params"].update(views=[None, None]), "views"),
        (lambda m: m["ops"][0]["params"].update(views=[[[0], [1]]]), "view 0 rank"),
        (
            lambda m: m["ops"][0]["params"].update(views=[[[0, 0, 0, 0], [1, 10**6, 1, 1]]]),
            "view 0 box",
        ),
    ],
)
def test_field_checks_with_a_valid_checksum(region, edit, message):
    blob = region.stream
    _, _, _, meta_len, data_len = HEADER.unpack_from(blob)
    meta = json.loads(blob[HEADER.size : HEADER.size + meta_len])
    data = blob[HEADER.size + meta_len : HEADER.size + meta_len + data_len]
    edit(meta)
    with pytest.raises(StreamError, match=message):
        decode(resign(meta, data))


def test_other_versions_and_foreign_bytes(region):
    blob = bytearray(region.stream)
    blob[4] = 9  # version
    with pytest.raises(StreamError, match="version 9"):
        decode(bytes(blob))
    with pytest.raises(StreamError, match="bad magic"):
        decode(b"TFL3" + bytes(40))


def test_supported_ops_doc_is_generated_from_the_constraints():
    from partita.backends.npu.docgen import render

    doc = Path(__file__).resolve().parents[3] / "docs" / "npu_supported_ops.md"
    assert doc.read_text() == render(), "run: python -m partita.backends.npu.docgen > " + str(doc)
    assert "Stride height and width must be in the range [1, 3]" in render()
