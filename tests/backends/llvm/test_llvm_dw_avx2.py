"""The exact AVX2 depthwise kernels (vector_plan.DW_ROW_PAIRS / DW_TAP_PAIRS), each forced on any
machine that runs AVX2 code, where their sums are largest: weights of -128 and +-127 against
inputs at the ends of their range, strides 1 and 2, rows narrower than a tile, an odd row count,
one thread or two. The same bits as the interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_checks import build_graph, depthwise_graph, isa_available

import partita as P


@pytest.mark.parametrize("route", ["rows", "rows2", "taps", "rows-int16", "taps-int16"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), in_dtype=st.sampled_from(["int8", "uint8"]),
       hw=st.sampled_from([(1, 1), (3, 5), (7, 9), (10, 13)]), stride=st.integers(1, 2),
       channels=st.sampled_from([3, 16, 40]), minus128=st.booleans(),
       threads=st.sampled_from(["", " -threads=2"]))
def test_avx2_depthwise_on_extreme_values(route, seed, in_dtype, hw, stride, channels,
                                          minus128, threads, tmp_path_factory):
    if not isa_available("avx2"):
        pytest.skip("this CPU does not run avx2 code")
    from partita.backends.llvm.emit.int8 import vdepthwise
    from partita.backends.llvm.lower import lower
    from partita.backends.llvm.lower import vector_plan as vplan

    mp = pytest.MonkeyPatch()
    if route.endswith("-int16"):  # widened before the interleave (an emitter switch: the
        # object-code cache is keyed by the plan, so this variant gets a cache of its own)
        mp.setattr(vdepthwise, "WEAVE_BYTES", False)
        mp.setenv("PARTITA_CACHE_DIR", str(tmp_path_factory.mktemp("dw-int16")))
    mp.setattr(vplan, "DW_ROW_PAIRS", route.startswith("rows"))
    mp.setattr(vplan, "DW_ROW_PAIRS_MIN_WIDTH", 1)
    mp.setattr(vplan, "DW_ROW_PAIRS_MAX_STRIDE", 2)
    mp.setattr(vplan, "DW_CV_OUTER", route != "rows2")
    mp.setattr(vplan, "DW_AVX2_TILE", 2 if route == "rows2" else 4)
    mp.setattr(vplan, "DW_TAP_PAIRS", route.startswith("taps"))
    mp.setenv("PARTITA_REGION_CACHE", "0")
    try:
        geo = {"hw": hw, "k": (3, 3), "strides": (stride, stride), "dilation": (1, 1),
               "padding": (1, 1, 1, 1)}
        values = [-127, 127, -127, 127, 1, 0] + ([-128, -128] if minus128 else [])
        mod, _ = build_graph("depthwise", in_dtype, channels, channels, geo, seed, True, None,
                             wvalues=values)
        (dw,) = [k for k in lower(P.InferType()(mod)["main"], "avx2", 1).kernels
                 if k.kind.name == "VDW"]
        assert bool(dw.params.get("rowpairs")) == route.startswith("rows")
        assert bool(dw.params.get("tap_pairs")) == route.startswith("taps")
        exe = P.build(mod, f"llvm -isa=avx2{threads}")
        ty = exe.input_types[0]
        info = np.iinfo(ty.dtype)
        ends = np.array([info.min, info.max, info.min, info.max, 0], ty.dtype)
        data = np.random.default_rng(seed).choice(ends, ty.shape)
        assert np.array_equal(exe.run(data)[0], P.interpret(mod, [data])[0])
    finally:
        mp.undo()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hw=st.tuples(st.integers(1, 9), st.integers(1, 21)),
       k=st.tuples(st.sampled_from([1, 3, 5]), st.sampled_from([1, 3])),
       stride=st.integers(1, 2), dilation=st.sampled_from([1, 2]),
       threads=st.sampled_from([1, 2]), tile=st.sampled_from([2, 4, 8]),
       seed=st.integers(0, 2**16))
def test_avx2_depthwise_row_pairs_geometry(hw, k, stride, dilation, threads, tile, seed):
    """The AVX2 row-pair depthwise kernel over kernel sizes, strides, dilations and row widths
    (two output rows per step, an odd last row again with the row before; tiles of ``tile``
    pixels, a row's last pixels again with the tile before them), one and two threads."""
    if not isa_available("avx2"):
        pytest.skip("this CPU does not run avx2 code")
    from partita.backends.llvm.lower import vector_plan as vplan

    mp = pytest.MonkeyPatch()
    mp.setattr(vplan, "DW_ROW_PAIRS", True)
    mp.setattr(vplan, "DW_ROW_PAIRS_MIN_WIDTH", 1)
    mp.setattr(vplan, "DW_ROW_PAIRS_MAX_STRIDE", 2)
    mp.setattr(vplan, "DW_CV_OUTER", seed % 2 == 0)
    mp.setattr(vplan, "DW_AVX2_TILE", tile)
    mp.setenv("PARTITA_REGION_CACHE", "0")
    mod, data = depthwise_graph(np.random.default_rng(seed), hw, k, stride, dilation)
    try:
        got = P.build(mod, f"llvm -isa=avx2 -threads={threads}").run(data)[0]
    finally:
        mp.undo()
    assert np.array_equal(got, P.interpret(mod, [data])[0])


@pytest.mark.parametrize("width", [7, 16, 40])
@pytest.mark.parametrize("stride", [1, 2])
def test_avx2_depthwise_route_by_row_width(width, stride):
    """By default the row-pair kernel takes output rows of at least DW_ROW_PAIRS_MIN_WIDTH
    pixels at strides up to DW_ROW_PAIRS_MAX_STRIDE, the tap-pair kernel the others (lowering
    only: any machine)."""
    from partita.backends.llvm.lower import lower
    from partita.backends.llvm.lower import vector_plan as vplan

    geo = {"hw": (4, width * stride), "k": (3, 3), "strides": (stride, stride),
           "dilation": (1, 1), "padding": (1, 1, 1, 1)}
    mod, _ = build_graph("depthwise", "int8", 16, 16, geo, 3, True, None)
    (dw,) = [k for k in lower(P.InferType()(mod)["main"], "avx2", 1).kernels
             if k.kind.name == "VDW"]
    rows = width >= vplan.DW_ROW_PAIRS_MIN_WIDTH and stride <= vplan.DW_ROW_PAIRS_MAX_STRIDE
    assert bool(dw.params.get("rowpairs")) == rows
    assert bool(dw.params.get("tap_pairs")) == (not rows)
    if rows:
        assert dw.params["dw_tile"] == vplan.DW_AVX2_TILE
