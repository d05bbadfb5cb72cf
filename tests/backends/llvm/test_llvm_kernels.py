"""Each conv/dense kernel variant of the LLVM backend (vnni, avxvnni, avx2, plain) equals the
interpreter bit for bit on hypothesis-generated shapes, strides, paddings, dilations, depthwise
groups, dtypes and per-channel requantization: every variant on every x86-64 CPU (natively
where the CPU runs it, else through -emulate=yes: backends/llvm/emit/emulate.py). The output
stage and the tables: test_llvm_stage_and_tables.py; the shared graphs: kernel_checks.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_checks import (
    ISAS,
    assert_equals_interpreter,
    build_graph,
    convs,
    depthwise_graph,
    llvm_target,
)

import partita as P


@pytest.mark.parametrize("isa", ISAS)
@settings(max_examples=9, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=convs())
def test_conv_dense_depthwise_kernels_equal_the_interpreter(isa, case):
    mod, x = build_graph(*case)
    assert_equals_interpreter(mod, isa, seed=1)


@pytest.mark.parametrize("isa", ISAS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=convs(), tap=st.booleans())
def test_pair_saturating_kernels_equal_the_interpreter(isa, case, tap):
    """accumulate="vpmaddubsw" (pairs in im2col order: an odd channel count goes through an
    IM2COL copy) and "vpmaddubsw_tap" (pairs within a tap), on inputs over the whole 8-bit
    range, where pairs do saturate; the VNNI variant uses the AVX2 dot product for them, the
    plain one the scalar WMAC kernel (q16_lower.py)."""
    kind, *rest = case
    if kind == "depthwise":
        kind = "conv"
    accumulate = "vpmaddubsw_tap" if tap and kind == "conv" else "vpmaddubsw"
    mod, _ = build_graph(kind, *rest, accumulate=accumulate)
    assert_equals_interpreter(mod, isa, seed=2)


def test_the_forced_variant_is_the_one_compiled():
    mod, _ = build_graph(
        "conv",
        "int8",
        8,
        16,
        {"hw": (4, 4), "k": (1, 1), "strides": (1, 1), "dilation": (1, 1), "padding": (0, 0, 0, 0)},
        0,
        False,
        None,
    )
    from partita.backends.llvm.lower import lower

    for isa in ("plain", "avx2"):  # plain: the same kernel as generic vector IR (any target)
        assert P.build(mod, llvm_target(isa)).steps[0].region.kernels[0].startswith("VCONV ")
        (conv,) = lower(P.InferType()(mod)["main"], isa).kernels
        assert conv.kind == "VCONV" and conv.params["isa"] == isa
        # plain: int16 weights; avx2: VPMADDUBSW (no weight of -128 here: the sign kernel)
        assert conv.params["wide"] == (isa == "plain")
        assert isa == "plain" or conv.params.get("sign")


@pytest.mark.parametrize("isa", ["plain", "avx2"])
@pytest.mark.parametrize("rows, cin, cout", [(1, 300, 40), (1, 1280, 1000), (3, 64, 17)])
@pytest.mark.parametrize("threads", ["", " -threads=2"])
def test_wide_kernels_of_one_tile_keep_byte_weights(isa, rows, cin, cout, threads, monkeypatch):
    """The int16-weight kernel (plain's, and AVX2's "wide") over one tile of pixels (a dense
    layer of a few rows) reads each weight once: the weights stay bytes, sign-extended as they
    are loaded ("w8"), and the outputs equal the interpreter's."""
    from partita.backends.llvm.lower import lower
    from partita.backends.llvm.lower import vector_plan as vplan

    monkeypatch.setattr(vplan, "EXACT_AVX2", "wide")
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    mod, _ = build_graph("dense", "int8", cin, cout, {"rows": rows}, 3, True, None)
    (conv,) = lower(P.InferType()(mod)["main"], isa).kernels
    assert conv.kind == "VCONV" and conv.params["wide"] and conv.params.get("w8")
    exe = P.build(mod, llvm_target(isa, threads))
    rng = np.random.default_rng(rows)
    for _ in range(3):
        x = rng.integers(-128, 128, (rows, cin), dtype=np.int8)
        assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])


