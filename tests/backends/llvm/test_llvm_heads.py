"""Attention heads without TRANSPOSE kernels (lower/heads.py): an FDENSE writes [S, heads * H]
as [heads, S, H] and an FBMM writes [heads, S, H] as [S, heads, H] when a transpose (0, 2, 1,
3) alone reads them; the plan has no TRANSPOSE for them and the outputs have the bits of the
build with the TRANSPOSE kernels, at one and two threads (row and column chunks)."""

from __future__ import annotations

import numpy as np
import pytest
from drivers import alternate_drivers
from partita.backends.llvm.emit.float import chunks
from partita.backends.llvm.lower import heads
from partita.backends.llvm.lower.context import lower
from partita.backends.llvm.runtime.jit import host_isa

import partita as P
from partita import relay

S, HEADS, H = 64, 8, 32  # H divides 64; N = 256: four 64-column panels (split at 2 threads)


def _attention(rng):
    """Q and V projections into heads, softmax(Q Q^T) V, the heads back into rows, a dense."""
    x = relay.var("x", shape=(1, S, HEADS * H))

    def proj(seed):
        w = relay.const((rng.standard_normal((HEADS * H, HEADS * H)) * 0.2).astype(np.float32))
        b = relay.const(rng.standard_normal(HEADS * H).astype(np.float32))
        h = relay.add(relay.nn.dense(relay.reshape(x, (S, HEADS * H)), w), b)
        h = relay.transpose(relay.reshape(h, (1, S, HEADS, H)), (0, 2, 1, 3))
        return relay.reshape(h, (HEADS, S, H))

    q, v = proj(0), proj(1)
    qt = relay.transpose(q, (0, 2, 1))  # [heads, H, S]: read as the product's B
    scores = relay.nn.softmax(relay.nn.batch_matmul(q, qt, transpose_b=False), axis=-1)
    out = relay.nn.batch_matmul(scores, v, transpose_b=False)  # [heads, S, H]
    out = relay.transpose(relay.reshape(out, (1, HEADS, S, H)), (0, 2, 1, 3))
    out = relay.reshape(out, (S, HEADS * H))
    w = relay.const((rng.standard_normal((HEADS * H, HEADS * H)) * 0.2).astype(np.float32))
    mod = relay.IRModule.from_expr(relay.Function([x], relay.nn.dense(out, w)))
    return relay.transform.InferType()(mod)


def _plan(mod, threads=1):
    return lower(P.InferType()(mod)["main"], host_isa(), threads=threads).kernels


@pytest.mark.parametrize(("threads", "chunk_mode"), [(1, None), (2, "rows"), (2, "panels")])
def test_products_write_the_heads_transposed_and_keep_the_bits(threads, chunk_mode,
                                                               monkeypatch, tmp_path):
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    real = chunks.chunk_plan
    want_mode = chunk_mode
    monkeypatch.setattr(chunks, "chunk_plan", lambda p: (
        ("rows", 12, -(-p["M"] // 12)) if want_mode == "rows" else
        ("panels", 64, -(-p["N"] // 64))) if p.get("out_heads") else real(p))
    rng = np.random.default_rng(5)
    mod = _attention(rng)
    plan = _plan(mod, threads)
    perms = [k.params["perm"] for k in plan if k.kind == "TRANSPOSE"]
    assert perms == [[0, 2, 1]], perms  # Q^T's stays
    assert sum(1 for k in plan if k.params.get("out_heads")) == 3
    data = rng.standard_normal((1, S, HEADS * H)).astype(np.float32)
    target = f"llvm -isa={host_isa()} -threads={threads}"
    exe = P.build(mod, target)
    # both drivers (the worker's chunks and the one-thread forms)
    regions = alternate_drivers(exe, 2) if threads == 2 else []
    assert regions or threads == 1, "no region has the two-thread driver"
    outs = [exe.run(data)[0] for _ in range(4)]
    assert all(len(t) >= 2 for r in regions for t in r.modes.times.values())  # both ran
    got = outs[0]
    with monkeypatch.context() as m:
        m.setattr(heads, "SWAP", [9, 9, 9, 9])  # no transpose matches: TRANSPOSE kernels
        assert not any(k.params.get("out_heads") for k in _plan(mod, threads))
        want = P.build(mod, target).run(data)[0]
    assert all(o.tobytes() == want.tobytes() for o in outs)
    np.testing.assert_allclose(got, P.interpret(mod, [data])[0], rtol=1e-4, atol=1e-4)
