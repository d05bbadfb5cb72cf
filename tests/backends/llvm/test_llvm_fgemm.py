"""The float GEMM's register tiles (backends/llvm/float_gemm.py) on shapes whose column count is
not a multiple of 16: the last vector is masked (its weight panel zero-padded at compile time),
for every bias form, one and two threads and each ISA's tile; within float32 rounding of the
interpreter's exact sums (FMA chains in k order)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from partita.backends.llvm.lower.context import lower
from partita.backends.llvm.runtime.jit import host_isa

import partita as P
from partita import relay


@settings(max_examples=20, deadline=None)
@given(
    m=st.sampled_from([1, 3, 7, 49]),
    k=st.sampled_from([5, 64, 300]),
    n=st.sampled_from([17, 37, 100, 1000]),
    form=st.sampled_from(["dense", "n", "mn", "scalar", "b-as-kn"]),
    relu=st.booleans(),
    target=st.sampled_from(["llvm", "llvm -threads=2", "llvm -isa=avx2"]),
)
def test_a_masked_last_vector_equals_the_interpreter(m, k, n, form, relu, target):
    rng = np.random.default_rng(m * 7 + n)
    x = relay.var("x", shape=(m, k))
    tb = form != "b-as-kn"
    w = relay.const(rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32))
    if form == "dense":
        out = relay.nn.dense(x, w)
    else:
        bshape = {"n": (n,), "mn": (m, n), "scalar": (1,), "b-as-kn": (n,)}[form]
        bias = relay.const(rng.standard_normal(bshape).astype(np.float32))
        out = relay.nn.gemm(x, w, bias, transpose_b=tb)
    out = relay.nn.relu(out) if relu else out
    mod = relay.transform.InferType()(relay.IRModule.from_expr(relay.Function([x], out)))
    exe = P.build(mod, target)
    kinds = [kk.split()[0] for kk in exe.steps[0].region.kernels]
    assert kinds[0] == "FDENSE"
    a = rng.standard_normal((m, k)).astype(np.float32)
    got, want = exe.run(a)[0], P.interpret(mod, [a])[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    scale = float(np.abs(want).max()) or 1.0
    assert float(np.abs(got - want).max()) <= 2e-6 * scale * max(1.0, np.sqrt(k) / 8)


@pytest.mark.parametrize("m, n", [(1, 1000), (2, 1024), (5, 1030)])
def test_a_classifier_row_splits_its_weight_panels_over_two_threads(m, n):
    """Few rows and 4 MB or more of weights (ResNet50's 2048 x 1000 head): each thread streams
    half the column panels; the same bits as one thread."""
    rng = np.random.default_rng(n)
    k = 1024 if n >= 1024 else 2048
    x = relay.var("x", shape=(m, k))
    w = relay.const(rng.standard_normal((n, k)).astype(np.float32))
    b = relay.const(rng.standard_normal((n,)).astype(np.float32))
    fn = relay.Function([x], relay.nn.gemm(x, w, b))
    mod = relay.transform.InferType()(relay.IRModule.from_expr(fn))
    plan = lower(mod["main"], host_isa(), threads=2)
    assert plan.kernels[0].kind == "FDENSE" and plan.kernels[0].params["threads"] == 2
    a = rng.standard_normal((m, k)).astype(np.float32)
    two = P.build(mod, "llvm -threads=2").run(a)[0]
    assert np.array_equal(two, P.build(mod, "llvm").run(a)[0])
    want = P.interpret(mod, [a])[0]
    assert float(np.abs(two - want).max()) <= 1e-5 * float(np.abs(want).max())


def test_a_pooler_row_splits_its_panels_through_both_drivers():
    """BERT's pooler, one row of 768 x 768 (2.4 MB of weights): split over two threads, and
    with the worker and without it the same bits as one thread."""
    rng = np.random.default_rng(768)
    x = relay.var("x", shape=(1, 768))
    w = relay.const(rng.standard_normal((768, 768)).astype(np.float32))
    fn = relay.Function([x], relay.tanh(relay.nn.dense(x, w)))
    mod = relay.transform.InferType()(relay.IRModule.from_expr(fn))
    plan = lower(mod["main"], host_isa(), threads=2)
    assert plan.kernels[0].kind == "FDENSE" and plan.kernels[0].params["threads"] == 2
    a = rng.standard_normal((1, 768)).astype(np.float32)
    one = P.build(mod, "llvm").run(a)[0]
    exe = P.build(mod, "llvm -threads=2")
    regions = [s.region for s in exe.steps if getattr(s.region, "modes", None) is not None]
    assert regions
    for r in regions:
        turns = iter(["pool", "alone"] * 3)
        r.modes.choose = lambda turns=turns: next(turns)  # both drivers, whatever the load
    for _ in range(6):
        assert exe.run(a)[0].tobytes() == one.tobytes()
    assert all(len(t) >= 3 for r in regions for t in r.modes.times.values())


@pytest.mark.parametrize("tile", [{"rows": 6, "cols": 4}, {"rows": 6, "cols": 1},
                                  {"rows": 4, "cols": 4}])
@pytest.mark.parametrize("threads", [1, 2])
def test_every_register_tile_gives_the_same_bits(monkeypatch, tile, threads):
    """AVX-512's 6 x 4 tile and the 6 x 1 tile of 16-register ISAs
    (lower/float_products.gemm_tile), each forced on any machine (a tile is a choice of
    registers, not of instructions), with the weights packed in panels of its width: every
    output's FMA chain runs in k order, so all tiles give the same bits, with and without the
    second thread."""
    from partita.backends.llvm.lower import float_products as float_lower

    rng = np.random.default_rng(4)
    m, k, n = 50, 300, 1000
    x = relay.var("x", shape=(m, k))
    w = relay.const(rng.standard_normal((n, k)).astype(np.float32))
    b = relay.const(rng.standard_normal((n,)).astype(np.float32))
    mod = relay.transform.InferType()(
        relay.IRModule.from_expr(relay.Function([x], relay.nn.relu(relay.nn.gemm(x, w, b)))))
    a = rng.standard_normal((m, k)).astype(np.float32)
    want = P.build(mod, "llvm").run(a)[0]
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")  # a cached region would hide the patch
    monkeypatch.setattr(float_lower, "gemm_tile", lambda isa: dict(tile))
    exe = P.build(mod, f"llvm -threads={threads}")
    (fdense,) = [kk for kk in lower(P.InferType()(mod)["main"], host_isa()).kernels
                 if kk.kind == "FDENSE"]
    assert (fdense.params["rows"], fdense.params["cols"]) == (tile["rows"], tile["cols"])
    assert exe.run(a)[0].tobytes() == want.tobytes()


@pytest.mark.parametrize("bias_first, residual_first", [(False, False), (True, True)])
@pytest.mark.parametrize("n", [768, 100])
@pytest.mark.parametrize("target", ["llvm -isa=avx2", "llvm -isa=plain", "llvm -threads=2"])
def test_bias_residual_and_relu_fuse_into_the_dense_with_the_separate_ops_bits(
        bias_first, residual_first, n, target):
    """ONNX's MatMul then Add of a bias, then the residual add (BERT's projections, either
    operand order): one FDENSE adds both to its float32 sums in that order (lower/float_ops
    dense_epilogue), then a relu: the bits of the product alone followed by the float32 adds."""
    rng = np.random.default_rng(n)
    m, k = 50, 300
    x, r = relay.var("x", shape=(1, m, k)), relay.var("r", shape=(1, m, n))
    w = rng.standard_normal((n, k)).astype(np.float32)
    bias = rng.standard_normal((n,)).astype(np.float32)
    y = relay.nn.dense(x, relay.const(w))
    y = relay.add(relay.const(bias), y) if bias_first else relay.add(y, relay.const(bias))
    y = relay.add(r, y) if residual_first else relay.add(y, r)
    mod = relay.transform.InferType()(
        relay.IRModule.from_expr(relay.Function([x, r], relay.nn.relu(y))))
    alone = relay.transform.InferType()(relay.IRModule.from_expr(
        relay.Function([x], relay.nn.dense(x, relay.const(w)))))
    exe = P.build(mod, target)
    kinds = [kk.split()[0] for kk in exe.steps[0].region.kernels]
    assert kinds == ["FDENSE"]
    a = rng.standard_normal((1, m, k)).astype(np.float32)
    res = rng.standard_normal((1, m, n)).astype(np.float32)
    product = P.build(alone, target).run(a)[0]
    want = np.maximum((product + bias) + res, np.float32(0))
    assert exe.run(a, res)[0].tobytes() == want.tobytes()


@pytest.mark.parametrize("target", ["llvm -isa=avx2", "llvm -isa=plain", "llvm -threads=2"])
def test_attention_heads_reshapes_run_no_copy_and_keep_the_bits(monkeypatch, target):
    """BERT's heads: dense -> reshape -> transpose -> reshape -> batch_matmul -> reshape. The
    products write their reshapes' buffers (lower/float_products absorb_reshapes) and a reshape
    read only by products is its input's buffer (lower_reshape_view): no COPY kernel, and the
    bits of the build that copies (the lowerings turned off)."""
    from partita.backends.llvm.lower import float_ops, float_products

    rng = np.random.default_rng(3)
    s, heads, d = 24, 4, 16
    x = relay.var("x", shape=(1, s, heads * d))
    wq, wk = (relay.const(rng.standard_normal((heads * d, heads * d)).astype(np.float32))
              for _ in range(2))

    def head_major(y, axes, shape):
        y = relay.reshape(relay.nn.dense(x, y), (1, s, heads, d))
        return relay.reshape(relay.transpose(y, axes), shape)

    q = head_major(wq, (0, 2, 1, 3), (heads, s, d))
    k = head_major(wk, (0, 2, 3, 1), (heads, d, s))
    scores = relay.reshape(relay.nn.batch_matmul(q, k, transpose_b=False), (1, heads, s, s))
    probs = relay.reshape(relay.nn.softmax(scores), (heads, s, s))
    ctx = relay.reshape(relay.nn.batch_matmul(probs, q, transpose_b=False), (1, heads, s, d))
    out = relay.reshape(relay.transpose(ctx, (0, 2, 1, 3)), (1, s, heads * d))
    out = relay.nn.dense(out, wq)
    mod = relay.transform.InferType()(relay.IRModule.from_expr(relay.Function([x], out)))
    a = rng.standard_normal((1, s, heads * d)).astype(np.float32)
    exe = P.build(mod, target)
    kinds = [kk.split()[0] for kk in exe.steps[0].region.kernels]
    assert "COPY" not in kinds and kinds.count("FBMM") == 2, kinds
    got = exe.run(a)[0]
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")  # a cached region would hide the patch
    monkeypatch.setattr(float_products, "absorb_reshapes", lambda low, node: node)
    from partita.backends.llvm.lower import registry

    monkeypatch.setitem(registry._BY_OP, "reshape", [
        c for c in registry._BY_OP["reshape"] if c.fn is not float_ops.lower_reshape_view])
    copied = P.build(mod, target)
    assert [kk.split()[0] for kk in copied.steps[0].region.kernels].count("COPY") == 8
    assert got.tobytes() == copied.run(a)[0].tobytes()
    want = P.interpret(mod, [a])[0]
    assert float(np.abs(got - want).max()) <= 1e-5 * float(np.abs(want).max())


@pytest.mark.parametrize("target", ["llvm -isa=avx2", "llvm -isa=plain", "llvm -threads=2"])
def test_a_residual_product_in_row_order_keeps_the_panel_order_bits(monkeypatch, tmp_path,
                                                                   target):
    """A product adding a residual, with weights in L2 and one k block (ResNet's 1 x 1
    expansions), runs row tiles outer (emit/float/gemm.py ROWS_FIRST_WEIGHTS): the bits of the
    panels-outer order (each output one FMA chain in k order either way). Short row tiles
    (m % 6) and a masked last vector included; each build its own object cache."""
    from partita.backends.llvm.emit.float import gemm

    rng = np.random.default_rng(11)
    m, k, n = 331, 64, 200  # 4.2 M multiply-adds: two threads split it
    x, r = relay.var("x", shape=(m, k)), relay.var("r", shape=(m, n))
    w = relay.const(rng.standard_normal((n, k)).astype(np.float32))
    b = relay.const(rng.standard_normal((n,)).astype(np.float32))
    y = relay.nn.relu(relay.add(relay.add(relay.nn.dense(x, w), b), r))
    mod = relay.transform.InferType()(relay.IRModule.from_expr(relay.Function([x, r], y)))
    a = rng.standard_normal((m, k)).astype(np.float32)
    res = rng.standard_normal((m, n)).astype(np.float32)
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path / "rows"))
    assert k * n <= gemm.ROWS_FIRST_WEIGHTS
    exe = P.build(mod, target)
    assert [kk.split()[0] for kk in exe.steps[0].region.kernels] == ["FDENSE"]
    rows = exe.run(a, res)[0]
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path / "panels"))
    monkeypatch.setattr(gemm, "ROWS_FIRST_WEIGHTS", 0)
    assert P.build(mod, target).run(a, res)[0].tobytes() == rows.tobytes()
    want = P.interpret(mod, [a, res])[0]
    assert float(np.abs(rows - want).max()) <= 1e-5 * float(np.abs(want).max())


@pytest.mark.parametrize("target", ["llvm", "llvm -isa=avx2", "llvm -threads=2"])
def test_a_long_product_in_long_k_blocks_keeps_the_short_block_bits(monkeypatch, tmp_path,
                                                                   target):
    """A product with k above LONG_K and LONG_K_ROWS rows or more (BERT's FFN output) sums in k
    blocks of LONG_K_STEPS (emit/float/gemm.py): the bits of the short blocks (each output
    one FMA chain in k order either way). k not a multiple of the block (a short last block),
    short row tiles and a masked last vector included; each build its own object cache."""
    from partita.backends.llvm.emit.float import gemm

    rng = np.random.default_rng(12)
    m, k, n = 67, 1300, 72
    x = relay.var("x", shape=(m, k))
    w = relay.const(rng.standard_normal((n, k)).astype(np.float32))
    b = relay.const(rng.standard_normal((n,)).astype(np.float32))
    mod = relay.transform.InferType()(
        relay.IRModule.from_expr(relay.Function([x], relay.nn.gemm(x, w, b))))
    a = rng.standard_normal((m, k)).astype(np.float32)
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path / "long"))
    assert k > gemm.LONG_K and m >= gemm.LONG_K_ROWS and k % gemm.LONG_K_STEPS
    exe = P.build(mod, target)
    assert [kk.split()[0] for kk in exe.steps[0].region.kernels] == ["FDENSE"]
    long_blocks = exe.run(a)[0]
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path / "short"))
    monkeypatch.setattr(gemm, "LONG_K", 1 << 40)
    assert P.build(mod, target).run(a)[0].tobytes() == long_blocks.tobytes()
    want = P.interpret(mod, [a])[0]
    assert float(np.abs(long_blocks - want).max()) <= 1e-5 * float(np.abs(want).max())
