"""A per-channel batch norm + relu (an EWISE) is computed by the 1 x 1 products that read it,
as they read x (ResNet v2's pre-activation: BN -> relu -> 1 x 1 conv, and the shortcut's
strided 1 x 1 conv of the same value):

    EWISE relu(x * s + t) (a -> a') ; FDENSE (a' -> y)   =>   FDENSE (a -> y, x_affine)

The product packs each row block of relu(x * s + t) (all of k, or a k block at a time) into a
stack block before its tiles read it (emit/float/gemm.py ``affine_row``), computing the EWISE's
float32 steps in its order: the same bits. Only when every reader can take it in (a reader of
another kind keeps the EWISE for all: packing would then save nothing), and not for a product
split by column panels over two threads (each chunk would pack all of x). The EWISE's pass
over the image (written to memory and read back past 1 MB: 1.1 ms of ResNet-50 v2's 57 at one
thread) goes.
"""

from __future__ import annotations

import numpy as np
from partita.backends.llvm.kinds import Kind

# only a batch norm + relu of more than this many floats (1 MB: its pass writes the image back to
# memory and the product reads it from there): packing costs a scratch block's write and read
# in L2, about what the EWISE costs while its image stays in L2 (session 21: 14 x 14 x 1024 and
# 7 x 7 x 2048 even, 56 x 56 x 256 and 28 x 28 x 512 faster; docs/performance-history.md)
MIN_FLOATS = 1 << 18


def float_bn_reads(plan) -> None:
    """A large (MIN_FLOATS) batch norm + relu whose readers are all vector FDENSEs reading it
    as x (a plain product, or a 1 x 1 implicit one): they get its input and its scale and
    shift, and the EWISE goes."""
    dropped = []
    for e in plan.kernels:
        affine = _batch_norm_relu(plan, e)
        if affine is None or int(np.prod(plan.buffers[e.output][0])) <= MIN_FLOATS:
            continue
        src, scale, shift = affine
        readers = [k for k in plan.kernels if e.output in k.inputs]
        if e.output in plan.outputs or not all(
                _fusable(plan, k, e.output, scale.size) for k in readers):
            continue  # the EWISE stays: a reader taking it in would only add its packing
        for k in readers:
            k.inputs[0] = src
            k.params["x_affine"] = True
            k.arrays.pop("koff", None)  # 1 x 1: x's k in order in a pixel
            k.arrays["xaff"] = np.concatenate([scale, shift]).astype(np.float32)
        dropped.append(e)
    plan.kernels[:] = [k for k in plan.kernels if all(k is not d for d in dropped)]


def _batch_norm_relu(plan, e):
    """(x's buffer, scale, shift) of an EWISE computing relu(x * s + t) in float32, s and t
    per channel (the last axis), x contiguous in the output's shape; else None."""
    p = e.params
    tree = p.get("tree")
    if e.kind != Kind.EWISE or not tree or tree[:2] != ["op", "nn.relu"]:
        return None
    (add,) = tree[2]
    if add[:2] != ["op", "add"] or p.get("dtypes") is None:
        return None
    mul = next((a for a in add[2] if a[:2] == ["op", "multiply"]), None)
    shift = next((a for a in add[2] if a is not mul), None)
    if mul is None or shift is None or any(n[-1] != "float32" for n in (tree, add, mul)):
        return None
    if any(n[0] != "leaf" for n in (*mul[2], shift)):
        return None
    shape = p["out_shape"]
    x, scale = (_leaf(e, plan, n[1], shape) for n in mul[2])
    if isinstance(x, np.ndarray):  # s * x
        x, scale = scale, x
    t = _leaf(e, plan, shift[1], shape)
    if isinstance(x, int) and isinstance(scale, np.ndarray) and isinstance(t, np.ndarray):
        return x, scale, t
    return None


def _leaf(e, plan, i: int, shape):
    """Leaf ``i`` of EWISE ``e``: its buffer index (float32, contiguous in ``shape``), its
    per-channel constant (float32, one value per channel), or None."""
    p = e.params
    kind, ref = p["sources"][i]
    strides = list(p["strides"][i])
    if p["dtypes"][i] != "float32":
        return None
    if kind == "buf":
        buf = e.inputs[ref]
        dense = [int(np.prod(shape[j + 1:])) for j in range(len(shape))]
        ok = plan.buffers[buf] == (tuple(shape), "float32") and all(
            s == d for s, d, n in zip(strides, dense, shape) if n > 1)
        return buf if ok else None
    if kind == "const":
        a = np.asarray(e.arrays.get(ref))
        per_channel = strides[-1] == 1 and all(
            s == 0 for s, n in zip(strides[:-1], shape[:-1]) if n > 1)
        if a.dtype == np.float32 and a.size == shape[-1] and per_channel:
            return a.reshape(-1)
    return None


def _fusable(plan, k, x: int, channels: int) -> bool:
    """A vector FDENSE reading ``x`` as its x only: rows of ``channels`` values (a plain
    product), or a 1 x 1 implicit convolution (one tap: x's k in order)."""
    p = k.params
    if k.kind != Kind.FDENSE or not p.get("vec") or p.get("tb") or "quant" in p:
        return False
    if k.inputs[0] != x or x in k.inputs[1:] or p.get("x_affine") or p["K"] != channels:
        return False
    if p.get("threads", 1) >= 2 and p["N"] >= p["M"]:  # may split by column panels
        return False  # (emit/float/chunks.py): each chunk would pack all of x again
    if "implicit" in p:
        return p["implicit"][1] == channels
    shape, dtype = plan.buffers[x]
    return dtype == "float32" and int(np.prod(shape)) == p["M"] * p["K"]
