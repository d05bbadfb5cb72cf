"""An elementwise tail with erf fused into a vector FDENSE's epilogue (lower/dense_act.py, params
"act": BERT's GELU as torch exports it): the plan has no EWISE kernel for it, and the output has
the bits of the unfused build (the same float32 steps) at one and two threads; a tail whose
steps are read elsewhere, or a product read elsewhere, stays an EWISE kernel."""

from __future__ import annotations

import numpy as np
import pytest
from drivers import alternate_drivers
from partita.backends.llvm.lower import dense_act
from partita.backends.llvm.lower.context import lower
from partita.backends.llvm.runtime.jit import host_isa

import partita as P
from partita import relay

M, K, N = 64, 256, 272  # 272 columns: four 64-column panels and a single vector; split at 2 threads


def _c(v):
    return relay.const(np.float32(v))


def _gelu(h):
    return relay.multiply(relay.multiply(h, relay.add(relay.erf(relay.divide(h, _c(1.4142135))),
                                                      _c(1.0))), _c(0.5))


def _dense(rng, tail):
    x = relay.var("x", shape=(M, K))
    w = relay.const((rng.standard_normal((N, K)) * 0.3).astype(np.float32))
    bias = relay.const(rng.standard_normal(N).astype(np.float32))
    h = relay.add(relay.nn.dense(x, w), bias)
    mod = relay.IRModule.from_expr(relay.Function([x], tail(h)))
    return relay.transform.InferType()(mod)


def _kinds(mod, threads=1):
    plan = lower(P.InferType()(mod)["main"], host_isa(), threads=threads).kernels
    return [(k.kind, k.params.get("act")) for k in plan]


def _plan_threads(mod, threads):
    plan = lower(P.InferType()(mod)["main"], host_isa(), threads=threads).kernels
    return plan[0].params.get("threads", 1)


def _unfused(mod, target, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(dense_act, "NEEDS", {"-none-"})
        return P.build(mod, target)


@pytest.mark.parametrize("threads", [1, 2])
def test_gelu_in_the_products_epilogue_keeps_the_bits(threads, monkeypatch, tmp_path):
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(3)
    mod = _dense(rng, _gelu)
    kinds = _kinds(mod, threads)
    assert [k for k, _ in kinds] == ["FDENSE"], kinds
    assert (threads == 2) == (_plan_threads(mod, threads) == 2)
    assert "erf" in str(kinds[0][1])
    data = (rng.standard_normal((M, K)) * 2).astype(np.float32)
    data[0, :4] = [np.nan, np.inf, -np.inf, 0.0]
    target = f"llvm -isa={host_isa()} -threads={threads}"
    exe = P.build(mod, target)
    # both drivers (the worker's chunks and the one-thread forms)
    regions = alternate_drivers(exe, 2) if threads == 2 else []
    assert regions or threads == 1, "no region has the two-thread driver"
    outs = [exe.run(data)[0] for _ in range(4)]
    assert all(len(t) >= 2 for r in regions for t in r.modes.times.values())  # both ran
    want = _unfused(mod, target, monkeypatch).run(data)[0]
    assert all(o.tobytes() == want.tobytes() for o in outs)
    ref = P.interpret(mod, [data])[0]
    np.testing.assert_allclose(outs[0][1:], ref[1:], rtol=1e-5, atol=1e-5)


def test_a_tail_read_elsewhere_is_not_fused():
    rng = np.random.default_rng(4)
    # the erf's value is also an output: the tail has two ends
    both = _dense(rng, lambda h: relay.Tuple([_gelu(h), relay.erf(h)]))
    assert all(act is None for _, act in _kinds(both))
    # the product itself is read by a second consumer outside the tail
    shared = _dense(rng, lambda h: relay.Tuple([_gelu(h), relay.nn.softmax(h, axis=-1)]))
    assert all(act is None for _, act in _kinds(shared))
    # no erf: a bare scale stays its own kernel
    scaled = _dense(rng, lambda h: relay.multiply(h, _c(0.5)))
    assert all(act is None for _, act in _kinds(scaled))
