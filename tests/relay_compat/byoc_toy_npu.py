"""A BYOC pattern-table module written the way TVM's python/tvm/relay/op/contrib/<target>.py
modules are (partita's own code, not TVM's): the imports are the only lines that name partita.
Checks read attributes (as fields and as a dict), constants with ``.data.numpy()`` and types
with ``checked_type``; ``partition_for_toy_npu`` is the pipeline a user calls."""

from __future__ import annotations

import numpy as np

from partita import relay
from partita.relay import transform
from partita.relay.build_module import bind_params_by_name
from partita.relay.dataflow_pattern import is_constant, is_op, wildcard
from partita.relay.op.contrib.register import register_pattern_table


def qnn_conv2d_pattern():
    """[nn.pad] -> qnn.conv2d -> nn.bias_add -> qnn.requantize [-> clip]"""
    pattern = is_op("nn.pad")(wildcard(), is_constant()) | wildcard()
    pattern = is_op("qnn.conv2d")(
        pattern, is_constant(), is_constant(), is_constant(), is_constant(), is_constant()
    )
    pattern = is_op("nn.bias_add")(pattern, is_constant())
    pattern = is_op("qnn.requantize")(
        pattern, is_constant(), is_constant(), is_constant(), is_constant()
    )
    return pattern.optional(lambda x: is_op("clip")(x))


def qnn_conv3d_pattern():
    """A row naming an op partita lacks: TVM builds it and it never matches."""
    return is_op("qnn.conv3d")(wildcard(), is_constant())


def max_pool2d_pattern():
    return is_op("nn.max_pool2d")(wildcard())


def _conv_of(extract):
    call = extract
    while call.op.name != "qnn.conv2d":
        call = call.args[0]
    return call


def check_qnn_conv2d(extract):
    """8-bit NHWC or NCHW convolutions, strides up to 2, a symmetric (all-zero) kernel."""
    conv = _conv_of(extract)
    attrs = conv.attrs
    if attrs["data_layout"] not in ("NCHW", "NHWC") or max(attrs.strides) > 2:
        return False
    if conv.args[0].checked_type.dtype not in ("int8", "uint8"):
        return False
    kernel_zp = conv.args[3].data.numpy()
    if np.any(kernel_zp != 0):
        return False
    return isinstance(conv.op, relay.op.Op) and dict(attrs)["groups"] >= 1


def check_max_pool2d(extract):
    return extract.checked_type.dtype == "int8" and tuple(extract.attrs.pool_size) == (2, 2)


@register_pattern_table("toy-npu")
def pattern_table():
    return [
        ("toy-npu.qnn_conv3d", qnn_conv3d_pattern(), lambda extract: True),
        ("toy-npu.qnn_conv2d", qnn_conv2d_pattern(), check_qnn_conv2d),
        ("toy-npu.max_pool2d", max_pool2d_pattern(), check_max_pool2d),
    ]


def partition_for_toy_npu(mod, params=None):
    """Partition ``mod`` for the toy NPU (TVM's partition_for_<target> shape)."""
    if params:
        mod["main"] = bind_params_by_name(mod["main"], params)
    seq = transform.Sequential(
        [
            transform.InferType(),
            transform.MergeComposite(pattern_table()),
            transform.AnnotateTarget("toy-npu"),
            transform.MergeCompilerRegions(),
            transform.PartitionGraph(),
        ]
    )
    return seq(mod)
