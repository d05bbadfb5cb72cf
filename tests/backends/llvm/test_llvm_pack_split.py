"""A vector convolution's packed input over two threads (vconv.PACK_SPLIT_BYTES,
pack_input.pack_rows): an input of at least PACK_SPLIT_BYTES that the kernel copies into padded
pixel slots (an image's 1-3 channels into 4-byte slots, 5 channels into 8, whole rows where the
channels fill their slots, int8 rows flipped to uint8 for the VNNI kernels) is packed in chunks
of rows on both threads before the convolution's own split. Every tier (-emulate=yes where the
CPU lacks one), padding above and below the image or not, the worker forced and absent: the
interpreter's bits."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_checks import build_graph, llvm_target
from test_llvm_plain_no_x86 import _build_capturing

import partita as P


def _force(exe, mode):
    regions = [s.region for s in exe.steps if getattr(s.region, "modes", None) is not None]
    assert regions
    for r in regions:
        r.modes.choose = lambda: mode
    return regions


@pytest.mark.parametrize("isa", ["amx", "vnni", "avxvnni", "avx2", "plain"])
@pytest.mark.parametrize("channels,in_dtype,padding", [
    (3, "int8", (0, 0, 1, 1)),   # MobileNetV2's stem: TFLite's stride-2 "same" padding
    (3, "uint8", (1, 1, 1, 1)),  # rows of zero points above and below the image
    (5, "int8", (1, 1, 1, 1)),   # 5 channels in 8-byte slots: one copy per pixel
    (8, "int8", (2, 1, 0, 1)),   # whole rows (flipped to uint8 on the VNNI tiers)
])
def test_packed_input_over_two_threads_keeps_the_bits(isa, channels, in_dtype, padding,
                                                      monkeypatch, tmp_path):
    from partita.backends.llvm.emit.int8 import vconv

    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(vconv, "PACK_SPLIT_BYTES", 1 << 12)  # small images for the test
    hw = (37, 40)  # 37 rows: chunks of rows with a short last one
    geo = {"hw": hw, "k": (3, 3), "strides": (2, 2), "dilation": (1, 1), "padding": padding}
    mod, _ = build_graph("conv", in_dtype, channels, 64, geo, 7 * channels, True, None)
    exe, ir_text = _build_capturing(mod, llvm_target(isa, " -threads=2"), monkeypatch)
    assert "_pack_chunks_back" in ir_text, "the packing is not split"
    info = np.iinfo(in_dtype)
    rng = np.random.default_rng(channels)
    for mode in ("pool", "alone", "pool"):
        _force(exe, mode)
        x = rng.integers(info.min, info.max + 1, (1, *hw, channels), dtype=in_dtype)
        assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])


def test_small_inputs_pack_on_the_driver(monkeypatch, tmp_path):
    """Below PACK_SPLIT_BYTES the driver packs before the split, as before (no second
    hand-off for a few kilobytes)."""
    from partita.backends.llvm.emit.int8 import vconv

    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    geo = {"hw": (20, 20), "k": (3, 3), "strides": (1, 1), "dilation": (1, 1),
           "padding": (1, 1, 1, 1)}
    mod, _ = build_graph("conv", "int8", 3, 64, geo, 3, True, None)
    assert 20 * 20 * 3 < vconv.PACK_SPLIT_BYTES
    exe, ir_text = _build_capturing(mod, llvm_target("avx2", " -threads=2"), monkeypatch)
    assert "_units_chunks" in ir_text and "_pack_chunks" not in ir_text
