"""Lowering of float32 convolutions (NHWC; backends/llvm/layout.py converts NCHW graphs):

    nn.conv2d, groups 1, exact sums, O % 16 = 0 [IM2COL] -> FDENSE (+ bias, relu)
    nn.conv2d depthwise (any accumulate)        FPAD -> FDW (+ bias, relu)
    nn.conv2d otherwise (grouped; "mlas",       [FIM2COL] -> FCONV (+ bias, relu)
      "torch_cpu": another runtime's order)
    nn.global_avg_pool2d "mlas" / "torch_cpu"   FGAP (NHWC or NCHW)

Exact sums (the interpreter's float64, rounded once) are float32 FMA chains here, within
float32 rounding of the reference. ONNX Runtime's ("mlas") and PyTorch's ("torch_cpu") float32
orders are reproduced bit for bit: sum_order.py turns the order into tiles of K blocks that
the kernels (conv.py, depthwise.py) follow per output; im2col's k order is (channel, kernel row,
kernel column) as theirs. Weights may be constant expressions (a dequantize of int8 weights,
transposed by the layout pass): they are evaluated here with the ops' references.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.errors import refuse
from partita.backends.llvm.kinds import Kind
from partita.backends.llvm.numerics.sum_order import (
    ConvShape,
    Tile,
    Unreproduced,
    conv_tiles,
    uniform_blocks,
)

from partita.ir import Call, Constant, Function

from .float_products import gemm_tile, panels, vector_registers
from .float_winograd import eligible as winograd_ok
from .float_winograd import lower_winograd
from .registry import OP, lowers

if TYPE_CHECKING:
    from .context import LowerContext

VEC = 16
MAX_POOL_PIXELS = 1 << 12  # FGAP's add sequence is straight-line code


@lowers("nn.conv2d", priority=OP)
def lower_fconv(low: LowerContext, call) -> bool:
    """nn.conv2d as above on ``low`` (a context.LowerContext), or False to refuse it by name."""
    x, w = call.args
    a = call.attrs
    weights = const_value(low, w)
    if (
        a.data_layout != "NHWC"
        or x.checked_type.dtype != "float32"
        or weights is None
        or weights.dtype != np.float32
    ):
        return False
    weights = np.transpose(weights, [a.kernel_layout.index(c) for c in "HWIO"])
    n = int(x.checked_type.shape[0])
    _, oh, ow, _ = (int(d) for d in call.checked_type.shape)
    if (a.accumulate == "exact" and winograd_ok(low, call, weights, n, oh, ow)
            and lower_winograd(low, call, weights, epilogue)):
        return True  # 2 x 2 outputs from 16 products of C x O (float_winograd.py)
    if (a.accumulate == "exact" and a.groups == 1 and weights.shape[3] % VEC == 0
            and _lower_gemm(low, call, weights)):
        return True  # FDENSE's panels (two threads for large products); else FCONV's tails
    return _lower_ordered(low, call, weights)


def _lower_gemm(low: LowerContext, call, weights) -> bool:
    x, a = call.args[0], call.attrs
    kh, kw, c, o = weights.shape
    n = int(x.checked_type.shape[0])
    _, oh, ow, _ = (int(d) for d in call.checked_type.shape)
    pointwise = (kh, kw) == (1, 1) and tuple(a.strides) == (1, 1) and not any(a.padding)
    if not pointwise and n != 1:
        return False  # IM2COL walks one image (FIM2COL and FCONV take batches)
    src = low.src(x)
    m = n * oh * ow
    params = {"M": m, "K": kh * kw * c, "N": o, "tb": False, "bias": "none", "vec": o % 16 == 0,
              **gemm_tile(low.isa)}
    wt = np.ascontiguousarray(weights.reshape(kh * kw * c, o).astype(np.float32))
    arrays = {"wt": panels(wt, 16 * params["cols"]) if params["vec"] else wt}
    if not pointwise and params["vec"]:
        # no im2col copy: the product reads each tap from the (zero-padded) image in place,
        # row m at pixel (m // OW * sh, m % OW * sw) plus the tap's offset (emit/float/gemm.py)
        top, left, bottom, right = a.padding
        h, w = (int(d) for d in x.checked_type.shape[1:3])
        hp, wp = h + top + bottom, w + left + right
        if any(a.padding):
            src = low.scratch(Kind.FPAD, [src], (1, hp, wp, c), "float32",
                              {"padding": list(a.padding)})
        (dh, dw), taps = a.dilation, np.arange(c)
        koff = [(ky * dh * wp + kx * dw) * c + taps for ky in range(kh) for kx in range(kw)]
        arrays["koff"] = np.concatenate(koff).astype(np.int32)
        params["implicit"] = [wp, c, list(a.strides), ow]
    elif not pointwise:
        im2col = {"strides": list(a.strides), "dilation": list(a.dilation),
                  "padding": list(a.padding), "kernel": [kh, kw], "in_zp": 0}
        src = low.scratch(Kind.IM2COL, [src], (n, oh, ow, kh * kw * c), "float32", im2col)
    if params["vec"] and low.threads > 1 and m >= 16 and m * o * kh * kw * c >= SPLIT_MACS:
        params["threads"] = 2
    last = epilogue(low, call, o, params, arrays, params["vec"], residual=params["vec"])
    inputs = [src] + ([low.src(params.pop("residual_of"))] if "residual_of" in params else [])
    low.emit(Kind.FDENSE, last, inputs, params, arrays)
    return True


def _lower_ordered(low: LowerContext, call, weights) -> bool:
    """Grouped or depthwise convolutions, and any in MLAS's or PyTorch's order."""
    x, a = call.args[0], call.attrs
    kh, kw, cg, o = weights.shape
    n, h, wd, c = (int(d) for d in x.checked_type.shape)
    _, oh, ow, _ = (int(d) for d in call.checked_type.shape)
    g = a.groups
    shape = ConvShape(n, g, o // g, cg, kh, kw, h, wd, oh * ow, tuple(a.strides),
                      tuple(a.padding), tuple(a.dilation), a.threads)
    try:
        tiles = conv_tiles(a.accumulate, shape)
    except Unreproduced as e:
        refuse(call, f"accumulate={a.accumulate!r} with threads={a.threads}: {e}")
    blocks = uniform_blocks(tiles)
    if g == c == o and blocks is not None and not any(b[2].startswith("lanes") for b in blocks):
        return _lower_depthwise(low, call, weights, blocks)
    return _lower_tiles(low, call, weights, shape, tiles)


def _lower_depthwise(low: LowerContext, call, weights, blocks) -> bool:
    x, a = call.args[0], call.attrs
    kh, kw, _, c = weights.shape
    n, h, w, _ = (int(d) for d in x.checked_type.shape)
    top, left, bottom, right = a.padding
    cp = -(-c // VEC) * VEC
    pad = low.scratch(Kind.FPAD, [low.src(x)], (n, h + top + bottom, w + left + right, cp),
                      "float32", {"padding": list(a.padding)})
    wt = np.zeros((kh * kw, cp), np.float32)
    wt[:, :c] = weights.reshape(kh * kw, c)
    params = {"kernel": [kh, kw], "strides": list(a.strides), "dilation": list(a.dilation),
              "blocks": [list(b) for b in blocks], "bias": "none"}
    arrays = {"wt": wt}
    last = epilogue(low, call, c, params, arrays, True, cp)
    low.emit(Kind.FDW, last, [pad], params, arrays)
    return True


def _lower_tiles(low: LowerContext, call, weights, s: ConvShape, tiles: list[Tile]) -> bool:
    x, a = call.args[0], call.attrs
    kh, kw, cg, o = weights.shape
    g, m = s.groups, s.m
    src = low.src(x)
    k = cg * kh * kw
    if not ((kh, kw) == (1, 1) and tuple(a.strides) == (1, 1) and not any(a.padding)):
        oh, ow = (int(d) for d in call.checked_type.shape[1:3])
        params = {"strides": list(a.strides), "dilation": list(a.dilation),
                  "padding": list(a.padding), "kernel": [kh, kw], "out": [oh, ow]}
        src = low.scratch(Kind.FIM2COL, [src], (s.images, oh, ow, k * g), "float32", params)
    # weights per group as [k][m] in im2col's (channel, row, column) order, m padded so that
    # every tile's last vector reads inside
    mp = max(t.m0 + -(-(t.m1 - t.m0) // VEC) * VEC for t in tiles)
    per = weights.reshape(kh, kw, cg, g, m).transpose(3, 2, 0, 1, 4).reshape(g, k, m)
    wt = np.zeros((g, k, mp), np.float32)
    wt[:, :, :m] = per
    params = {"images": s.images, "size": s.size, "G": g, "M": m, "Kg": k, "lda": k * g,
              "Mp": mp, "O": o, "bias": "none", "regs": vector_registers(low.isa),
              "tiles": [[t.p0, t.p1, t.m0, t.m1, [list(b) for b in t.blocks]] for t in tiles]}
    arrays = {"wt": wt}
    last = epilogue(low, call, o, params, arrays, True, (g - 1) * m + mp)
    last = quantize_epilogue(low, last, params, arrays)
    low.emit(Kind.FCONV, last, [src], split_fconv(low, params), arrays)
    return True


def quantize_epilogue(low: LowerContext, last, params: dict, arrays: dict):
    """Absorb the qnn.quantize (ONNX's QuantizeLinear: per tensor, to int8/uint8) that alone
    reads the product's result (QDQ models' float convolutions): FCONV stores the 8-bit values
    (emit/float/conv.py ``quantize``: float32 x / scale, rint, clamped, + zero point, as QUANT
    computes), not the float32 tensor. The node it computes (``last`` when none follows)."""
    q = low.only_user(last, "qnn.quantize")
    if q is None or q.args[0] is not last or q.attrs.semantics != "onnx":
        return last
    out = q.checked_type.dtype
    scale, zp = (const_value(low, a) for a in q.args[1:3])
    if (out not in ("int8", "uint8") or scale is None or zp is None or scale.size != 1
            or zp.size != 1):
        return last
    params["quant"] = out
    arrays["qscale"] = np.asarray(scale, np.float32).reshape(1)
    arrays["qzp"] = np.asarray(zp, np.int64).astype(np.int32).reshape(1)
    low.absorb(q)
    return q


# a float product this large (multiply-adds) is split over two threads (2 M: the QDQ
# MobileNetV2's 14 x 14 x 192 -> 64 and 28 x 28 x 144 -> 32 convolutions, ~0.1 ms each)
SPLIT_MACS = 1 << 21


def split_fconv(low: LowerContext, params: dict) -> dict:
    """``params`` of an FCONV, with ``threads`` 2 where the region has two threads and the
    product is worth a hand-off (emit/float/conv.py's k_fconv splits each tile's rows)."""
    macs = params["images"] * params["size"] * params["G"] * params["M"] * params["Kg"]
    if low.threads > 1 and macs >= SPLIT_MACS:
        params["threads"] = 2
    return params


def epilogue(low: LowerContext, call, n: int, params: dict, arrays: dict, relu_ok: bool,
             padded=None, residual=False):
    """Absorb a following bias add, (``residual``) an add of a same-shape float32 value
    already computed (ResNet's shortcut: params["residual_of"] names it) and a relu into the
    product; the last node it computes. ``padded``: the bias array's length (zeros after n:
    vector loads past the last channel)."""
    chain = [call]
    bias = _bias(low, call, n)
    if bias is not None:
        chain.append(bias)
        params["bias"] = "n"
        values = np.asarray(const_value(low, bias.args[1]), np.float32).reshape(-1)
        if padded is not None:
            values = np.concatenate([values, np.zeros(max(0, padded - n), np.float32)])
        arrays["bias"] = values
    add = low.only_user(chain[-1], "add") if residual else None
    if add is not None:
        other = add.args[1] if add.args[0] is chain[-1] else add.args[0]
        if (low.has_buffer(other) and other is not chain[-1] and other.checked_type.dtype
                == "float32" and tuple(other.checked_type.shape) == tuple(call.checked_type.shape)):
            chain.append(add)
            params["residual"], params["residual_of"] = True, other
    relu = low.only_user(chain[-1], "nn.relu")
    if relu is not None and relu_ok:
        chain.append(relu)
        params["relu"] = True
    for node in chain[1:]:
        low.absorb(node)
    return chain[-1]


def _bias(low: LowerContext, call, n: int):
    """The nn.bias_add (last axis) or add of a constant [n] vector that only reads ``call``."""
    for name in ("nn.bias_add", "add"):
        node = low.only_user(call, name)
        if node is None or node.args[0] is not call:
            continue
        bias = const_value(low, node.args[1])  # a constant, or a dequantize of one (QDQ)
        if bias is None:
            continue
        axis = getattr(node.attrs, "axis", -1) if name == "nn.bias_add" else -1
        if bias.dtype == np.float32 and bias.size == n and axis in (-1, 3) and (
            name == "nn.bias_add" or bias.shape[-1:] == (n,)
        ):
            return node
    return None


@lowers("nn.global_avg_pool2d", priority=OP)
def lower_fgap(low: LowerContext, call) -> bool:
    """nn.global_avg_pool2d of float32 (NHWC or NCHW) summing as MLAS or PyTorch does."""
    a, x = call.attrs, call.args[0]
    shape = x.checked_type.shape
    if (a.accumulate not in ("mlas", "torch_cpu") or x.checked_type.dtype != "float32"
            or len(shape) != 4):
        return False
    pixels = int(shape[a.layout.index("H")]) * int(shape[a.layout.index("W")])
    # FGAP's add sequence is straight-line code; more pixels run the same adds in loops
    kind = "FGAP" if pixels <= MAX_POOL_PIXELS else "FGAPL"  # (reduce_kernels)
    low.emit(kind, call, [low.src(x)], {"accumulate": a.accumulate, "layout": a.layout})
    return True


# ---- constant weights ---------------------------------------------------------------------------


def _constant_tree(expr, memo: dict | None = None) -> bool:
    """Whether ``expr`` is a Constant or calls of constants only (``memo``: answers by node id,
    so that asking for every node of a long chain stays linear)."""
    if isinstance(expr, Constant):
        return True
    if not isinstance(expr, Call) or isinstance(expr.op, Function) or not expr.args:
        return False
    if memo is None:
        return all(_constant_tree(a) for a in expr.args)
    if id(expr) not in memo:
        memo[id(expr)] = all(_constant_tree(a, memo) for a in expr.args)
    return memo[id(expr)]


def const_value(low: LowerContext, expr):
    """The value of a constant expression (a Constant, or calls of constants only: a dequantize
    or transpose of weights), computed with the ops' references; None if not constant."""
    if not _constant_tree(expr):
        return None
    if isinstance(expr, Constant):
        return np.asarray(expr.data)
    memo = low.memo("folded")
    if id(expr) not in memo:
        args = [const_value(low, a) for a in expr.args]
        memo[id(expr)] = np.asarray(expr.op.impl(*args, expr.attrs))
    return memo[id(expr)]


