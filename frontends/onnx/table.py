"""The one table: (domain, ONNX op type) -> converter. A converter takes a NodeContext and returns
the expression of the node's output (a list for several outputs; a numpy array for a constant).
Adding an operator adds a row."""

from __future__ import annotations

from . import ops_attention as A
from . import ops_dynquant as D
from . import ops_elemwise as E
from . import ops_nn as N
from . import ops_quant as Q
from . import ops_tensor as T
from . import ops_transformer as X

ONNX = {
    "Abs": E.unary, "Add": E.binary, "AveragePool": N.avg_pool, "BatchNormalization": N.batch_norm,
    "Cast": E.cast, "Clip": E.clip, "Concat": T.concat, "Constant": T.constant, "Conv": N.conv,
    "ConvInteger": Q.conv_integer, "DequantizeLinear": Q.dequantize_linear, "Div": E.binary,
    "Dropout": E.identity, "Exp": E.unary, "Flatten": T.flatten, "Floor": E.unary,
    "Gemm": N.gemm, "GlobalAveragePool": N.global_avg_pool, "GlobalMaxPool": N.global_max_pool,
    "HardSigmoid": E.hard_sigmoid, "HardSwish": E.hard_swish, "Identity": E.identity,
    "LeakyRelu": E.leaky_relu, "MatMul": N.matmul, "MatMulInteger": Q.matmul_integer,
    "Max": E.binary, "MaxPool": N.max_pool, "Min": E.binary, "Mul": E.binary, "Neg": E.unary,
    "Pad": T.pad, "QLinearConv": Q.qlinear_conv, "QLinearMatMul": Q.qlinear_matmul,
    "QuantizeLinear": Q.quantize_linear, "ReduceMean": T.reduce_mean, "Relu": E.unary,
    "Reshape": T.reshape, "Resize": T.resize, "Shape": T.shape, "Sigmoid": E.unary,
    "Slice": T.slice_, "Softmax": N.softmax, "Split": T.split, "Sqrt": E.unary,
    "Squeeze": T.squeeze, "Sub": E.binary, "Tanh": E.unary, "Transpose": T.transpose,
    "Unsqueeze": T.unsqueeze,
}

MICROSOFT = {
    "QGemm": Q.qgemm, "QLinearAdd": Q.qlinear_binary, "QLinearAveragePool": Q.qlinear_avg_pool,
    "QLinearConcat": Q.qlinear_concat, "QLinearGlobalAveragePool": Q.qlinear_global_avg_pool,
    "QLinearLeakyRelu": Q.qlinear_leaky_relu, "QLinearMul": Q.qlinear_binary,
    "QLinearSigmoid": Q.qlinear_sigmoid,
}

# transformer encoders (ops_transformer.py replaces ops_nn's MatMul with one for N-D batches)
ONNX.update(X.ONNX)
ONNX.update({"DynamicQuantizeLinear": D.dynamic_quantize_linear,
             "MatMulInteger": D.matmul_integer})
MICROSOFT.update({
    "Attention": A.attention, "BiasGelu": X.bias_gelu,
    "DynamicQuantizeMatMul": D.dynamic_quantize_matmul, "FastGelu": X.fast_gelu,
    "FusedMatMul": X.fused_matmul,
    "Gelu": X.gelu, "MatMulIntegerToFloat": D.matmul_integer_to_float,
    "SkipLayerNormalization": X.skip_layer_norm,
})

CONVERTERS = {**{("ai.onnx", k): v for k, v in ONNX.items()},
              **{("com.microsoft", k): v for k, v in MICROSOFT.items()}}
