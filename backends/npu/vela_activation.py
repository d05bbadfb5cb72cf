"""A convolution's fused ReLU-family activation that Vela 5.2 runs as an operation of its own.

Vela fuses a convolution's (or depthwise convolution's) activation into its output stage
unless the output has fewer than 8 channels: then the convolution writes its output to an
SRAM map and a separate activation operation (regor runs one as an average-pool NOP) moves it
to the output, rescaling nothing. Found on Vela 5.2's per-layer report of one-op models made
with /work/tfvenv's converter (a 3x3 depthwise convolution and ReLU6 on an 8x8 map: 1, 2, 4, 6
and 7 channels split, 8, 12, 16, 20, 24 and 32 fused; a 3x3 convolution with 4 output channels
splits, conv2d_same_s2_relu6's 8 fuse; the input's zero point, the stride and the padding do
not matter), not read in regor's source. The activation operation reads the map reshaped to 16
channels (vela_copy.copy_shape's reshape) and costs a 1x1 pool in the block model at the
output stage's plain rate, its first block unoverlapped: on u55-256 128, 192, 320, 384 and 864
cycles for 64, 128, 256, 384 and 1,024 elements, Vela's figures (448 for 448 elements against
Vela's 416, 264 for 144 against 269); on u65-256, writing DRAM, 355, 533 and 1,038 (Vela 355,
532 and 1,063). Our compiler marks a fused clip in the operation's parameters
(``activation``), since the clip's bounds alone may be the type's whole range (a ReLU6 whose
output zero point is -128 and scale above 6/255).
"""

from __future__ import annotations

from .blocks import Query, mac_cycles
from .config import NPUConfig
from .program import NPUOp, TensorDesc
from .vela_access import map_transfer
from .vela_copy import copy_shape

SPLIT_DEPTH = 8  # outputs with fewer channels run their activation separately


def split_activation(op: NPUOp, out: TensorDesc, depth: int | None = None) -> bool:
    """Whether Vela runs this convolution's fused clip as a separate operation (``depth``:
    the output depth of the convolution as Vela's graph has it, if not ``out``'s)."""
    return (
        op.kind in ("CONV", "DWCONV")
        and op.params.get("activation") == "clip"
        and len(out.shape) == 4
        and (out.shape[-1] if depth is None else depth) < SPLIT_DEPTH
    )


def activation_cycles(config: NPUConfig, out: TensorDesc, memory: str) -> float:
    """Cycles of the separate activation: from an SRAM map to ``out`` in ``memory``."""
    shape = copy_shape("reshape", out)
    src = TensorDesc((1, *shape), out.dtype, "sram")
    dst = TensorDesc((1, *shape), out.dtype, memory)
    transfer = map_transfer(config, src, dst, ("sram", memory))
    q = Query("pool", shape, shape)
    return mac_cycles(config, q, config.conv_output_cycles, transfer, fill=True)[0]
