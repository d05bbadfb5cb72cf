"""Vector types and small IR helpers shared by the vector kernels (vconv.py,
vector_output_stage.py, vdepthwise.py)."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import I8, I32, I64

V16 = ir.VectorType(I32, 16)
PTR8 = ir.PointerType()
V16x64 = ir.VectorType(I64, 16)
B16 = ir.VectorType(I8, 16)
B64 = ir.VectorType(I8, 64)
Q32 = ir.VectorType(I8, 32)  # one AVX2 register of bytes
H16 = ir.VectorType(ir.IntType(16), 16)  # ... of int16
V8 = ir.VectorType(I32, 8)  # ... of int32
V32 = ir.VectorType(I32, 32)  # int32 pair sums of 16 output channels
W64 = ir.VectorType(ir.IntType(16), 64)  # 16 channels x 4 int16 weights
W32 = ir.VectorType(ir.IntType(16), 32)  # one AVX-512 register of int16


def vpart(b, vec, index: int, size: int):
    """Elements index*size .. (index+1)*size - 1 of ``vec``."""
    return b.shuffle_vector(vec, vec, ir.Constant(ir.VectorType(I32, size),
                                                  list(range(index * size, (index + 1) * size))))


def vconcat(b, x, y):
    n = x.type.count
    return b.shuffle_vector(x, y, ir.Constant(ir.VectorType(I32, 2 * n), list(range(2 * n))))


def vsplat(b, value, ty=V16):
    """A vector of ``ty`` with every lane ``value`` (a scalar of its element type)."""
    one = b.insert_element(ir.Constant(ty, ir.Undefined), value, ir.Constant(I32, 0))
    mask = ir.Constant(ir.VectorType(I32, ty.count), [0] * ty.count)
    return b.shuffle_vector(one, ir.Constant(ty, ir.Undefined), mask)


def kconst(ty, value):
    return ir.Constant(ty, [ir.Constant(ty.element, int(value))] * ty.count)


