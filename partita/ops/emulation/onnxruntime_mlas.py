"""ONNX Runtime's MLAS float32 kernels on x86-64, emulated bit for bit with numpy.

ONNX Runtime (CPU provider, graph optimizations disabled) runs float Conv, Gemm and MatMul
through MLAS's SGEMM and GlobalAveragePool through MlasPool; their float32 results depend on
the order in which MLAS sums. The rules below were read from MLAS (sgemm.cpp, convolve.cpp,
pooling.cpp, the AVX-512F SGEMM kernel and the AVX M=1 kernels) and checked against
onnxruntime 1.31 on an AVX-512 machine (docs/onnx.md):

* SGEMM (MlasGemm): ``threads`` split the work (N in 16-column blocks when N > M, else M), each
  part runs MlasSgemmOperation: K in blocks of StrideK (128, halved while N >= K allows, doubled
  while N < K allows); per block every output is an FMA chain from zero over k in order, then
  ``C = block`` (first block, beta = 0) or ``C = block + C``.
* A part with M = 1 (or N = 1 with unit strides) takes the AVX M=1 kernels instead, which
  multiply and add separately (no FMA): for B as (K, N), groups of 4 products summed left to
  right and then added to C; for B as (N, K), 8 lanes over k, reduced in one of three orders.
* A constant B that ONNX Runtime prepacked (MlasGemmPackB, for Gemm / MatMul initializers)
  always takes the FMA kernel, in K blocks of 256.
* Conv (MlasConv): im2col, then MlasGemm or, per thread segment of output pixels,
  MlasConvOperation, which adds its own K blocking; the bias is added after the sum.
* GlobalAveragePool: 4 lanes over the pixels, reduced as (l0 + l2) + (l1 + l3), the remaining
  pixels added one by one, divided by the pixel count.
"""

from __future__ import annotations

import numpy as np

from partita.errors import TypeInferenceError

F32, F64 = np.float32, np.float64
STRIDE_N = STRIDE_K = 128
PACKED_STRIDE_K = 256  # MLAS_SGEMM_PACKED_STRIDEK: K blocks of a prepacked B
THREAD_ALIGN = 16  # MLAS_SGEMM_STRIDEN_THREAD_ALIGN
THREAD_COMPLEXITY = 64 * 1024  # multiplies per thread before MLAS adds a thread
MAX_THREADS = 16  # MLAS_MAXIMUM_THREAD_COUNT


def fma_f32(a, b, c) -> np.ndarray:
    """float32 a * b + c with one rounding (vfmadd231ps), for float32 arrays that broadcast."""
    p = a.astype(F64) * b.astype(F64)  # exact: 24 + 24 significant bits
    s = p + c.astype(F64)
    r = s.astype(F32)
    # Rounding s to float32 rounds the exact sum correctly unless s sits exactly halfway
    # between two float32 values (low 29 mantissa bits 1000...0) or is subnormal in float32.
    bits = s.view(np.int64)
    risky = ((bits & 0x1FFFFFFF) == 0x10000000) | ((np.abs(s) < 2.0**-125) & (s != 0))
    if not risky.any():
        return r
    cc = np.broadcast_to(c, s.shape).astype(F64)
    bb = s - p
    err = (p - (s - bb)) + (cc - bb)  # TwoSum: s + err is the exact sum
    other = np.nextafter(r, np.where(s > r, F32(np.inf), F32(-np.inf)).astype(F32))
    tie = risky & (s != r) & (err != 0) & (s == (r.astype(F64) + other.astype(F64)) / 2)
    fixed = np.where(err > 0, np.maximum(r, other), np.minimum(r, other))
    return np.where(tie, fixed, r).astype(F32)


def partition(index: int, count: int, total: int) -> tuple[int, int]:
    """MlasPartitionWork: (start, count) of part ``index`` of ``total`` split ``count`` ways."""
    per, extra = divmod(total, count)
    if index < extra:
        return (per + 1) * index, per + 1
    return per * index + extra, per


