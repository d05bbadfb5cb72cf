"""The NPU's pattern table: fused groups first, then single ops (first match wins).

    npu.conv2d      [nn.pad] -> qnn.conv2d -> [nn.bias_add] -> qnn.requantize -> [clip]
    npu.dense       qnn.dense -> [nn.bias_add] -> qnn.requantize -> [clip]
    npu.add/sub/mul qnn.add | qnn.subtract | qnn.mul -> [clip]
    npu.max_pool    nn.max_pool2d -> [clip];  npu.avg_pool  qnn.avg_pool2d -> [clip]
    npu.mean        qnn.mean
    npu.lut         qnn.sigmoid | qnn.tanh | qnn.hardswish | qnn.leaky_relu | qnn.elu | clip |
                    negative |
                    qnn.requantize of 8-bit data (any function of one int8/uint8 value)
    npu.concat      qnn.concatenate | concatenate;  npu.reshape  reshape;  npu.pad  nn.pad
    npu.resize      image.resize2d (nearest neighbour, 1x/2x/4x/8x)
    npu.squared_difference, npu.maximum, npu.minimum, npu.softmax (the elementwise unit)
    npu.strided_slice, npu.transpose, npu.squeeze, npu.expand_dims (data movement)

A clip alone between two NPU ops is a LUT operation, so it never splits a partition.
"""

from __future__ import annotations

from partita.backends.verdict import all_of
from partita.patterns import constants, is_constant, is_op, is_tuple, wildcard

from . import constraints as C
from . import lstm_ops, vela_ops
from .config import get_config

LUT_OPS = ("qnn.sigmoid", "qnn.tanh", "qnn.hardswish", "qnn.leaky_relu", "qnn.gelu")
LUT_OPS += ("qnn.exp", "qnn.log", "qnn.rsqrt")  # TFLite's EXP, LOG, RSQRT (Vela: tables)
LUT_OPS += ("qnn.elu",)  # TFLite's int8 ELU (Vela: a table)


def _clip(p):
    return p.optional(lambda q: is_op("clip")(q))


def conv2d():
    pad = is_op("nn.pad")(wildcard(), is_constant()).has_attr({"pad_mode": "constant"})
    data = pad | wildcard()
    conv = is_op("qnn.conv2d")(data, is_constant(), *constants(4))
    conv = conv.optional(lambda c: is_op("nn.bias_add")(c, is_constant()))
    return _clip(is_op("qnn.requantize")(conv, *constants(4)))


def dense():
    fc = is_op("qnn.dense")(wildcard(), is_constant(), *constants(4))
    fc = fc.optional(lambda c: is_op("nn.bias_add")(c, is_constant()))
    return _clip(is_op("qnn.requantize")(fc, *constants(4)))


def binary(name: str):
    return _clip(is_op(name)(wildcard(), wildcard(), *constants(6)))


def lut():
    # TFLite's quantized RELU/RELU6/RELU_0_TO_1 (requantize then clip): one table, as Vela
    requantize = is_op("qnn.requantize")(wildcard(), *constants(4))
    pattern = is_op("clip")(requantize) | is_op("clip")(wildcard()) | requantize
    pattern = pattern | is_op("negative")(wildcard())  # TFLite's int8 NEG (stored values)
    for name in LUT_OPS:
        pattern = pattern | is_op(name)(wildcard(), *constants(4))
    return pattern


def lut_chain():
    """TFLite's quantized ABS as the frontend writes it: a function of one int8 value."""
    v = is_op("cast")(wildcard())
    v = is_op("abs")(is_op("subtract")(v, is_constant()))
    return is_op("qnn.requantize")(v, *constants(4))


def pattern_table(options=None):
    """First match wins: fused convolutions and FC before the single ops. Every row also checks
    that the op's maps fit the design's SRAM (constraints.sram_fit)."""
    options = options or {}
    config = get_config(options.get("config"), options.get("sram"))
    fits = C.sram_fit(config)
    return [(name, pattern, all_of(check, fits)) for name, pattern, check in _rows()]


def _rows():
    return [
        ("conv2d", conv2d(), all_of(*C.CONV)),
        ("dense", dense(), all_of(*C.DENSE)),
        ("add", binary("qnn.add"), C.binary),
        ("sub", binary("qnn.subtract"), C.binary),
        ("mul", binary("qnn.mul"), C.binary),
        ("max_pool", _clip(is_op("nn.max_pool2d")(wildcard())), all_of(C.batch, C.pool)),
        (
            "avg_pool",
            _clip(is_op("qnn.avg_pool2d")(wildcard(), *constants(4))),
            all_of(C.batch, C.pool),
        ),
        ("mean", is_op("qnn.mean")(wildcard(), *constants(4)), all_of(C.batch, C.mean)),
        ("lut", lut(), C.lut),
        ("lut_chain", lut_chain(), C.lut_chain),
        ("requantize16", is_op("qnn.requantize")(wildcard(), *constants(4)), C.requantize16),
        (
            "concat",
            # the tuple inside the composite, so that each field is a feature-map input
            is_op("qnn.concatenate")(is_tuple(None), is_tuple(None), is_tuple(None), *constants(2))
            | is_op("concatenate")(is_tuple(None)),
            C.movement,
        ),
        ("resize", is_op("image.resize2d")(wildcard()), all_of(C.batch, C.resize)),
        ("reshape", is_op("reshape")(wildcard()), C.movement),
        ("pad", is_op("nn.pad")(wildcard(), is_constant()), C.movement),
        ("squared_difference", binary("qnn.squared_difference"), C.binary),
        # never accepted: says why a runtime's float convolution stays on the CPU
        (
            "float_conv2d",
            is_op("nn.conv2d")(wildcard(), wildcard()).has_attr({"accumulate": "mlas"}),
            C.float_mac,
        ),
        ("maximum", _clip(is_op("maximum")(wildcard(), wildcard())), C.min_max),
        ("minimum", _clip(is_op("minimum")(wildcard(), wildcard())), C.min_max),
        ("softmax", is_op("qnn.softmax")(wildcard(), *constants(4)), C.softmax),
        ("strided_slice", is_op("strided_slice")(wildcard()), C.strided_slice),
        ("transpose", is_op("transpose")(wildcard()), C.transpose),
        ("squeeze", is_op("squeeze")(wildcard()), C.movement),
        ("expand_dims", is_op("expand_dims")(wildcard()), C.movement),
        *vela_ops.rows(),  # prelu, reduce_max/min, argmax, tile
        *lstm_ops.rows(),  # the integer LSTM's recurrence
    ]
