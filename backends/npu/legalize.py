"""The NPU runs a transposed convolution as Vela does: a zero insertion (nn.dilate) and an
ordinary convolution with the kernel flipped (partita.passes.transpose_conv, which the llvm host
uses too)."""

from __future__ import annotations

import numpy as np

from partita.ir import Call, Constant, ExprMutator, IRModule, post_order
from partita.ops import get_op
from partita.passes import infer_type
from partita.passes.infra import module_pass
from partita.passes.rewrite_util import rewrite_module, typed
from partita.passes.transpose_conv import LegalizeTransposeConv


@module_pass("NPULegalizeTransposeConv", opt_level=0)
def NPULegalizeTransposeConv(mod: IRModule, ctx) -> IRModule:
    """Every qnn.conv2d_transpose the NPU can run as nn.dilate + qnn.conv2d."""
    return LegalizeTransposeConv()(mod)


# ---- SUM: TFLite's int8 SUM over the channels, or over H and W, as a convolution ---------------


def _sum_as_conv(call: Call, new: Call):
    """qnn.requantize(sum(cast(x, int32), axis), s_in, zp_in * n, s_out, zp_out), the frontend's
    int8 SUM (TFLite's builtin arithmetic as a "tflite_double" requantize, or the reference
    one), as a convolution with all-ones int8 weights (input zero
    point zp_in: the int32 sum S - zp_in * n) and the same requantize with input zero point 0,
    then a reshape to the sum's shape: the same bits. Over the channels a 1x1 convolution to one
    channel; over H and W a depthwise convolution with an H x W kernel. Vela runs SUM on the
    NPU too (as its ReduceSum block). ``call`` is the typed original (what decides), ``new``
    its rewritten copy (what is built on; typed afterwards)."""
    if call.attrs.semantics not in ("tflite", "tflite_double"):
        return None
    if call.attrs.out_dtype not in ("int8", "uint8"):
        return None
    total = call.args[0]
    if not (isinstance(total, Call) and getattr(total.op, "name", "") == "sum"):
        return None
    cast = total.args[0]
    if not (isinstance(cast, Call) and getattr(cast.op, "name", "") == "cast"):
        return None
    xt = cast.args[0].checked_type
    x = new.args[0].args[0].args[0]
    if xt.dtype not in ("int8", "uint8") or cast.checked_type.dtype != "int32" or xt.ndim != 4:
        return None
    if not all(isinstance(a, Constant) for a in call.args[1:]):
        return None
    axes = tuple(sorted(int(a) % 4 for a in total.attrs.axis)) if total.attrs.axis else ()
    _, h, w, c = (int(d) for d in xt.shape)
    n = {(3,): c, (1, 2): h * w}.get(axes)
    if n is None or (axes == (1, 2) and max(h, w) > 64):
        return None
    zp_n = int(np.asarray(call.args[2].data).reshape(()))
    if zp_n % n:
        return None
    zp_in = zp_n // n
    wdtype = "int8"
    conv = get_op("qnn.conv2d")
    if axes == (3,):
        weights, groups, layout, kernel = np.ones((1, 1, 1, c), wdtype), 1, "OHWI", (1, 1)
    else:
        weights, groups, layout, kernel = np.ones((h, w, c, 1), wdtype), c, "HWOI", (h, w)
    attrs = conv.make_attrs(
        {
            "strides": (1, 1),
            "padding": (0, 0, 0, 0),
            "dilation": (1, 1),
            "groups": groups,
            "data_layout": "NHWC",
            "kernel_layout": layout,
            "kernel_size": kernel,
            "channels": 1 if axes == (3,) else c,
            "out_dtype": "int32",
        }
    )
    zp = typed(Constant(np.asarray(zp_in, np.int32)))
    acc = Call(
        conv,
        [
            x,
            typed(Constant(weights)),
            zp,
            typed(Constant(np.asarray(0, np.int32))),
            call.args[1],
            typed(Constant(np.asarray(1.0, np.float32))),
        ],
        attrs,
        total.span,
    )
    args = [acc, call.args[1], typed(Constant(np.asarray(0, np.int32))), *call.args[3:]]
    req = Call(call.op, args, call.attrs, call.span)
    shape = tuple(int(d) for d in call.checked_type.shape)
    reshape = get_op("reshape")
    return Call(reshape, [req], reshape.make_attrs({"newshape": shape}), call.span)


class _LegalizeSum(ExprMutator):
    def rewrite_call(self, call, op, args):
        new = super().rewrite_call(call, op, args)
        if getattr(new.op, "name", "") != "qnn.requantize":
            return new
        return _sum_as_conv(call, new) or new


@module_pass("NPULegalizeSum", opt_level=0)
def NPULegalizeSum(mod: IRModule, ctx) -> IRModule:
    """Every int8 SUM (over the channels or over H and W) the NPU can run, as a convolution."""
    if not any(
        getattr(getattr(n, "op", None), "name", "") == "sum"
        for _, fn in mod.items()
        for n in post_order(fn)
    ):
        return mod
    out = rewrite_module(mod, lambda m: _LegalizeSum())
    for _, fn in out.items():
        infer_type(fn, out)
    return out
