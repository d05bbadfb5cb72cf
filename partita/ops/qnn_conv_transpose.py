"""``qnn.conv2d_transpose``: Relay's quantized transposed 2-D convolution, the exact integer
accumulator of ``nn.conv2d_transpose`` on zero-point-offset values (a pattern Relay BYOC tables
name, issue 27)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from partita.ir.types import TensorType

from .nn_common import layout_dims, to_layout
from .nn_conv import Conv2DTransposeAttrs, conv2d_transpose_out_shape, conv2d_transpose_reference
from .qnn import mac_params, offset_by_zero_point, quantized
from .registry import choice, register_op


@dataclass(frozen=True)
class QnnConv2DTransposeAttrs(Conv2DTransposeAttrs):
    """nn.conv2d_transpose's attributes (kernel "IOHW" by default, as Relay's
    ``qnn.conv2d_transpose``); out_dtype is the accumulator type."""

    out_dtype: str = choice("int32", "int32", "int64")


def _out_channels(weight: TensorType, attrs) -> int:
    return layout_dims(weight.shape, attrs.kernel_layout, "O")[0] * attrs.groups


def _rel(types, attrs):
    data, weight = quantized(types[0], "data"), quantized(types[1], "weight")
    shape = conv2d_transpose_out_shape(data.shape, weight.shape, attrs)
    o = _out_channels(weight, attrs)
    whose = f"output channel ({o} = kernel {weight.shape}'s O x groups={attrs.groups})"
    mac_params(types, o, whose)
    return TensorType(shape, attrs.out_dtype)


@register_op(
    "qnn.conv2d_transpose",
    inputs=(
        "data",
        "weight",
        "input_zero_point",
        "kernel_zero_point",
        "input_scale",
        "kernel_scale",
    ),
    attrs=QnnConv2DTransposeAttrs,
    type_rel=_rel,
    kind="out_elemwise_fusable",
)
def qnn_conv2d_transpose(
    data, weight, input_zero_point, kernel_zero_point, input_scale, kernel_scale, attrs
):
    """Quantized transposed 2-D convolution: ``out = conv2d_transpose(data - zp_in,
    weight - zp_w)`` summed exactly and wrapped to out_dtype, zp_w scalar or one per output
    channel (output channel g*Og + o reads kernel column o of group g). The scales only type the
    result: its scale is input_scale * kernel_scale."""
    x = offset_by_zero_point(data, input_zero_point, data.ndim, 0)
    w = to_layout(weight, attrs.kernel_layout, "IOHW").astype(np.int64)
    c, og, kh, kw = w.shape
    g = attrs.groups
    zp = kernel_zero_point.astype(np.int64).reshape(-1)
    zp = zp.reshape(g, 1, og, 1, 1) if zp.size > 1 else zp.reshape(())
    w = (w.reshape(g, c // g, og, kh, kw) - zp).reshape(c, og, kh, kw)
    iohw = Conv2DTransposeAttrs(
        strides=attrs.strides,
        padding=attrs.padding,
        dilation=attrs.dilation,
        groups=g,
        data_layout=attrs.data_layout,
        kernel_layout="IOHW",
        output_padding=attrs.output_padding,
    )
    return conv2d_transpose_reference(x, w, iohw).astype(attrs.out_dtype)
