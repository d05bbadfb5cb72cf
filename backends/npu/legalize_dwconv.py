"""DEPTHWISE_CONV_2D with a depth multiplier M > 1 as Vela 5.2 runs it (regor's
DecomposeDepthwiseConv2D): M plain depthwise convolutions, the m-th with the weights, bias and
per-channel scales of output channels m, M + m, 2M + m, ..., each writing one (1, H, W, C) slice
of an (M, H, W, C) map, then a transpose of that map to (H, W, C, M), which is the output
(1, H, W, C * M) in memory:

    clip(requantize(bias_add(qnn.conv2d(x, W, groups=C, C -> C * M))))
    ->  reshape(transpose(concatenate([clip(requantize(bias_add(qnn.conv2d(x, W[.., m::M]))))
                                       for m in range(M)], axis=0), (1, 2, 3, 0)), (1, H, W, C*M))

Every output channel's sum, bias and requantization are the original's, so the result is the
same bits. The NPU runs the M convolutions (``npu.conv2d``), the concatenation and the transpose
(data movement) and the reshape, on 8-bit and 16x8 maps alike; a grouped convolution whose
pieces the NPU would not all take (a piece failing a convolution requirement, 32-bit data) is
left as it is, for the CPU.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from partita.ir import Call, Constant, IRModule, Tuple, post_order
from partita.ops import get_op
from partita.passes import infer_type
from partita.passes.infra import module_pass
from partita.passes.rewrite_util import TypedScopedMutator, rewrite_module, typed

from . import constraints as C


def _name(e) -> str:
    return getattr(getattr(e, "op", None), "name", "") if isinstance(e, Call) else ""


def _chain(root: Call):
    """(clip or None, requantize, bias_add or None, conv) of a convolution's output chain, or
    None when ``root`` is not one with a depth multiplier above 1."""
    clip = root if _name(root) == "clip" else None
    rq = root.args[0] if clip is not None else root
    if _name(rq) != "qnn.requantize":
        return None
    acc = rq.args[0]
    bias = acc if _name(acc) == "nn.bias_add" else None
    conv = acc.args[0] if bias is not None else acc
    if _name(conv) != "qnn.conv2d":
        return None
    a = conv.attrs
    x = conv.args[0].checked_type
    if a.data_layout != "NHWC" or x.ndim != 4 or not isinstance(conv.args[1], Constant):
        return None
    cin, cout = int(x.shape[3]), int(conv.checked_type.shape[3])
    if a.groups != cin or cin < 2 or cout <= cin or cout % cin:
        return None  # one input channel: a plain convolution, which the NPU runs as it is
    if (
        "I" not in a.kernel_layout
        or conv.args[1].checked_type.shape[a.kernel_layout.index("I")] != 1
    ):
        return None
    return clip, rq, bias, conv


def _every(value: Constant, m: int, mult: int) -> Constant:
    """A per-channel constant's channels m, m + M, ... (a scalar as it is)."""
    data = np.asarray(value.data)
    if data.ndim == 0 or data.size == 1:
        return value
    return typed(Constant(np.ascontiguousarray(data[m::mult])))


def _piece(chain, x, m: int, mult: int):
    """The m-th depthwise convolution's output chain (typed)."""
    clip, rq, bias, conv = chain
    a = conv.attrs
    o = a.kernel_layout.index("O")
    w = np.asarray(conv.args[1].data)
    w = np.ascontiguousarray(np.take(w, np.arange(m, w.shape[o], mult), axis=o))
    cin = w.shape[o]
    attrs = conv.op.make_attrs({**_attrs(a), "channels": cin})
    args = [x, typed(Constant(w)), conv.args[2], _every(conv.args[3], m, mult), conv.args[4]]
    args.append(_every(conv.args[5], m, mult))
    out = typed(Call(conv.op, args, attrs, conv.span))
    if bias is not None:
        out = typed(Call(bias.op, [out, _every(bias.args[1], m, mult)], bias.attrs, bias.span))
    rq_args = [out] + [_every(c, m, mult) for c in rq.args[1:]]
    out = typed(Call(rq.op, rq_args, rq.attrs, rq.span))
    if clip is not None:
        out = typed(Call(clip.op, [out], clip.attrs, clip.span))
    return out


def _attrs(a) -> dict:
    return {f.name: getattr(a, f.name) for f in dataclasses.fields(a)}


CHECKS = tuple(c for c in C.CONV if c is not C.groups)


def as_depthwise_pieces(call: Call, new: Call):
    """``call`` (typed; a convolution chain's clip or requantize) rewritten as M depthwise
    convolutions, a concatenation, a transpose and a reshape, or None. ``new`` is its rewritten
    copy, whose input is the one the pieces read."""
    chain = _chain(call)
    if chain is None:
        return None
    clip, rq, bias, conv = chain
    if call.checked_type.dtype not in C.WIDE_DTYPES:
        return None
    mult = int(conv.checked_type.shape[3]) // int(conv.args[0].checked_type.shape[3])
    x = new
    while x is not None and _name(x) != "qnn.conv2d":
        x = x.args[0] if isinstance(x, Call) and x.args else None
    if x is None:
        return None
    pieces = [_piece(chain, x.args[0], m, mult) for m in range(mult)]
    if not all(check(p).ok for p in pieces for check in CHECKS):
        return None
    span = call.span
    concat, perm, reshape = get_op("concatenate"), get_op("transpose"), get_op("reshape")
    out = typed(Call(concat, [typed(Tuple(pieces))], concat.make_attrs({"axis": 0}), span))
    out = typed(Call(perm, [out], perm.make_attrs({"axes": (1, 2, 3, 0)}), span))
    shape = tuple(int(d) for d in call.checked_type.shape)
    return typed(Call(reshape, [out], reshape.make_attrs({"newshape": shape}), span))


class _LegalizeMultiplier(TypedScopedMutator):
    def __init__(self, mod: IRModule, clipped: set[int]):
        super().__init__(mod)
        self.clipped = clipped  # requantizes whose clip rewrites them

    def scope(self):
        return type(self)(self.mod, self.clipped)

    def rewrite_call(self, call, op, args):
        new = super().rewrite_call(call, op, args)
        if id(call) in self.clipped:
            return new
        return as_depthwise_pieces(call, new) or new


@module_pass("NPULegalizeDepthMultiplier", opt_level=0)
def NPULegalizeDepthMultiplier(mod: IRModule, ctx) -> IRModule:
    """Every depthwise convolution with a depth multiplier the NPU can run, as Vela's
    depthwise convolutions and transpose."""
    clipped: set[int] = set()
    found = False
    for _, fn in mod.items():
        for n in post_order(fn):
            if _name(n) == "qnn.conv2d" and n.attrs.groups > 1:
                found = True
            if _name(n) == "clip" and _name(n.args[0]) == "qnn.requantize":
                clipped.add(id(n.args[0]))
    if not found:
        return mod
    for _, fn in mod.items():
        infer_type(fn, mod)  # the checks read the original's types
    out = rewrite_module(mod, lambda m: _LegalizeMultiplier(m, clipped))
    for _, fn in out.items():
        infer_type(fn, out)
    return out
