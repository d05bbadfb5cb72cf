"""The exact AVX2 int8 product routes (vector_plan.EXACT_AVX2), each forced on any machine that
runs AVX2 code: VPMADDUBSW of |x| and the weights signed by x ("sign"), VPMADDUBSW with unsafe
weight pairs corrected by a sparse second product ("ubsw"), VPMADDUBSW on the weights' nibbles
("nibbles"), int16 weights into VPMADDWD ("wide"); their packing-time splits; and their
two-thread splits. The shapes and the interpreter check are kernel_checks.py's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_checks import assert_equals_interpreter, build_graph, convs, isa_available

import partita as P


@pytest.mark.parametrize("mode", ["sign", "ubsw", "nibbles", "wide"])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=convs(), wmax=st.sampled_from([127, 64, 127]),
       dw=st.sampled_from(["rows", "rows2", "taps", "mul"]),
       threads=st.sampled_from(["", " -threads=2"]))
def test_exact_avx2_products_equal_the_interpreter(mode, case, wmax, dw, threads):
    """Each exact AVX2 convolution/dense kernel, forced (vector_plan.EXACT_AVX2): VPMADDUBSW
    on weights whose unsafe pairs (same-sign pairs summing past 128 in magnitude, which would
    saturate int16) keep a safe half, the rest in a sparse second product ("ubsw"); VPMADDUBSW
    on the weights' two nibbles with int16 sums widened every few k-steps ("nibbles"); int16
    weights into VPMADDWD ("wide"). Weights over -127..127 make about a quarter of the pairs
    unsafe; ``wmax`` 64 none (no second product). Depthwise layers (``dw``): int16 pairs of
    input rows shared by two output rows and a tile of 4 (``rows``) or 2 pixels (``rows2``),
    two taps per VPMADDWD (``taps``) or one VPMULLD per tap; one thread or two (rows or
    channel panels split)."""
    if not isa_available("avx2"):
        pytest.skip("this CPU does not run avx2 code")
    from partita.backends.llvm.lower import vector_plan as vplan

    mp = pytest.MonkeyPatch()
    mp.setattr(vplan, "EXACT_AVX2", mode)
    mp.setattr(vplan, "DW_ROW_PAIRS", dw.startswith("rows"))
    mp.setattr(vplan, "DW_ROW_PAIRS_MIN_WIDTH", 1)
    mp.setattr(vplan, "DW_ROW_PAIRS_MAX_STRIDE", 2)
    mp.setattr(vplan, "DW_AVX2_TILE", 2 if dw == "rows2" else 4)
    mp.setattr(vplan, "DW_TAP_PAIRS", dw == "taps")
    mp.setenv("PARTITA_REGION_CACHE", "0")  # a cached region would hide the patch
    try:
        mod, _ = build_graph(*case, wmax=wmax)
        assert_equals_interpreter(mod, "avx2", seed=2, threads=threads)
    finally:
        mp.undo()


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), scale=st.sampled_from([16, 64, 127, 128]),
       shape=st.tuples(st.integers(1, 9), st.integers(1, 5), st.sampled_from([16, 32, 48])))
def test_ubsw_and_nibble_splits_are_safe_and_sum_to_the_weights(seed, scale, shape):
    """Packing-time checks of the exact AVX2 kernels' weights (-128 included): ubsw_split's
    main part has only safe pairs, and so have its remainders, which sum back to the weights
    and are listed for exactly the (panel, k-step)s that have any; nibble_split's parts sum
    back as 16 h + l, and ``steps`` k-steps of its pair sums fit int16."""
    from partita.backends.llvm.lower import vector_plan as vplan

    kk, c4, ocp = shape
    w = np.random.default_rng(seed).integers(-scale, min(scale, 127) + 1, (kk, c4, ocp, 4))
    w = w.astype(np.int8)
    for width in (16, 32):
        main, fix = vplan.ubsw_split(w, width)
        assert vplan.pair_safe(main.reshape(kk, c4, ocp, 2, 2)).all()
        rest = np.zeros((kk * c4, ocp, 4), np.int32)
        for g, panel in enumerate(range(0, ocp, width)):
            lo, hi = fix["off"][g], fix["off"][g + 1]
            entries = fix["w"].reshape(-1, width, 4)[lo:hi]
            assert vplan.pair_safe(entries.reshape(-1, 2, 2)).all()
            n = min(width, ocp - panel)
            rest[fix["k"][lo:hi], panel : panel + n] = entries[:, :n]
        full = main.astype(np.int32).reshape(kk * c4, ocp, 4) + rest
        assert np.array_equal(full, w.reshape(kk * c4, ocp, 4))
        unsafe = ~vplan.pair_safe(w.reshape(kk * c4, ocp, 2, 2))
        want = sum(int(unsafe[:, g : g + width].any(axis=(1, 2)).sum())
                   for g in range(0, ocp, width))
        assert fix["k"].size == want
    parts, steps = vplan.nibble_split(w)
    assert steps >= 8
    hl = parts.reshape(kk, c4, ocp // 16, 2, 16, 4).astype(np.int32)
    back = (16 * hl[:, :, :, 0] + hl[:, :, :, 1]).reshape(kk, c4, ocp, 4)
    assert np.array_equal(back, w)
    pairs = hl.reshape(*hl.shape[:-1], 2, 2)
    assert steps * 255 * np.clip(pairs, 0, None).sum(-1).max() <= 32767
    assert steps * 255 * np.clip(pairs, None, 0).sum(-1).min() >= -32768


@pytest.mark.parametrize("mode", ["ubsw", "nibbles"])
@pytest.mark.parametrize("kind", ["conv", "dense"])
def test_exact_avx2_products_split_over_two_threads(mode, kind):
    """The VPMADDUBSW kernels large enough for -threads=2 to split them (a pointwise
    convolution's pixel tiles; a dense layer's channel panels, whose second products are
    listed per panel): the same bits as the interpreter, unsafe pairs included."""
    if not isa_available("avx2"):
        pytest.skip("this CPU does not run avx2 code")
    from partita.backends.llvm.lower import lower
    from partita.backends.llvm.lower import vector_plan as vplan

    mp = pytest.MonkeyPatch()
    mp.setattr(vplan, "EXACT_AVX2", mode)
    mp.setenv("PARTITA_REGION_CACHE", "0")
    try:
        if kind == "conv":
            geo = {"hw": (16, 16), "k": (1, 1), "strides": (1, 1), "dilation": (1, 1),
                   "padding": (0, 0, 0, 0)}
            mod, _ = build_graph("conv", "int8", 64, 96, geo, 5, True, None)
        else:
            mod, _ = build_graph("dense", "uint8", 512, 520, {"rows": 3}, 6, True, None)
        (k,) = lower(P.InferType()(mod)["main"], "avx2", 2).kernels
        assert k.params.get("threads") == 2 and k.params.get(mode)
        assert_equals_interpreter(mod, "avx2", seed=3, threads=" -threads=2")
    finally:
        mp.undo()


@pytest.mark.parametrize(("mode", "channels_outer", "threads"), [
    ("nibbles", True, ""), ("nibbles", True, " -threads=2"), ("nibbles", False, ""),
    ("ubsw", True, ""), ("wide", True, " -threads=2")])
def test_pointwise_row_in_either_loop_order(mode, channels_outer, threads, tmp_path):
    """A pointwise convolution's single row of pixels, channel groups outer (vconv
    CHANNELS_OUTER: a group's weight panel stays in L1 across the pixel tiles) or pixel tiles
    outer, one thread or two (pixel tiles split): with a tail tile of pixels (11 x 13 = 143
    pixels, no multiple of any tile) and a narrower last channel group (70 channels), unsafe
    weight pairs included, the same bits as the interpreter."""
    if not isa_available("avx2"):
        pytest.skip("this CPU does not run avx2 code")
    from partita.backends.llvm.emit.int8 import vconv
    from partita.backends.llvm.lower import lower
    from partita.backends.llvm.lower import vector_plan as vplan

    mp = pytest.MonkeyPatch()
    mp.setattr(vplan, "EXACT_AVX2", mode)
    mp.setattr(vconv, "CHANNELS_OUTER", channels_outer)
    mp.setenv("PARTITA_REGION_CACHE", "0")  # a cached region would hide the patches
    mp.setenv("PARTITA_CACHE_DIR", str(tmp_path))  # and so would cached objects
    try:
        geo = {"hw": (11, 13), "k": (1, 1), "strides": (1, 1), "dilation": (1, 1),
               "padding": (0, 0, 0, 0)}
        mod, _ = build_graph("conv", "int8", 68, 70, geo, 7, True, None)
        (k,) = lower(P.InferType()(mod)["main"], "avx2", 2 if threads else 1).kernels
        assert k.params["OH"] == 1 and k.params["OW"] % k.params["R"]
        assert k.params.get(mode) and k.params.get("threads", 1) == (2 if threads else 1)
        assert_equals_interpreter(mod, "avx2", seed=4, threads=threads)
    finally:
        mp.undo()


@pytest.mark.parametrize("in_dtype", ["int8", "uint8"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), kind=st.sampled_from(["conv", "dense"]),
       cin=st.sampled_from([4, 17, 64]), cout=st.sampled_from([5, 16, 24, 40]),
       minus128=st.booleans(), threads=st.sampled_from(["", " -threads=2"]))
def test_sign_kernel_on_extreme_pairs(in_dtype, seed, kind, cin, cout, minus128, threads):
    """The sign kernel (VPMADDUBSW(|x|, VPSIGNB(w, x))) where its pair sums are largest:
    weights of +-127 (and a few small ones) against inputs at the ends of their range (int8
    -128 and 127, uint8 0 and 255, read as x ^ 0x80), so pairs reach 2 * 128 * 127 = 32512;
    with a weight of -128 the layer is no sign kernel (-128 signed stays -128) and falls back
    to another exact route. The same bits as the interpreter."""
    if not isa_available("avx2"):
        pytest.skip("this CPU does not run avx2 code")
    from partita.backends.llvm.lower import lower
    from partita.backends.llvm.lower import vector_plan as vplan

    mp = pytest.MonkeyPatch()
    mp.setattr(vplan, "EXACT_AVX2", "auto")
    mp.setenv("PARTITA_REGION_CACHE", "0")
    try:
        geo = ({"rows": 3} if kind == "dense" else
               {"hw": (5, 6), "k": (3, 1), "strides": (1, 1), "dilation": (1, 1),
                "padding": (1, 0, 1, 0)})
        values = [-127, 127, -127, 127, -1, 0, 2]
        # with -128 drawn as often as the rest together: the smallest layer (4 x 5 weights)
        # has one but for 1 seed in a million (one -128 among 8 values missed 7% of them)
        values += [-128] * len(values) if minus128 else []
        mod, _ = build_graph(kind, in_dtype, cin, cout, geo, seed, True, None,
                             wvalues=values)
        kernels = lower(P.InferType()(mod)["main"], "avx2", 1).kernels
        (conv,) = [k for k in kernels if k.kind.name == "VCONV"]
        assert bool(conv.params.get("sign")) == (not minus128)
        exe = P.build(mod, f"llvm -isa=avx2{threads}")
        ty = exe.input_types[0]
        info = np.iinfo(ty.dtype)
        rng = np.random.default_rng(seed)
        ends = np.array([info.min, info.max, info.min, info.max, info.min + 1], ty.dtype)
        data = rng.choice(ends, ty.shape)
        assert np.array_equal(exe.run(data)[0], P.interpret(mod, [data])[0])
    finally:
        mp.undo()


@pytest.mark.parametrize("cout", [8, 24, 40, 56])
@pytest.mark.parametrize("kernel", ["1x1", "3x3"])
def test_sign_kernel_skips_the_padding_half(cout, kernel, monkeypatch):
    """Output channels ending in the lower half of a 16-channel vector (24 = 16 + 8; 40 and 56
    with a narrower last group): the sign kernel leaves the padding half's products out
    (vconv._live_halves) and the real channels keep their bits, on 1 x 1 rows (channel groups
    outer, a constant first channel) and on 3 x 3 ones, at the ends of the input range."""
    if not isa_available("avx2"):
        pytest.skip("this CPU does not run avx2 code")
    from partita.backends.llvm.emit.int8 import vconv

    skipped = []
    real = vconv._live_halves

    def spy(p, o0, vecs):
        halves = real(p, o0, vecs)
        skipped.append(halves is not None and 1 in halves)
        return halves

    monkeypatch.setattr(vconv, "_live_halves", spy)
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    geo = ({"hw": (3, 7), "k": (1, 1), "strides": (1, 1), "dilation": (1, 1),
            "padding": (0, 0, 0, 0)} if kernel == "1x1" else
           {"hw": (4, 5), "k": (3, 3), "strides": (1, 1), "dilation": (1, 1),
            "padding": (1, 1, 1, 1)})
    mod, _ = build_graph("conv", "int8", 20, cout, geo, cout, True, None,
                         wvalues=[-127, 127, -127, 127, -1, 0, 3])
    exe = P.build(mod, "llvm -isa=avx2")
    assert any(skipped)
    ty = exe.input_types[0]
    data = np.random.default_rng(cout).choice(np.array([-128, 127, -128, 127, 5], np.int8),
                                              ty.shape)
    assert np.array_equal(exe.run(data)[0], P.interpret(mod, [data])[0])
