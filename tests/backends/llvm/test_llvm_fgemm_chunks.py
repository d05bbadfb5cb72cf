"""The float GEMM's cache blocking and its chunks over two threads (emit/float/gemm.py): row
blocks x k blocks (sums kept in y between k blocks), a short last row tile split in two, and
two threads claiming chunks of rows or of column panels one at a time. Every output stays one
FMA chain in k order, so each form gives the bits of the unblocked one-thread product, within
float32 rounding of the interpreter's exact sums. The 3 x 3 convolutions here are FDENSE's
(``-winograd=no``; test_llvm_winograd.py has Winograd's form)."""

from __future__ import annotations

import numpy as np
import pytest
from partita.backends.llvm.emit.float import chunks, gemm
from partita.backends.llvm.lower.context import lower
from partita.backends.llvm.runtime.jit import host_isa

import partita as P
from partita import relay


def _module(expr, x):
    return relay.transform.InferType()(relay.IRModule.from_expr(relay.Function([x], expr)))


def _conv(rng, h, cin, cout, k, residual):
    """An NHWC convolution (k x k, same padding) + bias + residual add + relu."""
    x = relay.var("x", shape=(1, h, h, cin))
    w = relay.const((rng.standard_normal((k, k, cin, cout)) / np.sqrt(cin * k)).astype(np.float32))
    y = relay.nn.conv2d(x, w, padding=[k // 2] * 4, data_layout="NHWC", kernel_layout="HWIO")
    y = relay.nn.bias_add(y, relay.const(rng.standard_normal(cout).astype(np.float32)), axis=3)
    if residual:
        short = relay.nn.conv2d(x, relay.const(rng.standard_normal((1, 1, cin, cout)).astype(
            np.float32)), data_layout="NHWC", kernel_layout="HWIO")
        y = relay.add(y, short)
    return _module(relay.nn.relu(y), x), (1, h, h, cin)


def _gemm(rng, m, k, n, bias):
    x = relay.var("x", shape=(m, k))
    w = relay.const(rng.standard_normal((n, k)).astype(np.float32))
    shape = {"n": (n,), "mn": (m, n)}[bias]
    out = relay.nn.gemm(x, w, relay.const(rng.standard_normal(shape).astype(np.float32)))
    return _module(out, x), (m, k)


def _fdense(mod, threads):
    plan = lower(P.InferType()(mod)["main"], host_isa(), threads=threads, winograd=False)
    return [kk for kk in plan.kernels if kk.kind == "FDENSE"]


CASES = {
    # implicit 3x3 convolution (x read in place from the padded image, rows from a run-time
    # first row), k blocked (576 > 384), a residual in the epilogue: row chunks
    "conv3x3_rows": lambda rng: _conv(rng, 28, 64, 64, 3, True),
    # 49 rows: 8 full tiles and a short one, k blocked, panel chunks (1024 columns: 16 AVX-512
    # panels of 4 vectors, 64 AVX2 ones; either way more panels than row tiles)
    "few_rows_panels": lambda rng: _gemm(rng, 49, 1000, 1024, "n"),
    # BERT's 768 x 768 projection at seq 128 (2.4 MB of weights, 128 rows): panel chunks
    "bert_rows_panels": lambda rng: _gemm(rng, 128, 768, 768, "n"),
    # a per-element bias moves with the rows; 1000 columns: a masked last vector
    "rows_mn_bias": lambda rng: _gemm(rng, 300, 200, 1000, "mn"),
    # ResNet-50's 14 x 14 3 x 3 convolution (implicit, 2.4 MB of weights) with a residual:
    # panel chunks, each panel's rows in parts (chunk_grid)
    "conv3x3_panels_parts": lambda rng: _conv(rng, 14, 256, 256, 3, True),
    # a per-element bias moves with the rows and the columns of a panels x row parts grid
    "mn_bias_panels_parts": lambda rng: _gemm(rng, 100, 1100, 256, "mn"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_chunks_over_two_threads_give_the_one_thread_bits(monkeypatch, tmp_path, case):
    rng = np.random.default_rng(len(case))
    mod, shape = CASES[case](rng)
    a = rng.standard_normal(shape).astype(np.float32)
    one = P.build(mod, "llvm -winograd=no").run(a)[0]
    want = P.interpret(mod, [a])[0]
    scale = float(np.abs(want).max())
    assert float(np.abs(one - want).max()) <= 1e-5 * scale
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")  # a cached region would hide the patch,
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))  # and so would cached objects
    monkeypatch.setattr(chunks, "CHUNK_MACS", 1 << 16)  # many chunks, a shorter last one
    monkeypatch.setattr(chunks, "PANEL_CHUNKS", 64)  # row parts on any CPU's panel width
    split = [kk for kk in _fdense(mod, 2) if kk.params.get("threads") == 2]
    assert split, "no FDENSE was split over two threads"
    mode, size, count = chunks.chunk_plan(split[0].params)
    assert count > 2 and mode == ("panels" if "panels" in case else "rows")
    for kk in split:  # PANEL_CHUNKS 64: every panel split has row parts
        kind, (rsize, parts), (_, panels) = chunks.chunk_grid(kk.params)
        assert parts > 1 and kk.params["M"] > (parts - 1) * rsize
        assert (panels > 1) == (kind == "panels")
    exe = P.build(mod, "llvm -winograd=no -threads=2")
    regions = [s.region for s in exe.steps if getattr(s.region, "modes", None) is not None]
    assert regions, "no region has the two-thread driver"
    for region in regions:  # both drivers, whatever the machine's load
        turns = iter(["pool", "alone"] * 2)
        region.modes.choose = lambda turns=turns: next(turns)
    for _ in range(4):
        assert exe.run(a)[0].tobytes() == one.tobytes()
    assert all(len(t) >= 2 for r in regions for t in r.modes.times.values())  # both ran


def test_blocking_leaves_the_bits_of_an_unblocked_product(monkeypatch, tmp_path):
    """Blocks of 64 k steps and of one row tile, against the default blocking: the same bits
    (the partial sums wait in y as float32, the registers' own type). Each build has its own
    object cache (its key is the plan and the generator's source, not the patched values)."""
    rng = np.random.default_rng(7)
    mod, shape = _gemm(rng, 100, 700, 96, "n")
    a = rng.standard_normal(shape).astype(np.float32)
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path / "default"))
    want = P.build(mod, "llvm -winograd=no").run(a)[0]
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path / "blocked"))
    monkeypatch.setattr(gemm, "PANEL_FLOATS", 64 * 16)
    monkeypatch.setattr(gemm, "ROW_BLOCK_FLOATS", 1)
    assert gemm.k_blocks(700, 1)[0] > 1 and gemm.row_block(64, 6) == 1
    assert P.build(mod, "llvm -winograd=no").run(a)[0].tobytes() == want.tobytes()


