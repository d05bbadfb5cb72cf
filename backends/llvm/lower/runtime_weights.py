"""Float32 products whose weights are computed at run time (not constants: float_conv.py,
float_conv_transpose.py and float_dense.py pack constant weights at compile time):

    nn.conv2d (NHWC, any groups, any accumulate)    WPACK + [FIM2COL] -> FCONV (+ bias, relu)
    nn.conv2d_transpose                             GCONV (float64 sums, rounded once)
    nn.dense / nn.gemm, MLAS's orders               WPACK -> FCONV (+ bias, relu)
    nn.batch_matmul, MLAS's order                   WPACK x 2 -> FCONV [-> TRANSPOSE]

WPACK lays the weight buffer out at run time as float_conv._lower_tiles and
float_dense.lower_mlas_dense lay constant weights out at compile time ([groups][K][Mp], zeros
past each group's M columns), so FCONV runs the same tiles: the exact sums as float32 FMA chains
(within float32 rounding of the reference, as for constant weights), ONNX Runtime's ("mlas",
"mlas_packed") and PyTorch's ("torch_cpu") orders bit for bit. Exact float dense products with
run-time weights are float_ops's FDENSE already.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.errors import refuse
from partita.backends.llvm.kinds import Kind
from partita.backends.llvm.numerics.sum_order import ConvShape, Unreproduced, conv_tiles, gemm_tiles

from partita.ops.nn_common import layout_dims

from .float_conv import VEC, const_value, epilogue, split_fconv
from .float_dense import emit_mlas_gemm
from .float_products import vector_registers
from .int_products import emit_gconv
from .registry import OP, lowers

if TYPE_CHECKING:
    from .context import LowerContext

F32 = "float32"


def _runtime_float(low: LowerContext, call) -> bool:
    """Whether ``call`` multiplies float32 data by float32 weights that are not constant."""
    x, w = call.args[:2]
    return (x.checked_type.dtype == w.checked_type.dtype == call.checked_type.dtype == F32
            and const_value(low, w) is None)


def _runtime_bias(low: LowerContext, call) -> bool:
    """Whether float32 nn.gemm ``call``'s bias is computed at run time."""
    return call.checked_type.dtype == F32 and const_value(low, call.args[2]) is None


@lowers("nn.conv2d", "nn.conv2d_transpose", priority=OP + 2)
def lower_runtime_conv(low: LowerContext, call) -> bool:
    """nn.conv2d (WPACK + FCONV) or nn.conv2d_transpose (GCONV) of float32 with run-time
    weights; False for other calls."""
    if not _runtime_float(low, call):
        return False
    if call.op.name == "nn.conv2d_transpose":
        emit_gconv(low, call, low.src(call.args[1]))
        return True
    if call.attrs.data_layout != "NHWC":  # layout.py converts float convolutions to NHWC
        return False
    return _conv_tiles(low, call)


