"""The region blob (backends/blob.py) the llvm and npu regions share: the llvm layout is the one
saved files already hold, an npu region of the old text-header format still loads, and bad
blobs are refused with the backend's error."""

from __future__ import annotations

import json

import numpy as np
import pytest
from common_graphs import int8_convnet
from partita.backends.blob import BlobError, pack_region, unpack_region

import partita as P


def test_pack_unpack_round_trip_and_layout():
    arrays = [np.arange(6, dtype=np.int16).reshape(2, 3), np.array([1.5], np.float64)]
    data = pack_region({"name": "r"}, arrays, b"\x01\x02")
    header, back, payload = unpack_region(data)
    assert header["name"] == "r" and header["consts"] == [["int16", [2, 3]], ["float64", [1]]]
    assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(arrays, back))
    assert payload == b"\x01\x02"
    # the layout llvm regions were saved in: u32 length, JSON, raw arrays, payload
    meta = json.dumps(header).encode()
    assert data == len(meta).to_bytes(4, "little") + meta + b"".join(
        a.tobytes() for a in arrays) + b"\x01\x02"


@pytest.mark.parametrize("bad", [b"", b"\x05\x00", b"\x04\x00\x00\x00nope", b"\x02\x00\x00\x00[]",
                                 b"\x20\x00\x00\x00{}"])
def test_bad_blobs_are_refused(bad):
    with pytest.raises(BlobError):
        unpack_region(bad)


def test_truncated_constants_are_refused():
    data = pack_region({}, [np.zeros(8, np.int32)])
    with pytest.raises(BlobError, match="truncated constants"):
        unpack_region(data[:-4])


def test_llvm_region_round_trip_with_keywords():
    from partita.backends.llvm import LLVMRegion, load_region

    mod = int8_convnet()
    exe = P.build(mod, "llvm")
    region = exe.steps[0].region
    assert isinstance(region, LLVMRegion)
    again = load_region(region.to_bytes())
    assert again.to_bytes() == region.to_bytes()
    x = np.random.default_rng(1).integers(-128, 128, (1, 8, 8, 4), dtype=np.int8)
    assert all(np.array_equal(a, b) for a, b in zip(again.run([x]), region.run([x])))
    with pytest.raises(TypeError):
        LLVMRegion("name", b"")  # keyword construction only
    with pytest.raises(P.PartitaError, match="corrupt llvm region"):
        load_region(region.to_bytes()[:100])


def test_npu_region_new_and_version_1_blobs_load():
    from partita.backends.npu import NPURegion, load_region

    mod = int8_convnet()
    exe = P.build(mod, "npu, llvm")
    regions = [s.region for s in exe.steps if isinstance(s.region, NPURegion)]
    assert regions
    region = regions[0]
    data = region.to_bytes()
    header, _, stream = unpack_region(data)
    assert header["format"] == "npu-region" and header["version"] == 2
    assert stream == region.stream
    # version 1: "name|1x8x8x4:int8;...|..." before the stream
    def spell(types):
        return ";".join(f"{'x'.join(map(str, t.shape))}:{t.dtype}" for t in types)

    text = "|".join([region.name, spell(region.input_types), spell(region.output_types)])
    old = len(text.encode()).to_bytes(4, "little") + text.encode() + region.stream
    for blob in (data, old):
        back = load_region(blob)
        assert back.name == region.name and back.stream == region.stream
        assert back.input_types == region.input_types
        assert back.output_types == region.output_types
    future = pack_region({**header, "version": 3}, payload=stream)
    with pytest.raises(P.PartitaError, match="version 3"):
        load_region(future)


