"""The float32 order in which each output of a float convolution sums, as data for the kernels
(conv.py): the output's K products (k in im2col's (channel, kernel row, kernel column)
order) are cut into blocks, each block summed on its own, and the block sums added up:

    block (k0, k1, kind, add):  kind "fma"    an FMA chain over k0..k1-1 from the first product
                                     "fmaz"   an FMA chain from +0 (PyTorch's MKL and jit_dw)
                                     "sum"    products rounded, added left to right (MLAS M=1)
                                     "lanesW" products rounded, added into 8 lanes by k mod 8,
                                              the lanes reduced in the order of MLAS's M=1
                                              transposed-B kernel for a W-column block
                                add           C = block + C (C starts at +0 or the bias),
                                              else C = block

Which blocks an output gets depends on where it falls in ONNX Runtime's work split, so a
convolution's plan is a list of tiles (pixels [p0, p1) of each image x output channels
[m0, m1) of each group, one block list each), read from partita/ops/emulation/
onnxruntime_mlas.py's conv2d_nchw step by step. PyTorch's and exact sums are one block.
"""

from __future__ import annotations

from dataclasses import dataclass

from partita.ops.emulation import onnxruntime_mlas as mlas

Block = tuple[int, int, str, bool]


@dataclass(frozen=True)
class ConvShape:
    """One float convolution: images, groups, output channels per group (m), input channels
    per group (cg), kernel, input H x W, output pixels per image (size), strides, padding
    (top, left, bottom, right), dilation, and the ``threads`` MLAS splits work for."""

    images: int
    groups: int
    m: int
    cg: int
    kh: int
    kw: int
    h: int
    w: int
    size: int
    strides: tuple[int, int]
    padding: tuple[int, int, int, int]
    dilation: tuple[int, int]
    threads: int = 1


@dataclass(frozen=True)
class Tile:
    p0: int
    p1: int
    m0: int
    m1: int
    blocks: tuple[Block, ...]


class Unreproduced(Exception):
    """A split whose order the kernels do not reproduce (the message says which)."""


def conv_tiles(accumulate: str, s: ConvShape) -> list[Tile]:
    """The tiles of a convolution summing as ``accumulate`` says, or raise Unreproduced."""
    k = s.cg * s.kh * s.kw
    if accumulate == "exact":
        return [Tile(0, s.size, 0, s.m, ((0, k, "fma", False),))]
    if accumulate == "torch_cpu":  # MKL for K <= 320 and jit_dw: one chain from zero
        return [Tile(0, s.size, 0, s.m, ((0, k, "fmaz", False),))]
    if accumulate != "mlas":
        raise Unreproduced(f"accumulate={accumulate!r}")
    return merged(_mlas_tiles(s, k))


