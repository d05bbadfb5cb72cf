"""Each conv/dense kernel variant of the LLVM backend (vnni, avxvnni, avx2, plain) equals the
interpreter bit for bit on hypothesis-generated shapes, strides, paddings, dilations, depthwise
groups, dtypes and per-channel requantization: every variant on every x86-64 CPU (natively
where the CPU runs it, else through -emulate=yes: backends/llvm/emit/emulate.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import partita as P

ISAS = ["vnni", "avxvnni", "avx2", "plain"]


def _isa_available(isa: str) -> bool:
    from partita.backends.llvm.runtime.jit import amx_permitted, runs_isa

    return amx_permitted() if isa == "amx" else runs_isa(isa)


def llvm_target(isa: str, rest: str = "") -> str:
    """``llvm -isa=ISA`` and ``rest``; where this CPU lacks the ISA, with ``-emulate=yes``
    (its instructions as exact stand-ins, backends/llvm/emit/emulate.py), so every kernel
    family is checked on every x86-64 machine."""
    return f"llvm -isa={isa}{rest}" + ("" if _isa_available(isa) else " -emulate=yes")


@st.composite
def convs(draw):
    """A fused qnn.conv2d/dense -> bias -> requantize(tflite) -> clip with random parameters."""
    kind = draw(st.sampled_from(["conv", "depthwise", "dense"]))
    in_dtype = draw(st.sampled_from(["int8", "uint8"]))
    cin = draw(st.sampled_from([1, 3, 4, 8, 17, 32]))
    cout = cin if kind == "depthwise" else draw(st.sampled_from([1, 5, 16, 24, 40, 70]))
    if kind == "dense":
        rows = draw(st.integers(1, 9))
        geo = {"rows": rows}
    else:
        k = draw(st.sampled_from([1, 3, 5])), draw(st.sampled_from([1, 3]))
        h, w = draw(st.integers(k[0], 9)), draw(st.integers(k[1], 9))
        geo = {
            "hw": (h, w),
            "k": k,
            "strides": (draw(st.integers(1, 2)), draw(st.integers(1, 2))),
            "dilation": (draw(st.sampled_from([1, 1, 2])),) * 2,
            "padding": tuple(draw(st.integers(0, 2)) for _ in range(4)),
        }
        dh, dw = geo["dilation"]
        if h + geo["padding"][0] + geo["padding"][2] < dh * (k[0] - 1) + 1:
            geo["dilation"] = (1, 1)
        if w + geo["padding"][1] + geo["padding"][3] < dw * (k[1] - 1) + 1:
            geo["dilation"] = (1, 1)
    seed = draw(st.integers(0, 2**16))
    per_channel = draw(st.booleans())
    clip = draw(st.sampled_from([None, (0, 127), (-20, 60)]))
    semantics = draw(st.sampled_from(["tflite", "tflite_builtin", "onnx", "tflite_double"]))
    return kind, in_dtype, cin, cout, geo, seed, per_channel, clip, semantics


def build_graph(
    kind, in_dtype, cin, cout, geo, seed, per_channel, clip, semantics="tflite",
    accumulate="exact", pre_clip=False, wmax=127, wvalues=None,
):
    """The fused graph; ``pre_clip``: the convolution reads a clip of the input (a buffer of
    the segment's arena) instead of the input itself; ``wvalues``: the weights drawn from
    these values (else uniform over -wmax..wmax)."""
    rng = np.random.default_rng(seed)
    op = P.get_op
    info = np.iinfo(in_dtype)
    in_zp = int(rng.integers(info.min, info.max + 1))
    if kind == "dense":
        x = P.var("x", (geo["rows"], cin), in_dtype)
        wshape = (cout, cin)
    else:
        x = P.var("x", (geo.get("batch", 1), *geo["hw"], cin), in_dtype)
        wshape = (cout, *geo["k"], 1 if kind == "depthwise" else cin)
    data = op("clip")(x, a_min=float(info.min + 1), a_max=float(info.max)) if pre_clip else x
    w = rng.integers(-wmax, wmax + 1, wshape, dtype=np.int8)
    if wvalues is not None:
        w = rng.choice(np.asarray(wvalues, np.int8), wshape)
    n = cout if per_channel else 1
    w_scale = (rng.uniform(0.002, 0.05, n)).astype(np.float32)
    in_scale = np.float32(rng.uniform(0.01, 0.1))
    args = [
        data,
        P.const(w),
        P.const(np.int32(in_zp)),
        P.const(np.zeros(n, np.int32) if n > 1 else np.int32(0)),
    ]
    args += [P.const(in_scale), P.const(w_scale if n > 1 else w_scale[0])]
    if kind == "dense":
        y = op("qnn.dense")(*args, accumulate=accumulate)
    else:
        y = op("qnn.conv2d")(
            *args,
            strides=geo["strides"],
            padding=geo["padding"],
            dilation=geo["dilation"],
            groups=cin if kind == "depthwise" else 1,
            data_layout="NHWC",
            kernel_layout="OHWI",
            accumulate=accumulate,
        )
    y = op("nn.bias_add")(y, P.const(rng.integers(-3000, 3000, cout, dtype=np.int32)), axis=-1)
    # now and then a multiplier above 1 (TFLite's left shift before the high multiply)
    out_scale = np.float32(rng.uniform(0.02, 0.3) if rng.random() < 0.7 else 1e-4)
    rq_scale = (in_scale * w_scale).astype(np.float32)
    y = op("qnn.requantize")(
        y,
        P.const(rq_scale if n > 1 else rq_scale[0]),
        P.const(np.int32(0)),
        P.const(out_scale),
        P.const(np.int32(rng.integers(-20, 20))),
        axis=-1,
        out_dtype="int8",
        semantics=semantics,
    )
    if clip is not None:
        y = op("clip")(y, a_min=float(clip[0]), a_max=float(clip[1]))
    return P.IRModule.from_expr(P.Function([x], y)), x


def assert_equals_interpreter(mod, isa: str, seed: int, threads: str = "") -> None:
    """The ``isa`` build of ``mod`` on inputs over the whole 8-bit range."""
    exe = P.build(mod, llvm_target(isa, threads))
    ty = exe.input_types[0]
    info = np.iinfo(ty.dtype)
    data = np.random.default_rng(seed).integers(
        info.min, info.max, ty.shape, dtype=ty.dtype, endpoint=True
    )
    assert np.array_equal(exe.run(data)[0], P.interpret(mod, [data])[0])


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


def test_transpose_and_elementwise_tables():
    """transpose (any dtype) is a real TRANSPOSE kernel; only elementwise ops become tables."""
    text = """
def @main(%x: Tensor[(1, 3, 4, 5), uint8]) {
  %0 = transpose(%x, axes=[0, 2, 3, 1]);
  %1 = qnn.dequantize(%0, 0.5f, 3);
  transpose(%1, axes=[3, 1, 0, 2])
}"""
    mod = P.parse(text)
    exe = P.build(mod, "llvm")
    x = np.random.default_rng(0).integers(0, 256, (1, 3, 4, 5), dtype=np.uint8)
    for got, want in zip(exe.run(x), P.interpret(mod, [x])):
        assert got.dtype == want.dtype and np.array_equal(got, want)


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


@pytest.mark.parametrize("timed", [True, False])
def test_profile_times_every_fused_kernel_and_returns_the_same_outputs(timed):
    """The timed driver's stamps (``timed``), or for a region saved before it had one, each
    kernel called on its own."""
    from common_graphs import int8_convnet

    mod = int8_convnet()
    region = P.build(mod, "llvm").steps[0].region
    if not timed:
        region._timed = None
    x = np.random.default_rng(3).integers(-128, 128, (1, 8, 8, 4), dtype=np.int8)
    outputs, profile = region.profile([x])
    assert np.array_equal(outputs[0], P.interpret(mod, [x])[0])
    assert [p.name for p in profile] == [k.split(" ", 1)[1] for k in region.kernels]
    assert all(p.kind == "cpu kernel" and p.time_s > 0 for p in profile)
    assert all((p.metrics.get("run") == "one thread") == timed for p in profile)


def test_float_mean_exact_where_its_sum_is_exact():
    """A float32 mean over H, W of dequantized 8-bit data is bit-exact (FMEAN: float64 sums of
    such values are exact in any order); of arbitrary floats it compiles to FREDUCE, whose
    sequential float64 sum may differ from numpy's pairwise one in the last float32 ulp."""
    text = """
def @main(%x: Tensor[(1, 7, 9, 5), uint8]) {
  %0 = qnn.dequantize(%x, 0.0371f, 100);
  mean(%0, axis=[1, 2], keepdims=True)
}"""
    mod = P.parse(text)
    x = np.random.default_rng(0).integers(0, 256, (1, 7, 9, 5), dtype=np.uint8)
    got, want = P.build(mod, "llvm").run(x)[0], P.interpret(mod, [x])[0]
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    floats = P.parse("""
def @main(%x: Tensor[(1, 7, 9, 5), float32]) {
  mean(%x, axis=[1, 2], keepdims=True)
}""")
    y = np.random.default_rng(1).standard_normal((1, 7, 9, 5)).astype(np.float32)
    got, want = P.build(floats, "llvm").run(y)[0], P.interpret(floats, [y])[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("isa", ISAS)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    size=st.integers(1, 70),
    dtype=st.sampled_from(["int8", "uint8"]),
    semantics=st.sampled_from(["tflite", "onnx"]),
    op=st.sampled_from(["qnn.add", "qnn.subtract", "qnn.mul"]),
    broadcast=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_two_input_tables_equal_the_interpreter(isa, size, dtype, semantics, op, broadcast, seed):
    """qnn.add/subtract/mul of two 8-bit tensors (LUT2): the vector variants gather whole
    vectors of same-shape inputs from the 256 x 256 table (sizes off the vector width test
    the scalar tail), broadcasting inputs take the scalar loop."""
    rng = np.random.default_rng(seed)
    shapes = [(1, 3, size), (1, 1, size) if broadcast else (1, 3, size)]
    dtypes = [dtype, dtype]
    xs = [P.var(f"x{i}", shape=s, dtype=dtype) for i, s in enumerate(shapes)]

    def q(dtype):
        lo = 0 if dtype == "uint8" else -128
        zp = np.int32(lo + rng.integers(0, 256))
        return P.const(np.float32(rng.uniform(0.01, 0.2))), P.const(zp)

    (s1, z1), (s2, z2), (so, zo) = q(dtype), q(dtype), q(dtype)
    y = P.get_op(op)(xs[0], xs[1], s1, z1, s2, z2, so, zo, semantics=semantics)
    mod = P.IRModule.from_expr(P.Function(xs, y))
    exe = P.build(mod, llvm_target(isa))
    data = [rng.integers(np.iinfo(d).min, np.iinfo(d).max, s, dtype=d, endpoint=True)
            for s, d in zip(shapes, dtypes)]
    assert np.array_equal(exe.run(*data)[0], P.interpret(mod, data)[0])


def test_output_stage_shortcuts_are_taken_only_where_exact():
    """The zero point folds into the rounding constant only when no int32 sum can wrap; the
    sign mask goes only when every channel shifts; the clamp becomes a saturating narrowing
    only for the type's whole range."""
    from partita.backends.llvm.lower.vector_stage import stage_flags as _stage_flags

    def consts(corr, e):
        e = np.asarray(e, np.int32)
        return {"corr": np.asarray(corr, np.int32), "rshift": e, "rnd": (1 << e) >> 1,
                "ozp": np.full(e.size, 5, np.int32), "mult": np.full(e.size, 3 << 29, np.int32)}

    params = {"rounding": "tflite", "rq_zp": 0, "left": False, "out_zp": 5, "lo": -128, "hi": 127}
    c = consts([100, -100], [3, 7])
    flags = _stage_flags(params, c, np.array([1000, 2000]))
    assert flags == {"fold_zp": True, "round_all": True, "saturate": "int8", "umul": True,
                     "offset": 1 << 30}
    assert c["rnd"].tolist() == [4 + (5 << 3), 64 + (5 << 7)] and not c["ozp"].any()
    # every sum is far below 2^30: the accumulators start 2^30 higher, the addends lose
    # 2^30 * 2M and 2^32, so high32(x' * 2M + addend) + (x' >> 30) is SRDHM(x, M) + rnd,
    # minus RDBPOT's 1 for negative x
    assert c["corr"].tolist() == [100 + (1 << 30), -100 + (1 << 30)]
    x = np.array([-(1 << 29), -12345, -1, 0, 1, 999, (1 << 29) - 1], np.int64)
    for ch, h in ((0, c["heven"][0]), (1, c["hodd"][0])):
        m, rnd = int(3 << 29), int(c["rnd"][ch])
        xo = x + (1 << 30)
        got = ((xo * (2 * m) + int(h)) >> 32) + (xo >> 30)  # the 64-bit sum's high half
        want = ((x * m + (1 << 30)) >> 31) + rnd - (x < 0)  # TFLite's SRDHM (m > 0), + rnd
        assert got.tolist() == want.tolist()
    c = consts([2**31 - 2**10, 0], [0, 7])  # |corr| + 255 * 1000 would wrap
    flags = _stage_flags({**params, "lo": -100}, c, np.array([1000, 2000]))
    assert flags == {"fold_zp": False, "round_all": False, "saturate": False, "umul": True,
                     "offset": 0}
    # the unsigned form's constants: 2M mod 2^32, and -2M - [e > 0] for negative accumulators
    assert c["mult2"].view(np.uint32).tolist() == [3 << 30] * 2
    assert c["negc"].view(np.uint32).tolist() == [(1 << 32) - (3 << 30), (1 << 32) - (3 << 30) - 1]
    assert c["ozp"].tolist() == [5, 5]
    c = consts([2**30 - 2**10, 0], [3, 7])  # every channel shifts, but a sum may reach 2^30
    assert _stage_flags(params, c, np.array([1000, 2000]))["offset"] == 0
    assert c["corr"].tolist() == [2**30 - 2**10, 0]
    assert not _stage_flags({**params, "rounding": "onnx"}, consts([0], [1]), np.ones(1))["fold_zp"]


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


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("seed", [0, 1])
def test_output_stage_on_accumulators_across_the_int32_range(isa, seed):
    """TFLite's output stage on accumulators from -2^31 to 2^31 (a dense layer of depth 1 with
    large biases) and multipliers below and above 1 (right shifts 0-30, left shifts), against
    the interpreter: the vector kernels' shortcuts (unsigned high multiply, folded zero point,
    saturating narrowing) must agree everywhere, including x < 0 with SRDHM(x, M) = 0."""
    rng = np.random.default_rng(seed)
    cout = 64
    x = P.var("x", (256, 1), "int8")
    y = P.get_op("qnn.dense")(
        x, P.const(rng.choice([-127, -1, 1, 127], (cout, 1)).astype(np.int8)),
        P.const(np.int32(0)), P.const(np.int32(0)),
        P.const(np.float32(1.0)), P.const(np.ones(cout, np.float32)),
    )
    magnitude = rng.choice([2**8, 2**16, 2**24, 2**30], cout)
    bias = (rng.uniform(-1, 1, cout) * magnitude).astype(np.int32)
    y = P.get_op("nn.bias_add")(y, P.const(bias), axis=-1)
    scale = (2.0 ** rng.uniform(-30, 3, cout)).astype(np.float32)
    y = P.get_op("qnn.requantize")(
        y, P.const(scale), P.const(np.int32(0)), P.const(np.float32(1.0)),
        P.const(np.int32(rng.integers(-128, 128))), axis=-1, out_dtype="int8",
    )
    mod = P.IRModule.from_expr(P.Function([x], y))
    data = np.arange(-128, 128, dtype=np.int8).reshape(256, 1)
    got = P.build(mod, llvm_target(isa)).run(data)[0]
    assert np.array_equal(got, P.interpret(mod, [data])[0])


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


def depthwise_graph(rng, hw, k, stride, dilation, wmin=-128):
    """A 32-channel int8 depthwise qnn.conv2d with "same" padding, per-channel requantize to
    int8, weights from [wmin, 127]; and an input over the whole int8 range."""
    c = 32
    pad = (k[0] // 2 * dilation, k[1] // 2 * dilation) * 2
    x = P.var("x", (1, *hw, c), "int8")
    y = P.get_op("qnn.conv2d")(
        x, P.const(rng.integers(wmin, 128, (c, *k, 1), dtype=np.int8)),
        P.const(np.int32(rng.integers(-128, 128))), P.const(np.int32(0)),
        P.const(np.float32(0.05)), P.const(rng.uniform(0.002, 0.05, c).astype(np.float32)),
        strides=(stride, stride), padding=pad, dilation=(dilation, dilation), groups=c,
        data_layout="NHWC", kernel_layout="OHWI",
    )
    y = P.get_op("qnn.requantize")(
        y, P.const(rng.uniform(1e-4, 2e-3, c).astype(np.float32)), P.const(np.int32(0)),
        P.const(np.float32(0.1)), P.const(np.int32(3)), axis=-1, out_dtype="int8",
    )
    mod = P.IRModule.from_expr(P.Function([x], y))
    return mod, rng.integers(-128, 128, (1, *hw, c), dtype=np.int8)


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


@pytest.mark.parametrize("isa, kernel", [("avx2", "VCONV"), ("plain", "VCONV")])
def test_pair_saturation_with_the_tflite_builtin_output_stage(isa, kernel):
    """The vector kernels' 'tflite_builtin' output stage (ties upward twice) after saturating
    pairs; -isa=plain runs the same kernel as generic vector IR. Bit for bit either way."""
    mod, _ = build_graph("dense", "uint8", 8, 16, {"rows": 4}, 0, False, None,
                         semantics="tflite_builtin", accumulate="vpmaddubsw")
    kinds = P.build(mod, llvm_target(isa)).steps[0].region.kernels
    assert [k.split()[0] for k in kinds] == [kernel]
    assert_equals_interpreter(mod, isa, seed=4)
