"""The tables: aten / quantized_decomposed op -> converter, keyed by the op's overload packet
(``aten.conv2d`` for ``aten.conv2d.default``). TorchScript's ``aten::name`` ops use the same
rows; its quantized ops are in ts_ops.QUANTIZED. Adding an op adds a row.
"""

from __future__ import annotations

from . import aten_nn as nn
from . import aten_tensor as t
from . import aten_transformer, pt2e

CONVERTERS = {
    "aten._convolution": nn.convolution,
    "aten._native_batch_norm_legit_no_training": nn.batch_norm,
    "aten._softmax": t.softmax,
    "aten._unsafe_view": t.reshape,
    "aten.adaptive_avg_pool2d": nn.adaptive_avg_pool2d,
    "aten.add": t.binary("add"),
    "aten.addmm": nn.addmm,
    "aten.alias": t.identity,
    "aten.avg_pool2d": nn.avg_pool2d,
    "aten.batch_norm": nn.batch_norm,
    "aten.cat": t.cat,
    "aten.clamp": t.clamp(None, None),
    "aten.clone": t.identity,
    "aten.constant_pad_nd": t.pad,
    "aten.contiguous": t.identity,
    "aten.conv2d": nn.conv2d,
    "aten.convolution": nn.convolution,
    "aten.detach": t.identity,
    "aten.div": t.binary("divide"),
    "aten.dropout": t.identity,
    "aten.flatten": t.flatten,
    "aten.hardsigmoid": t.hardsigmoid,
    "aten.hardswish": t.unary("nn.hardswish"),
    "aten.hardtanh": t.clamp(-1.0, 1.0),
    "aten.leaky_relu": t.leaky_relu,
    "aten.linear": nn.linear,
    "aten.matmul": nn.matmul,
    "aten.max_pool2d": nn.max_pool2d,
    "aten.max_pool2d_with_indices": nn.max_pool2d,
    "aten.mean": t.mean,
    "aten.mm": nn.matmul,
    "aten.mul": t.binary("multiply"),
    "aten.pad": t.pad,
    "aten.permute": t.permute,
    "aten.relu": t.unary("nn.relu"),
    "aten.relu6": t.clamp(0.0, 6.0, fixed=True),
    "aten.reshape": t.reshape,
    "aten.sigmoid": t.unary("sigmoid"),
    "aten.silu": t.silu,
    "aten.softmax": t.softmax,
    "aten.squeeze": t.squeeze,
    "aten.sub": t.binary("subtract"),
    "aten.t": t.transpose,
    "aten.tanh": t.unary("tanh"),
    "aten.transpose": t.transpose,
    "aten.unsqueeze": t.unsqueeze,
    "aten.view": t.reshape,
    "getitem": t.getitem,
    "quantized_decomposed.dequantize_per_channel": pt2e.dequantize_per_channel,
    "quantized_decomposed.dequantize_per_tensor": pt2e.dequantize_per_tensor,
    "quantized_decomposed.quantize_per_channel": pt2e.quantize_per_channel,
    "quantized_decomposed.quantize_per_tensor": pt2e.quantize_per_tensor,
}
CONVERTERS.update(aten_transformer.CONVERTERS)  # overrides aten.matmul with the N-D form
