"""Hand-built TFLite models (tflbuild.py) for what the converter-made test models lack: float
graphs, uint8 kernels, RELU_N1_TO_1, SQUEEZE without a converter rewrite, and the unsupported-
operator report."""

from __future__ import annotations

import numpy as np
import pytest
from partita.frontends import from_tflite
from partita.frontends.tflite import UnsupportedOperatorError
from tflbuild import Model, Op, T, build
from tflite_cases import SEMANTICS, Oracle, assert_same

from partita import interpret
from partita.ir import iter_calls

RNG = np.random.default_rng(20240611)


def w(*shape, scale=0.3):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


def opt(cls, **fields):
    return (cls, fields)


SAME, VALID = 0, 1
RELU, RELU_N1_TO_1, RELU6 = 1, 2, 3


def float_model() -> Model:
    """One float graph through the float converters, each with its options."""
    t = [T("image", (1, 8, 8, 3)),
         T("conv_w", (6, 3, 3, 3), data=w(6, 3, 3, 3)), T("conv_b", (6,), data=w(6)),
         T("conv", (1, 4, 4, 6)),
         T("dw_w", (1, 3, 3, 12), data=w(1, 3, 3, 12)), T("dw_b", (12,), data=w(12)),
         T("dw", (1, 4, 4, 12)),
         T("pool", (1, 2, 2, 12)), T("avg", (1, 4, 4, 12)), T("sig", (1, 4, 4, 12)),
         T("mul", (1, 4, 4, 12)), T("mean", (1, 1, 1, 12)), T("flat", (1, 12)),
         T("fc_w", (5, 12), data=w(5, 12)), T("fc_b", (5,), data=w(5)), T("fc", (1, 5)),
         T("soft", (1, 5)), T("hsw", (1, 4, 4, 12)), T("leaky", (1, 4, 4, 12)),
         T("size", (2,), "int32", data=np.array([7, 5], np.int32)), T("resized", (1, 7, 5, 12)),
         T("relu1", (1, 7, 5, 12)), T("tanh", (1, 7, 5, 12)),
         T("axes", (2,), "int32", data=np.array([1, 2], np.int32))]
    ops = [Op("CONV_2D", [0, 1, 2], [3], opt("Conv2DOptions", Padding=SAME, StrideW=2,
                                               StrideH=2, FusedActivationFunction=RELU6)),
           Op("DEPTHWISE_CONV_2D", [3, 4, 5], [6],
              opt("DepthwiseConv2DOptions", Padding=SAME, StrideW=1, StrideH=1,
                  DepthMultiplier=2, FusedActivationFunction=RELU_N1_TO_1)),
           Op("MAX_POOL_2D", [6], [7], opt("Pool2DOptions", Padding=VALID, StrideW=2,
                                            StrideH=2, FilterWidth=2, FilterHeight=2)),
           Op("AVERAGE_POOL_2D", [6], [8], opt("Pool2DOptions", Padding=SAME, StrideW=1,
                                                StrideH=1, FilterWidth=3, FilterHeight=3)),
           Op("LOGISTIC", [8], [9]),
           Op("MUL", [9, 6], [10], opt("MulOptions", FusedActivationFunction=RELU)),
           Op("MEAN", [10, 23], [11], opt("ReducerOptions", KeepDims=True)),
           Op("RESHAPE", [11], [12], opt("ReshapeOptions", NewShape=[1, 12])),
           Op("FULLY_CONNECTED", [12, 13, 14], [15], opt("FullyConnectedOptions")),
           Op("SOFTMAX", [15], [16], opt("SoftmaxOptions", Beta=1.5)),
           Op("HARD_SWISH", [10], [17]),
           Op("LEAKY_RELU", [17], [18], opt("LeakyReluOptions", Alpha=0.2)),
           Op("RESIZE_BILINEAR", [18, 19], [20],
              opt("ResizeBilinearOptions", HalfPixelCenters=True)),
           Op("RELU_N1_TO_1", [20], [21]),
           Op("TANH", [21], [22])]
    return Model(t, ops, [0], [16, 22])


