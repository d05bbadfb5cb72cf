"""The integer-semantics variant of a PT2E program (x86 quantizers): a convolution whose output
feeds a residual add before it is quantized.

X86InductorQuantizer annotates conv + add as one fused group: the convolution's output is never
quantized, so after the QDQ -> QNN rewrites it stays a float convolution of dequantized operands
added to a dequantized residual and quantized once (oneDNN's conv with a sum post-op). An NPU
computes such a group as two integer ops, as TFLite's converter writes it; the variant does the
same:

    qnn.quantize(add(qnn.dequantize(r), bias_add(nn.conv2d(qnn.dequantize(x), qnn.dequantize(W)),
                                                  qnn.dequantize(B))), s_o, zp_o)
->  qnn.add(qnn.requantize(bias_add(qnn.conv2d(x, W), B), s_x * s_w -> s_o, zp_o), r, -> s_o, zp_o)

The convolution's sum is requantized to the add's output parameters (the only scale the model
gives for it), so the variant can differ from PyTorch by a rounding step there (the report says
so, as for every variant). Groups of any other form are left as they are.
"""

from __future__ import annotations

import numpy as np

from partita.ir import Call, Constant, ExprMutator, IRModule
from partita.ops import get_op
from partita.passes.infer_type import infer_type


def _op(e) -> str:
    return getattr(getattr(e, "op", None), "name", "") if isinstance(e, Call) else ""


def _dq(e):
    """(value, scale, zero point, axis) of qnn.dequantize with constant parameters."""
    if _op(e) != "qnn.dequantize" or not all(isinstance(a, Constant) for a in e.args[1:3]):
        return None
    return e.args[0], e.args[1], e.args[2], e.attrs.axis


def _conv_group(e):
    """(conv call, x dq, w dq, bias dq or None) of bias_add?(nn.conv2d(dq(x), dq(W)))."""
    bias = None
    if _op(e) == "nn.bias_add":
        bias = _dq(e.args[1])
        if bias is None or not isinstance(bias[0], Constant):
            return None
        e = e.args[0]
    if _op(e) != "nn.conv2d":
        return None
    x, w = _dq(e.args[0]), _dq(e.args[1])
    if x is None or w is None or not isinstance(w[0], Constant):
        return None
    return e, x, w, bias


def _rewrite(q: Call):
    add = q.args[0]
    if _op(add) != "add" or not all(isinstance(a, Constant) for a in q.args[1:3]):
        return None
    for conv_side, res_side in ((1, 0), (0, 1)):
        group, res = _conv_group(add.args[conv_side]), _dq(add.args[res_side])
        if group is not None and res is not None:
            break
    else:
        return None
    conv, (xq, s_x, zp_x, _), (wq, s_w, zp_w, w_axis), bias = group
    a = conv.attrs
    if a.groups != 1 and a.groups != xq.checked_type.shape[1 if a.data_layout == "NCHW" else 3]:
        return None
    channel_axis = 1 if a.data_layout == "NCHW" else 3
    s_prod = (np.float64(s_x.data) * np.asarray(s_w.data, np.float64)).reshape(-1)
    if bias is not None:
        b, s_b, zp_b, _ = bias
        if b.data.dtype != np.int32 or np.any(np.asarray(zp_b.data) != 0):
            return None
        s_b = np.asarray(s_b.data, np.float64).reshape(-1)
        if s_b.shape != s_prod.shape and s_b.size != 1:
            return None
        if not np.allclose(s_b, s_prod, rtol=1e-6, atol=0):
            return None
    qconv = get_op("qnn.conv2d")
    attrs = qconv.make_attrs(
        {
            "strides": a.strides,
            "padding": a.padding,
            "dilation": a.dilation,
            "groups": a.groups,
            "channels": a.channels,
            "kernel_size": a.kernel_size,
            "data_layout": a.data_layout,
            "kernel_layout": a.kernel_layout,
            "out_dtype": "int32",
        }
    )
    acc = Call(qconv, [xq, wq, zp_x, zp_w, s_x, s_w], attrs, conv.span)
    if bias is not None:
        acc = Call(
            get_op("nn.bias_add"),
            [acc, bias[0]],
            get_op("nn.bias_add").make_attrs({"axis": channel_axis}),
            conv.span,
        )
    s_o, zp_o = q.args[1], q.args[2]
    dtype = q.attrs.out_dtype
    scale = Constant(s_prod.astype(np.float32) if s_prod.size > 1 else np.float32(s_prod[0]))
    rq_op = get_op("qnn.requantize")
    y = Call(
        rq_op,
        [acc, scale, Constant(np.int32(0)), s_o, zp_o],
        rq_op.make_attrs({"axis": channel_axis, "out_dtype": dtype, "semantics": "onnx"}),
        conv.span,
    )
    rq, s_r, zp_r, _ = res
    if rq.checked_type.dtype != dtype:
        return None
    qadd = get_op("qnn.add")
    args = [y, rq, s_o, zp_o, s_r, zp_r, s_o, zp_o]
    if conv_side == 1:
        args = [rq, y, s_r, zp_r, s_o, zp_o, s_o, zp_o]
    return Call(qadd, args, qadd.make_attrs({"out_dtype": dtype, "semantics": "onnx"}), q.span)


class _Fold(ExprMutator):
    def rewrite_call(self, call, op, args):
        new = super().rewrite_call(call, op, args)
        if _op(new) == "qnn.quantize":
            infer_type(new)  # the rewritten operands below (types are cached: cheap)
            return _rewrite(new) or new
        return new


def fold_residual_convs(mod: IRModule) -> IRModule:
    """``mod`` with every float conv -> residual add -> quantize group as integer ops."""
    out = IRModule({name: _Fold().visit(fn) for name, fn in mod.items()}, dict(mod.attrs))
    infer_type(out["main"])
    return out
