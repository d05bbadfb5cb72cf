"""The VNNI kernels' int8 input flipped to uint8 once, as it is copied (vector_plan.FLIP_INPUT,
pack_input.copy_flipped): the inner loop then broadcasts each pixel's bytes from memory. Every
form (pointwise, padded, dense, rows whose bytes are no multiple of 64, a batch) equals the
interpreter on the vnni and avxvnni tiers and amx's VNNI fallback, one and two threads."""

from __future__ import annotations

import pytest
from partita.backends.llvm.lower import lower
from test_llvm_kernels import assert_equals_interpreter, build_graph, llvm_target

import partita as P

GEOS = {
    # 7 x 7 pixels of 160 channels: 49 x 160 bytes, a 64-byte tail of 0 and a row of 4-byte steps
    "pointwise": ("conv", 160, 96, {"hw": (7, 7), "k": (1, 1), "strides": (1, 1),
                                     "dilation": (1, 1), "padding": (0, 0, 0, 0)}),
    "odd_row": ("conv", 68, 40, {"hw": (3, 5), "k": (1, 1), "strides": (1, 1),
                                  "dilation": (1, 1), "padding": (0, 0, 0, 0)}),
    "padded": ("conv", 20, 33, {"hw": (6, 7), "k": (3, 3), "strides": (2, 1),
                                 "dilation": (1, 1), "padding": (1, 2, 1, 0)}),
    "batch": ("conv", 64, 24, {"batch": 2, "hw": (4, 4), "k": (1, 1), "strides": (1, 1),
                                "dilation": (1, 1), "padding": (0, 0, 0, 0)}),
    "dense": ("dense", 1280, 70, {"rows": 1}),
}


def _vconv(mod, isa: str):
    (conv,) = [k for k in lower(P.InferType()(mod)["main"], isa).kernels if k.kind == "VCONV"]
    return conv


@pytest.mark.parametrize("isa", ["vnni", "avxvnni", "amx"])
@pytest.mark.parametrize("geo", sorted(GEOS))
@pytest.mark.parametrize("threads", ["", " -threads=2"])
def test_flipped_input_equals_the_interpreter(isa, geo, threads):
    kind, cin, cout, shape = GEOS[geo]
    mod, _ = build_graph(kind, "int8", cin, cout, shape, 7, True, (-20, 60))
    conv = _vconv(mod, isa)
    if conv.params.get("isa") != "amx":  # AMX tiles read the raw int8 input
        assert conv.params.get("flipped") and conv.params["pack"]
    if isa == "amx":
        from partita.backends.llvm.runtime.jit import amx_permitted

        if not amx_permitted():
            pytest.skip("this CPU or OS does not run AMX tiles")
    assert_equals_interpreter(mod, isa, seed=3, threads=threads)


@pytest.mark.parametrize("isa", ["vnni", "avx2"])
def test_uint8_input_and_other_tiers_are_not_flipped(isa):
    """uint8 input is read as it is; AVX2's kernels keep their own routes."""
    shape = GEOS["pointwise"][3]
    for dtype in ("uint8", "int8"):
        mod, _ = build_graph("conv", dtype, 64, 32, shape, 1, False, None)
        conv = _vconv(mod, isa)
        assert bool(conv.params.get("flipped")) == (dtype == "int8" and isa == "vnni")
        assert conv.params["pack"] == bool(conv.params.get("flipped"))
        assert_equals_interpreter(mod, isa, seed=4)
    assert llvm_target(isa)  # the tier runs here or through -emulate=yes
