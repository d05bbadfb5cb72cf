"""-isa=plain's depthwise kernel (vector_plan.DW_PLAIN_ROW_PAIRS): input rows as int16 pairs shared
by two output rows, summed as generic IR of VPMADDWD's products (vdepthwise.dw_paired_rows). Any
CPU runs plain code, so every case runs everywhere: both tile widths (the zmm host's 8 pixels and
the narrower one), kernel sizes, strides, dilations, odd row counts, rows narrower than a tile,
extreme values, one thread and two; the same bits as the interpreter, and no x86 intrinsic in
the IR."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_checks import build_graph, depthwise_graph
from test_llvm_plain_no_x86 import X86, _build_capturing

import partita as P


def _vdw(mod):
    from partita.backends.llvm.lower import lower

    (dw,) = [k for k in lower(P.InferType()(mod)["main"], "plain", 1).kernels
             if k.kind.name == "VDW"]
    return dw


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hw=st.tuples(st.integers(1, 9), st.integers(1, 21)),
       k=st.tuples(st.sampled_from([1, 3, 5]), st.sampled_from([1, 3])),
       stride=st.integers(1, 2), dilation=st.sampled_from([1, 2]),
       threads=st.sampled_from([1, 2]), zmm=st.booleans(), seed=st.integers(0, 2**16))
def test_plain_depthwise_row_pairs_geometry(hw, k, stride, dilation, threads, zmm, seed):
    from partita.backends.llvm.lower import vector_plan as vplan

    mp = pytest.MonkeyPatch()
    mp.setattr(vplan, "_zmm", lambda: zmm)  # the tile width LLVM's register width picks
    mp.setattr(vplan, "DW_PLAIN_STRIDED_MIN_WIDTH", 1)
    mp.setenv("PARTITA_REGION_CACHE", "0")
    mod, data = depthwise_graph(np.random.default_rng(seed), hw, k, stride, dilation)
    try:
        dw = _vdw(mod)
        assert dw.params["rowpairs"] == 2
        assert dw.params["dw_tile"] == (8 if zmm else vplan.DW_AVX2_TILE)
        got = P.build(mod, f"llvm -isa=plain -threads={threads}").run(data)[0]
    finally:
        mp.undo()
    assert np.array_equal(got, P.interpret(mod, [data])[0])


@pytest.mark.parametrize("route", ["rows", "taps"])
@pytest.mark.parametrize("in_dtype", ["int8", "uint8"])
@pytest.mark.parametrize("stride", [1, 2])
def test_plain_depthwise_on_extreme_values(route, in_dtype, stride, monkeypatch):
    """Weights of -128 and +-127 against inputs at the ends of their range (the largest pair
    sums), by the row-pair kernel and by the tap loop it replaced (DW_PLAIN_ROW_PAIRS off);
    the IR is generic either way."""
    from partita.backends.llvm.lower import vector_plan as vplan

    monkeypatch.setattr(vplan, "DW_PLAIN_ROW_PAIRS", route == "rows")
    monkeypatch.setattr(vplan, "DW_PLAIN_STRIDED_MIN_WIDTH", 1)
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    geo = {"hw": (7, 10), "k": (3, 3), "strides": (stride, stride), "dilation": (1, 1),
           "padding": (1, 1, 1, 1)}
    mod, _ = build_graph("depthwise", in_dtype, 40, 40, geo, 11, True, None,
                         wvalues=[-127, 127, -128, 127, -128, 1, 0])
    assert bool(_vdw(mod).params.get("rowpairs")) == (route == "rows")
    exe, ir_text = _build_capturing(mod, "llvm -isa=plain", monkeypatch)
    assert not X86.search(ir_text), X86.search(ir_text)
    ty = exe.input_types[0]
    info = np.iinfo(ty.dtype)
    ends = np.array([info.min, info.max, info.min, info.max, 0], ty.dtype)
    data = np.random.default_rng(stride).choice(ends, ty.shape)
    assert np.array_equal(exe.run(data)[0], P.interpret(mod, [data])[0])


@pytest.mark.parametrize("width", [7, 16, 40])
@pytest.mark.parametrize("stride", [1, 2])
def test_plain_depthwise_route_by_stride_and_width(width, stride):
    """By default row pairs take every stride-1 layer and strided ones at least
    DW_PLAIN_STRIDED_MIN_WIDTH pixels wide, the tap loop the rest (lowering only)."""
    from partita.backends.llvm.lower import vector_plan as vplan

    geo = {"hw": (4, width * stride), "k": (3, 3), "strides": (stride, stride),
           "dilation": (1, 1), "padding": (1, 1, 1, 1)}
    mod, _ = build_graph("depthwise", "int8", 16, 16, geo, 3, True, None)
    rows = stride == 1 or width >= vplan.DW_PLAIN_STRIDED_MIN_WIDTH
    assert bool(_vdw(mod).params.get("rowpairs")) == rows
