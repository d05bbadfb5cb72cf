"""How an exact float32 product is planned for gemm.py's kernels (FDENSE, FBMM; float_ops.py
decides which calls are such products): the register tile per ISA, the weights' column panels,
the two-thread thresholds, and what follows a product that its epilogue absorbs (a bias, a
residual, a relu, BERT's GELU, an attention heads transpose)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.kinds import Kind

from partita.ir import Constant

from .dense_act import act_tail
from .ewise_tree import absorb_reshapes
from .heads import bmm_heads, dense_heads

if TYPE_CHECKING:
    from .context import LowerContext


def plan_dense(low: LowerContext, call) -> bool:
    """nn.dense, and nn.gemm (ONNX Gemm: weight [N, K] or [K, N], a bias broadcast to the
    product, added to the sum)."""
    x, w = call.args[:2]
    tb = call.attrs.transpose_b if call.op.name == "nn.gemm" else True
    wshape = [int(d) for d in w.checked_type.shape]
    k, n = (wshape[1], wshape[0]) if tb else wshape
    m = int(np.prod(x.checked_type.shape[:-1], dtype=np.int64))
    params = {"M": m, "K": k, "N": n, "tb": tb, "bias": "none"}
    arrays = {}
    if call.op.name == "nn.gemm":
        bias = call.args[2]
        if not isinstance(bias, Constant):
            return False
        data = np.asarray(bias.data, np.float32)
        params["bias"] = "scalar" if data.size == 1 else "n" if data.shape[-1:] == (n,) and (
            data.size == n) else "mn"
        arrays["bias"] = np.ascontiguousarray(np.broadcast_to(data, (m, n)) if params["bias"]
                                              == "mn" else data.ravel())
    if isinstance(w, Constant):  # packed [K][N]: the inner loop over N is contiguous
        wdata = np.asarray(w.data, np.float32)
        wt = np.ascontiguousarray(wdata.T if tb else wdata)
        params["vec"] = n >= 16  # gemm.py's register tiles (a masked last vector)
        params.update(gemm_tile(low.isa))
        width = 16 * params["cols"]
        arrays["wt"] = panels(np.pad(wt, ((0, 0), (0, -n % 16))), width) if params["vec"] else wt
        if params["vec"] and low.threads > 1 and (
            (m >= 16 and m * n * k >= 1 << 22) or (n >= 128 and n * k >= 1 << 19)
        ):  # worth a thread start (~20 us): 4 M multiply-adds, or 2 MB of weights to stream
            params["threads"] = 2  # (a classifier's one row: each core half the panels)
        last = dense_epilogue(low, call, n, params, arrays) if params["vec"] and (
            call.op.name == "nn.dense") else call
        inputs = [low.src(x)]
        if "residual_of" in params:
            inputs.append(low.src(params.pop("residual_of")))
        low.emit(Kind.FDENSE, last, inputs, params, arrays)
    else:
        low.emit(Kind.FDENSE, call, [low.src(x), low.src(w)], params, arrays)
    return True


def dense_epilogue(low: LowerContext, call, n: int, params: dict, arrays: dict):
    """Absorb into a vector FDENSE what follows the product (ONNX's MatMul then Add, BERT's
    projections): an add of a constant [n] (or [1, .., n]) vector, then an add of a float32
    value of the product's shape already computed (a residual), then a relu, each the only
    reader of the one before, either operand order (float32 addition commutes, bit for bit).
    gemm.py adds them to the float32 sums in this order: the bits of the separate ops. The last
    node computed; params["residual_of"]: the residual's node (the caller passes its buffer)."""
    shape = tuple(call.checked_type.shape)
    last = call
    add = low.only_user(last, "add")
    if add is not None:
        other = add.args[1] if add.args[0] is last else add.args[0]
        data = np.asarray(other.data) if isinstance(other, Constant) else None
        if (data is not None and other is not last and data.dtype == np.float32
                and data.size == n and data.shape[-1:] == (n,)
                and tuple(add.checked_type.shape) == shape):
            params["bias"] = "n"
            arrays["bias"] = np.ascontiguousarray(data.reshape(-1))
            low.absorb(add)
            last = add
    add = low.only_user(last, "add")
    if add is not None:
        other = add.args[1] if add.args[0] is last else add.args[0]
        if (other is not last and not isinstance(other, Constant) and low.has_buffer(other)
                and other.checked_type.dtype == "float32"
                and tuple(other.checked_type.shape) == shape
                and tuple(add.checked_type.shape) == shape):
            params["residual"], params["residual_of"] = True, other
            low.absorb(add)
            last = add
    relu = low.only_user(last, "nn.relu")
    if relu is not None:
        params["relu"] = True
        low.absorb(relu)
        last = relu
    tail = act_tail(low, last, shape)  # an elementwise tail with erf: BERT's GELU (dense_act)
    if tail is not None:
        params["act"], last, nodes = tail
        for node in nodes:
            low.absorb(node)
    return dense_heads(low, absorb_reshapes(low, last), params)  # a heads transpose (heads.py)


def gemm_tile(isa: str) -> dict:
    """gemm.py's register tile, rows x vectors of 16 floats: 6 x 4 takes 24 of AVX-512's 32
    registers (6% faster than 4 x 4 on ResNet50 v2); with 16 registers, where a 16-float vector
    is two, 6 x 1 (12 accumulators, MLAS's FMA3 tile). The weights' panels are as wide."""
    return {"rows": 6, "cols": 4 if vector_registers(isa) >= 32 else 1}


def vector_registers(isa: str) -> int:
    """The vector registers float kernels may tile over: AVX-512's 32, else 16 (AVX2's ymm; a
    16-float vector takes two)."""
    return 32 if isa in ("vnni", "amx") else 16


def panels(wt: np.ndarray, width: int = 64, vec: int = 16) -> np.ndarray:
    """[K][N] weights as column panels, each [K][width] contiguous (then [K][vec] panels for
    the columns past the last full panel): gemm.py's tiles stream one panel per k loop."""
    k, n = wt.shape
    full = n // width * width
    parts = [wt[:, i : i + width].ravel() for i in range(0, full, width)]
    parts += [wt[:, i : i + vec].ravel() for i in range(full, n, vec)]
    return np.ascontiguousarray(np.concatenate(parts))


def plan_bmm(low: LowerContext, call) -> bool:
    """FBMM (float64 sums, or gemm.py's float32 FMA chains); a constant operand is read as
    data (a CONST copy), as a run-time one."""
    x, y = call.args
    a = call.attrs
    bx, by = int(x.checked_type.shape[0]), int(y.checked_type.shape[0])
    m = int(x.checked_type.shape[2 if a.transpose_a else 1])
    k = int(x.checked_type.shape[1 if a.transpose_a else 2])
    n = int(y.checked_type.shape[1 if a.transpose_b else 2])
    params = {
        "B": max(bx, by), "M": m, "K": k, "N": n, "bx": bx, "by": by,
        "ta": bool(a.transpose_a), "tb": bool(a.transpose_b),
        "vec": not a.transpose_b and n % 16 == 0,
        "dot": a.transpose_b and not a.transpose_a and k % 16 == 0, **gemm_tile(low.isa),
    }  # fmt: skip
    if low.threads > 1 and (params["vec"] or params["dot"]) and params["B"] >= 2 and (
        params["B"] * m * k * n >= 1 << 22
    ):  # 4 M multiply-adds: batches claimed one at a time by both threads (gemm.py batches)
        params["threads"] = 2
    inputs = [low.src(x), low.src(y)]
    low.emit(Kind.FBMM, bmm_heads(low, absorb_reshapes(low, call), params), inputs, params)
    return True