def test_chunk_plan():
    # tall: row chunks of whole tiles; short and wide: whole panels; never fewer than 2
    mode, size, count = chunks.chunk_plan({"M": 3136, "K": 576, "N": 64, "rows": 6, "cols": 1})
    assert mode == "rows" and size % 6 == 0 and (count - 1) * size < 3136 <= count * size
    mode, size, count = chunks.chunk_plan({"M": 49, "K": 4608, "N": 512, "rows": 6, "cols": 1})
    assert mode == "panels" and size % 16 == 0 and count * size >= 512 and count >= 2
    mode, size, count = chunks.chunk_plan({"M": 1, "K": 2048, "N": 1000, "rows": 6, "cols": 4})
    assert mode == "panels" and size % 64 == 0 and (count - 1) * size < 1000


def test_chunk_plan_splits_weights_past_l2_by_panels():
    # AVX-512's 64-column panels: ResNet's 7 x 7 stage (8 panels, 9 row tiles) and 14 x 14
    # 3 x 3 convolutions (2.4 MB of weights) stream half the weights per thread, and so do
    # products of more rows with twice L2's share of weights or more (196 x 1024 x 512, 2 MB;
    # 192 x 768 x 768); 196 x 1024 x 256 (1 MB, in L2), weights in L2 and tall products keep
    # row chunks
    implicit = [16, 256, [1, 1], 14]
    for m, k, n, conv in ((49, 4608, 512, True), (49, 2048, 512, False), (196, 2304, 256, True),
                          (196, 1024, 512, False), (192, 768, 768, False)):
        p = {"M": m, "K": k, "N": n, "rows": 6, "cols": 4} | ({"implicit": implicit} if conv
                                                               else {})
        mode, size, count = chunks.chunk_plan(p)
        assert mode == "panels" and size % 64 == 0 and count >= 2 and count * size >= n
    for m, k, n in ((196, 1024, 256), (784, 1152, 128), (3136, 64, 256), (128, 512, 512)):
        mode, _, _ = chunks.chunk_plan({"M": m, "K": k, "N": n, "rows": 6, "cols": 4})
        assert mode == "rows"


