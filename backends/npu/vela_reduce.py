"""REDUCE_MAX and REDUCE_MIN over a 4-D map as Vela 5.2 runs them, read off its debug database
(`vela --enable-debug-db`, u55-256 and u65-256, the one-op and in-graph models of
tests/models/tflite/ops; figures in tests/backends/npu/test_npu_reduce_vela.py):

    one ReduceMax per reduced axis, H first, then W, then C, each a pooling operation whose
    1 x n kernel runs along the map seen as (outer, n, inner): H of an h x w x c map as
    (1, h, w*c), W as (h, w, c), C as (h*w, c, 1). REDUCE_MAX over H and W of 8x8x4: ReduceMax
    1x8x32 -> 1x1x32 (block 2x2x32; 266 / 719 cycles on u55-256 / u65-256), then 1x8x4 ->
    1x1x4 (block 2x2x8; 124 / 337);
    REDUCE_MIN as a negation (a SUB from 0, on the map's flat shape), REDUCE_MAX and a
    negation of the result: over C of 8x8x4, SUB 4x4x16 (192 / 192), ReduceMax 64x4x1 ->
    64x1x1 (block 4x2x8; 595 / 590), SUB 2x2x16 (48 / 137).

Each pooling operation is charged in our block model as MAX_POOL_2D is (op_compute.BLOCK_POOLS:
the first block unoverlapped, the max-pool output rate), each SUB by Vela's elementwise rule
(vela_access); the first operation reads the input where it lives, the last writes the output
where it lives, the maps between them are in SRAM.
"""

from __future__ import annotations

import numpy as np

from .blocks import Query, mac_cycles
from .config import NPUConfig
from .program import NPUOp, TensorDesc
from .vela_access import elementwise_pass, map_transfer

REDUCES = ("max", "min")


def reduces_as_vela(op: NPUOp, ifm: TensorDesc) -> bool:
    """Whether ``op`` is a REDUCE_MAX or REDUCE_MIN of a 4-D map over some of H, W and C."""
    axes = (op.params.get("attrs") or {}).get("axis")
    return (
        op.kind == "UNIT"
        and op.params.get("op") in REDUCES
        and len(ifm.shape) == 4
        and bool(axes)
        and all(int(a) % 4 in (1, 2, 3) for a in axes)
    )


def _views(shape, axes) -> list[tuple[tuple[int, int, int], int]]:
    """The (outer, n, inner) map each ReduceMax pools, and n, in Vela's order."""
    dims = [int(d) for d in shape[1:]]
    out = []
    for axis in sorted(int(a) % 4 for a in axes):
        i = axis - 1
        n = dims[i]
        outer, inner = int(np.prod(dims[:i])), int(np.prod(dims[i + 1 :]))
        out.append(((outer, n, inner), n))
        dims[i] = 1
    return out


def reduce_as_vela(
    config: NPUConfig, op: NPUOp, ifm: TensorDesc, ofm: TensorDesc, io
) -> tuple[float, float]:
    """Cycles of Vela's operations for a REDUCE_MAX / REDUCE_MIN (``reduces_as_vela``) and of
    the last of them (the next operation's weight transfer runs under it: weight_staging's
    prefetch_stall); ``io``: the memories of the input and output maps."""
    bits = 16 if ifm.dtype == "int16" else 8
    views = _views(ifm.shape, op.params["attrs"]["axis"])
    negate = op.params["op"] == "min"
    cycles = 0.0
    src = io[0]
    if negate:  # 0 - x on the input's flat shape, into SRAM
        i = TensorDesc(tuple(ifm.shape), ifm.dtype, io[0])
        sram = TensorDesc(tuple(ifm.shape), ifm.dtype, "sram")
        cycles += elementwise_pass(config, "qnn.subtract", [i], sram, {}, False, True)
        src = "sram"
    for k, ((outer, n, inner), _) in enumerate(views):
        last = k == len(views) - 1 and not negate
        dst = io[1] if last else "sram"
        q = Query("pool", (outer, n, inner), (outer, 1, inner), (1, n), (1, 1), (1, 1), bits)
        i = TensorDesc((1, outer, n, inner), ifm.dtype, src)
        o = TensorDesc((1, outer, 1, inner), ifm.dtype, dst)
        transfer = map_transfer(config, i, o, (src, dst))
        tail = mac_cycles(config, q, config.pool_output_cycles, transfer, fill=True)[0]
        cycles += tail
        src = dst
    if negate:  # the result negated back, into the output
        mid = TensorDesc(tuple(ofm.shape), ofm.dtype, "sram")
        o = TensorDesc(tuple(ofm.shape), ofm.dtype, io[1])
        cycles += elementwise_pass(config, "qnn.subtract", [mid], o, {}, False, True)
        # the next weights' slack: the SUB as regor's scheduler estimates it, its maps where
        # they are before SRAM placement (off-chip on the U65: 142, Vela's estimate 143)
        far = config.spill_memory if config.spill_memory != "none" else "sram"
        est = [TensorDesc(tuple(ofm.shape), ofm.dtype, far) for _ in range(2)]
        tail = elementwise_pass(config, "qnn.subtract", est[:1], est[1], {}, False, True)
    return cycles, tail
