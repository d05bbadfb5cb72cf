"""PyTorch 2.13's float32 CPU kernels on x86-64 (AVX-512 build), emulated bit for bit with numpy.

PyTorch runs a PT2E-quantized program as dequantize -> float op -> quantize, so its results
depend on the order in which its float kernels sum. Found by experiment against torch 2.13.0
(MKL 2024.2, oneDNN 3.12, 2 threads; docs/pytorch.md):

* conv2d, small batch-1 shapes (the ones torch does not send to oneDNN: every non-depthwise
  conv of the test models): im2col with k in (channel, kernel row, kernel column) order and MKL
  SGEMM. For K <= 320 every output is one FMA chain from zero over k in order. Longer K is
  blocked in a way that depends on the shape (16 x 512 x 64: two 256-wide chains added; 8 x 400
  x 36: not that), so it is not reproduced. A bias is added afterwards.
* depthwise conv2d (groups = C, one output channel per group): oneDNN's jit_dw kernel, one FMA
  chain over the taps in (row, column) order, starting from the bias (from zero without one).
* mean over H * W, adaptive_avg_pool2d to 1 x 1: ATen's cascade sum (8-float vectors, 4
  interleaved vector accumulators, cascade levels of 16 rows), then / float32(H * W).
"""

from __future__ import annotations

import numpy as np

from .onnxruntime_mlas import fma_f32, im2col

F32 = np.float32
MAX_K = 320  # MKL SGEMM sums K <= 320 in one chain
LANES = 8  # ATen's Vectorized<float> in its reduction kernels
ILP = 4  # row_sum's interleaved accumulators
LEVELS = 4  # multi_row_sum's cascade levels


def gemm_chain(w: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """MKL SGEMM (G, M, K) x (G, K, N), K <= MAX_K: one FMA chain from zero over k per output."""
    out = np.zeros(w.shape[:2] + cols.shape[-1:], F32)
    for k in range(w.shape[-1]):
        out = fma_f32(w[:, :, k : k + 1], cols[:, k : k + 1, :], out)
    return out


def depthwise_chain(x: np.ndarray, weight: np.ndarray, strides_hw, padding, dilation) -> np.ndarray:
    """oneDNN jit_dw: (N, C, H, W) with (C, 1, KH, KW), one FMA chain per output over the taps."""
    n, c, h, w = x.shape
    kh, kw = weight.shape[2:]
    cols, oh, ow = im2col(x.reshape(n * c, 1, h, w), (kh, kw), strides_hw, dilation, padding)
    cols = cols.reshape(n, c, kh * kw, oh * ow)
    taps = np.ascontiguousarray(weight.reshape(1, c, kh * kw, 1).astype(F32))
    out = np.zeros((n, c, oh * ow), F32)
    for t in range(kh * kw):
        out = fma_f32(taps[:, :, t], cols[:, :, t], out)
    return out.reshape(n, c, oh, ow)


def conv2d_nchw(x, weight, strides_hw, padding, dilation, groups: int) -> np.ndarray:
    """PyTorch's float32 conv2d of ``x`` (N, C, H, W) with ``weight`` (O, C / groups, KH, KW),
    no bias: depthwise as oneDNN's jit_dw, anything else as im2col + MKL SGEMM."""
    n, c, h, w = x.shape
    o, cg, kh, kw = weight.shape
    if cg == 1 and o == groups == c:
        return depthwise_chain(x, weight, strides_hw, padding, dilation)
    m, k = o // groups, cg * kh * kw
    wg = np.broadcast_to(weight.reshape(1, groups, m, k), (n, groups, m, k)).reshape(-1, m, k)
    cols, oh, ow = im2col(x.reshape(n * groups, cg, h, w), (kh, kw), strides_hw, dilation, padding)
    return gemm_chain(wg.astype(F32), cols).reshape(n, o, oh, ow)


def _multi_row_sum(rows: list) -> list:
    """ATen's multi_row_sum over ``rows`` (each a tuple of ILP arrays): cascade levels."""
    size = len(rows)
    power = max(4, int(np.ceil(np.log2(size))) // LEVELS if size > 1 else 0)
    step, mask = 1 << power, (1 << power) - 1
    zero = np.zeros_like(rows[0][0]) if rows else None
    acc = [[zero] * ILP for _ in range(LEVELS)]
    i = 0
    while i + step <= size:
        for _ in range(step):
            acc[0] = [(a + r).astype(F32) for a, r in zip(acc[0], rows[i])]
            i += 1
        for j in range(1, LEVELS):
            acc[j] = [(a + b).astype(F32) for a, b in zip(acc[j], acc[j - 1])]
            acc[j - 1] = [zero] * ILP
            if i & (mask << (j * power)):
                break
    for r in rows[i:]:
        acc[0] = [(a + b).astype(F32) for a, b in zip(acc[0], r)]
    for j in range(1, LEVELS):
        acc[0] = [(a + b).astype(F32) for a, b in zip(acc[0], acc[j])]
    return acc[0]


def inner_sum(v: np.ndarray) -> np.ndarray:
    """ATen's vectorized_inner_sum of float32 ``v`` over its last axis (cascade_sum)."""
    n = v.shape[-1]
    vectors = [v[..., i * LANES : (i + 1) * LANES] for i in range(n // LANES)]
    vacc = np.zeros(v.shape[:-1] + (LANES,), F32)
    if vectors:
        groups = len(vectors) // ILP
        rows = [tuple(vectors[r * ILP : (r + 1) * ILP]) for r in range(groups)]
        acc = _multi_row_sum(rows) if rows else [vacc] * ILP
        for extra in vectors[groups * ILP :]:
            acc[0] = (acc[0] + extra).astype(F32)
        vacc = acc[0]
        for a in acc[1:]:
            vacc = (vacc + a).astype(F32)
    total = np.zeros(v.shape[:-1], F32)
    for i in range(n // LANES * LANES, n):
        total = (total + v[..., i]).astype(F32)
    for lane in range(LANES):
        total = (total + vacc[..., lane]).astype(F32)
    return total


def global_avg_pool_nchw(x: np.ndarray) -> np.ndarray:
    """torch.mean(x, (2, 3), keepdim=True) of contiguous float32 (N, C, H, W): ATen's cascade
    sum over the H * W pixels, divided by float32(H * W)."""
    n, c, h, w = x.shape
    total = inner_sum(x.astype(F32).reshape(n, c, h * w))
    return (total / F32(h * w)).astype(F32).reshape(n, c, 1, 1)


ACCUMULATE = ("torch_cpu",)
