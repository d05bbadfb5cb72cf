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


# ---- SUM: TFLite's int8 SUM over any of H, W and the channels, as a convolution ----------------


def _sum_as_conv(call: Call, new: Call):
    """qnn.requantize(sum(cast(x, int32), axis), s_in, zp_in * n, s_out, zp_out), the frontend's
    int8 SUM (TFLite's builtin arithmetic as a "tflite_double" requantize, or the reference
    one), as a convolution with all-ones int8 weights (input zero
    point zp_in: the int32 sum S - zp_in * n) and the same requantize with input zero point 0,
    then a reshape to the sum's shape (none with keepdims): the same bits. A sum over the
    channels (and any of H, W) is a convolution to one channel with the summed H x W as its
    window, one over H and/or W alone a depthwise convolution; a sum over all of H x W with H or
    W above the NPU's 64-element window reads the map reshaped to a window that fits
    (``_sum_window``). Vela runs SUM on the NPU too. ``call`` is the typed original (what
    decides), ``new`` its rewritten copy (what is built on; typed afterwards)."""
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
    axes = tuple(sorted({int(a) % 4 for a in total.attrs.axis})) if total.attrs.axis else ()
    b, h, w, c = (int(d) for d in xt.shape)
    if not axes or (0 in axes and b != 1):
        return None
    axes = tuple(a for a in axes if a)  # a batch of one sums over nothing
    dims = {1: h, 2: w, 3: c}
    n = int(np.prod([dims[a] for a in axes]))
    zp_n = int(np.asarray(call.args[2].data).reshape(()))
    if zp_n % n:
        return None
    zp_in = zp_n // n
    kh, kw = (h if 1 in axes else 1), (w if 2 in axes else 1)
    reshape, conv = get_op("reshape"), get_op("qnn.conv2d")
    if 3 not in axes and kh * kw > MAX_WINDOW:
        # a window of more than 64 values: the summed values moved into the channels (and W)
        # by a transpose, summed by the MAC array 32 channels at a time (Vela moves them too,
        # for its ReduceSum); a convolution to one channel as below
        order, newshape = _sum_transpose(axes, h, w, c)
        perm = get_op("transpose")
        x = Call(perm, [x], perm.make_attrs({"axes": order}), total.span)
        h, w, c = (dims[a] for a in order[1:])
        if newshape is not None:
            x = Call(reshape, [x], reshape.make_attrs({"newshape": newshape}), total.span)
            h, w, c = newshape[1:]
        kh, kw, axes = 1, (w if order[2] in axes else 1), (3,)
    if max(kh, kw) > MAX_WINDOW:
        return None
    if 3 in axes:  # over the channels too: a convolution to one channel
        weights, groups, layout, channels = np.ones((1, kh, kw, c), "int8"), 1, "OHWI", 1
    else:  # depthwise: one sum per channel
        weights, groups, layout, channels = np.ones((kh, kw, c, 1), "int8"), c, "HWOI", c
    attrs = conv.make_attrs(
        {
            "strides": (1, 1),
            "padding": (0, 0, 0, 0),
            "dilation": (1, 1),
            "groups": groups,
            "data_layout": "NHWC",
            "kernel_layout": layout,
            "kernel_size": (kh, kw),
            "channels": channels,
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
    if shape == (1, h - kh + 1, w - kw + 1, channels):
        return req  # keepdims: the convolution's output has the sum's shape
    reshape = get_op("reshape")
    return Call(reshape, [req], reshape.make_attrs({"newshape": shape}), call.span)


MAX_WINDOW = 64  # the NPU's kernel height and width (constraints.kernel_size)


def _sum_transpose(axes: tuple[int, ...], h: int, w: int, c: int):
    """(permutation, reshape or None) putting the summed axes (of 1, 2) last in an NHWC map: H
    or W alone into the channels; H and W into W and the channels, the one of at most 64 values
    in W (the convolution's window), or both into the channels (a reshape) if neither fits."""
    if axes == (1,):
        return (0, 2, 3, 1), None
    if axes == (2,):
        return (0, 1, 3, 2), None
    if h <= MAX_WINDOW:
        return (0, 3, 1, 2), None
    if w <= MAX_WINDOW:
        return (0, 3, 2, 1), None
    return (0, 3, 1, 2), (1, c, 1, h * w)


class _LegalizeSum(ExprMutator):
    def rewrite_call(self, call, op, args):
        new = super().rewrite_call(call, op, args)
        if getattr(new.op, "name", "") != "qnn.requantize":
            return new
        return _sum_as_conv(call, new) or new


@module_pass("NPULegalizeSum", opt_level=0)
def NPULegalizeSum(mod: IRModule, ctx) -> IRModule:
    """Every int8 SUM (over any of H, W and the channels) the NPU can run, as a convolution."""
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
