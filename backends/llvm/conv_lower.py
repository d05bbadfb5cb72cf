"""Lowering of float32 convolutions to the float GEMM (float_gemm.py):

    nn.conv2d NHWC, groups 1, constant weights, exact sums    [FIM2COL] -> FDENSE (+ bias, relu)

A 1x1, stride-1, unpadded convolution is a product of its input read as (N*H*W) x C rows; any
other is one after IM2COL copies each output pixel's window (zero padding) into a
(N*OH*OW) x (KH*KW*C) buffer. The weights are packed at compile time as the GEMM's [K][N]
panels (K in the window's (ky, kx, c) order), a following bias add (per output channel) and relu
run in the product's epilogue. Sums are float32 (tests allow float32 rounding against the
reference's exact sums); ``accumulate`` other than "exact" (ONNX Runtime's or PyTorch's own
summation order, which a following quantize could tell apart) is left to the ``ref`` host.
"""

from __future__ import annotations

import numpy as np

from partita.ir import Constant

from .float_lower import panels


def lower_fconv(low, call) -> bool:
    """nn.conv2d as above on ``low`` (a lower._Lowering), or False to refuse it by name."""
    x, w = call.args
    a = call.attrs
    if (
        a.data_layout != "NHWC"
        or a.groups != 1
        or a.accumulate != "exact"
        or not isinstance(w, Constant)
        or x.checked_type.dtype != "float32"
        or np.asarray(w.data).dtype != np.float32
    ):
        return False
    weights = np.transpose(np.asarray(w.data), [a.kernel_layout.index(c) for c in "HWIO"])
    kh, kw, c, o = weights.shape
    n = int(x.checked_type.shape[0])
    _, oh, ow, _ = (int(d) for d in call.checked_type.shape)
    pointwise = (kh, kw) == (1, 1) and tuple(a.strides) == (1, 1) and not any(a.padding)
    if not pointwise and n != 1:
        return False  # IM2COL walks one image
    src = low.src(x)
    if not pointwise:
        params = {"strides": list(a.strides), "dilation": list(a.dilation),
                  "padding": list(a.padding), "kernel": [kh, kw], "in_zp": 0}
        src = low.scratch("IM2COL", [src], (n, oh, ow, kh * kw * c), "float32", params)
    wt = np.ascontiguousarray(weights.reshape(kh * kw * c, o).astype(np.float32))
    m = n * oh * ow
    params = {"M": m, "K": kh * kw * c, "N": o, "tb": False, "bias": "none", "vec": o % 16 == 0}
    arrays = {"wt": panels(wt) if params["vec"] else wt}
    if params["vec"] and low.threads > 1 and m >= 16 and m * o * kh * kw * c >= 1 << 22:
        params["threads"] = 2
    last = _epilogue(low, call, o, params, arrays)
    low.emit("FDENSE", last, [src], params, arrays)
    return True


def _epilogue(low, call, n: int, params: dict, arrays: dict):
    """Absorb a following bias add and relu into the product; the last node it computes."""
    chain = [call]
    bias = _bias(low, call, n)
    if bias is not None:
        chain.append(bias)
        params["bias"] = "n"
        arrays["bias"] = np.asarray(bias.args[1].data, np.float32).reshape(-1)
    relu = low.only_user(chain[-1], "nn.relu")
    if relu is not None and params["vec"]:
        chain.append(relu)
        params["relu"] = True
    for node in chain[1:]:
        low.absorbed.add(id(node))
    return chain[-1]


def _bias(low, call, n: int):
    """The nn.bias_add (last axis) or add of a constant [n] vector that only reads ``call``."""
    for name in ("nn.bias_add", "add"):
        node = low.only_user(call, name)
        if node is None or node.args[0] is not call or not isinstance(node.args[1], Constant):
            continue
        bias = np.asarray(node.args[1].data)
        axis = getattr(node.attrs, "axis", -1) if name == "nn.bias_add" else -1
        if bias.dtype == np.float32 and bias.size == n and axis in (-1, 3) and (
            name == "nn.bias_add" or bias.shape[-1:] == (n,)
        ):
            return node
    return None


def ungrouped(w: np.ndarray, groups: int, cin: int, w_zp: np.ndarray) -> np.ndarray:
    """OHWI weights of a grouped convolution (I = cin / groups) as a full one over all cin
    channels: each output's own group holds its weights, the others its zero point."""
    o, kh, kw, per = w.shape
    full = np.empty((o, kh, kw, cin), w.dtype)
    full[...] = w_zp.astype(w.dtype).reshape(o, 1, 1, 1)
    outs = o // groups
    for i in range(o):
        g = i // outs
        full[i, :, :, g * per : (g + 1) * per] = w[i]
    return full