def test_outputs_are_copied_once_and_stay_the_callers():
    """An llvm region's outputs are copies out of its arena (fresh_outputs): the executable
    hands them out as they are; a later run never writes into arrays already returned."""
    from unittest import mock

    mod = int8_convnet()
    exe = P.build(mod, "llvm")
    x = np.random.default_rng(2).integers(-128, 128, (1, 8, 8, 4), dtype=np.int8)
    first = exe.run(x)
    keep = [a.copy() for a in first]
    with mock.patch.object(np, "array", wraps=np.array) as copies:
        second = exe.run(x)
    assert not any(c.kwargs.get("copy") for c in copies.call_args_list)
    first[0][...] = 0
    assert all(np.array_equal(a, b) for a, b in zip(second, keep))
    assert all(np.array_equal(a, b) for a, b in zip(exe.run(x), keep))


def test_llvm_region_constants_start_on_cache_lines(monkeypatch):
    """Every constant of a region, compiled or loaded, starts on a 64-byte boundary (the float
    products' weight vectors are 64-byte loads: one straddling two lines cost up to 15%), with
    its values, dtype and shape unchanged (``packed``: one buffer, each on a line of it)."""
    import partita.backends.llvm.region as region_module
    from partita.backends.llvm import load_region
    from partita.backends.llvm.runtime.arena import packed

    from partita import relay

    def off_line(a):  # a copy 4 bytes past a cache line: what numpy may hand out
        raw = np.empty(a.nbytes + 128, np.uint8)
        start = -raw.ctypes.data % 64 + 4
        out = raw[start : start + a.nbytes].view(a.dtype).reshape(a.shape)
        out[...] = a
        return out

    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(12, 40))
    w = relay.const(rng.standard_normal((48, 40)).astype(np.float32))
    mod = relay.transform.InferType()(relay.IRModule.from_expr(
        relay.Function([x], relay.nn.dense(x, w))))
    region = P.build(mod, "llvm -isa=plain").steps[0].region
    unpack = region_module.unpack_region
    monkeypatch.setattr(region_module, "unpack_region", lambda data: (
        lambda m, c, o: (m, [off_line(a) for a in c], o))(*unpack(data)))
    again = load_region(region.to_bytes())  # loaded from constants that start off a line
    assert region.consts and again.to_bytes() == region.to_bytes()
    for r in (region, again):
        assert all(c.ctypes.data % 64 == 0 and c.flags.c_contiguous for c in r.consts)
    xd = rng.standard_normal((12, 40)).astype(np.float32)
    assert np.array_equal(again.run([xd])[0], region.run([xd])[0])
    some = (off_line(np.arange(15, dtype=np.float32).reshape(3, 5)),
            off_line(np.arange(15, dtype=np.float32).reshape(3, 5)).T,
            np.zeros((0, 4), np.int8), np.arange(7, dtype=np.int16))
    for a, b in zip(some, packed(some)):
        assert b.ctypes.data % 64 == 0 and b.flags.c_contiguous and b.flags.writeable
        assert b.dtype == a.dtype and b.shape == a.shape and np.array_equal(a, b)


def test_large_buffers_start_on_huge_pages():
    """A region's constants together and its arena, from HUGE_MIN bytes on, start on a 2 MB
    boundary (memory advised for huge pages, where Python's mmap has MADV_HUGEPAGE); smaller ones
    on a cache line; zero-filled, writable, and alive as long as a view of them is."""
    import gc
    import mmap

    from partita.backends.llvm.runtime.arena import HUGE_MIN, HUGE_PAGE, packed, zeroed

    small = zeroed(1000)
    assert small.ctypes.data % 64 == 0 and small.nbytes == 1000 and not small.any()
    big = zeroed(HUGE_MIN + 12345)
    assert big.nbytes == HUGE_MIN + 12345 and not big.any() and big.flags.writeable
    if hasattr(mmap, "MADV_HUGEPAGE"):
        assert big.ctypes.data % HUGE_PAGE == 0
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((700, 400)).astype(np.float32), rng.integers(0, 9, (33,))]
    views = packed(arrays)
    del big
    gc.collect()  # the mapping outlives everything but its views
    assert all(np.array_equal(a, v) for a, v in zip(arrays, views))
    if hasattr(mmap, "MADV_HUGEPAGE"):
        assert views[0].ctypes.data % HUGE_PAGE == 0
    assert views[1].ctypes.data % 64 == 0
