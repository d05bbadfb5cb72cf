"""Data movement as a gather through an index table made at compile time (GATHER):

    nn.pad, image.resize2d (nearest neighbour), concatenate, tile, reverse, nn.dilate
    qnn.concatenate: each input whose scale or zero point differs from the output's is first
                     rescaled: 8-bit data by a 256-entry table (LUT) made with the op's own
                     reference, int16 element by element (QRESCALE, qbinary.py) with
                     the reference's float32 steps

Which input element each output element copies is found by running the op's reference (the
interpreter) on the inputs' flat indices, so the table is exact by construction; -1 marks an
element the op fills (nn.pad's value). The kernel copies one element per table entry, of any
dtype.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.errors import LLVMError
from partita.backends.llvm.kinds import Kind

from partita.interpreter import interpret
from partita.ir import Call, Constant, Function, IRModule, TensorType, Tuple, Var
from partita.ops import get_op

from .registry import OP, lowers

if TYPE_CHECKING:
    from .context import LowerContext

GATHER_OPS = (
    "nn.pad", "image.resize2d", "concatenate", "qnn.concatenate", "tile", "reverse", "nn.dilate",
)
LIMIT = 1 << 24  # elements of a table built at compile time
RANGE = {"int8": (-128, 127), "uint8": (0, 255)}


@lowers(*GATHER_OPS, priority=OP)
def lower_gather(low: LowerContext, call) -> bool:
    """``call`` as a GATHER kernel (after LUT rescaling for qnn.concatenate), or False."""
    name = call.op.name
    if name not in GATHER_OPS:
        return False
    if name == "image.resize2d" and call.attrs.method != "nearest_neighbor":
        return False
    fields = list(call.args[0].fields) if isinstance(call.args[0], Tuple) else [call.args[0]]
    # constant fields are data too (src copies them into buffers); the op's other operands
    # (scales, zero points, a pad value) must be constants
    if any(not isinstance(a, Constant) for a in call.args[1:] if not isinstance(a, Tuple)):
        return False
    out = call.checked_type
    count = int(np.prod(out.shape, dtype=np.int64))
    sizes = [int(np.prod(f.checked_type.shape, dtype=np.int64)) for f in fields]
    if count > LIMIT or sum(sizes) > LIMIT:
        raise LLVMError(f"llvm cannot compile {name} of {out.shape}: more than 2**24 elements "
                        "to gather (the index table is made at compile time)")
    table = index_table(call, fields, sizes)
    sources = [low.src(f) for f in fields]
    if name == "qnn.concatenate":
        sources = _rescaled(low, call, fields, sources)
    fill = np.zeros(1, out.dtype)
    if name == "nn.pad":
        fill[0] = np.asarray(call.args[1].data).reshape(-1)[0]
    elif name == "nn.dilate":
        fill[0] = np.asarray(call.attrs.dilation_value).astype(out.dtype)
    params = {
        "itemsize": int(np.dtype(out.dtype).itemsize),
        "count": count,
        "offsets": [int(v) for v in np.cumsum([0, *sizes[:-1]])],
    }
    arrays = {"map": table.astype(np.int32), "fill": fill.view(np.uint8).copy()}
    low.emit(Kind.GATHER, call, sources, params, arrays)
    return True


def index_table(call, fields, sizes) -> np.ndarray:
    """The op on int64 inputs holding their elements' flat indices (numbered across inputs);
    nn.pad and nn.dilate fill with -1."""
    params, values, start = [], [], 0
    for i, (f, n) in enumerate(zip(fields, sizes)):
        shape = tuple(int(d) for d in f.checked_type.shape)
        params.append(Var(f"i{i}", TensorType(shape, "int64")))
        values.append(np.arange(start, start + n, dtype=np.int64).reshape(shape))
        start += n
    name = call.op.name
    if name in ("concatenate", "qnn.concatenate"):
        expr = get_op("concatenate")(Tuple(params), axis=call.attrs.axis)
    elif name == "nn.pad":
        expr = Call(call.op, [params[0], Constant(np.int64(-1))], call.attrs)
    elif name == "nn.dilate":
        expr = Call(call.op, [params[0]], dataclasses.replace(call.attrs, dilation_value=-1))
    else:
        expr = Call(call.op, [params[0], *call.args[1:]], call.attrs)
    result = interpret(IRModule.from_expr(Function(params, expr)), values)[0]
    return np.asarray(result).reshape(-1)


def _rescaled(low: LowerContext, call, fields, sources) -> list[int]:
    """qnn.concatenate's inputs in the output's quantization: a LUT kernel per 8-bit input
    whose parameters differ (its table: the op itself on all 256 values of that input), a
    QRESCALE kernel per wider one."""
    scales, zps = call.args[1], call.args[2]
    if not (isinstance(scales, Tuple) and isinstance(zps, Tuple)):
        raise LLVMError("llvm cannot compile qnn.concatenate with non-tuple scales")
    out_dtype = call.checked_type.dtype
    new = []
    for f, s, z, src in zip(fields, scales.fields, zps.fields, sources):
        dtype = f.checked_type.dtype
        if dtype not in RANGE or out_dtype not in RANGE:
            new.append(_direct(low, call, f, (s, z), src))
            continue
        lo, hi = RANGE[dtype]
        values = np.arange(lo, hi + 1).astype(dtype)
        attrs = dataclasses.replace(call.attrs, axis=0)
        consts = [np.asarray(a.data) for a in (s, z, call.args[3], call.args[4])]
        table = np.asarray(call.op.impl((values,), (consts[0],), (consts[1],), consts[2],
                                        consts[3], attrs)).astype(out_dtype)
        if dtype == out_dtype and np.array_equal(table, values):
            new.append(src)
            continue
        new.append(low.scratch(Kind.LUT, [src], f.checked_type.shape, out_dtype, {},
                               {"table": table}))
    return new


def _direct(low: LowerContext, call, field, params, src) -> int:
    """One input of wider data rescaled element by element (QRESCALE), with the constants
    qnn_elemwise._rescale computes in float32; the input itself when its parameters are the
    output's (the reference copies it)."""
    so, zo = (np.asarray(a.data).reshape(-1)[0] for a in call.args[3:5])
    s, zp = (np.asarray(a.data).reshape(-1)[0] for a in params)
    f32, dtype = np.float32, field.checked_type.dtype  # the output's too (the type relation)
    s, so, zp, zo = f32(s), f32(so), int(zp), int(zo)
    if zp == zo and s == so:
        return src
    shape = field.checked_type.shape
    p = {"count": int(np.prod(shape, dtype=np.int64)), "zo": zo, "mode": call.attrs.semantics}
    if p["mode"] == "tflite":
        with np.errstate(all="ignore"):  # an infinite scale is the reference's too
            scale = s * (f32(1) / so)
            p.update(scale=float(scale), bias=float(f32(-zp) * scale))
    else:
        p.update(s=float(s), zp=zp, so=float(so))
    return low.scratch(Kind.QRESCALE, [src], shape, dtype, p)
