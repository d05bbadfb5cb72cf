"""Softmax and layer norm over two threads (emit/float/rows.py row_split): whole lines in chunks
that the driver's thread and its worker claim one at a time, each chunk a function of its own.
Both drivers (with the worker and without it) give the bits of -threads=1 (itself the
interpreter's bits for softmax, within an ulp or so for layer norm: float64 sums in lane
order), for contiguous rows and for lines across an inner axis."""

from __future__ import annotations

import numpy as np
import pytest
from partita.backends.llvm.emit.float import rows
from partita.backends.llvm.lower.context import lower
from partita.backends.llvm.runtime.jit import host_isa

import partita as P
from partita import relay


def _softmax(shape, axis):
    x = relay.var("x", shape=shape)
    return relay.Function([x], relay.nn.softmax(relay.multiply(x, relay.const(np.float32(1.5))),
                                                axis=axis))


def _layer_norm(shape, axis, rng):
    x = relay.var("x", shape=shape)
    n = shape[axis]
    gamma = relay.const(rng.uniform(0.5, 1.5, n).astype(np.float32))
    beta = relay.const(rng.standard_normal(n).astype(np.float32))
    return relay.Function([x], relay.nn.layer_norm(relay.add(x, relay.const(np.float32(0.25))),
                                                   gamma, beta, axis=axis, epsilon=1e-5))


def _cases(rng):
    yield "FSOFTMAX", (1, 4, 64, 97), _softmax((1, 4, 64, 97), -1)  # rows of 12 vectors + 1
    yield "FSOFTMAX", (2, 4, 64, 40), _softmax((2, 4, 64, 40), 2)  # lines across 40 inner
    yield "FLAYERNORM", (1, 100, 771), _layer_norm((1, 100, 771), -1, rng)
    # 24 steps of the 4 sums' 32, a group of 8 left over, a tail of 5
    yield "FLAYERNORM", (1, 100, 781), _layer_norm((1, 100, 781), -1, rng)
    yield "FLAYERNORM", (3, 256, 100), _layer_norm((3, 256, 100), 1, rng)


def test_row_chunk_plan():
    # about ROW_CHUNK elements a chunk of whole lines, never fewer than two, the last shorter
    assert rows.row_chunk_plan({"outer": 1536, "n": 128, "inner": 1}) == (128, 12)
    assert rows.row_chunk_plan({"outer": 128, "n": 768, "inner": 1}) == (21, 7)
    assert rows.row_chunk_plan({"outer": 3, "n": 1 << 16, "inner": 1}) == (1, 3)
    assert rows.row_chunk_plan({"outer": 2, "n": 8, "inner": 1}) == (1, 2)


@pytest.mark.parametrize("isa", ["plain", "avx2"])
def test_two_threads_split_rows_and_keep_the_bits(isa, monkeypatch, tmp_path):
    if isa == "avx2" and host_isa() == "plain":
        pytest.skip("avx2 code does not run on this host")
    rng = np.random.default_rng(11)
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")  # emitted afresh: the patch below counts
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PARTITA_COMPILE_JOBS", "1")
    monkeypatch.setattr(rows, "ROW_CHUNK", 1 << 11)  # many chunks, a shorter last one
    splits = []
    real = rows.RowKernels.row_split
    monkeypatch.setattr(rows.RowKernels, "row_split",
                        lambda self, k, *a: splits.append(k.params.get("threads", 1)) or
                        real(self, k, *a))
    for kind, shape, fn in _cases(rng):
        mod = relay.transform.InferType()(relay.IRModule.from_expr(fn))
        plan = lower(P.InferType()(mod)["main"], host_isa(), threads=2).kernels
        ks = [k for k in plan if k.kind == kind]
        assert len(ks) == 1 and ks[0].params.get("threads") == 2, kind
        data = (rng.standard_normal(shape) * 4).astype(np.float32)
        data.flat[::331] = -0.0
        want = P.interpret(mod, [data])[0]
        one = P.build(mod, f"llvm -isa={isa} -threads=1").run(data)[0]
        if kind == "FSOFTMAX":  # the reference's float32 algorithm (float32_math.softmax32)
            assert one.tobytes() == want.tobytes()
        # layer norm's float64 sums in lane order: within an ulp or so of the numpy sums
        np.testing.assert_allclose(one, want, rtol=1e-6, atol=1e-7, err_msg=kind)
        before = splits.count(2)
        exe = P.build(mod, f"llvm -isa={isa} -threads=2")
        assert splits.count(2) > before, f"{kind} was not emitted split"
        regions = [s.region for s in exe.steps if getattr(s.region, "modes", None) is not None]
        assert regions and all(r._alone is not None for r in regions)
        for r in regions:
            turns = iter(["pool", "alone"] * 4)
            r.modes.choose = lambda turns=turns: next(turns)  # both drivers, whatever the load
        for _ in range(8):
            assert exe.run(data)[0].tobytes() == one.tobytes(), kind
        assert all(len(t) >= 3 for r in regions for t in r.modes.times.values())


def test_small_rows_stay_on_one_thread():
    rng = np.random.default_rng(3)
    for fn in (_softmax((1, 2, 16, 32), -1), _layer_norm((1, 16, 768), -1, rng)):
        mod = P.InferType()(relay.IRModule.from_expr(fn))
        plan = lower(mod["main"], host_isa(), threads=2).kernels
        assert all(k.params.get("threads", 1) == 1 for k in plan
                   if k.kind in ("FSOFTMAX", "FLAYERNORM"))
