"""The VNNI kernels' inner loop: int8 input flipped to uint8 once, as it is copied
(vector_plan.FLIP_INPUT, pack_input.copy_flipped), so that the loop broadcasts each pixel's bytes
from memory; AVX-VNNI's 6 x 1 register tile (vector_plan.TILES). Every form (pointwise, padded,
dense, rows whose bytes are no multiple of 64, a batch) equals the interpreter on the vnni and
avxvnni tiers and amx's VNNI fallback, one and two threads."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_checks import assert_equals_interpreter, build_graph, llvm_target
from partita.backends.llvm.lower import lower

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
    # K = 960: vnni's 10 x 2 tiles (VNNI_L1_PANEL), a group of 2 vectors and a tail of 1
    "l1_panel": ("conv", 960, 48, {"hw": (7, 7), "k": (1, 1), "strides": (1, 1),
                                    "dilation": (1, 1), "padding": (0, 0, 0, 0)}),
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


def test_avxvnni_tiles_take_six_pixels_of_one_vector():
    """6 pixels x 1 vector where there are 6 pixels; a one-row dense layer keeps 2 vectors
    (independent sums); AVX-512 VNNI keeps its 6 x 4."""
    pointwise = build_graph(*GEOS["pointwise"][:1], "int8", *GEOS["pointwise"][1:3],
                            GEOS["pointwise"][3], 1, False, None)[0]
    dense = build_graph("dense", "int8", 256, 64, {"rows": 1}, 1, False, None)[0]
    tiles = {(name, isa): (_vconv(mod, isa).params["R"], _vconv(mod, isa).params["V"])
             for name, mod in (("pointwise", pointwise), ("dense", dense))
             for isa in ("avxvnni", "vnni")}
    assert tiles == {("pointwise", "avxvnni"): (6, 1), ("dense", "avxvnni"): (1, 2),
                     ("pointwise", "vnni"): (6, 4), ("dense", "vnni"): (1, 4)}


def test_vnni_tiles_keep_the_weight_panel_in_l1():
    """7 x 7 pixels of K = 960 (a 61 KB panel at 6 x 4): 10 x 2 tiles (31 KB); K = 576 keeps
    6 x 4 (37 KB); a one-row dense layer of K = 1280 reads each weight once and keeps 4 vectors."""
    shape = GEOS["pointwise"][3]
    got = [(_vconv(build_graph(kind, "int8", cin, cout, geo, 1, False, None)[0], "vnni")
            .params[key]) for kind, cin, cout, geo in (("conv", 960, 320, shape),
                                                        ("conv", 576, 160, shape),
                                                        ("dense", 1280, 100, {"rows": 1}))
           for key in ("R", "V")]
    assert got == [10, 2, 6, 4, 1, 4]


def _stage(x, rng, cin, cout, depthwise=False):
    """qnn.conv2d (3 x 3 depthwise padded, or 1 x 1) -> bias -> requantize -> clip, int8."""
    op = P.get_op
    k = 3 if depthwise else 1
    w = rng.integers(-127, 128, (cout, k, k, 1 if depthwise else cin), dtype=np.int8)
    y = op("qnn.conv2d")(
        x, P.const(w), P.const(np.int32(int(rng.integers(-30, 30)))), P.const(np.int32(0)),
        P.const(np.float32(0.05)), P.const(np.float32(0.01)), strides=(1, 1),
        padding=(k // 2,) * 4, dilation=(1, 1), groups=cin if depthwise else 1,
        data_layout="NHWC", kernel_layout="OHWI")
    y = op("nn.bias_add")(y, P.const(rng.integers(-900, 900, cout, dtype=np.int32)), axis=-1)
    y = op("qnn.requantize")(y, P.const(np.float32(0.0005)), P.const(np.int32(0)),
                             P.const(np.float32(0.02 * (1 + depthwise))),
                             P.const(np.int32(int(rng.integers(-10, 10)))), axis=-1,
                             out_dtype="int8")
    return op("clip")(y, a_min=-128.0, a_max=127.0)


def _chain():
    """depthwise (32 channels) -> 1 x 1 (32 -> 64) -> 1 x 1 (64 -> 48): both 1 x 1 layers read
    a single producer's output, which stores it flipped (lower/flip_input.py)."""
    rng = np.random.default_rng(11)
    x = P.var("x", (1, 6, 7, 32), "int8")
    y = _stage(_stage(_stage(x, rng, 32, 32, depthwise=True), rng, 32, 64), rng, 64, 48)
    return P.IRModule.from_expr(P.Function([x], y))