def _conv_tiles(low: LowerContext, call) -> bool:
    """float_conv._lower_tiles with the weights packed at run time."""
    x, w = call.args
    a = call.attrs
    o, cg, kh, kw = layout_dims(w.checked_type.shape, a.kernel_layout, "OIHW")
    n, h, wd, _ = (int(d) for d in x.checked_type.shape)
    _, oh, ow, _ = (int(d) for d in call.checked_type.shape)
    g = a.groups
    m = o // g
    s = ConvShape(n, g, m, cg, kh, kw, h, wd, oh * ow, tuple(a.strides), tuple(a.padding),
                  tuple(a.dilation), a.threads)
    try:
        tiles = conv_tiles(a.accumulate, s)
    except Unreproduced as e:
        refuse(call, f"accumulate={a.accumulate!r} with threads={a.threads}: {e}")
    src = low.src(x)
    k = cg * kh * kw
    if not ((kh, kw) == (1, 1) and tuple(a.strides) == (1, 1) and not any(a.padding)):
        params = {"strides": list(a.strides), "dilation": list(a.dilation),
                  "padding": list(a.padding), "kernel": [kh, kw], "out": [oh, ow]}
        src = low.scratch(Kind.FIM2COL, [src], (n, oh, ow, k * g), F32, params)
    mp = max(t.m0 + -(-(t.m1 - t.m0) // VEC) * VEC for t in tiles)
    wshape = [int(d) for d in w.checked_type.shape]
    dense = {d: int(np.prod(wshape[i + 1 :], dtype=np.int64))
             for i, d in enumerate(a.kernel_layout)}
    # k in im2col's (channel, kernel row, kernel column) order, as float_conv packs it
    pack = {"G": g, "M": m, "Mp": mp, "gstride": m * dense["O"], "mstride": dense["O"],
            "kdims": [[cg, dense["I"]], [kh, dense["H"]], [kw, dense["W"]]]}
    packed = low.scratch(Kind.WPACK, [low.src(w)], (g, k, mp), F32, pack)
    params = {"images": n, "size": oh * ow, "G": g, "M": m, "Kg": k, "lda": k * g,
              "Mp": mp, "O": o, "bias": "none", "regs": vector_registers(low.isa),
              "tiles": [[t.p0, t.p1, t.m0, t.m1, [list(b) for b in t.blocks]] for t in tiles]}
    arrays = {}
    last = epilogue(low, call, o, params, arrays, True, (g - 1) * m + mp)
    low.emit(Kind.FCONV, last, [src, packed], split_fconv(low, params), arrays)
    return True


@lowers("nn.dense", "nn.gemm", priority=OP)
def lower_runtime_dense(low: LowerContext, call) -> bool:
    """nn.dense / nn.gemm in MLAS's order ("mlas", "mlas_packed") with run-time weights as
    float_dense.lower_mlas_dense computes constant ones; False for exact ones (FDENSE takes
    run-time weights) and constant weights."""
    a = call.attrs
    if a.accumulate == "exact" and call.op.name == "nn.gemm" and _runtime_bias(low, call):
        refuse(call, "a bias computed at run time (FDENSE adds a constant one)")
    if a.accumulate == "exact" or not _runtime_float(low, call):
        return False
    w = call.args[1]
    tb = a.transpose_b if call.op.name == "nn.gemm" else True
    wshape = [int(d) for d in w.checked_type.shape]
    k, n = (wshape[1], wshape[0]) if tb else (wshape[0], wshape[1])

    def packed(mp):  # [K][Mp]: B = weight.T when transpose_b (weight [N][K]), else the weight
        pack = {"G": 1, "M": n, "Mp": mp, "gstride": 0, "mstride": k if tb else 1,
                "kdims": [[k, 1 if tb else n]]}
        return low.scratch(Kind.WPACK, [low.src(w)], (1, k, mp), F32, pack)

    return emit_mlas_gemm(low, call, k, n, tb, packed)


@lowers("nn.batch_matmul", priority=OP + 1)
def lower_mlas_bmm(low: LowerContext, call) -> bool:
    """nn.batch_matmul of float32 in MLAS's order (MlasGemmBatch: equal batches, no
    transpose_a, each product on its share of the threads) as FCONV with the batches as groups:
    WPACK lays x out as rows of [batch][K] and y as [batch][K][Np]; FCONV writes (M, B, N), a
    TRANSPOSE makes it (B, M, N). False for other batch products (FBMM's exact sums)."""
    a = call.attrs
    x, y = call.args
    if a.accumulate != "mlas" or call.checked_type.dtype != F32:
        return False
    bt, m, k = (int(d) for d in x.checked_type.shape)
    n = int(call.checked_type.shape[2])
    tiles = gemm_tiles("mlas", m, n, k, a.threads, a.transpose_b, False, bt)
    np_ = max(t.p0 + -(-(t.p1 - t.p0) // VEC) * VEC for t in tiles)
    rows = low.scratch(Kind.WPACK, [low.src(x)], (1, m * bt, k), F32,  # [m][b][k]
                       {"G": 1, "M": k, "Mp": k, "gstride": 0, "mstride": 1,
                        "kdims": [[m, k], [bt, m * k]]})
    tb = a.transpose_b  # y [B][N][K] or [B][K][N]
    packed = low.scratch(Kind.WPACK, [low.src(y)], (bt, k, np_), F32,
                         {"G": bt, "M": n, "Mp": np_, "gstride": n * k, "mstride": k if tb else 1,
                          "kdims": [[k, 1 if tb else n]]})
    params = {"images": 1, "size": m, "G": bt, "M": n, "Kg": k, "lda": bt * k, "Mp": np_,
              "O": bt * n, "bias": "none", "regs": vector_registers(low.isa),
              "tiles": [[t.m0, t.m1, t.p0, t.p1, [list(b) for b in t.blocks]] for t in tiles]}
    split_fconv(low, params)
    if bt == 1:  # (M, 1, N) is (1, M, N)
        low.emit(Kind.FCONV, call, [rows, packed], params)
        return True
    out = low.scratch(Kind.FCONV, [rows, packed], (m, bt, n), F32, params)
    low.emit(Kind.TRANSPOSE, call, [out], {"perm": [1, 0, 2]})
    return True


__all__ = ["lower_mlas_bmm", "lower_runtime_conv", "lower_runtime_dense"]