def target_threads(complexity: int, threads: int) -> int:
    """Threads MLAS uses for ``complexity`` multiplies with a pool of ``threads``."""
    if complexity < THREAD_COMPLEXITY * MAX_THREADS:
        return min(int(complexity / THREAD_COMPLEXITY) + 1, threads)
    return min(MAX_THREADS, threads)


def strides(n: int, k: int, transpose_a: bool = False) -> tuple[int, int]:
    """(StrideN, StrideK) of MlasSgemmOperation / MlasConvOperation for N columns, K depth."""
    sn, sk = STRIDE_N, STRIDE_K
    if n >= k:
        while sk // 2 >= k:
            sn, sk = sn * 2, sk // 2
    elif not transpose_a:
        while sn > 16 and sn // 2 >= n:
            sn, sk = sn // 2, sk * 2
    return sn, sk


# ---- kernels: a (G, M, K), b (G, K, N), c None or (G, M, N) -> (G, M, N) float32 ------------


def kernel_fma(a, b, c, stride_k: int) -> np.ndarray:
    """The AVX-512F SGEMM kernel over K blocks: FMA chain from zero per block, then C += block."""
    k_total = a.shape[-1]
    for k0 in range(0, k_total, stride_k):
        acc = None
        for k in range(k0, min(k_total, k0 + stride_k)):
            ak, bk = a[..., :, k, None], b[..., None, k, :]
            acc = ak * bk if acc is None else fma_f32(ak, bk, acc)
        c = acc if c is None else acc + c
    return c


def kernel_m1(a, b, c) -> np.ndarray:
    """MlasSgemmKernelM1Avx (M = 1, B as (K, N)): products of 4 rows of B summed left to
    right, then added to C; then a pair, then a single row, likewise. No FMA."""
    k_total = a.shape[-1]
    out = np.zeros(b.shape[:-2] + (1, b.shape[-1]), F32) if c is None else c

    def prod(k):
        return a[..., :, k, None] * b[..., None, k, :]

    k = 0
    for step in [4] * (k_total // 4) + [s for s in (2, 1) if k_total % 4 & s]:
        part = prod(k)
        for j in range(k + 1, k + step):
            part = part + prod(j)
        out, k = part + out, k + step
    return out


def _reduce_lanes(x: list, kind: int):
    if kind == 4:  # the 4-row transpose-and-add
        return (((x[0] + x[1]) + x[2]) + x[3]) + (((x[4] + x[5]) + x[6]) + x[7])
    if kind == 2:  # unpack, add halves, add 64-bit halves
        return ((x[0] + x[2]) + (x[4] + x[6])) + ((x[1] + x[3]) + (x[5] + x[7]))
    return ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7]))  # vhaddps