def _layer(x, rng, cin, cout, k, stride, pad, groups):
    """qnn.conv2d (NHWC, OHWI, int8) -> bias -> requantize(tflite) -> clip, random constants."""
    op = P.get_op
    wshape = (cout, k, k, cin // groups)
    y = op("qnn.conv2d")(
        x, P.const(rng.integers(-127, 128, wshape, dtype=np.int8)),
        P.const(np.int32(rng.integers(-128, 128))), P.const(np.int32(0)),
        P.const(np.float32(0.05)), P.const(rng.uniform(0.002, 0.05, cout).astype(np.float32)),
        strides=(stride, stride), padding=(pad,) * 4, groups=groups,
        data_layout="NHWC", kernel_layout="OHWI",
    )
    y = op("nn.bias_add")(y, P.const(rng.integers(-3000, 3000, cout, dtype=np.int32)), axis=-1)
    y = op("qnn.requantize")(
        y, P.const(rng.uniform(1e-4, 2e-3, cout).astype(np.float32)), P.const(np.int32(0)),
        P.const(np.float32(rng.uniform(0.02, 0.3))), P.const(np.int32(rng.integers(-20, 20))),
        axis=-1, out_dtype="int8",
    )
    return op("clip")(y, a_min=-128.0, a_max=float(rng.choice([127, 90])))


@pytest.mark.parametrize("isa", ["vnni", "avx2"])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hw=st.tuples(st.integers(5, 9), st.integers(5, 9)),
    cin=st.sampled_from([3, 8, 16]),
    mid=st.sampled_from([16, 24, 32, 48]),
    k=st.sampled_from([1, 3]),
    dw=st.tuples(st.sampled_from([3, 5]), st.integers(1, 2), st.integers(0, 2)),
    shared=st.booleans(),
    threads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_a_convolution_writes_into_its_depthwise_readers_halo(
    isa, hw, cin, mid, k, dw, shared, threads, seed
):
    """conv -> depthwise: the conv's kernel stores into the depthwise kernel's padded input
    (no copy) when it is the only reader and the channels are a multiple of 16; the same bits
    as the interpreter either way, on one and two threads."""
    from partita.backends.llvm.lower.context import lower

    rng = np.random.default_rng(seed)
    x = P.var("x", (1, *hw, cin), "int8")
    y = _layer(x, rng, cin, mid, k, 1, k // 2, 1)
    kd, stride, pad = dw
    out = _layer(y, rng, mid, mid, kd, stride, pad, mid)
    body = P.Tuple([out, y]) if shared else out
    mod = P.InferType()(P.IRModule.from_expr(P.Function([x], body)))
    plan = lower(mod["main"], isa)
    halo = [kk for kk in plan.kernels if kk.params.get("prepadded")]
    assert len(halo) == (0 if shared or mid % 16 else 1)
    exe = P.build(mod, llvm_target(isa, f" -threads={threads}"))
    data = rng.integers(-128, 128, (1, *hw, cin), dtype=np.int8)
    for got, want in zip(exe.run(data), P.interpret(mod, [data])):
        assert np.array_equal(got, want)


@pytest.mark.parametrize("isa", ["vnni", "avx2"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cin=st.integers(1, 3),
    hw=st.tuples(st.integers(3, 6), st.integers(16, 40)),
    stride=st.integers(1, 2),
    pad=st.integers(0, 1),
    seed=st.integers(0, 2**16),
)
def test_images_of_one_to_three_channels_are_padded_16_pixels_at_a_time(
    isa, cin, hw, stride, pad, seed
):
    """A first layer's input (1-3 channels into 4-byte slots, rows of 16 pixels and more, the
    last pixels of a row by an overlapping shuffle) equals the interpreter."""
    rng = np.random.default_rng(seed)
    x = P.var("x", (1, *hw, cin), "int8")
    y = _layer(x, rng, cin, 16, 3, stride, pad, 1)
    mod = P.IRModule.from_expr(P.Function([x], y))
    data = rng.integers(-128, 128, (1, *hw, cin), dtype=np.int8)
    got = P.build(mod, llvm_target(isa)).run(data)[0]
    assert np.array_equal(got, P.interpret(mod, [data])[0])


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hw=st.tuples(st.integers(1, 9), st.integers(1, 21)),
    k=st.tuples(st.sampled_from([1, 3, 5]), st.sampled_from([1, 3])),
    stride=st.integers(1, 2),
    dilation=st.sampled_from([1, 2]),
    threads=st.sampled_from([1, 2]),
    quads=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_depthwise_rows_in_pairs_and_overlapping_tiles(
    hw, k, stride, dilation, threads, quads, seed
):
    """VNNI depthwise: input rows in byte quads (VPDPBUSD) or int16 pairs (VPDPWSSD), two
    output rows per step (an odd last row again with the row before), 8-pixel tiles (a row's
    last pixels again with the tile before them), one- and two-thread row ranges, strides and
    dilations: the same bits as the interpreter."""
    from partita.backends.llvm.lower import vector_plan as vplan

    mp = pytest.MonkeyPatch()
    mp.setattr(vplan, "DW_QUADS", quads)
    mp.setenv("PARTITA_REGION_CACHE", "0")  # a cached region would hide the patch
    mod, data = depthwise_graph(np.random.default_rng(seed), hw, k, stride, dilation, wmin=-127)
    try:
        got = P.build(mod, llvm_target("vnni", f" -threads={threads}")).run(data)[0]
    finally:
        mp.undo()
    assert np.array_equal(got, P.interpret(mod, [data])[0])


@pytest.mark.parametrize("isa", ISAS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=convs(), batch=st.integers(2, 3), threads=st.sampled_from(["", " -threads=2"]),
       pairs=st.booleans())
def test_convolutions_of_several_images(isa, case, batch, threads, pairs):
    """A batch of images: each convolution kernel (vector, scalar, paired-saturating through
    IM2COL for odd channel counts) computes one image and loops over the batch."""
    kind, *rest = case
    if kind == "dense":
        return
    rest[3] = {**rest[3], "batch": batch}  # geo
    accumulate = "vpmaddubsw" if pairs else "exact"
    if accumulate != "exact":
        rest[0], rest[-1] = "uint8", "tflite"  # fbgemm's pairs: uint8 activations
    if isa == "plain":
        rest[-1] = "tflite"  # the float32 stages need the vector kernels
    mod, _ = build_graph(kind, *rest, accumulate=accumulate)
    assert_equals_interpreter(mod, isa, seed=3, threads=threads)


def test_an_isa_the_cpu_lacks_is_refused(monkeypatch):
    """-isa=avxvnni where the CPU has no AVX-VNNI would build code that dies with SIGILL: it is
    refused with the host's best ISA named; auto never picks it there."""
    from partita.backends.llvm import resolve_isa
    from partita.backends.llvm.runtime import jit

    monkeypatch.setattr(jit, "host_features", lambda: "+avx2,+fma,-avxvnni")
    mod, _ = build_graph("dense", "int8", 8, 16, {"rows": 4}, 0, False, None)
    with pytest.raises(P.PartitaError, match="-isa=avxvnni needs a CPU with AVX-VNNI.*avx2"):
        P.build(mod, "llvm -isa=avxvnni")
    assert resolve_isa({}) == "avx2"
