"""Single-operator TFLite test models: one builder per model, used by gen_tflite_models.py.

Each spec names a builder `build(rng) -> (body, inputs)`: `body` is a TensorFlow function of the
float inputs and `inputs` lists their shapes and calibration ranges. `expect` lists the builtin
operators (with options in the summary form of gen_tflite_models.op_summaries) the converted model
must contain; generation fails otherwise.
"""

from __future__ import annotations

import tensorflow as tf
from tflite_spec_builders import (
    Inp,
    Spec,
    binary,
    concat_diff,
    conv,
    conv_fc,
    dense,
    dwconv,
    fmt,
    hard_swish,
    pool,
    reshape_to_squeeze,
    resize,
    unary,
    want,
    with_const,
)
from tflite_vela_specs import VELA_SPECS

# Inp, Spec and fmt are re-exported for gen_tflite_models.py and tflite_net_specs.py.
__all__ = ["OP_SPECS", "Inp", "Spec", "fmt", "want"]


def _cv(pad, stride, act="NONE", dil=1, weights="per-channel"):
    s, d = f"{stride}x{stride}", f"{dil}x{dil}"
    return ("CONV_2D", {"padding": pad, "stride": s, "dilation": d, "act": act, "weights": weights})


def _dw(pad, stride, mult, act="NONE"):
    return (
        "DEPTHWISE_CONV_2D",
        {"padding": pad, "stride": f"{stride}x{stride}", "depth_multiplier": str(mult), "act": act},
    )