def kernel_m1_trans(a, b, c) -> np.ndarray:
    """MlasSgemmKernelM1TransposeBAvx (M = 1, B stored as (N, K)): 8 lanes accumulate
    a[k] * b[k, n] for k = lane mod 8 (no FMA), reduced per output in the order of the 4-, 2-
    or 1-column block the output falls in, then added to C."""
    g, k_total, n = b.shape
    kp = -(-k_total // 8) * 8
    ap = np.zeros((g, 1, kp), F32)
    ap[..., :k_total] = a
    bp = np.zeros((g, n, kp), F32)
    bp[..., :k_total] = np.swapaxes(b, -1, -2)
    lanes = np.zeros((g, n, 8), F32)
    for k0 in range(0, kp, 8):
        lanes = lanes + ap[:, :, k0 : k0 + 8] * bp[:, :, k0 : k0 + 8]
    kinds = np.array([4] * (n // 4 * 4) + [2] * (n & 2) + [1] * (n & 1))
    out = np.empty((g, 1, n), F32)
    for kind in (4, 2, 1):
        cols = np.flatnonzero(kinds == kind)
        if cols.size:
            sel = lanes[:, cols, :]
            out[:, 0, cols] = _reduce_lanes([sel[..., i] for i in range(8)], kind)
    return out + (F32(0) if c is None else c)


def sgemm_operation(a, b, c, trans_b: bool, ldb: int, ldc: int, beta_one: bool) -> np.ndarray:
    """MlasSgemmOperation (alpha = 1, beta 0 or 1): one thread's part; ``c`` holds C when
    ``beta_one`` (else None). ``ldb`` / ``ldc`` only matter for the N = 1 special case."""
    m, n = a.shape[-2], b.shape[-1]
    if m == 1:
        return kernel_m1_trans(a, b, c) if trans_b else kernel_m1(a, b, c)
    if n == 1 and ldb == 1 and ldc == 1:  # B and C are vectors: C^T = B^T A^T with M = 1
        ct = None if c is None else np.swapaxes(c, -1, -2)
        return np.swapaxes(
            kernel_m1_trans(np.swapaxes(b, -1, -2), np.swapaxes(a, -1, -2), ct), -1, -2
        )
    return kernel_fma(a, b, c, strides(n, a.shape[-1])[1])


def sgemm(
    a,
    b,
    c=None,
    trans_b: bool = False,
    threads: int = 1,
    ldb: int | None = None,
    ldc: int | None = None,
    packed: bool = False,
) -> np.ndarray:
    """MlasGemm / MlasGemmBatch with alpha = 1: a (G, M, K) @ b (G, K, N) [+ c (G, M, N), as
    beta = 1] for G independent products; ``trans_b``: B is stored as (N, K) in memory;
    ``packed``: B was prepacked (MlasSgemmPackedOperation: no M=1 kernels, K blocks of 256,
    whatever the thread split)."""
    if packed:
        return kernel_fma(a, b, c, PACKED_STRIDE_K)
    g, m, k = a.shape
    n = b.shape[-1]
    ldb = (k if trans_b else n) if ldb is None else ldb
    ldc = n if ldc is None else ldc
    per = -(-target_threads(m * n * k, threads) // g)
    out = np.empty((g, m, n), F32)
    if n > m:
        blocks = -(-n // THREAD_ALIGN)
        per = min(per, blocks)
        for i in range(per):
            s, cnt = (v * THREAD_ALIGN for v in partition(i, per, blocks))
            cols = slice(s, min(n, s + cnt))
            out[..., cols] = sgemm_operation(
                a,
                b[..., cols],
                None if c is None else c[..., cols],
                trans_b,
                ldb,
                ldc,
                c is not None,
            )
        return out
    per = min(per, m)
    for i in range(per):
        s, cnt = partition(i, per, m)
        rows = slice(s, s + cnt)
        out[:, rows] = sgemm_operation(
            a[:, rows], b, None if c is None else c[:, rows], trans_b, ldb, ldc, c is not None
        )
    return out


# ---- convolution (MlasConvPrepare / MlasConv) -------------------------------------------------


def im2col(x, kernel, strides_hw, dilation, padding) -> tuple[np.ndarray, int, int]:
    """(G, C, H, W) -> (G, C * KH * KW, OH * OW) zero-padded patches in MLAS's k order
    (channel, kernel row, kernel column), with OH, OW. padding is (top, left, bottom, right)."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides_hw, dilation
    top, left, bottom, right = padding
    g, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    oh = (h + top + bottom - dh * (kh - 1) - 1) // sh + 1
    ow = (w + left + right - dw * (kw - 1) - 1) // sw + 1
    cols = np.empty((g, c, kh, kw, oh, ow), F32)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = xp[
                :,
                :,
                i * dh : i * dh + (oh - 1) * sh + 1 : sh,
                j * dw : j * dw + (ow - 1) * sw + 1 : sw,
            ]
    return cols.reshape(g, c * kh * kw, oh * ow), oh, ow


def conv_operation(w, cols, start: int, count: int) -> np.ndarray:
    """MlasConvOperation on output pixels [start, start + count): K in StrideK slices, each an
    SGEMM (beta 0, then 1) on StrideN-pixel slices. w (G, M, K), cols (G, K, N)."""
    k_total = w.shape[-1]
    sn, sk = strides(count, k_total)
    out = np.empty(w.shape[:2] + (count,), F32)
    for n in range(0, count, sn):
        cn = min(sn, count - n)
        c = None
        for k in range(0, k_total, sk):
            part = cols[:, k : k + sk, start + n : start + n + cn]
            c = sgemm_operation(w[..., k : k + sk], part, c, False, cn, -1, c is not None)
        out[..., n : n + cn] = c
    return out


def _segmented(w, cols, threads: int) -> np.ndarray:
    """MlasConvTryMultithread / MlasConvOperation for one image and group: output pixels in
    thread segments of a multiple of 16."""
    m, k = w.shape[-2:]
    size = cols.shape[-1]
    t = target_threads(m * size * k, threads)
    seg = -(-size // t)
    if t > 1:
        seg = -(-seg // THREAD_ALIGN) * THREAD_ALIGN
    if seg >= size:
        return conv_operation(w, cols, 0, size)
    return np.concatenate(
        [conv_operation(w, cols, s, min(seg, size - s)) for s in range(0, size, seg)], axis=-1
    )


def conv2d_nchw(
    x, weight, strides_hw, padding, dilation, groups: int, threads: int = 1
) -> np.ndarray:
    """MlasConv of float32 ``x`` (N, C, H, W) with ``weight`` (O, C / groups, KH, KW), no bias:
    the algorithm MlasConvPrepare picks (direct GEMM for 1x1 / full-width kernels, im2col +
    MlasGemm when O / groups exceeds the pixel count, else segmented im2col + SGEMM)."""
    n, c, h, w = x.shape
    o, cg, kh, kw = weight.shape
    m, k = o // groups, cg * kh * kw
    wg = np.broadcast_to(weight.reshape(1, groups, m, k), (n, groups, m, k)).reshape(-1, m, k)
    cols, oh, ow = im2col(x.reshape(n * groups, cg, h, w), (kh, kw), strides_hw, dilation, padding)
    size, many = oh * ow, n * groups > 1
    unit = tuple(strides_hw) == (1, 1) and tuple(padding) == (0, 0, 0, 0)
    if unit and k == cg:  # pointwise: GEMM straight on the input
        out = (
            sgemm_operation(wg, cols, None, False, size, size, False)
            if many
            else sgemm(wg, cols, threads=threads)
        )
    elif unit and tuple(dilation) == (1, 1) and cg == 1 and (kw == w or (kh == h and kw == 1)):
        trans = kw == w  # windows are rows of the input read with stride W
        out = (
            sgemm_operation(wg, cols, None, trans, w, size, False)
            if many
            else sgemm(wg, cols, trans_b=trans, threads=threads, ldb=w)
        )
    elif m > size:
        out = np.concatenate(
            [sgemm(wg[i : i + 1], cols[i : i + 1], threads=threads) for i in range(len(wg))]
        )
    else:
        out = conv_operation(wg, cols, 0, size) if many else _segmented(wg, cols, threads)
    return out.reshape(n, o, oh, ow)


def global_avg_pool_nchw(x) -> np.ndarray:
    """MlasPoolGlobalKernel (average) of float32 (N, C, H, W): 4 lanes over the H * W pixels,
    (l0 + l2) + (l1 + l3), the remaining pixels one by one, then / float32(H * W)."""
    n, c, h, w = x.shape
    v = x.reshape(n, c, h * w)
    whole = (h * w) // 4 * 4
    lanes = np.zeros((n, c, 4), F32)
    for i in range(0, whole, 4):
        lanes = lanes + v[..., i : i + 4]
    total = (lanes[..., 0] + lanes[..., 2]) + (lanes[..., 1] + lanes[..., 3])
    for i in range(whole, h * w):
        total = total + v[..., i]
    return (total / F32(h * w)).reshape(n, c, 1, 1)


ACCUMULATE = ("exact", "mlas")
# GEMM ops may also name a prepacked constant B ("mlas_packed")
GEMM_ACCUMULATE = ("exact", "mlas", "mlas_packed")


def check_threads(threads: int) -> None:
    """Attrs.validate helper: MLAS's work split needs a positive thread count."""
    if threads < 1:
        raise ValueError(f"threads must be positive, got {threads}")


def require_float32(attrs, dtype: str, what: str) -> None:
    """Type-relation helper: accumulate="mlas" computes float32 only."""
    if attrs.accumulate != "exact" and dtype != "float32":
        raise TypeInferenceError(
            f'accumulate="{attrs.accumulate}" needs float32 {what}, got {dtype}'
        )

