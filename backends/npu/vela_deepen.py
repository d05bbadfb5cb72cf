"""The shape Vela 5.2 runs a shallow elementwise operation's maps as (session 21, n30y):
regor's scheduler packing reshapes an elementwise operation's maps when its output has fewer
than 8 channels (vela_access.deepens, vela_layout.deepened)."""

from __future__ import annotations

import numpy as np

DEPTH = 16  # the depth regor builds up to
SHALLOW_DEPTH = 8  # an elementwise map shallower than this Vela deepens (deepened_shape)


def deepened_shape(shape) -> tuple[int, int, int]:
    """The h x w x c map Vela 5.2 runs a shallow elementwise operation's maps as (regor's
    scheduler packing, ReshapeToIncreaseDepth): the elements' prime factors, smallest first,
    multiplied into the depth until it reaches 16, the rest dealt out to the rows and the
    columns in turn, the rows taking the next factor unless the columns are fewer, rows the
    larger of the two. MobileNetV3's 224x224x3 input rescale runs as 168x56x16 (`vela
    --verbose-performance`: its MUL 56,448 and ADD 112,896 cycles, 0.375 and 0.75 per
    element, no depth padding)."""
    n = int(np.prod([int(d) for d in shape] or [1]))
    factors, rest, f = [], n, 2
    while rest > 1 and f * f <= rest:
        while rest % f == 0:
            factors.append(f)
            rest //= f
        f += 1
    if rest > 1:
        factors.append(rest)
    depth, i = 1, 0
    while i < len(factors) and depth < DEPTH:
        depth *= factors[i]
        i += 1
    h = w = 1
    for f in factors[i:]:
        if w < h:
            w *= f
        else:
            h *= f
    return max(h, w), min(h, w), depth
