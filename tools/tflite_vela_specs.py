"""Test models of the operators Vela runs on the Ethos-U NPU that partita added last: for each,
a one-op model and an in-graph model (the op between two convolutions, as in a network), all
made by TFLite's converter. Appended to tflite_op_specs.OP_SPECS."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tflite_spec_builders import Inp, Spec, unary, want


def _c(a) -> tf.Tensor:
    return tf.constant(np.asarray(a, np.float32))


def in_graph(fn, act=None, cin=4, mid=8, hw=8):
    """x -> 3x3 conv (+bias, act: tanh or sigmoid) -> fn -> 1x1 conv (+bias), unless fn's
    result is not a feature map (ARG_MAX: the model ends there)."""

    def build(rng):
        w1 = _c(rng.normal(size=(3, 3, cin, mid)) / np.sqrt(9 * cin))
        b1 = _c(rng.normal(0, 0.2, mid))

        def body(x):
            y = tf.nn.conv2d(x, w1, 1, "SAME") + b1
            y = {None: y, "sigmoid": tf.sigmoid(y), "tanh": tf.tanh(y)}[act]
            y = fn(y)
            if y.dtype != tf.float32:
                return y
            c = y.shape[-1]
            w2 = _c(rng.normal(size=(1, 1, c, 8)) / np.sqrt(c))
            return tf.nn.conv2d(y, w2, 1, "SAME") + _c(rng.normal(0, 0.2, 8))

        return body, [Inp((1, hw, hw, cin))]

    return build


def _prelu(alpha):
    a = _c(alpha)
    # Keras PReLU's form, which the converter fuses into PRELU
    return lambda x: tf.nn.relu(x) + (-a) * tf.nn.relu(-x)


def relu_to_relu_0_to_1(model_bytes: bytes) -> bytes:
    """Rewrite the model's one RELU as RELU_0_TO_1: TensorFlow 2.21's converter writes
    min(max(x, 0), 1) as RELU + MINIMUM and has no other spelling of the op; the RELU's
    output quantization (calibrated on [0, 2]) holds [0, 1] too."""
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    m = flatbuffer_utils.read_model_from_bytearray(bytearray(model_bytes))
    relu = schema.BuiltinOperator.RELU
    (code,) = [c for c in m.operatorCodes if max(c.builtinCode, c.deprecatedBuiltinCode) == relu]
    code.builtinCode = schema.BuiltinOperator.RELU_0_TO_1
    code.deprecatedBuiltinCode = schema.BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES
    code.version = 1  # the only version TFLite registers (it takes float32 and int8)
    return bytes(flatbuffer_utils.convert_object_to_bytearray(m))


def int8_between_dequantize_and_quantize(op_name: str):
    """A patch: TensorFlow 2.21's converter keeps ELU and NEG in float, as DEQUANTIZE -> op ->
    QUANTIZE, although TFLite's kernels take them in int8. The patch gives the op the
    DEQUANTIZE's int8 input and the QUANTIZE's int8 output (whose quantization the converter
    calibrated on the op's float output) and drops the two conversions: the int8 model the
    converter would write if it quantized the op. Every other op and tensor stays as converted."""

    def patch(model_bytes: bytes) -> bytes:
        from tensorflow.lite.python import schema_py_generated as schema
        from tensorflow.lite.tools import flatbuffer_utils

        m = flatbuffer_utils.read_model_from_bytearray(bytearray(model_bytes))
        names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}

        def name(op):
            c = m.operatorCodes[op.opcodeIndex]
            return names[max(c.builtinCode, c.deprecatedBuiltinCode)]

        (g,) = m.subgraphs
        ops = list(g.operators)
        targets = [i for i, op in enumerate(ops) if name(op) == op_name]
        if len(targets) != 1:
            raise ValueError(f"expected one {op_name}, found {len(targets)}")
        i = targets[0]
        (src,) = [o for o in ops if list(o.outputs) == [ops[i].inputs[0]]]
        (dst,) = [o for o in ops if list(o.inputs) == [ops[i].outputs[0]]]
        if (name(src), name(dst)) != ("DEQUANTIZE", "QUANTIZE"):
            raise ValueError(f"{op_name} is between {name(src)} and {name(dst)}")
        ops[i].inputs, ops[i].outputs = list(src.inputs), list(dst.outputs)
        g.operators = [o for o in ops if o is not src and o is not dst]
        return bytes(flatbuffer_utils.convert_object_to_bytearray(m))

    return patch


_ALPHA4 = [[[0.1, 0.25, -0.3, 0.5]]]
_ALPHA8 = [[[0.1, 0.2, 0.3, -0.1, 0.05, 0.4, 0.25, 0.15]]]


def _pair(name, desc, fn, expect, lo=-1.0, hi=1.0, act=None, shape=(1, 8, 8, 4), g=None, **kw):
    """The one-op model `name` and the in-graph model `name`_in_graph."""
    return [
        Spec(name, desc, unary(fn, shape, lo, hi), expect, **kw),
        Spec(
            f"{name}_in_graph",
            f"{desc}, between a 3x3 and a 1x1 convolution",
            in_graph(g or fn, act),
            (want("CONV_2D"), *expect),
            **kw,
        ),
    ]


VELA_SPECS: list[Spec] = [
    *_pair(
        "elu",
        "ELU, x in [-3, 2] (int8: the converter's float ELU given its int8 tensors)",
        tf.nn.elu,
        (want("ELU"),),
        -3.0,
        2.0,
        "tanh",
        # BUILTIN_REF registers no ELU kernel: the builtin kernels are the oracle
        extra={"patch": int8_between_dequantize_and_quantize("ELU"), "no_kernel": ("ref",)},
    ),
    *_pair(
        "neg",
        "NEG, x in [-2, 2] (int8: the converter's float NEG given its int8 tensors)",
        tf.math.negative,
        (want("NEG"),),
        -2.0,
        2.0,
        "tanh",
        # TFLite negates the stored values: -128 stays -128 (+2.0 in float gives -2.0)
        extra={
            "patch": int8_between_dequantize_and_quantize("NEG"),
            "known_bad": ("ref", "builtin", "xnnpack"),
        },
    ),
    *_pair("exp", "elementwise e**x, x in [-2, 1]", tf.exp, (want("EXP"),), -2.0, 1.0, "tanh"),
    *_pair("log", "natural log, x in [0.05, 4]", tf.math.log, (want("LOG"),), 0.05, 4.0, "sigmoid"),
    *_pair(
        "rsqrt", "1/sqrt(x), x in [0.05, 2]", tf.math.rsqrt, (want("RSQRT"),), 0.05, 2.0, "sigmoid"
    ),
    *_pair(
        "relu_0_to_1",
        "RELU_0_TO_1 (a converted RELU, relabelled), x in [-2, 2]",
        tf.nn.relu,
        (want("RELU_0_TO_1"),),
        -2.0,
        2.0,
        "tanh",
        extra={"patch": relu_to_relu_0_to_1, "known_bad": ("ref", "builtin", "xnnpack")},
    ),
    *_pair(
        "prelu",
        "PReLU with a per-channel alpha (Keras's relu(x) - alpha * relu(-x))",
        _prelu(_ALPHA4),
        (want("PRELU"),),
        g=_prelu(_ALPHA8),
    ),
    Spec(
        "sum_in_graph",
        "sum over the channels, keepdims, between a 3x3 and a 1x1 convolution",
        in_graph(lambda x: tf.reduce_sum(x, axis=[3], keepdims=True)),
        (want("CONV_2D"), want("SUM", keep_dims=True)),
        # BUILTIN_REF's int8 SUM is broken (tests/frontends/tflite/test_tflite_ops.py)
        extra={"known_bad": ("ref",)},
    ),
    Spec(
        "sum_h",
        "sum over H without keepdims (a depthwise H x 1 window)",
        unary(lambda x: tf.reduce_sum(x, [1]), shape=(1, 6, 5, 4)),
        (want("SUM", keep_dims=False),),
        extra={"known_bad": ("ref",)},
    ),
    Spec(
        "sum_w",
        "sum over W with keepdims (a depthwise 1 x W window)",
        unary(lambda x: tf.reduce_sum(x, [2], keepdims=True), shape=(1, 6, 5, 4)),
        (want("SUM", keep_dims=True),),
        extra={"known_bad": ("ref",)},
    ),
    Spec(
        "sum_wc",
        "sum over W and the channels, keepdims",
        unary(lambda x: tf.reduce_sum(x, [2, 3], keepdims=True), shape=(1, 6, 5, 4)),
        (want("SUM", keep_dims=True),),
        extra={"known_bad": ("ref",)},
    ),
    Spec(
        "sum_all",
        "sum over H, W and the channels without keepdims",
        unary(lambda x: tf.reduce_sum(x, [1, 2, 3]), shape=(1, 6, 5, 4)),
        (want("SUM", keep_dims=False),),
        extra={"known_bad": ("ref",)},
    ),
    Spec(
        "sum_hw_tall",
        "sum over H and W of an 80 x 40 map (H > 64), keepdims",
        unary(lambda x: tf.reduce_sum(x, [1, 2], keepdims=True), shape=(1, 80, 40, 4)),
        (want("SUM", keep_dims=True),),
        extra={"known_bad": ("ref",)},
    ),
    *_pair(
        "reduce_max",
        "max over H and W, keepdims",
        lambda x: tf.reduce_max(x, axis=[1, 2], keepdims=True),
        (want("REDUCE_MAX", keep_dims=True),),
    ),
    *_pair(
        "reduce_min",
        "min over the channels, keepdims",
        lambda x: tf.reduce_min(x, axis=[3], keepdims=True),
        (want("REDUCE_MIN", keep_dims=True),),
    ),
    *_pair(
        "reverse_v2",
        "tf.reverse along W",
        lambda x: tf.reverse(x, axis=[2]),
        (want("REVERSE_V2"),),
    ),
    *_pair(
        "arg_max",
        "argmax over the channels, int32",
        lambda x: tf.math.argmax(x, axis=3, output_type=tf.int32),
        (want("ARG_MAX"),),
        extra={"known_bad": ("ref", "builtin", "xnnpack")},
    ),
]


def transpose_conv(k=3, stride=2, pad="SAME", cin=4, cout=8, hw=8, bias=True):
    """tf.nn.conv2d_transpose of a (1, hw, hw, cin) map to cout channels (+ bias)."""

    def fn_of(rng):
        w = _c(rng.normal(size=(k, k, cout, cin)) / np.sqrt(k * k * cin))
        b = _c(rng.normal(0, 0.2, cout))
        n = hw * stride if pad == "SAME" else (hw - 1) * stride + k

        def fn(x):
            y = tf.nn.conv2d_transpose(x, w, (1, n, n, cout), stride, pad)
            return y + b if bias else y

        return fn

    return fn_of


def _tc_one_op(**kw):
    return lambda rng: (transpose_conv(**kw)(rng), [Inp((1, 8, 8, 4))])


def _tc_in_graph(**kw):
    def build(rng):
        tc = transpose_conv(cin=8, **kw)(rng)
        return in_graph(tc, "tanh")(rng)

    return build


VELA_SPECS += [
    Spec(
        "transpose_conv_s2_same",
        "3x3 transposed conv, stride 2, SAME, 8x8x4 -> 16x16x8, bias",
        _tc_one_op(),
        (want("TRANSPOSE_CONV"),),
    ),
    Spec(
        "transpose_conv_s2_valid",
        "4x4 transposed conv, stride 2, VALID, 8x8x4 -> 18x18x8, bias",
        _tc_one_op(k=4, pad="VALID"),
        (want("TRANSPOSE_CONV"),),
    ),
    Spec(
        "transpose_conv_in_graph",
        "3x3 stride-2 SAME transposed conv between a 3x3 and a 1x1 convolution",
        _tc_in_graph(),
        (want("CONV_2D"), want("TRANSPOSE_CONV")),
    ),
]


def _bilinear(align, half, factor=2):
    return lambda x: tf.compat.v1.image.resize_bilinear(
        x, (8 * factor, 8 * factor), align_corners=align, half_pixel_centers=half
    )


VELA_SPECS += [
    *_pair(
        "resize_bilinear_2x_half_pixel",
        "bilinear 8x8 -> 16x16, half_pixel_centers",
        _bilinear(False, True),
        (want("RESIZE_BILINEAR", align_corners=False, half_pixel_centers=True),),
    ),
    Spec(
        "resize_bilinear_4x",
        "bilinear 8x8 -> 32x32, neither flag",
        unary(_bilinear(False, False, 4)),
        (want("RESIZE_BILINEAR", align_corners=False, half_pixel_centers=False),),
    ),
]


def _dwconv_m2(x):
    """3x3 SAME depthwise convolution with depth multiplier 2, bias and RELU (fixed weights:
    the same on every trace of the body)."""
    c = int(x.shape[-1])
    r = np.random.default_rng(20)
    w = _c(r.normal(size=(3, 3, c, 2)) / 3)
    b = _c(r.normal(0, 0.5, 2 * c))
    return tf.nn.relu(tf.nn.bias_add(tf.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "SAME"), b))


# session 20 (n30i): the in-graph forms of two operators Vela 5.2 runs on the NPU
VELA_SPECS += [
    Spec(
        "dwconv_m2_in_graph",
        "3x3 SAME depthwise, multiplier 2, RELU, between a 3x3 and a 1x1 convolution",
        in_graph(_dwconv_m2),
        (want("CONV_2D"), want("DEPTHWISE_CONV_2D", depth_multiplier=2)),
    ),
    Spec(
        "mean_axis2_in_graph",
        "mean over W alone, keepdims, between a 3x3 and a 1x1 convolution",
        in_graph(lambda x: tf.reduce_mean(x, [2], keepdims=True)),
        (want("CONV_2D"), want("MEAN", keep_dims=True)),
    ),
]


def _rescale_in_graph(rng):
    """Keras MobileNetV3's input preprocessing on a wide 3-channel map: x / 127.5 - 1 (a MUL
    and an ADD of per-tensor scalars), then a 3x3 stride-2 convolution (+bias, RELU)."""
    w = _c(rng.normal(size=(3, 3, 3, 16)) / np.sqrt(27))
    b = _c(rng.normal(0, 0.2, 16))

    def body(x):
        y = x * _c(1 / 127.5) + _c(-1.0)
        return tf.nn.relu(tf.nn.conv2d(y, w, 2, "SAME") + b)

    return body, [Inp((1, 64, 64, 3), 0.0, 255.0)]


# session 21 (n30y): the shallow elementwise maps Vela deepens (vela_access.deepened_shape)
VELA_SPECS += [
    Spec(
        "rescale_in_graph",
        "x / 127.5 - 1 on a 64x64x3 input (MUL, ADD of scalars), then a 3x3 stride-2 conv",
        _rescale_in_graph,
        (want("MUL"), want("ADD"), want("CONV_2D")),
    ),
]