def test_float_model_within_tolerance():
    data = build(float_model())
    oracle = Oracle(data, "ref")
    mod = from_tflite(data)
    assert not [c for c in iter_calls(mod["main"]) if c.op_name.startswith("qnn.")]
    for _ in range(3):
        x = oracle.random_inputs(RNG)
        for got, want in zip(interpret(mod, x), oracle(x)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def q(name, shape, dtype, scale, zp, data=None, qdim=0):
    scale = scale if isinstance(scale, list) else [scale]
    zp = zp if isinstance(zp, list) else [zp] * len(scale)
    return T(name, shape, dtype, data=data, scale=scale, zp=zp, qdim=qdim)


def uint8_model() -> Model:
    """A legacy uint8 graph: uint8 conv (per-tensor weights with a zero point), average pool,
    add, fully connected and logistic, each with uint8 quantization."""
    s_in, s_w, s_fw = 0.02, 0.01, 0.015
    conv_w = RNG.integers(0, 256, (4, 3, 3, 3)).astype(np.uint8)
    t = [q("x", (1, 6, 6, 3), "uint8", s_in, 128),
         q("cw", (4, 3, 3, 3), "uint8", s_w, 120, conv_w),
         q("cb", (4,), "int32", s_in * s_w, 0, RNG.integers(-500, 500, 4).astype(np.int32)),
         q("conv", (1, 6, 6, 4), "uint8", 0.05, 100),
         q("pool", (1, 3, 3, 4), "uint8", 0.05, 100),
         q("y", (1, 3, 3, 4), "uint8", 0.04, 90),
         q("sum", (1, 3, 3, 4), "uint8", 0.07, 110),
         q("flat", (1, 36), "uint8", 0.07, 110),
         q("fw", (6, 36), "uint8", s_fw, 130,
           RNG.integers(0, 256, (6, 36)).astype(np.uint8)),
         q("fb", (6,), "int32", 0.07 * s_fw, 0, RNG.integers(-300, 300, 6).astype(np.int32)),
         q("fc", (1, 6), "uint8", 0.1, 128),
         q("sig", (1, 6), "uint8", 1 / 256, 0),
         T("size", (2,), "int32", data=np.array([5, 7], np.int32)),
         q("bilinear", (1, 5, 7, 4), "uint8", 0.05, 100),
         q("nearest", (1, 5, 7, 4), "uint8", 0.05, 100)]
    ops = [Op("CONV_2D", [0, 1, 2], [3], opt("Conv2DOptions", Padding=SAME, StrideW=1,
                                               StrideH=1, FusedActivationFunction=RELU6)),
           Op("AVERAGE_POOL_2D", [3], [4], opt("Pool2DOptions", Padding=VALID, StrideW=2,
                                                StrideH=2, FilterWidth=2, FilterHeight=2)),
           Op("ADD", [4, 5], [6], opt("AddOptions", FusedActivationFunction=RELU_N1_TO_1)),
           Op("RESHAPE", [6], [7], opt("ReshapeOptions", NewShape=[1, 36])),
           Op("FULLY_CONNECTED", [7, 8, 9], [10], opt("FullyConnectedOptions")),
           Op("LOGISTIC", [10], [11]),
           Op("RESIZE_BILINEAR", [4, 12], [13], opt("ResizeBilinearOptions", AlignCorners=True)),
           Op("RESIZE_NEAREST_NEIGHBOR", [4, 12], [14],
              opt("ResizeNearestNeighborOptions", HalfPixelCenters=True))]
    return Model(t, ops, [0, 5], [11, 10, 13, 14])


def neon_tails_model() -> Model:
    """Sizes that leave NEON tails in the optimized kernels: (1, 3, 5, 20) is 300 values (8-
    and 16-value blocks leave 4 and 12) and 20 channels (8-channel blocks leave 4, 16-channel
    blocks leave 4): QUANTIZE float -> int8, a depthwise conv without activation, a requantizing
    QUANTIZE, MEAN over H, W with keep_dims, DEQUANTIZE."""
    dw = RNG.integers(-127, 128, (1, 3, 3, 20)).astype(np.int8)
    t = [T("x", (1, 3, 5, 20)), q("q", (1, 3, 5, 20), "int8", 0.01, 3),
         q("w", (1, 3, 3, 20), "int8", list(RNG.uniform(0.002, 0.01, 20)), 0, dw, qdim=3),
         q("b", (20,), "int32", 1.0, 0, RNG.integers(-2000, 2000, 20).astype(np.int32)),
         q("d", (1, 3, 5, 20), "int8", 0.03, -2), q("r", (1, 3, 5, 20), "int8", 0.07, 5),
         T("axes", (2,), "int32", data=np.array([1, 2], np.int32)),
         q("m", (1, 1, 1, 20), "int8", 0.02, -1), T("f", (1, 3, 5, 20))]
    ops = [Op("QUANTIZE", [0], [1]),
           Op("DEPTHWISE_CONV_2D", [1, 2, 3], [4],
              opt("DepthwiseConv2DOptions", Padding=SAME, StrideW=1, StrideH=1,
                  DepthMultiplier=1)),
           Op("QUANTIZE", [4], [5]),
           Op("MEAN", [5, 6], [7], opt("ReducerOptions", KeepDims=True)),
           Op("DEQUANTIZE", [5], [8])]
    return Model(t, ops, [0], [7, 8])


def int8_relu_model() -> Model:
    """RELU_N1_TO_1 and RELU as standalone int8 operators, SQUEEZE and a fused RELU_N1_TO_1."""
    t = [q("x", (1, 1, 4, 8), "int8", 0.05, 3), q("r1", (1, 1, 4, 8), "int8", 1 / 127, 0),
         q("r", (1, 1, 4, 8), "int8", 0.03, -128), q("sq", (4, 8), "int8", 0.03, -128),
         q("c", (8,), "int8", 0.04, -7, RNG.integers(-128, 128, 8).astype(np.int8)),
         q("sub", (4, 8), "int8", 0.02, 1)]
    ops = [Op("RELU_N1_TO_1", [0], [1]), Op("RELU", [1], [2]),
           Op("SQUEEZE", [2], [3], opt("SqueezeOptions", SqueezeDims=[0, 1])),
           Op("SUB", [3, 4], [5], opt("SubOptions", FusedActivationFunction=RELU_N1_TO_1))]
    return Model(t, ops, [0], [5, 1])


@pytest.mark.parametrize("kernels", ["ref", "builtin"])
@pytest.mark.parametrize("make", [uint8_model, int8_relu_model, neon_tails_model],
                         ids=["uint8", "int8_relu", "neon_tails"])
def test_quantized_crafted_models_bit_exact(make, kernels):
    data = build(make())
    oracle = Oracle(data, kernels)
    mod = from_tflite(data, semantics=SEMANTICS[kernels])
    for _ in range(4):
        x = oracle.random_inputs(RNG)
        assert_same(interpret(mod, x), oracle(x), f"{make.__name__} vs {kernels}")


def test_every_unsupported_operator_is_listed_at_once():
    """Two unsupported operators (one custom), one after a supported one and one fed by an
    unsupported one's output: all are reported with index, name and tensors; nothing
    downstream of them is reported twice."""
    t = [T("x", (1, 4)), T("a", (1, 4)), T("b", (1, 4)), T("c", (1, 4)), T("d", (1, 4))]
    ops = [Op("RELU", [0], [1]), Op("FLOOR", [1], [2]), Op("CUSTOM(MyOp)", [0], [3]),
           Op("ADD", [2, 3], [4], opt("AddOptions"))]
    with pytest.raises(UnsupportedOperatorError) as info:
        from_tflite(build(Model(t, ops, [0], [4])))
    listed = [(i, name) for i, name, *_ in info.value.unsupported]
    assert listed == [(1, "FLOOR"), (2, "CUSTOM(MyOp)")]
    text = str(info.value)
    assert "2 unsupported operators" in text
    assert "#1 FLOOR" in text and "'a'" in text and "'b'" in text
    assert "#2 CUSTOM(MyOp)" in text and "'c'" in text


def test_unsupported_operator_options_are_reported():
    """A supported operator with an option partita does not model (a fused TANH) joins the
    report with the reason."""
    t = [T("x", (1, 4)), T("y", (1, 4)), T("z", (1, 4))]
    ops = [Op("ADD", [0, 1], [2], opt("AddOptions", FusedActivationFunction=4))]
    with pytest.raises(UnsupportedOperatorError, match=r"#0 ADD: fused activation TANH"):
        from_tflite(build(Model(t, ops, [0, 1], [2])))


def test_input_shapes_fill_a_dynamic_batch():
    """A float conv declared for batch 1 with a dynamic batch signature, run with batch 3:
    each image gives what it gives alone."""
    t = [T("x", (1, 6, 6, 3), signature=(-1, 6, 6, 3)),
         T("w", (4, 3, 3, 3), data=w(4, 3, 3, 3)), T("y", (1, 6, 6, 4))]
    ops = [Op("CONV_2D", [0, 1], [2], opt("Conv2DOptions", StrideW=1, StrideH=1))]
    data = build(Model(t, ops, [0], [2]))
    one = from_tflite(data)
    three = from_tflite(data, input_shapes={"x": (3, 6, 6, 3)})
    assert three["main"].params[0].type_annotation.shape == (3, 6, 6, 3)
    x = RNG.uniform(-1, 1, (3, 6, 6, 3)).astype(np.float32)
    batch = interpret(three, [x])[0]
    assert batch.shape == (3, 6, 6, 4)
    for i in range(3):
        np.testing.assert_array_equal(batch[i:i + 1], interpret(one, [x[i:i + 1]])[0])
