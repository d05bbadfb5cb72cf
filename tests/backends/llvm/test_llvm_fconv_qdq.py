"""A QDQ model's float convolution (ONNX Runtime runs s8s8 QDQ convolutions in float on AVX2
CPUs): nn.conv2d in MLAS's order -> add of a dequantized int32 bias -> qnn.quantize ("onnx",
per tensor). The bias (a constant expression) and the quantize run in FCONV's epilogue
(lower/float_conv.py ``quantize_epilogue``, emit/float/conv.py ``store_quantized``): one kernel,
8-bit stores, the interpreter's bits (ties of x / scale, saturation both ways, NaN, channel
tails, both loop orders, one and two threads; `-isa=avx2`, emulated where the CPU lacks it,
and `plain`)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_checks import llvm_target
from partita.backends.llvm.emit.float import conv as fconv
from partita.backends.llvm.lower.context import lower

import partita as P
from partita.ir import Function, IRModule, TensorType, Var
from partita.ops import get_op

F32 = np.float32


def qdq_conv(n, h, w, c, o, kernel, stride, out_dtype, scale, zp, seed):
    """Integer-valued inputs and weights and a half-integer bias: the float sums are exact and
    x / scale lands on halves often (rint's ties)."""
    rng = np.random.default_rng(seed)
    x = Var("x", TensorType((n, h, w, c), "float32"))
    weights = rng.integers(-3, 4, (kernel, kernel, c, o)).astype(F32)
    pad = kernel // 2
    y = get_op("nn.conv2d")(x, weights, strides=(stride, stride), padding=(pad,) * 4,
                            dilation=(1, 1), data_layout="NHWC", kernel_layout="HWIO",
                            accumulate="mlas", threads=1)
    bias = get_op("qnn.dequantize")(rng.integers(-40, 40, o).astype(np.int32),
                                    rng.choice(F32([0.5, 0.25, 1.5]), o), np.int32(0), axis=0)
    y = get_op("add")(y, bias)
    q = get_op("qnn.quantize")(y, F32(scale), np.int32(zp), axis=-1, out_dtype=out_dtype,
                               semantics="onnx")
    return P.InferType()(IRModule({"main": Function([x], q)})), (n, h, w, c)


def check(mod, xs, target, seed, nan=False):
    kernels = lower(mod["main"], target.split("-isa=")[1].split()[0]).kernels
    assert [k.kind for k in kernels if k.kind != "FIM2COL"] == ["FCONV"]  # bias, quantize fused
    assert kernels[-1].params["quant"] and kernels[-1].params["bias"] == "n"
    exe = P.build(mod, target)
    assert [s.target for s in exe.steps] == ["llvm"]
    x = np.random.default_rng(seed).integers(-4, 5, xs).astype(F32)
    if nan:
        x.flat[:: max(1, x.size // 5)] = np.nan
    got, want = exe.run(x)[0], P.interpret(mod, [x])[0]
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    return got


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 2), h=st.integers(1, 9), w=st.integers(1, 9), c=st.integers(1, 40),
       o=st.sampled_from([1, 5, 16, 24, 40, 48]), kernel=st.sampled_from([1, 1, 3]),
       stride=st.integers(1, 2), out_dtype=st.sampled_from(["int8", "uint8"]),
       scale=st.sampled_from([0.5, 1.0, 2.0, 0.37, 3.0]), zp=st.integers(-20, 20),
       threads=st.integers(1, 2), isa=st.sampled_from(["avx2", "avx2", "plain"]),
       nan=st.booleans(), seed=st.integers(0, 99))
def test_bias_and_quantize_in_the_fconv_epilogue_equal_the_interpreter(
        n, h, w, c, o, kernel, stride, out_dtype, scale, zp, threads, isa, nan, seed):
    zp = abs(zp) + 100 if out_dtype == "uint8" else zp
    o = 5 if c == o == 1 else o  # (1 -> 1 channel is a depthwise convolution: FDW)
    mod, xs = qdq_conv(n, h, w, c, o, kernel, stride, out_dtype, scale, zp, seed)
    check(mod, xs, llvm_target(isa, f" -threads={threads}"), seed, nan)


@pytest.mark.parametrize("order", ["rows", "cols"])
def test_both_tile_orders_and_two_threads_give_the_same_bytes(order, monkeypatch, tmp_path):
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))  # the forced order is not in the key
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setattr(fconv, "FCONV_ORDER", order)
    mod, xs = qdq_conv(1, 12, 12, 40, 72, 1, 1, "int8", 0.5, -3, 3)
    one = check(mod, xs, llvm_target("avx2"), 4)
    two = check(mod, xs, llvm_target("avx2", " -threads=2"), 4)
    assert one.tobytes() == two.tobytes()
    assert len(np.unique(one)) > 50 and (one == 127).any() and (one == -128).any()


def test_a_qdq_mobilenet_sized_fconv_splits_through_both_drivers(monkeypatch, tmp_path):
    """The QDQ MobileNetV2's 14 x 14 x 192 -> 64 pointwise convolution (2.4 M multiply-adds,
    at least SPLIT_MACS): split over two threads; with the worker and without it the bytes of
    one thread and of the interpreter."""
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    mod, xs = qdq_conv(1, 14, 14, 192, 64, 1, 1, "int8", 2.0, 3, 5)
    (conv,) = [k for k in lower(mod["main"], "avx2", threads=2).kernels if k.kind == "FCONV"]
    assert conv.params.get("threads") == 2
    one = check(mod, xs, llvm_target("avx2"), 6)
    exe = P.build(mod, llvm_target("avx2", " -threads=2"))
    regions = [s.region for s in exe.steps if getattr(s.region, "modes", None) is not None]
    assert regions
    for r in regions:
        turns = iter(["pool", "alone"] * 3)
        r.modes.choose = lambda turns=turns: next(turns)  # both drivers, whatever the load
    x = np.random.default_rng(6).integers(-4, 5, xs).astype(F32)
    for _ in range(6):
        assert exe.run(x)[0].tobytes() == one.tobytes()
    assert all(len(t) >= 3 for r in regions for t in r.modes.times.values())
