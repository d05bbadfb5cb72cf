"""The LLVM backend's int8 output stage and tables against the interpreter, bit for bit, on every
ISA tier (emulated where this CPU lacks one): TFLite's output stage on accumulators across the
int32 range, the vector kernels' shortcuts (taken only where exact; 'tflite_builtin' after
saturating pairs), the one- and two-input tables (LUT, LUT2) beside TRANSPOSE, FMEAN, and the
profile of every fused kernel. The conv / dense / depthwise kernels: test_llvm_kernels.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_checks import ISAS, assert_equals_interpreter, build_graph, llvm_target

import partita as P


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


@pytest.mark.parametrize("isa, kernel", [("avx2", "VCONV"), ("plain", "VCONV")])
def test_pair_saturation_with_the_tflite_builtin_output_stage(isa, kernel):
    """The vector kernels' 'tflite_builtin' output stage (ties upward twice) after saturating
    pairs; -isa=plain runs the same kernel as generic vector IR. Bit for bit either way."""
    mod, _ = build_graph("dense", "uint8", 8, 16, {"rows": 4}, 0, False, None,
                         semantics="tflite_builtin", accumulate="vpmaddubsw")
    kinds = P.build(mod, llvm_target(isa)).steps[0].region.kernels
    assert [k.split()[0] for k in kinds] == [kernel]
    assert_equals_interpreter(mod, isa, seed=4)


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
