"""The one table: TFLite builtin operator -> (converter, the builtin options type it reads).

A converter takes an OpContext and returns the expression of the operator's output (a list for
several outputs). Adding an operator adds a row.
"""

from __future__ import annotations

from . import ops_conv, ops_elemwise, ops_lstm, ops_pool, ops_tensor, ops_transformer, ops_vela

CONVERTERS = {
    "ABS": (ops_elemwise.abs_, None),
    "ADD": (ops_elemwise.binary, "AddOptions"),
    "AVERAGE_POOL_2D": (ops_pool.avg_pool, "Pool2DOptions"),
    "BATCH_MATMUL": (ops_conv.batch_matmul, "BatchMatMulOptions"),
    "CONCATENATION": (ops_tensor.concatenation, "ConcatenationOptions"),
    "CONV_2D": (ops_conv.conv2d, "Conv2DOptions"),
    "DEPTHWISE_CONV_2D": (ops_conv.depthwise_conv2d, "DepthwiseConv2DOptions"),
    "DEQUANTIZE": (ops_elemwise.dequantize, None),
    "EXPAND_DIMS": (ops_tensor.expand_dims, None),
    "FULLY_CONNECTED": (ops_conv.fully_connected, "FullyConnectedOptions"),
    "HARD_SWISH": (ops_elemwise.unary, None),
    "LEAKY_RELU": (ops_elemwise.leaky_relu, "LeakyReluOptions"),
    "LOGISTIC": (ops_elemwise.unary, None),
    "MAX_POOL_2D": (ops_pool.max_pool, "Pool2DOptions"),
    "MAXIMUM": (ops_elemwise.min_max, None),
    "MEAN": (ops_pool.mean, "ReducerOptions"),
    "MINIMUM": (ops_elemwise.min_max, None),
    "MIRROR_PAD": (ops_tensor.mirror_pad, "MirrorPadOptions"),
    "MUL": (ops_elemwise.binary, "MulOptions"),
    "PACK": (ops_tensor.pack, "PackOptions"),
    "PAD": (ops_tensor.pad, None),
    "PADV2": (ops_tensor.pad, None),
    "QUANTIZE": (ops_elemwise.quantize, None),
    "RELU": (ops_elemwise.relu, None),
    "RELU6": (ops_elemwise.relu, None),
    "RELU_N1_TO_1": (ops_elemwise.relu, None),
    "RELU_0_TO_1": (ops_elemwise.relu, None),
    "RESHAPE": (ops_tensor.reshape, "ReshapeOptions"),
    "RESIZE_BILINEAR": (ops_pool.resize_bilinear, "ResizeBilinearOptions"),
    "RESIZE_NEAREST_NEIGHBOR": (ops_pool.resize_nearest, "ResizeNearestNeighborOptions"),
    "SLICE": (ops_tensor.slice_, None),
    "SOFTMAX": (ops_elemwise.softmax, "SoftmaxOptions"),
    "SPLIT": (ops_tensor.split, "SplitOptions"),
    "SPLIT_V": (ops_tensor.split_v, None),
    "SQUEEZE": (ops_tensor.squeeze, "SqueezeOptions"),
    "STRIDED_SLICE": (ops_tensor.strided_slice, "StridedSliceOptions"),
    "SUB": (ops_elemwise.binary, "SubOptions"),
    "SUM": (ops_pool.reduce_sum, "ReducerOptions"),
    "TANH": (ops_elemwise.unary, None),
    "TRANSPOSE": (ops_tensor.transpose, None),
    "UNPACK": (ops_tensor.unpack, "UnpackOptions"),
}
CONVERTERS.update(ops_transformer.CONVERTERS)
CONVERTERS.update(ops_vela.CONVERTERS)
CONVERTERS.update(ops_lstm.CONVERTERS)
