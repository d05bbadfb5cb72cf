"""Lowering of float32 3 x 3 convolutions to Winograd's F(2 x 2, 3 x 3) (FWINO):

    nn.conv2d 3 x 3, stride 1, dilation 1, groups 1, exact sums, NHWC, any batch,
    C and O multiples of 16, 16 tiles or more                    FPAD -> FWINO (+ bias,
                                                                  residual, relu)

Each 2 x 2 block of outputs (a tile; an odd height or width's last tiles half outside, their
window's last row or column the padding's, their outside pixels not stored) is computed from
the 4 x 4 window of the padded input around it with 16 products of C x O instead of 36: the
window transformed (V = B^T d B), one matrix product per element of the 4 x 4 transform
(V[e] x U[e], U = G g G^T the weights transformed here, in float64, rounded once), and the 16
results transformed back (Y = A^T M A).
2.25x fewer multiply-adds than the direct sum (emit/float/winograd.py computes it); the sums
are still float32 but not one FMA chain per output: measured against float64 sums on random
layers of ResNet-50's shapes, 3-8e-7 of the output's scale where the direct chain gives
about 2e-7 (docs/performance.md, session 28). Non-finite inputs spread further: a NaN or inf
reaches every output of the tiles whose 4 x 4 windows hold it (inf - inf in the transforms
gives NaN where the direct sum gives inf).

The llvm target's ``-winograd=no`` keeps every such convolution on FDENSE's implicit
product.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.kinds import Kind

from .float_products import gemm_tile, panels

if TYPE_CHECKING:
    from .context import LowerContext

VEC = 16
# the transforms (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2016)
BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)
# fewer input or output channels: not measured. 16 pays already (56 x 56 x 16 -> 16: 0.050
# against the direct 0.082 ms; 28 x 28 x 64 -> 16 0.047 / 0.081, Zen 5)
MIN_CHANNELS = 16
MIN_TILES = 16  # fewer 2 x 2 tiles (8 x 8 outputs): the products' rows too few for the tile
# transformed weights past this many floats (4 MB, beyond L2) streamed for fewer than
# FEW_TILES rows: memory-bound. ResNet-50's 7 x 7 x 512 (16 tiles, 16 MB): 1.00 ms against the
# direct product's 0.90 on a Zen 5 (14 x 14 x 256: 49 tiles, 4 MB, 0.53 against 0.96)
BIG_WEIGHTS, FEW_TILES = 1 << 20, 32
# the transformed window and products of a block of tiles, one thread's scratch (floats):
# 16 x tiles x (C + O), about L2's size
BLOCK_FLOATS = 1 << 19


def eligible(low: LowerContext, call, weights: np.ndarray, n: int, oh: int, ow: int) -> bool:
    """Whether lower_winograd takes this convolution (``weights`` HWIO)."""
    a = call.attrs
    kh, kw, c, o = weights.shape
    return (low.winograd and (kh, kw) == (3, 3) and tuple(a.strides) == (1, 1)
            and tuple(a.dilation) == (1, 1) and a.groups == 1
            and c % VEC == 0 and o % VEC == 0 and min(c, o) >= MIN_CHANNELS
            and n * tiles(oh, ow) >= MIN_TILES
            and (n * tiles(oh, ow) >= FEW_TILES or 16 * c * o <= BIG_WEIGHTS))


def tiles(oh: int, ow: int) -> int:
    """The 2 x 2 tiles of an oh x ow output."""
    return -(-oh // 2) * -(-ow // 2)


def transformed_weights(weights: np.ndarray) -> np.ndarray:
    """U[e] = (G g G^T)[e // 4, e % 4] per input and output channel: [16][C][O] float32."""
    u = np.einsum("ai,ijco,bj->abco", G, weights.astype(np.float64), G)
    return u.reshape(16, *weights.shape[2:]).astype(np.float32)


def block_tiles(tiles: int, c: int, o: int) -> int:
    """Tiles per block: the largest divisor of ``tiles`` whose scratch fits BLOCK_FLOATS (at
    least the smallest divisor of 6 or more), so every block has the same rows."""
    small = [d for d in range(1, math.isqrt(tiles) + 1) if tiles % d == 0]
    divisors = sorted({*small, *(tiles // d for d in small)})
    big = [d for d in divisors if d >= 6 and 16 * d * (c + o) <= BLOCK_FLOATS]
    if big:
        return max(big)
    return min(d for d in divisors if d >= 6) if tiles >= 6 else tiles


def lower_winograd(low: LowerContext, call, weights: np.ndarray, epilogue) -> bool:
    """FPAD (folded into its producer by float_halos where it can) and FWINO for ``call``;
    ``epilogue`` float_conv's (a following bias, residual add and relu absorbed)."""
    x, a = call.args[0], call.attrs
    _, _, c, o = weights.shape
    n, h, w, _ = (int(d) for d in x.checked_type.shape)
    _, oh, ow, _ = (int(d) for d in call.checked_type.shape)
    top, left, bottom, right = a.padding
    hp, wp = h + top + bottom, w + left + right
    if (hp, wp) != (oh + 2, ow + 2):
        return False
    th, tw = -(-oh // 2), -(-ow // 2)
    tiles = n * th * tw  # the images' tiles in a row: a batch is a longer product
    per = block_tiles(tiles, c, o)
    if 16 * per * (c + o) > 4 * BLOCK_FLOATS:
        return False  # no even block near the budget (a tile count of large prime factors)
    src = low.src(x)
    odd_h, odd_w = oh % 2, ow % 2  # an odd output's last tiles: a zero row / column more
    if any(a.padding) or odd_h or odd_w:
        hp, wp = hp + odd_h, wp + odd_w
        src = low.scratch(Kind.FPAD, [src], (n, hp, wp, c), "float32",
                          {"padding": [top, left, bottom + odd_h, right + odd_w]})
    blocks = tiles // per
    params = {"B": 16, "M": tiles, "K": c, "N": o, "C": c, "O": o, "out": [oh, ow], "th": th,
              "tw": tw, "hp": hp, "wp": wp, "per": per, "blocks": blocks, "bias": "none",
              "vec": True, "scratch": 16 * per * (c + o), **gemm_tile(low.isa)}
    u = transformed_weights(weights)
    arrays = {"wt": np.concatenate([panels(u[e], VEC * params["cols"]) for e in range(16)])}
    # two threads: chunks of a block and half the output channels where blocks are few
    parts = 2 if low.threads > 1 and blocks < 4 and o % (2 * VEC * params["cols"]) == 0 else 1
    params["parts"] = parts
    if low.threads > 1 and blocks * parts >= 2:
        params["threads"] = 2
    last = epilogue(low, call, o, params, arrays, True, o, residual=True)
    # a thread's scratch (floats): V and M of a block; one per thread
    ws = low.workspace(4 * params["scratch"] * params.get("threads", 1))
    inputs = [src, ws]
    if "residual_of" in params:  # ResNet's shortcut, added after the bias
        inputs.append(low.src(params.pop("residual_of")))
    low.emit(Kind.FWINO, last, inputs, params, arrays)
    return True


__all__ = ["eligible", "lower_winograd", "transformed_weights"]
