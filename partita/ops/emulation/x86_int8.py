"""The int16 pair saturation of x86's VPMADDUBSW, which int8 kernels without VNNI inherit.

Without VNNI (AVX2 CPUs, AVX-512 Skylake) a uint8 x int8 dot product is VPMADDUBSW, which adds
each pair of adjacent products into an int16 with saturation, then VPMADDWD, which widens the
pairs to int32 exactly; VNNI's VPDPBUSD sums all four products of a lane in int32. So the
same model gives other int8 results on such CPUs wherever a pair of products exceeds 32,767,
e.g. (255, 255) . (127, 127) = 64,770 -> 32,767. Which kernels do it, and in which order they
pair the products, was measured against the runtimes (docs/onnx.md, docs/pytorch.md):

* ONNX Runtime (MLAS QgemmU8S8 / ConvSym kernels, AVX2 and AVX-512 Skylake): convolutions in
  NHWC im2col order (kernel row, kernel column, input channel), GEMMs along K; its depthwise
  kernel widens first and is exact.
* PyTorch fbgemm: every convolution in the same order, depthwise ones included (fbgemm's
  depthwise kernels are AVX2 code, also on AVX-512 CPUs, so they pair taps there too).
* PyTorch oneDNN (AVX2): channels pair within each kernel tap, an odd channel count padded
  ("vpmaddubsw_tap"); depthwise exact.

accumulate= of qnn.conv2d / qnn.dense: "exact", "vpmaddubsw" (pairs along K in the order
above) or "vpmaddubsw_tap" (qnn.conv2d: pairs of channels within each tap).
"""

from __future__ import annotations

import numpy as np

INT_ACCUMULATE = ("exact", "vpmaddubsw", "vpmaddubsw_tap")
INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1


def pair_saturation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """What VPMADDUBSW's int16 saturation takes off an exact u8 x s8 product sum.

    ``a`` (..., M, K) holds raw uint8 values, ``b`` (..., K, N) raw int8 values, K in the order
    MLAS packs it. MLAS multiplies adjacent pairs, k = 2j and 2j + 1, adds each pair into an
    int16 with saturation (VPMADDUBSW), then widens the pairs to int32 exactly (VPMADDWD with
    ones); zero points are applied afterwards from exact row and column sums. So the kernel's sum
    is ``sum_j sat16(a[2j] b[2j] + a[2j+1] b[2j+1])`` and this returns that minus the exact sum,
    (..., M, N) int64, zero wherever no pair can leave int16. An odd K is padded with a zero.
    """
    a = a.astype(np.int64)
    b = b.astype(np.int64)
    if a.shape[-1] % 2:
        a = np.concatenate([a, np.zeros(a.shape[:-1] + (1,), np.int64)], axis=-1)
        b = np.concatenate([b, np.zeros(b.shape[:-2] + (1,) + b.shape[-1:], np.int64)], axis=-2)
    out = np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]),
                   np.int64)
    amax = np.abs(a).max(axis=-2, keepdims=True) if a.size else a
    bmax = np.abs(b).max(axis=-1, keepdims=True) if b.size else b
    # the largest |pair| each j can reach, over every row and column (and batch)
    reach = (amax[..., 0::2] * np.swapaxes(bmax, -1, -2)[..., 0::2]
             + amax[..., 1::2] * np.swapaxes(bmax, -1, -2)[..., 1::2])
    reach = reach.reshape(-1, reach.shape[-1]).max(axis=0) if reach.size else reach
    for j in np.flatnonzero(reach > INT16_MAX):
        pair = (a[..., :, 2 * j, None] * b[..., None, 2 * j, :]
                + a[..., :, 2 * j + 1, None] * b[..., None, 2 * j + 1, :])
        out += np.clip(pair, INT16_MIN, INT16_MAX) - pair
    return out
