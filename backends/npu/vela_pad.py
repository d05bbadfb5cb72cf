"""PAD, PADV2 and MIRROR_PAD as Vela 5.2 runs them: a MemoryCopy of the input into the
output's interior, then one MemoryCopy per padded border, each charged as Vela's per-layer
report (`vela --verbose-performance`) and debug database (`--enable-debug-db`) show them on
the one-op models of tests/models/tflite/ops (an 8x8x4 map):

    constant fill (PAD, PADV2): the top and bottom borders span the output's width, the left
        and right ones its height (corners in both); each copies a constant map of the
        border's shape from the weight memory (flash on the U55: 768 and 1,536 cycles for
        borders of 44 and 88 bytes on u55-256, Vela's bursts over whole output blocks);
    reflect (MIRROR_PAD): the top and bottom borders span the input's width and the left and
        right ones the output's height, each copied from the output map itself (Vela: 153-202
        cycles each on u55-256, no weight memory).

Each copy is a 1x1 pooling operation in the block model, charged as regor's
EstimateMacOpCycles charges an operation both first and last (blocks.single_mac_op: the output
stage at the plain output rate, the command-issue bound carrying the difference of one
block's read and write; vela_copy.py's docstring), at least each memory's access: the bytes of whole
blocks in the bursts of the map's NHWC shape over the memory's bandwidth, no first-byte
latency (Vela's access cycles). The operation's cycles are the sum of its copies'.
"""

from __future__ import annotations

from math import ceil

from .blocks import Query, find_block, single_mac_op
from .config import NPUConfig
from .program import TensorDesc
from .vela_access import bandwidth, burst_factor, map_transfers


def pad_borders(shape: tuple, pad_width, reflect: bool) -> list[tuple[int, int, int]]:
    """The h x w x c shapes of the border copies (empty borders left out), ``shape`` the
    input's NHWC shape."""
    _, h, w, c = shape
    (top, bottom), (left, right) = pad_width[1], pad_width[2]
    oh = h + top + bottom
    across = w if reflect else w + left + right
    rows = [(top, across, c), (bottom, across, c)]
    cols = [(oh, left, c), (oh, right, c)]
    return [s for s in rows + cols if s[0] and s[1]]


def _accessed(shape: tuple, block: tuple) -> int:
    """Elements Vela accesses to move ``shape`` a ``block`` at a time: whole blocks, each
    clipped to the map where the map is smaller than one block."""
    n = 1
    for s, b in zip(shape, block):
        n *= ceil(s / b) * min(s, b)
    return n


def copy_cycles(config: NPUConfig, shape: tuple, src: str, dst: str, dtype: str) -> float:
    """One MemoryCopy of an h x w x c map from ``src`` to ``dst``: the slower of its block
    model and its memories' access."""
    item = 2 if dtype == "int16" else 1
    i, o = TensorDesc((1, *shape), dtype, src), TensorDesc((1, *shape), dtype, dst)
    q = Query("pool", shape, shape, bits=8 * item)
    transfers = map_transfers(config, i, o, (src, dst))
    npu = single_mac_op(config, q, config.conv_output_cycles, transfers, const_latency=0)
    block = find_block(config, q)
    nbytes = _accessed(shape, block.ofm) * item
    access: dict[str, float] = {}
    for memory, write in ((src, False), (dst, True)):
        factor = burst_factor(config, memory, shape, block.ofm, item, write)
        access[memory] = access.get(memory, 0.0) + nbytes * factor
    return max(npu, *(n / bandwidth(config, m) for m, n in access.items()))


def pad_as_vela(
    config: NPUConfig, ifm: TensorDesc, ofm: TensorDesc, pad_width, reflect: bool, io
) -> float:
    """Cycles of a 4-D PAD over H and W as Vela 5.2's copies (module docstring); ``io``: the
    memories the input and output maps live in."""
    shape = tuple(int(d) for d in ifm.shape)
    cycles = copy_cycles(config, shape[1:], io[0], io[1], ifm.dtype)
    fill_from = io[1] if reflect else config.weight_memory
    for border in pad_borders(shape, pad_width, reflect):
        cycles += copy_cycles(config, border, fill_from, io[1], ofm.dtype)
    return cycles


def pads_as_vela(op, ifm: TensorDesc) -> bool:
    """Whether ``op`` is a PAD this model decomposes: a 4-D map padded over H and W only."""
    if op.params.get("op") != "nn.pad" or len(ifm.shape) != 4:
        return False
    pw = op.params["attrs"]["pad_width"]
    return not any(pw[0]) and not any(pw[3])