@pytest.mark.parametrize("isa", ["vnni", "avxvnni", "amx"])
@pytest.mark.parametrize("threads", ["", " -threads=2"])
def test_producers_store_their_output_flipped(isa, threads):
    mod = _chain()
    kernels = lower(P.InferType()(mod)["main"], isa).kernels
    flipped_out = [k.kind for k in kernels if k.params.get("flip_out")]
    readers = [k for k in kernels if k.params.get("flipped")]
    if isa != "amx":  # amx: the 1 x 1 layers of 42 pixels are AMX tiles, which read int8
        assert flipped_out == ["VDW", "VCONV"]
        assert all(not k.params["pack"] and len(k.inputs) == 1 for k in readers)
    if isa == "amx":
        from partita.backends.llvm.runtime.jit import amx_permitted

        if not amx_permitted():
            pytest.skip("this CPU or OS does not run AMX tiles")
    assert_equals_interpreter(mod, isa, seed=5, threads=threads)


def _add_then_pointwise(second_reader: bool):
    """qnn.add of two int8 tensors (LUT2) -> 1 x 1 (64 -> 96); with ``second_reader`` the sum
    is also the function's second output (then it must stay unflipped)."""
    rng = np.random.default_rng(13)
    op = P.get_op
    xs = [P.var(f"x{i}", (1, 7, 7, 64), "int8") for i in range(2)]
    q = [P.const(np.float32(s)) for s in (0.05, 0.07, 0.09)]
    s = op("qnn.add")(xs[0], xs[1], q[0], P.const(np.int32(3)), q[1], P.const(np.int32(-7)),
                      q[2], P.const(np.int32(-5)))
    w = rng.integers(-127, 128, (96, 1, 1, 64), dtype=np.int8)
    y = op("qnn.conv2d")(
        s, P.const(w), P.const(np.int32(-5)), P.const(np.int32(0)), P.const(np.float32(0.09)),
        P.const(np.float32(0.01)), strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1),
        groups=1, data_layout="NHWC", kernel_layout="OHWI")
    y = op("qnn.requantize")(y, P.const(np.float32(0.0009)), P.const(np.int32(0)),
                             P.const(np.float32(0.05)), P.const(np.int32(2)), axis=-1,
                             out_dtype="int8")
    out = P.Tuple([y, s]) if second_reader else y
    return P.IRModule.from_expr(P.Function(xs, out))


@pytest.mark.parametrize("isa", ["vnni", "avxvnni"])
@pytest.mark.parametrize("threads", ["", " -threads=2"])
@pytest.mark.parametrize("second_reader", [False, True])
def test_a_residual_add_stores_its_sum_flipped(isa, threads, second_reader):
    """A LUT2 (a residual add) whose only reader is a flipped convolution stores its bytes
    flipped: its table's entries xor 0x80, no copy pass; with another reader it does not."""
    mod = _add_then_pointwise(second_reader)
    kernels = lower(P.InferType()(mod)["main"], isa).kernels
    (lut,) = [k for k in kernels if k.kind == "LUT2"]
    (conv,) = [k for k in kernels if k.kind == "VCONV"]
    assert bool(lut.params.get("flip_out")) == (not second_reader)
    assert conv.params["pack"] == second_reader
    exe = P.build(mod, llvm_target(isa, threads))
    data = [np.random.default_rng(i).integers(-128, 128, (1, 7, 7, 64), dtype=np.int8)
            for i in range(2)]
    got, want = exe.run(*data), P.interpret(mod, data)
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
