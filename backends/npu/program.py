"""The NPU program: tensors with their memory placement, and operations in execution order.

This is what the compiler produces, the command stream encodes (stream.py), and the simulator
and the cycle model read. Op kinds:

    CONV    2-D convolution on the MAC array (fused pad, bias, requantize, activation clamp)
    DWCONV  depthwise convolution on the MAC array (one input channel per output channel)
    FC      fully connected on the MAC array
    LUT     a 256-entry table on the elementwise unit (sigmoid, tanh, hardswish, clip, ...)
    UNIT    the elementwise/pooling unit and DMA: add, sub, mul, pooling, mean, concat,
            reshape, pad, with the QNN op's integer arithmetic and an activation clamp
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

KINDS = ("CONV", "DWCONV", "FC", "LUT", "UNIT")
MEMORIES = ("sram", "dram", "flash")
DTYPES = ("int8", "uint8", "int16", "int32", "int64", "float32", "float64")


@dataclass
class TensorDesc:
    """A feature map: shape, dtype, where it lives and at which address. ``resident`` is the
    bytes a cascaded map keeps in SRAM (the rows its consumer reads, double-buffered); 0 means
    the whole map is resident."""

    shape: tuple[int, ...]
    dtype: str
    memory: str = "sram"
    address: int = 0
    resident: int = 0

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    @property
    def resident_bytes(self) -> int:
        return self.resident or self.nbytes


@dataclass
class NPUOp:
    """One operation: kind, feature-map inputs and output (tensor ids), scalar parameters,
    constant arrays (weights, bias, multipliers, tables) and the number of output stripes."""

    kind: str
    name: str
    inputs: list[int]
    output: int
    params: dict = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    stripes: int = 1


@dataclass
class Program:
    """Tensors, operations in order, the region's inputs and outputs, and the SRAM plan."""

    config: str
    tensors: list[TensorDesc]
    ops: list[NPUOp]
    inputs: list[int]
    outputs: list[int]
    sram_peak: int = 0
