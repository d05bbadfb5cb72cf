"""Kernel kinds, and the one registry that says which function emits each.

A lowering plans kernels of a ``Kind`` (``low.emit(Kind.LUT, call, ...)``); the emitter
generates each kernel's LLVM IR with the function registered for its kind:

    class ScalarKernels(Family):          # a kernel family, given the emit context (self.em)
        @emits(Kind.LUT)
        def k_lut(self, k: Kernel) -> ir.Function: ...

``emitter_for(kind)`` is that function; the kernel emitter (emit/module.py) calls it on its
instance of the function's family. Kinds are strings too (``Kind.LUT == "LUT"``), so plans
serialise, hash and print as before.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum


class Kind(str, Enum):
    """Every kernel a plan may hold; the comment says what it computes."""

    # 8-bit quantized, scalar loops (emit/int8/scalar.py)
    CONV = "CONV"  # qnn.conv2d + bias + requantize + clip, TFLite's output stage
    DWCONV = "DWCONV"  # its depthwise form
    FC = "FC"  # qnn.dense + bias + requantize + clip
    LUT = "LUT"  # any one-input 8-bit function: a 256-entry table made by the op's reference
    LUT2 = "LUT2"  # a per-tensor binary 8-bit op: a 256 x 256 table
    QUANT = "QUANT"  # qnn.quantize of float32
    MEAN = "MEAN"  # qnn.mean (TFLite / ONNX / legacy arithmetic)
    MAXPOOL = "MAXPOOL"  # nn.max_pool2d, NHWC
    COPY = "COPY"  # reshape, squeeze, expand_dims: bytes copied
    TRANSPOSE = "TRANSPOSE"  # transpose of any dtype
    IM2COL = "IM2COL"  # the windows of an 8-bit convolution as rows (odd channel counts)
    # 8-bit quantized, vector (emit/int8/vconv.py, vdepthwise.py: the ISA tiers)
    VCONV = "VCONV"  # CONV / FC on int8 dot-product instructions (avx2, vnni, amx)
    VDW = "VDW"  # DWCONV on vector instructions
    # quantized, other (emit/int8/wide_mac.py, qbinary.py, transformer.py; emit/reductions.py)
    WMAC = "WMAC"  # conv / dense of int16 data or weights, int64 accumulators, wide outputs
    QBIN = "QBIN"  # qnn.add / subtract / mul, per channel or int16
    QRESCALE = "QRESCALE"  # an int16 input of qnn.concatenate rescaled
    QMEANX = "QMEANX"  # qnn.mean over any axes, any semantics
    AVGPOOL = "AVGPOOL"  # qnn.avg_pool2d
    QSOFTMAX = "QSOFTMAX"  # qnn.softmax, TFLite's reference arithmetic
    QSOFTMAXF = "QSOFTMAXF"  # qnn.softmax, TFLite's optimized (float32) kernel
    QSOFTMAXO = "QSOFTMAXO"  # qnn.softmax, ONNX Runtime's
    QSOFTMAX16 = "QSOFTMAX16"  # qnn.softmax of int16, TFLite's 16x8 kernel
    QBMM = "QBMM"  # qnn.batch_matmul with its requantize
    # integer products (emit/int8/dynq_dense.py, emit/integer.py, emit/int_products.py)
    # (IDENSE before): qnn.dense read as its int32 accumulator, sum of (x - zx) * (w - zw)
    DYNQ_DENSE = "DYNQ_DENSE"
    # (INTDENSE before): nn.dense of integer tensors, exact int64 sums wrapped to out_dtype
    EXACT_INT_DENSE = "EXACT_INT_DENSE"
    GCONV = "GCONV"  # integer (transposed) convolution of any group count, int64 sums
    IBMM = "IBMM"  # integer batch_matmul, int64 sums, stored wrapped or requantized
    # float and any-dtype kernels (emit/float/*.py, emit/reductions.py, emit/data.py)
    EWISE = "EWISE"  # a fused tree of elementwise ops (each step rounded to its dtype)
    FDENSE = "FDENSE"  # float32 matrix product (nn.dense, nn.gemm, pointwise convolutions)
    FWINO = "FWINO"  # float32 3 x 3 convolution as Winograd's F(2 x 2, 3 x 3)
    FBMM = "FBMM"  # float32 batch_matmul
    FSOFTMAX = "FSOFTMAX"  # float32 softmax
    FLAYERNORM = "FLAYERNORM"  # float32 layer_norm
    FREDUCE = "FREDUCE"  # sum / mean / max / min over axes
    ARGMAX = "ARGMAX"  # argmax
    FMEAN = "FMEAN"  # float32 mean over H, W of dequantized 8-bit data (exact)
    FIM2COL = "FIM2COL"  # float32 convolution windows as rows
    FCONV = "FCONV"  # float32 convolution in another runtime's sum order
    FPAD = "FPAD"  # zero padding before FDW
    FDW = "FDW"  # float32 depthwise convolution
    FGAP = "FGAP"  # float32 global average pool, straight-line adds
    FGAPL = "FGAPL"  # FGAP's adds in loops (any number of pixels)
    FCONVT = "FCONVT"  # float32 transposed convolution
    FPOOL = "FPOOL"  # float32 / integer average and max pooling
    FRESIZE = "FRESIZE"  # linear resize of float32
    EINSUM = "EINSUM"  # einsum, float64 sums
    BNORM = "BNORM"  # nn.batch_norm's result
    TAKE = "TAKE"  # take, rows copied as bytes
    GATHER = "GATHER"  # pad / concatenate / nearest resize: a compile-time index table
    CONST = "CONST"  # a constant read as data, copied into its buffer
    DYNQ = "DYNQ"  # one field of qnn.dynamic_quantize
    WPACK = "WPACK"  # run-time weights packed into panels

    __str__ = str.__str__  # "LUT", as the bare strings printed
    __format__ = str.__format__


_EMITTERS: dict[Kind, Callable] = {}


def emits(kind: Kind) -> Callable:
    """Register the decorated ``fn(emitter, kernel) -> ir.Function`` as the code of ``kind``."""

    def register(fn: Callable) -> Callable:
        if kind in _EMITTERS and _EMITTERS[kind] is not fn:
            raise ValueError(f"llvm: two emitters for kernel kind {kind.value}: "
                             f"{_EMITTERS[kind].__qualname__} and {fn.__qualname__}")
        _EMITTERS[Kind(kind)] = fn
        return fn

    return register


def emitter_for(kind) -> Callable:
    """The function that emits kernels of ``kind``."""
    fn = _EMITTERS.get(Kind(kind))
    if fn is None:
        raise ValueError(f"llvm: no emitter registered for kernel kind {Kind(kind).value}")
    return fn


def emitters() -> dict[Kind, Callable]:
    """Every kind's emitting function."""
    return dict(_EMITTERS)


__all__ = ["Kind", "emits", "emitter_for", "emitters"]
