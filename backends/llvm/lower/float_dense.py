"""Float32 dense products in ONNX Runtime's order (accumulate "mlas" / "mlas_packed"):

    nn.dense, nn.gemm (constant weight), MLAS's order        FCONV (+ bias, relu)

MlasGemm's split of the rows x columns product over ``threads`` and its K blocks
(sum_order.gemm_tiles; the M=1 kernels for a single row) are the tiles of a 1x1 convolution
whose pixels are the rows: FCONV sums each output in that order bit for bit. nn.gemm's bias is
MLAS's C (the sum starts from it, beta = 1); exact products stay with float_ops's FDENSE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.errors import refuse
from partita.backends.llvm.kinds import Kind
from partita.backends.llvm.numerics.sum_order import Unreproduced, gemm_tiles

from .float_conv import VEC, const_value, epilogue, split_fconv
from .float_products import vector_registers
from .registry import OP, lowers

if TYPE_CHECKING:
    from .context import LowerContext


@lowers("nn.dense", "nn.gemm", priority=OP + 1)
def lower_mlas_dense(low: LowerContext, call) -> bool:
    """nn.dense / nn.gemm with accumulate "mlas" or "mlas_packed" as FCONV on ``low``; False
    for exact ones (FDENSE's); an LLVMError names what it cannot reproduce."""
    a = call.attrs
    if getattr(a, "accumulate", "exact") == "exact":
        return False
    x, w = call.args[:2]
    if x.checked_type.dtype != "float32" or call.checked_type.dtype != "float32":
        return False
    weight = const_value(low, w)
    if weight is None:
        refuse(call, f"accumulate={a.accumulate!r} needs a constant weight")
    tb = a.transpose_b if call.op.name == "nn.gemm" else True
    b = np.asarray(weight, np.float32)
    b = b.T if tb else b  # [K][N]
    return emit_mlas_gemm(low, call, *b.shape, tb, b)


def emit_mlas_gemm(low: LowerContext, call, k: int, n: int, tb: bool, weight) -> bool:
    """The FCONV of a K x N product in MLAS's order: ``weight`` the constant [K][N] array, or
    a function of the padded width Mp giving the buffer its run-time packing fills
    (runtime_weights); nn.gemm's bias is MLAS's C, else a bias add and relu after it fuse."""
    a, x = call.attrs, call.args[0]
    rows = int(np.prod(x.checked_type.shape[:-1], dtype=np.int64))
    bias = gemm_bias(low, call, n) if call.op.name == "nn.gemm" else None
    try:
        tiles = gemm_tiles(a.accumulate, rows, n, k, a.threads, tb, bias is not None)
    except Unreproduced as e:
        refuse(call, str(e))
    mp = max(t.p0 + -(-(t.p1 - t.p0) // VEC) * VEC for t in tiles)
    params = {"images": 1, "size": rows, "G": 1, "M": n, "Kg": k, "lda": k, "Mp": mp, "O": n,
              "bias": "none", "regs": vector_registers(low.isa),  # rows: tiles' m, columns: p
              "tiles": [[t.m0, t.m1, t.p0, t.p1, [list(x) for x in t.blocks]] for t in tiles]}
    arrays, inputs = {}, [low.src(x)]
    if callable(weight):
        inputs.append(weight(mp))
    else:
        arrays["wt"] = np.zeros((1, k, mp), np.float32)
        arrays["wt"][0, :, :n] = weight
    if bias is not None:
        params["bias"] = "init"
        arrays["bias"] = np.concatenate([bias, np.zeros(mp - n, np.float32)])
        last = call
    else:
        last = epilogue(low, call, n, params, arrays, True, mp)
    low.emit(Kind.FCONV, last, inputs, split_fconv(low, params), arrays)
    return True


def gemm_bias(low: LowerContext, call, n: int) -> np.ndarray:
    """nn.gemm's bias as one value per column (MLAS's C), or refuse the op."""
    bias = const_value(low, call.args[2])
    if bias is None or bias.size not in (1, n) or (bias.size == n > 1 and bias.shape[-1] != n):
        refuse(call, f"accumulate={call.attrs.accumulate!r} with a bias other than a "
                "constant per column")
    return np.broadcast_to(np.asarray(bias, np.float32).reshape(-1), (n,))