def weight_only(low: LowerContext, call) -> bool:
    """Whether ``call`` is a constant expression read only as float convolutions' weights
    (directly or through other such expressions): lower_fconv folds it, no kernel computes it."""
    memo = low.memo("constant_trees")
    if not isinstance(call, Call) or isinstance(call.op, Function) or not _constant_tree(call,
                                                                                       memo):
        return False
    outs = low.outputs
    users = low.users_of(call)
    if not users or any(call is o for o in outs):
        return False
    return all(_folds_weight(u, call) or weight_only(low, u) or _folded_bias(low, u, call)
               for u in users)


def _folded_bias(low: LowerContext, user, bias) -> bool:
    """Whether ``user`` is a bias add of ``bias`` that a float product absorbed (``epilogue``,
    lowered before the bias's own constant expression: the add reads the product first)."""
    return (low.absorbed(user) and getattr(user.op, "name", "") in ("add", "nn.bias_add")
            and user.args[1] is bias and user.args[0] is not bias)


def _folds_weight(user, weight) -> bool:
    """Whether ``user`` reads ``weight`` only as weights this module's lowerings fold: float
    convolutions, and dense products in MLAS's order (float_dense.py)."""
    name = getattr(user.op, "name", "")
    if user.args[0] is weight or len(user.args) < 2 or user.args[1] is not weight:
        return False
    if name == "nn.conv2d":
        return True
    return name in ("nn.dense", "nn.gemm") and user.attrs.accumulate != "exact" and all(
        a is not weight for a in user.args[2:])


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