def _mlas_tiles(s: ConvShape, k: int) -> list[Tile]:
    """MlasConv's algorithm choice (onnxruntime_mlas.conv2d_nchw), per image and group."""
    many, size, m = s.images * s.groups > 1, s.size, s.m
    unit = tuple(s.strides) == (1, 1) and tuple(s.padding) == (0, 0, 0, 0)
    if unit and k == s.cg:  # pointwise: GEMM straight on the input
        if many:
            return _at(0, 0, _operation(m, size, k, False, size, size, False))
        return _sgemm(m, size, k, s.threads, False, size, size)
    if (unit and tuple(s.dilation) == (1, 1) and s.cg == 1
            and (s.kw == s.w or (s.kh == s.h and s.kw == 1))):
        trans = s.kw == s.w
        if many:
            return _at(0, 0, _operation(m, size, k, trans, s.w, size, False))
        return _sgemm(m, size, k, s.threads, trans, s.w, size)
    if m > size:
        return _sgemm(m, size, k, s.threads, False, size, size)
    if many:
        return _conv_operation(m, k, 0, size)
    t = mlas.target_threads(m * size * k, s.threads)
    seg = -(-size // t)
    if t > 1:
        seg = -(-seg // mlas.THREAD_ALIGN) * mlas.THREAD_ALIGN
    if seg >= size:
        return _conv_operation(m, k, 0, size)
    return [tile for p in range(0, size, seg) for tile in
            _conv_operation(m, k, p, min(seg, size - p))]


def gemm_tiles(accumulate: str, m: int, n: int, k: int, threads: int, trans_b: bool,
               beta: bool, batches: int = 1) -> list[Tile]:
    """MlasGemm of an m x k by k x n product (``trans_b``: B stored as [n][k]; ``beta``: C
    preloaded with a bias) as tiles: p is n (columns), m is m (rows)."""
    if accumulate == "mlas_packed":  # MlasGemmPackB: the FMA kernel, K blocks of 256
        blocks = tuple((a, min(k, a + mlas.PACKED_STRIDE_K), "fma", beta or a > 0)
                       for a in range(0, k, mlas.PACKED_STRIDE_K))
        return [Tile(0, n, 0, m, blocks)]
    if accumulate != "mlas":
        raise Unreproduced(f"accumulate={accumulate!r}")
    return merged(_sgemm(m, n, k, threads, trans_b, k if trans_b else n, n, beta, batches))


def _at(p0: int, m0: int, parts) -> list[Tile]:
    """Relative parts (m_lo, m_hi, n_lo, n_hi, blocks) as tiles at pixel p0, channel m0."""
    return [Tile(p0 + a, p0 + b, m0 + c, m0 + d, blocks) for c, d, a, b, blocks in parts]


def _operation(m, n, k_len, trans_b, ldb, ldc, beta, k0=0) -> list:
    """MlasSgemmOperation for an m x n part over k0..k0+k_len (beta: C preloaded): parts
    (m_lo, m_hi, n_lo, n_hi, blocks) relative to the part."""
    if m == 1 and not trans_b:  # MlasSgemmKernelM1Avx: 4 rows at a time, no FMA
        steps = [4] * (k_len // 4) + [st for st in (2, 1) if k_len % 4 & st]
        out, at = [], k0
        for st in steps:
            out.append((at, at + st, "sum", True))
            at += st
        return [(0, 1, 0, n, tuple(out))]
    if m == 1:  # MlasSgemmKernelM1TransposeBAvx over the n columns
        return [(0, 1, a, b, blocks) for a, b, blocks in _lanes(n, k0, k_len)]
    if n == 1 and ldb == 1 and ldc == 1:  # C^T = B^T A^T: the same kernel over the m rows
        return [(a, b, 0, 1, blocks) for a, b, blocks in _lanes(m, k0, k_len)]
    stride = mlas.strides(n, k_len)[1]
    blocks = tuple((k0 + a, k0 + min(k_len, a + stride), "fma", beta or a > 0)
                   for a in range(0, k_len, stride))
    return [(0, m, 0, n, blocks)]


def _lanes(n: int, k0: int, k_len: int) -> list:
    """kernel_m1_trans: 8 lanes over k, reduced by the order of the 4-, 2- or 1-column block
    an output falls in ("lanes4", "lanes2", "lanes1"), then added to C."""
    cuts = [(0, n // 4 * 4, "lanes4"), (n // 4 * 4, n // 4 * 4 + (n & 2), "lanes2"),
            (n // 4 * 4 + (n & 2), n, "lanes1")]
    return [(a, b, ((k0, k0 + k_len, kind, True),)) for a, b, kind in cuts if b > a]


def _sgemm(m, n, k, threads, trans_b, ldb, ldc, beta=False, batches=1) -> list[Tile]:
    """MlasGemm on ``threads``: N in 16-column blocks when N > M, else M, split over threads
    (MlasGemmBatch: each of ``batches`` products gets its share of them)."""
    per = -(-mlas.target_threads(m * n * k, threads) // batches)
    tiles = []
    if n > m:
        blocks = -(-n // mlas.THREAD_ALIGN)
        per = min(per, blocks)
        for i in range(per):
            a, cnt = (v * mlas.THREAD_ALIGN for v in mlas.partition(i, per, blocks))
            p1 = min(n, a + cnt)
            tiles += _at(a, 0, _operation(m, p1 - a, k, trans_b, ldb, ldc, beta))
        return tiles
    per = min(per, m)
    for i in range(per):
        a, cnt = mlas.partition(i, per, m)
        tiles += _at(0, a, _operation(cnt, n, k, trans_b, ldb, ldc, beta))
    return tiles


def _conv_operation(m, k, start, count) -> list[Tile]:
    """MlasConvOperation on pixels [start, start + count): K slices of StrideK, each a GEMM
    (the first with beta 0) on StrideN-pixel slices."""
    sn, sk = mlas.strides(count, k)
    tiles = []
    for n in range(0, count, sn):
        cn = min(sn, count - n)
        slices = [_operation(m, cn, min(sk, k - a), False, cn, -1, a > 0, a)
                  for a in range(0, k, sk)]
        for parts in zip(*slices):  # every K slice cuts the part the same way
            blocks = tuple(b for part in parts for b in part[4])
            c, d, a, b = parts[0][:4]
            tiles.append(Tile(start + n + a, start + n + b, c, d, blocks))
    return tiles


def merged(tiles: list[Tile]) -> list[Tile]:
    """Neighbouring tiles with the same blocks joined (fewer loops, same sums)."""
    out: list[Tile] = []
    for t in tiles:
        last = out[-1] if out else None
        if last and last.blocks == t.blocks and (last.m0, last.m1) == (t.m0, t.m1) \
                and last.p1 == t.p0:
            out[-1] = Tile(last.p0, t.p1, t.m0, t.m1, t.blocks)
        elif last and last.blocks == t.blocks and (last.p0, last.p1) == (t.p0, t.p1) \
                and last.m1 == t.m0:
            out[-1] = Tile(t.p0, t.p1, last.m0, t.m1, t.blocks)
        else:
            out.append(t)
    return out


def uniform_blocks(tiles: list[Tile]):
    """The one block list every tile shares (depthwise kernels need it), or None."""
    first = tiles[0].blocks
    return first if all(t.blocks == first for t in tiles) else None


# ---- global average pools: the add sequence over the pixels of one channel --------------------

ZERO = -1  # the value +0; pixels are 0 .. n-1, sums n, n+1, ...


def pool_program(accumulate: str, n: int) -> list[tuple[int, int]]:
    """The float32 adds of ``accumulate``'s global average over n pixels, as (a, b) pairs in
    order; the i-th pair makes value n + i, the last one is the total (then / float32(n))."""
    prog: list[tuple[int, int]] = []

    def add(a, b):
        prog.append((a, b))
        return n + len(prog) - 1

    if accumulate == "mlas":  # MlasPoolGlobalKernel: 4 lanes, (l0 + l2) + (l1 + l3), the rest
        whole = n // 4 * 4
        lanes = [ZERO] * 4
        for i in range(0, whole, 4):
            lanes = [add(lanes[j], i + j) for j in range(4)]
        total = add(add(lanes[0], lanes[2]), add(lanes[1], lanes[3]))
        for i in range(whole, n):
            total = add(total, i)
        return prog
    _torch_inner_sum(n, add)  # torch_cpu
    return prog


def _torch_inner_sum(n: int, add) -> int:
    """torch_cpu.inner_sum over n pixels with symbolic adds (8 lanes, 4 accumulators)."""
    lanes, ilp = 8, 4
    vectors = [tuple(range(i * lanes, (i + 1) * lanes)) for i in range(n // lanes)]

    def vadd(a, b):
        return tuple(add(x, y) for x, y in zip(a, b))

    vacc = (ZERO,) * lanes
    if vectors:
        groups = len(vectors) // ilp
        rows = [tuple(vectors[r * ilp : (r + 1) * ilp]) for r in range(groups)]
        acc = _multi_row_sum(rows, vadd, lanes) if rows else [vacc] * ilp
        for extra in vectors[groups * ilp :]:
            acc[0] = vadd(acc[0], extra)
        vacc = acc[0]
        for a in acc[1:]:
            vacc = vadd(vacc, a)
    total = ZERO
    for i in range(n // lanes * lanes, n):
        total = add(total, i)
    for lane in range(lanes):
        total = add(total, vacc[lane])
    return total


def _multi_row_sum(rows, vadd, lanes) -> list:
    """torch_cpu._multi_row_sum with symbolic vectors (its cascade levels)."""
    import math

    levels, ilp = 4, 4
    size = len(rows)
    power = max(4, math.ceil(math.log2(size)) // levels if size > 1 else 0)
    step, mask = 1 << power, (1 << power) - 1
    zero = (ZERO,) * lanes
    acc = [[zero] * ilp for _ in range(levels)]
    i = 0
    while i + step <= size:
        for _ in range(step):
            acc[0] = [vadd(a, r) for a, r in zip(acc[0], rows[i])]
            i += 1
        for j in range(1, levels):
            acc[j] = [vadd(a, b) for a, b in zip(acc[j], acc[j - 1])]
            acc[j - 1] = [zero] * ilp
            if i & (mask << (j * power)):
                break
    for r in rows[i:]:
        acc[0] = [vadd(a, b) for a, b in zip(acc[0], r)]
    for j in range(1, levels):
        acc[0] = [vadd(a, b) for a, b in zip(acc[0], acc[j])]
    return acc[0]
