"""qnn.add / qnn.subtract / qnn.mul that LUT2's 256 x 256 table does not take: per-channel
scales or zero points on an operand (``lhs_axis`` / ``rhs_axis``), parameters of shape (1,),
int16 data or another out_dtype. One QBIN kernel computes each output element directly, with
its runtime's arithmetic (partita/ops/qnn_elemwise.py, step for step):

    tflite_add   TFLite ADD / SUB: MultiplyByQuantizedMultiplierSmallerThanOneExp of each side
                 shifted left by 20 (15 for int16), the int32 sum, then the output's multiplier
    tflite_mul   TFLite MUL: MultiplyByQuantizedMultiplier of the int32 product
    onnx_add     MLAS QLinearAdd (int8/uint8): two float32 FMAs, round half to even
    onnx_mul     MLAS QLinearMul (int8/uint8): float32(product) * scale + zp_out
    onnx_float   DequantizeLinear -> float32 op -> QuantizeLinear (subtract; int16 add, mul)

Every parameter a step needs is computed here per pair of channels (lhs channel, rhs channel)
with the reference's own helpers, so the kernel only loads them: an output element reads pair
``c_lhs * C_rhs + c_rhs``, its channel coordinates found by the loop nest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.errors import LLVMError
from partita.backends.llvm.kinds import Kind

from partita.errors import PartitaError
from partita.ir import Constant
from partita.ops.emulation.tflite_fixedpoint import quantize_multiplier_array
from partita.ops.qnn_elemwise import fma32, ort_scalar_side, smaller_than_one

from .float_ops import strides_for
from .registry import EDGE, lowers
from .tables import const_array

if TYPE_CHECKING:
    from .context import LowerContext

OPS = ("qnn.add", "qnn.subtract", "qnn.mul")
DTYPES = ("int8", "uint8", "int16")
MAX_PAIRS = 1 << 20  # per-pair parameter arrays larger than this are refused
F32, F64 = np.float32, np.float64


@lowers(*OPS, priority=EDGE)
def lower_qbinary(low: LowerContext, call) -> bool:
    """``call`` as a QBIN kernel, or False: LUT2 takes it (scalar parameters, 8-bit data), or
    an operand is not what the kernel reads."""
    name = call.op.name
    lhs, rhs = call.args[:2]
    out = call.checked_type.dtype
    dtypes = [a.checked_type.dtype for a in (lhs, rhs)]
    if name not in OPS or not all(isinstance(a, Constant) for a in call.args[2:]):
        return False
    if set(dtypes) - set(DTYPES) or out not in DTYPES:
        return False
    consts = [const_array(a) for a in call.args[2:]]
    if all(c.ndim == 0 for c in consts) and {*dtypes, out} <= {"int8", "uint8"}:
        return False  # one 256 x 256 table (lower/context.py's LUT2) is faster
    oshape = [int(d) for d in call.checked_type.shape]
    a = call.attrs
    sides = [_side(x, consts[2 * i : 2 * i + 2], axis, len(oshape))
             for i, (x, axis) in enumerate(((lhs, a.lhs_axis), (rhs, a.rhs_axis)))]
    (ls, lz, cl, lax), (rs, rz, cr, rax) = sides
    if cl * cr > MAX_PAIRS:
        raise LLVMError(f"llvm cannot compile {name}: {cl} x {cr} channel pairs of "
                        "quantization parameters (more than 2**20)")
    pairs = [0] * len(oshape)  # the pair index's stride along each output axis
    if cl > 1:
        pairs[lax] += cr
    if cr > 1:
        pairs[rax] += 1
    ps = (ls.reshape(-1, 1), lz.reshape(-1, 1), rs.reshape(1, -1), rz.reshape(1, -1))
    try:
        mode, params, arrays = _arithmetic(call, dtypes[0], ps, consts[4:], oshape)
    except PartitaError as e:  # TFLite's CHECKs on the multipliers: the reference fails too
        raise LLVMError(f"llvm cannot compile {name}: {e}") from None
    strides = [strides_for(x.checked_type.shape, oshape) for x in (lhs, rhs)]
    params.update(mode=mode, out_shape=oshape, strides=[*strides, pairs])
    arrays = {k: np.ascontiguousarray(np.broadcast_to(v, (cl, cr))).reshape(-1)
              for k, v in arrays.items()}
    low.emit(Kind.QBIN, call, [low.src(lhs), low.src(rhs)], params, arrays)
    return True


def _side(x, params, axis: int, out_rank: int):
    """An operand's scale (float32) and zero point (int64) per channel, its channel count and
    the output axis its channels lie along."""
    s, z = (np.asarray(p).reshape(-1) for p in params)
    n = max(s.size, z.size)
    rank = len(x.checked_type.shape)
    out_axis = out_rank - rank + axis % rank if rank else 0
    return (np.broadcast_to(s.astype(F32), (n,)), np.broadcast_to(z.astype(np.int64), (n,)),
            n, out_axis)


def _arithmetic(call, dtype: str, ps, out_params, oshape):
    """(mode, scalar params, per-pair arrays) of the op's semantics, as the reference
    computes them (qnn_elemwise._tflite_add, _tflite_mul, _onnx_add, _onnx_mul,
    _onnx_float_path)."""
    ls, lz, rs, rz = ps
    os_ = np.asarray(out_params[0]).astype(F32).reshape(())
    oz = int(np.asarray(out_params[1]).reshape(()))
    name, sem = call.op.name, call.attrs.semantics
    common = {"oz": oz}
    if sem == "tflite" and name in ("qnn.add", "qnn.subtract"):
        left = 15 if dtype == "int16" else 20
        s1, s2, so = ls.astype(F64), rs.astype(F64), os_.astype(F64)
        twice_max = 2 * np.maximum(s1, s2)
        q1, e1 = smaller_than_one(s1 / twice_max, "input1")
        q2, e2 = smaller_than_one(s2 / twice_max, "input2")
        qo, eo = smaller_than_one(twice_max / ((1 << left) * so), "output")
        sign = 1 if name == "qnn.add" else -1
        arrays = {"q1": q1, "e1": e1, "q2": sign * q2, "e2": e2, "qo": qo, "eo": eo,
                  "lz": lz, "rz": rz}
        return "tflite_add", {**common, "left": left}, _ints(arrays)
    if sem == "tflite":  # qnn.mul
        q, shift = quantize_multiplier_array((ls * rs) / os_)
        return "tflite_mul", common, _ints({"q": q, "shift": shift, "lz": lz, "rz": rz})
    if name == "qnn.add" and dtype != "int16":
        swap = ort_scalar_side(call.args[0].checked_type.shape,
                               call.args[1].checked_type.shape) == "lhs"
        sa, za, sb, zb = (rs, rz, ls, lz) if swap else (ls, lz, rs, rz)
        ra, rb = sa / os_, sb / os_
        fixed = F32(oz) - fma32(ra, za.astype(F32), rb * zb.astype(F32))
        floats = {"ra": ra, "rb": rb, "fixed": fixed}
        return "onnx_add", {**common, "swap": swap}, _floats(floats)
    if name == "qnn.mul" and dtype != "int16":
        scale = (ls * rs) / os_
        return "onnx_mul", common, {**_floats({"scale": scale}), **_ints({"lz": lz, "rz": rz})}
    op = {"qnn.add": "add", "qnn.subtract": "sub", "qnn.mul": "mul"}[name]
    arrays = {**_floats({"ls": ls, "rs": rs}), **_ints({"lz": lz, "rz": rz})}
    return "onnx_float", {**common, "op": op, "os": float(os_)}, arrays


def _ints(arrays: dict) -> dict:
    return {k: np.asarray(v, np.int64).astype(np.int32) for k, v in arrays.items()}


def _floats(arrays: dict) -> dict:
    """float32 values, passed as float64 (exact): the kernel rounds them back."""
    return {k: np.asarray(v, F32).astype(F64) for k, v in arrays.items()}


__all__ = ["OPS", "lower_qbinary"]
