"""A plan pass: a VNNI convolution whose input copy only flips int8 to uint8
(vector_plan.FLIP_INPUT) reads its producer's output as it is, the producer storing it flipped."""

from __future__ import annotations

import numpy as np
from partita.backends.llvm.kinds import Kind

# the kernels that store their output flipped when such a convolution is its only reader (VDW
# and VCONV store through OutputStage.vrequant, which applies ``flip_out``; LUT2, a residual
# add's table, has its table's bytes flipped: no cost at run time)
FLIP_PRODUCERS = (Kind.VDW, Kind.VCONV, Kind.LUT2)


def flip_into_producers(plan) -> None:
    """A VNNI convolution that copies its input only to flip it to uint8 (FLIP_INPUT: no padding,
    whole 4-channel quads) reads it as it is when the input's producer is a depthwise or vector
    convolution kernel or a LUT2 (FLIP_PRODUCERS) with no other reader: that kernel stores its
    bytes flipped (``flip_out``: one xor per 16 outputs, or a LUT2's table flipped) and the
    convolution's copy and its scratch buffer go."""
    readers, producer = plan.links()
    for k in plan.kernels:
        p = k.params
        if (k.kind != Kind.VCONV or not p.get("flipped") or not p["pack"] or any(p["pad"])
                or (p["Hs"], p["Ws"], p["Cs"]) != (p["H"], p["W"], p["C"])
                or len(k.inputs) != 2):
            continue
        x = k.inputs[0]
        src = producer.get(x)
        if (src is None or src.kind not in FLIP_PRODUCERS or x in plan.outputs
                or readers.get(x) != 1 or "batch" in p or "batch" in src.params
                or src.params.get("flip_out")):
            continue
        src.params["flip_out"] = True
        if src.kind == Kind.LUT2:  # the 256 x 256 entries (not the gathers' 4 bytes of slack)
            table = src.arrays["table"].copy()
            table[: 1 << 16] ^= np.array(-128, table.dtype)
            src.arrays["table"] = table
        p["pack"] = False
        k.inputs = [x]


__all__ = ["FLIP_PRODUCERS", "flip_into_producers"]
