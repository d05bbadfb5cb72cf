"""A table lookup or a rescaling ReLU that reads a region's input and writes its output (the
one-op models' NHWC maps) as Vela 5.2 runs it: a 1x1 pooling operation over the map reshaped
as its MemoryCopy's (vela_copy.copy_shape: 16 channels, rows and columns as near a square as
they divide; an 8x8x4 map is one 4x4x16 block), its table loaded before it, in sequence.

Read off Vela's debug database (`vela --enable-debug-db`, u55-256 and u65-256, the one-op
models of tests/models/tflite/ops; figures in tests/backends/npu/test_npu_unary_vela.py):
LOGISTIC and RELU both run as a LUT / Relu operation with the 4x4x16 block, mac 192, ao 192,
cmd 48 cycles, est_op_cycles 320 on u55-256 and 1,026 on u65-256, the reshape's MemoryCopy
figures to the cycle (n30h). Vela's op cycles for a table are that plus its table's load from
the weight memory: 640 = 320 + (64 + 256 bytes at 1 byte per cycle) on u55-256, 1,547 =
1,026 + (500 + 256 / 12) on u65-256 (the database's DramLut access: 256 bytes read); a ReLU,
ReLU6 or ReLU_0_TO_1 with rescaling has no table (the output stage clamps): 320 / 1,026.
Between two operations a table keeps cycles.py's rule (its table loaded under the previous
operation: the *_in_graph rows are within 1% of Vela's).
"""

from __future__ import annotations

from .config import NPUConfig
from .program import TensorDesc
from .vela_access import bandwidth, memory_latency
from .vela_copy import copy_as_vela

# our LUT operations Vela runs without a table: a ReLU with rescaling (requantize and clip)
TABLELESS = ("qnn.requantize+clip",)


def table_load(config: NPUConfig, table_bytes: int) -> float:
    """Cycles to load a table from the weight memory: its first-byte latency and bytes."""
    memory = config.weight_memory
    return memory_latency(config, memory, False) + table_bytes / bandwidth(config, memory)


def unary_as_vela(
    config: NPUConfig, out: TensorDesc, io: tuple[str, str], table_bytes: int
) -> float:
    """Cycles of a table (or a rescaling ReLU) from a region's input to its output, ``io`` the
    memories of the two maps, ``table_bytes`` the table's size as loaded (0: no table,
    ``TABLELESS``)."""
    cycles = copy_as_vela(config, "reshape", out, io)
    return cycles + (table_load(config, table_bytes) if table_bytes else 0.0)
