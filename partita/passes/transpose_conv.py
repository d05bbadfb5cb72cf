"""Transposed convolutions as ordinary convolutions (Vela's way, which the NPU and the llvm host
both use): TFLite's TRANSPOSE_CONV, imported as qnn.conv2d_transpose (NHWC, OHWI), becomes a
zero insertion and an ordinary convolution with the kernel flipped in H and W:

    qnn.conv2d_transpose(%x, W, zp_x, zp_w, s_x, s_w, strides=(s, s), padding=(t, l, b, r))
->  qnn.conv2d(nn.dilate(%x, strides=(1, s, s, 1), dilation_value=zp_x), W[:, ::-1, ::-1, :],
               zp_x, zp_w, s_x, s_w, padding=(kh-1-t, kw-1-l, kh-1-b+op_h, kw-1-r+op_w))

Both are the same exact int32 sum (the inserted values are the zero point, so they add
nothing), so the rewrite changes no bit anywhere; the convolution then fuses with its bias,
requantization and activation like any other. Transposed convolutions this cannot express
(groups, dilation, padding wider than the kernel) are left as they are.
"""

from __future__ import annotations

import numpy as np

from partita.ir import Call, Constant, ExprMutator, IRModule, post_order
from partita.ops import get_op

from .infra import module_pass
from .rewrite_util import rewrite_module, typed


def _rewrite(call: Call):
    a = call.attrs
    if (
        a.data_layout != "NHWC"
        or a.kernel_layout != "OHWI"
        or a.groups != 1
        or tuple(a.dilation) != (1, 1)
        or not isinstance(call.args[1], Constant)
        or not isinstance(call.args[2], Constant)
    ):
        return None
    w = np.asarray(call.args[1].data)
    kh, kw = w.shape[1], w.shape[2]
    t, left, b, r = a.padding
    oph, opw = a.output_padding
    pads = (kh - 1 - t, kw - 1 - left, kh - 1 - b + oph, kw - 1 - r + opw)
    if min(pads) < 0:
        return None
    x, _, zp_x, zp_w, s_x, s_w = call.args
    sh, sw = a.strides
    dilated = Call(
        get_op("nn.dilate"),
        [x],
        get_op("nn.dilate").make_attrs(
            {"strides": (1, int(sh), int(sw), 1), "dilation_value": float(zp_x.data)}
        ),
        call.span,
    )
    flipped = typed(Constant(np.ascontiguousarray(w[:, ::-1, ::-1, :])))
    conv = get_op("qnn.conv2d")
    attrs = conv.make_attrs(
        {
            "strides": (1, 1),
            "padding": pads,
            "dilation": (1, 1),
            "groups": 1,
            "data_layout": "NHWC",
            "kernel_layout": "OHWI",
            "out_dtype": a.out_dtype,
        }
    )
    return Call(conv, [dilated, flipped, zp_x, zp_w, s_x, s_w], attrs, call.span)


class _Legalize(ExprMutator):
    def rewrite_call(self, call, op, args):
        new = super().rewrite_call(call, op, args)
        if getattr(new.op, "name", "") != "qnn.conv2d_transpose":
            return new
        out = _rewrite(new)
        if out is None:
            return new
        typed(out.args[0])
        return typed(out)


@module_pass("LegalizeTransposeConv", opt_level=0)
def LegalizeTransposeConv(mod: IRModule, ctx) -> IRModule:
    """Every qnn.conv2d_transpose that can be written so, as nn.dilate + qnn.conv2d."""
    if not any(
        getattr(getattr(n, "op", None), "name", "") == "qnn.conv2d_transpose"
        for _, fn in mod.items()
        for n in post_order(fn)
    ):
        return mod
    return rewrite_module(mod, lambda m: _Legalize())