OP_SPECS: list[Spec] = [
    Spec(
        "conv2d_same_s1_relu",
        "3x3 conv, SAME, stride 1, bias, fused RELU",
        conv(act="relu"),
        (_cv("SAME", 1, "RELU"),),
    ),
    Spec(
        "conv2d_valid_s1",
        "3x3 conv, VALID, stride 1, bias, no activation",
        conv("VALID"),
        (_cv("VALID", 1),),
    ),
    Spec(
        "conv2d_same_s2_relu6",
        "3x3 conv, SAME, stride 2 on 9x9 (odd size), fused RELU6",
        conv("SAME", 2, act="relu6", hw=9),
        (_cv("SAME", 2, "RELU6"),),
    ),
    Spec(
        "conv2d_valid_s2_relu",
        "3x3 conv, VALID, stride 2 on 16x16x8, fused RELU",
        conv("VALID", 2, act="relu", hw=16, cin=8),
        (_cv("VALID", 2, "RELU"),),
    ),
    Spec(
        "conv2d_same_dil2",
        "3x3 conv, SAME, dilation 2",
        conv(dil=2, hw=10),
        (_cv("SAME", 1, dil=2),),
    ),
    Spec(
        "conv2d_valid_dil2",
        "3x3 conv, VALID, dilation 2",
        conv("VALID", dil=2, hw=10),
        (_cv("VALID", 1, dil=2),),
    ),
    Spec(
        "conv2d_nobias",
        "3x3 conv without bias (the converter adds a zero int32 bias)",
        conv(bias=False),
        (_cv("SAME", 1),),
    ),
    Spec(
        "conv2d_1x1",
        "1x1 conv 8 -> 16 channels, bias, fused RELU6",
        conv(k=1, cin=8, cout=16, act="relu6"),
        (_cv("SAME", 1, "RELU6"),),
    ),
    Spec(
        "conv2d_per_tensor",
        "3x3 conv with per-tensor weight scale (disable_per_channel)",
        conv(act="relu"),
        (_cv("SAME", 1, "RELU", weights="per-tensor"),),
        quant="int8_per_tensor",
    ),
    Spec(
        "dwconv_m1_s1_same_relu6",
        "3x3 depthwise, multiplier 1, SAME, stride 1, RELU6",
        dwconv(act="relu6"),
        (_dw("SAME", 1, 1, "RELU6"),),
    ),
    Spec(
        "dwconv_m2_s1_valid",
        "3x3 depthwise, multiplier 2, VALID, stride 1",
        dwconv("VALID", mult=2),
        (_dw("VALID", 1, 2),),
    ),
    Spec(
        "dwconv_m1_s2_same",
        "3x3 depthwise, multiplier 1, SAME, stride 2 on 9x9",
        dwconv("SAME", 2, hw=9),
        (_dw("SAME", 2, 1),),
    ),
    Spec(
        "dwconv_m2_s2_valid_relu",
        "3x3 depthwise, multiplier 2, VALID, stride 2, RELU",
        dwconv("VALID", 2, 2, act="relu", hw=9),
        (_dw("VALID", 2, 2, "RELU"),),
    ),
    Spec(
        "fc_bias_relu",
        "fully connected 32 -> 16 with bias and fused RELU",
        dense(act="relu"),
        (want("FULLY_CONNECTED", act="RELU", keep_num_dims=False),),
    ),
    Spec(
        "fc_nobias",
        "fully connected 32 -> 16 without bias",
        dense(bias=False),
        (want("FULLY_CONNECTED", act="NONE"),),
    ),
    Spec(
        "fc_keep_dims",
        "rank-3 x (1, 4, 32) @ W (32, 16) + b: FULLY_CONNECTED keep_num_dims",
        dense((1, 4, 32)),
        (want("FULLY_CONNECTED", keep_num_dims=True),),
    ),
    Spec(
        "add_same",
        "x + y, same shapes, different input scales",
        binary(tf.add),
        (want("ADD", act="NONE"),),
    ),
    Spec(
        "add_broadcast",
        "x (1,8,8,4) + y (1,1,1,4)",
        binary(tf.add, sy=(1, 1, 1, 4)),
        (want("ADD"),),
    ),
    Spec("add_const", "x + a constant of shape (4,)", with_const(tf.add, (4,)), (want("ADD"),)),
    Spec(
        "add_relu",
        "relu(x + y): ADD with fused RELU",
        binary(lambda x, y: tf.nn.relu(x + y)),
        (want("ADD", act="RELU"),),
    ),
    Spec("sub_same", "x - y, same shapes", binary(tf.subtract), (want("SUB"),)),
    Spec(
        "sub_broadcast",
        "x (1,8,8,4) - y (1,8,1,4)",
        binary(tf.subtract, sy=(1, 8, 1, 4)),
        (want("SUB"),),
    ),
    Spec("mul_same", "x * y, same shapes", binary(tf.multiply), (want("MUL"),)),
    Spec(
        "mul_broadcast_const",
        "x * a constant of shape (1,1,1,4)",
        with_const(tf.multiply, (1, 1, 1, 4)),
        (want("MUL"),),
    ),
    Spec(
        "avgpool_valid_k2s2",
        "average pool 2x2 stride 2 VALID on 9x9",
        pool("avg", 2, 2, "VALID"),
        (want("AVERAGE_POOL_2D", padding="VALID", filter="2x2", stride="2x2"),),
    ),
    Spec(
        "avgpool_same_k3s2",
        "average pool 3x3 stride 2 SAME on 9x9 (edge windows are partial)",
        pool("avg", 3, 2, "SAME"),
        (want("AVERAGE_POOL_2D", padding="SAME", filter="3x3", stride="2x2"),),
    ),
    Spec(
        "maxpool_valid_k2s2",
        "max pool 2x2 stride 2 VALID on 9x9",
        pool("max", 2, 2, "VALID"),
        (want("MAX_POOL_2D", padding="VALID", filter="2x2", stride="2x2"),),
    ),
    Spec(
        "maxpool_same_k3s1",
        "max pool 3x3 stride 1 SAME on 9x9",
        pool("max", 3, 1, "SAME"),
        (want("MAX_POOL_2D", padding="SAME", filter="3x3", stride="1x1"),),
    ),
    Spec(
        "mean_hw_keepdims",
        "mean over H, W with keepdims",
        unary(lambda x: tf.reduce_mean(x, [1, 2], keepdims=True)),
        (want("MEAN", keep_dims=True),),
    ),
    Spec(
        "mean_hw",
        "mean over H, W without keepdims",
        unary(lambda x: tf.reduce_mean(x, [1, 2])),
        (want("MEAN", keep_dims=False),),
    ),
    Spec(
        "mean_axis2",
        "mean over axis 2 only, without keepdims",
        unary(lambda x: tf.reduce_mean(x, [2])),
        (want("MEAN"),),
    ),
    # BUILTIN_REF's int8 SUM gives wrong results in ai-edge-litert 2.3 (see README notes).
    Spec(
        "sum_hw",
        "sum over H, W with keepdims",
        unary(lambda x: tf.reduce_sum(x, [1, 2], keepdims=True)),
        (want("SUM", keep_dims=True),),
        extra={"known_bad": ("ref",)},
    ),
    Spec(
        "sum_axis3",
        "sum over the channel axis without keepdims",
        unary(lambda x: tf.reduce_sum(x, [3])),
        (want("SUM", keep_dims=False),),
        extra={"known_bad": ("ref",)},
    ),
    Spec(
        "reshape",
        "reshape (1,8,8,4) -> (1,16,16)",
        unary(lambda x: tf.reshape(x, (1, 16, 16))),
        (want("RESHAPE"),),
    ),
    Spec(
        "squeeze",
        "squeeze axes 1, 2 of (1,1,1,16); RESHAPE patched into SQUEEZE (see notes)",
        unary(lambda x: tf.squeeze(x, [1, 2]), shape=(1, 1, 1, 16)),
        (want("SQUEEZE"),),
        extra={"patch": reshape_to_squeeze},
    ),
    Spec(
        "softmax",
        "softmax over the last axis of (1,16), inputs in [-4, 4]",
        unary(tf.nn.softmax, (1, 16), -4, 4),
        (want("SOFTMAX", beta=1.0),),
    ),
    Spec(
        "softmax_4d",
        "softmax over the last axis of (1,4,4,8)",
        unary(tf.nn.softmax, (1, 4, 4, 8), -3, 3),
        (want("SOFTMAX"),),
    ),
    Spec(
        "logistic",
        "sigmoid, inputs in [-6, 6]",
        unary(tf.sigmoid, lo=-6, hi=6),
        (want("LOGISTIC"),),
    ),
    Spec("tanh", "tanh, inputs in [-3, 3]", unary(tf.tanh, lo=-3, hi=3), (want("TANH"),)),
    Spec(
        "hard_swish",
        "x * relu6(x + 3) / 6, fused by the converter, inputs in [-5, 5]",
        unary(hard_swish, lo=-5, hi=5),
        (want("HARD_SWISH"),),
    ),
    Spec("relu", "relu, inputs in [-4, 4]", unary(tf.nn.relu, lo=-4, hi=4), (want("RELU"),)),
    Spec("relu6", "relu6, inputs in [-3, 9]", unary(tf.nn.relu6, lo=-3, hi=9), (want("RELU6"),)),
    Spec(
        "leaky_relu",
        "leaky relu alpha 0.2, inputs in [-4, 4]",
        unary(lambda x: tf.nn.leaky_relu(x, 0.2), lo=-4, hi=4),
        (want("LEAKY_RELU", alpha=0.2),),
    ),
    Spec(
        "concat_same_scale",
        "concatenate two inputs of equal range on the channel axis",
        binary(lambda x, y: tf.concat([x, y], 3), ry=1.0),
        (want("CONCATENATION", axis=3),),
    ),
    Spec(
        "concat_diff_scale",
        "concatenate relu6(6x) and tanh(y): inputs of different ranges",
        binary(concat_diff),
        (want("CONCATENATION", axis=3),),
    ),
    Spec(
        "pad",
        "zero padding ((1,2),(2,1)) on H, W",
        unary(lambda x: tf.pad(x, [[0, 0], [1, 2], [2, 1], [0, 0]])),
        (want("PAD"),),
    ),
    Spec(
        "padv2",
        "padding ((1,1),(0,2)) on H, W with the constant 0.5",
        unary(lambda x: tf.pad(x, [[0, 0], [1, 1], [0, 2], [0, 0]], constant_values=0.5)),
        (want("PADV2"),),
    ),
    Spec(
        "quantize_float_io",
        "3x3 conv with float32 input and output: QUANTIZE, DEQUANTIZE",
        conv(act="relu"),
        (
            want("QUANTIZE", input="float32", output="int8"),
            want("DEQUANTIZE", input="int8", output="float32"),
        ),
        io="float32",
    ),
    Spec(
        "quantize_uint8_io",
        "3x3 conv with uint8 input and output: requantizing QUANTIZE",
        conv(act="relu"),
        (
            want("QUANTIZE", input="uint8", output="int8"),
            want("QUANTIZE", input="int8", output="uint8"),
        ),
        io="uint8",
    ),
    Spec(
        "dequantize_fp16",
        "float conv + FC with float16 weights (float16 post-training quant)",
        conv_fc,
        (want("DEQUANTIZE", input="float16", output="float32"), want("CONV_2D", input="float32")),
        io="float32",
        quant="float16",
    ),
    Spec(
        "strided_slice",
        "x[:, 1:7:2, 2:, :3]",
        unary(lambda x: x[:, 1:7:2, 2:, :3]),
        (want("STRIDED_SLICE"),),
    ),
    Spec(
        "strided_slice_shrink",
        "x[:, 2, ::3, 1:] (shrinks axis 1)",
        unary(lambda x: x[:, 2, ::3, 1:]),
        (want("STRIDED_SLICE", shrink_axis_mask=2),),
    ),
    Spec(
        "transpose",
        "transpose NHWC -> NCHW",
        unary(lambda x: tf.transpose(x, [0, 3, 1, 2])),
        (want("TRANSPOSE"),),
    ),
    Spec(
        "resize_bilinear_half_pixel",
        "bilinear 8x8 -> 13x11, half_pixel_centers",
        resize("bilinear", False, True),
        (want("RESIZE_BILINEAR", align_corners=False, half_pixel_centers=True),),
    ),
    Spec(
        "resize_bilinear_align_corners",
        "bilinear 8x8 -> 13x11, align_corners",
        resize("bilinear", True, False),
        (want("RESIZE_BILINEAR", align_corners=True, half_pixel_centers=False),),
    ),
    Spec(
        "resize_bilinear_asymmetric",
        "bilinear 8x8 -> 13x11, neither flag (legacy TF1)",
        resize("bilinear", False, False),
        (want("RESIZE_BILINEAR", align_corners=False, half_pixel_centers=False),),
    ),
    Spec(
        "resize_nearest_half_pixel",
        "nearest 8x8 -> 13x11, half_pixel_centers",
        resize("nearest", False, True),
        (want("RESIZE_NEAREST_NEIGHBOR", align_corners=False, half_pixel_centers=True),),
    ),
    Spec(
        "resize_nearest_align_corners",
        "nearest 8x8 -> 13x11, align_corners",
        resize("nearest", True, False),
        (want("RESIZE_NEAREST_NEIGHBOR", align_corners=True, half_pixel_centers=False),),
    ),
    Spec(
        "resize_nearest_asymmetric",
        "nearest 8x8 -> 13x11, neither flag (legacy TF1)",
        resize("nearest", False, False),
        (want("RESIZE_NEAREST_NEIGHBOR", align_corners=False, half_pixel_centers=False),),
    ),
    Spec(
        "split",
        "split the channel axis into 2 equal parts (two outputs)",
        unary(lambda x: tuple(tf.split(x, 2, axis=3))),
        (want("SPLIT", num_splits=2),),
    ),
    Spec(
        "split_v",
        "split the channel axis into sizes (1, 3) (two outputs)",
        unary(lambda x: tuple(tf.split(x, [1, 3], axis=3))),
        (want("SPLIT_V"),),
    ),
    Spec(
        "slice",
        "tf.slice(x, [0, 1, 2, 0], [1, 5, -1, 3])",
        unary(lambda x: tf.slice(x, [0, 1, 2, 0], [1, 5, -1, 3])),
        (want("SLICE"),),
    ),
    Spec(
        "pack",
        "tf.stack of the two channel halves along a new axis 1",
        unary(lambda x: tf.stack([x[..., :2], x[..., 2:]], axis=1)),
        (want("PACK"),),
    ),
    Spec(
        "unpack",
        "tf.unstack over the channel axis (four outputs)",
        unary(lambda x: tuple(tf.unstack(x, axis=3))),
        (want("UNPACK"),),
    ),
    Spec("abs", "elementwise |x|, x in [-1, 1]", unary(tf.abs), (want("ABS"),)),
    Spec(
        "mirror_pad",
        "tf.pad REFLECT by (1, 2) rows and (2, 1) columns",
        unary(lambda x: tf.pad(x, [[0, 0], [1, 2], [2, 1], [0, 0]], mode="REFLECT")),
        (want("MIRROR_PAD"),),
    ),
    Spec("maximum", "elementwise max(x, y)", binary(tf.maximum), (want("MAXIMUM"),)),
    Spec("minimum", "elementwise min(x, y)", binary(tf.minimum), (want("MINIMUM"),)),
    Spec(
        "batch_matmul",
        "(1,4,8) @ (1,8,6), both operands are inputs",
        binary(tf.matmul, (1, 4, 8), (1, 8, 6)),
        (want("BATCH_MATMUL", adj_y=False),),
    ),
    Spec(
        "batch_matmul_adj_y",
        "(2,4,8) @ (2,6,8)^T, both operands are inputs",
        binary(lambda x, y: tf.matmul(x, y, transpose_b=True), (2, 4, 8), (2, 6, 8)),
        (want("BATCH_MATMUL", adj_y=True),),
    ),
]

# EXP, LOG, RSQRT, RELU_0_TO_1, PRELU, REDUCE_MAX/MIN, TILE, ARG_MAX: one-op and in-graph models
OP_SPECS += VELA_SPECS  # noqa: E402