def test_chunk_grid_cuts_few_panels_into_row_parts():
    """Fewer panel chunks than PANEL_CHUNKS: each panel's rows in parts of whole row tiles (2
    tiles at least), so a thread slowed for a while leaves the other part of a panel."""
    p = {"M": 196, "K": 2304, "N": 256, "rows": 6, "cols": 4, "implicit": True}
    assert chunks.chunk_plan(p)[::2] == ("panels", 4)
    mode, (rsize, parts), (csize, count) = chunks.chunk_grid(p)
    assert (mode, csize, count) == ("panels", 64, 4) and parts == 4 and rsize % 6 == 0
    assert (parts - 1) * rsize < 196 <= parts * rsize
    # rows mode, or enough panels: one part of all the rows
    assert chunks.chunk_grid({"M": 3136, "K": 576, "N": 64, "rows": 6, "cols": 1})[2] == (64, 1)
    wide = {"M": 49, "K": 4608, "N": 2048, "rows": 6, "cols": 4}
    assert chunks.chunk_plan(wide)[2] >= chunks.PANEL_CHUNKS
    assert chunks.chunk_grid(wide)[1] == (54, 1)
    # a head-major output (heads.py) keeps whole panels
    assert chunks.chunk_grid({**p, "out_heads": 64})[1][1] == 1


def test_chunk_plan_splits_bert_products_by_panels():
    # BERT at seq 128 (128 rows, 22 row tiles): 768 x 768 (12 panels), the FFN's 768 x 3072
    # (48) and 3072 x 768 (12, x 1.5 MB): each thread streams its own panels of the weights,
    # and each chunk rereads x: at most n / m chunks (6 of 2 panels), not one a panel
    for k, n, chunk_count in ((768, 768, 6), (768, 3072, 24), (3072, 768, 6)):
        mode, size, count = chunks.chunk_plan({"M": 128, "K": k, "N": n, "rows": 6, "cols": 4})
        assert mode == "panels" and size % 64 == 0 and count == chunk_count
        assert (count - 1) * size < n <= count * size
    # the cap leaves ResNet's products as they were: n / m past the few-row ones' panel
    # counts; implicit convolutions (196 x 512 x 1024, 16 panels) uncapped
    for m, k, n, conv, chunk_count in ((49, 4608, 512, False, 8), (49, 512, 2048, False, 16),
                                       (196, 512, 1024, True, 16)):
        p = {"M": m, "K": k, "N": n, "rows": 6, "cols": 4} | (
            {"implicit": [16, 512, [2, 2], 14]} if conv else {})
        assert chunks.chunk_plan(p)[2] == chunk_count
