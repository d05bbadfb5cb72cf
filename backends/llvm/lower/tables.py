"""8-bit tables made at compile time with the op's own reference implementation: LUT (any
function of one 8-bit value) and LUT2 (of two), exact by construction; and the constant
operands they read."""

from __future__ import annotations

import numpy as np
from partita.backends.llvm.errors import LLVMError

from partita.errors import PartitaError
from partita.ir import Call, Constant

RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}


def const_array(e) -> np.ndarray:
    if not isinstance(e, Constant):
        raise LLVMError(f"llvm: expected a constant operand, got {e.short()}")
    return np.asarray(e.data)


_TABLES: dict = {}  # tables made in this process, by op, attributes and constant operands


def _memo(call: Call, consts: list, dtypes, out_dtype: str, make) -> np.ndarray:
    """``make()``, or the table an earlier build of the same op and constants made (a second
    build of a model recomputes no 64 K-entry table)."""
    key = (call.op.name, repr(call.attrs), tuple(dtypes), out_dtype,
           tuple((c.dtype.str, c.shape, c.tobytes()) for c in consts))
    if key not in _TABLES:
        if len(_TABLES) >= 1024:
            _TABLES.clear()
        _TABLES[key] = make()
    return _TABLES[key].copy()


def lut_table(call: Call, in_dtype: str, out_dtype: str) -> np.ndarray:
    lo, hi = RANGE[in_dtype]
    consts = [const_array(a) for a in call.args[1:]]

    def make():
        values = np.arange(lo, hi + 1, dtype=in_dtype)
        try:
            return np.asarray(call.op.impl(values, *consts, call.attrs)).astype(out_dtype)
        except PartitaError as e:  # e.g. qnn.rsqrt below its zero point: no result there
            raise LLVMError(
                f"llvm: {call.op.name}: no 256-entry table, since the reference refuses some "
                f"{in_dtype} inputs ({e}); the 'ref' host refuses them only where they occur"
            ) from None

    return _memo(call, consts, [in_dtype], out_dtype, make)


def lut2_table(call: Call, dtypes, out_dtype: str) -> np.ndarray:
    (alo, ahi), (blo, bhi) = RANGE[dtypes[0]], RANGE[dtypes[1]]
    consts = [const_array(x) for x in call.args[2:]]

    def make():
        a, b = np.meshgrid(np.arange(alo, ahi + 1), np.arange(blo, bhi + 1), indexing="ij")
        args = [a.astype(dtypes[0]).ravel(), b.astype(dtypes[1]).ravel(), *consts]
        return np.asarray(call.op.impl(*args, call.attrs)).astype(out_dtype).reshape(256, 256)

    return _memo(call, consts, dtypes, out_dtype, make)
