"""A large EWISE over two threads (emit/float/kernels.py k_ewise): the split axis in chunks that
the driver's thread and its worker claim one at a time, each chunk run by the vector rows in a
function of its own (noalias pointers). -threads=2, with the worker and without it, gives the
bits of -threads=1 and of the interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from partita.backends.llvm.emit.float import ewise_vec, kernels
from partita.backends.llvm.lower.context import lower
from partita.backends.llvm.lower.ewise_tree import EWISE_THREADS
from partita.backends.llvm.runtime.jit import host_isa

import partita as P
from partita import relay

SHAPE = (1, 37, 3547)  # 131,239 elements (split); rows of 443 vectors and 3 more


def _modules():
    x = relay.var("x", shape=SHAPE)
    root2 = relay.const(np.float32(1.4142135))
    gelu = relay.multiply(relay.multiply(x, relay.const(np.float32(0.5))), relay.add(
        relay.const(np.float32(1.0)), relay.erf(relay.divide(x, root2))))
    col = relay.const(np.linspace(-2, 2, SHAPE[-1]).astype(np.float32))  # broadcast rows
    mixed = relay.subtract(relay.negative(relay.erf(relay.multiply(x, col))), x)
    for body in (gelu, mixed):
        yield relay.transform.InferType()(relay.IRModule.from_expr(relay.Function([x], body)))


def test_chunk_plan():
    # about EWISE_CHUNK elements a chunk, never fewer than two chunks, the last maybe shorter
    assert kernels.ewise_chunk_plan([128, 3072]) == (5, 26)
    assert kernels.ewise_chunk_plan([1, 2, 1 << 17]) == (1, 2)
    size, count = kernels.ewise_chunk_plan([1, 37, 3547])
    assert size == 4 and count == 10 and (count - 1) * size < 37 <= count * size
    assert kernels.split_axis([1, 1, 5]) == 2 and kernels.split_axis([1, 1]) is None


@pytest.mark.parametrize("isa", ["plain", "avx2"])
def test_two_threads_claim_chunks_and_keep_the_bits(isa, monkeypatch, tmp_path):
    rng = np.random.default_rng(5)
    data = (rng.standard_normal(SHAPE) * 3).astype(np.float32)
    data.flat[::997], data.flat[1::997], data.flat[2::997] = np.nan, -0.0, 1e-40  # fix-ups
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")  # emitted afresh: the patches below count
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PARTITA_COMPILE_JOBS", "1")
    monkeypatch.setattr(kernels, "EWISE_CHUNK", 1 << 13)  # 19 chunks of 2 rows, the last of 1
    assert kernels.ewise_chunk_plan(list(SHAPE)) == (2, 19)
    chunks, ranges, rows = [], [], []
    for target, name, log in ((kernels.FloatKernels, "ewise_chunks", chunks),
                              (kernels.FloatKernels, "ewise_range", ranges),
                              (ewise_vec, "ewise_rows", rows)):
        real = getattr(target, name)
        monkeypatch.setattr(target, name, lambda *a, r=real, log=log: log.append(1) or r(*a))
    for mod in _modules():
        ewise = [k for k in lower(P.InferType()(mod)["main"], host_isa(), threads=2).kernels
                 if k.kind == "EWISE"]
        assert len(ewise) == 1 and ewise[0].params.get("threads") == 2
        want = P.interpret(mod, [data])[0]
        one = P.build(mod, f"llvm -isa={isa} -threads=1").run(data)[0]
        assert one.tobytes() == want.tobytes()
        before = len(chunks)
        exe = P.build(mod, f"llvm -isa={isa} -threads=2")
        assert len(chunks) > before, "the EWISE was not emitted as claimed chunks"
        for _ in range(4):  # TwoModes tries the driver with the worker and the one without
            assert exe.run(data)[0].tobytes() == want.tobytes()
    assert ranges and rows  # each chunk in its own function, on the vector rows


def _residual(shape):
    x, r = relay.var("x", shape=shape), relay.var("r", shape=shape)
    bias = relay.const(np.linspace(-1, 1, shape[-1]).astype(np.float32))
    body = relay.add(relay.add(x, bias), r)
    return relay.transform.InferType()(relay.IRModule.from_expr(relay.Function([x, r], body)))


@pytest.mark.parametrize("isa", ["plain", "avx2"])
def test_bert_sized_ewise_splits_and_keeps_the_bits(isa, monkeypatch, tmp_path):
    """BERT's 128 x 768 activations (98,304 elements): a residual add over both threads (7
    chunks of 21 rows, the last of 2), forced through both drivers; a 96 x 256 one (24,576,
    below EWISE_THREADS) stays on one thread."""
    if isa == "avx2" and host_isa() == "plain":
        pytest.skip("avx2 code does not run on this host")
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    small = _residual((1, 96, 256))
    assert 96 * 256 < EWISE_THREADS <= 128 * 768
    assert all(k.params.get("threads", 1) == 1
               for k in lower(small["main"], host_isa(), threads=2).kernels)
    mod = _residual((1, 128, 768))
    ewise = [k for k in lower(mod["main"], host_isa(), threads=2).kernels if k.kind == "EWISE"]
    assert len(ewise) == 1 and ewise[0].params.get("threads") == 2
    assert kernels.ewise_chunk_plan([1, 128, 768]) == (21, 7)
    rng = np.random.default_rng(9)
    x, r = (rng.standard_normal((1, 128, 768)).astype(np.float32) for _ in range(2))
    want = P.interpret(mod, [x, r])[0]
    assert P.build(mod, f"llvm -isa={isa} -threads=1").run(x, r)[0].tobytes() == want.tobytes()
    exe = P.build(mod, f"llvm -isa={isa} -threads=2")
    regions = [s.region for s in exe.steps if getattr(s.region, "modes", None) is not None]
    assert regions and all(r_._alone is not None for r_ in regions)
    for reg in regions:
        turns = iter(["pool", "alone"] * 3)
        reg.modes.choose = lambda turns=turns: next(turns)  # both drivers, whatever the load
    for _ in range(6):
        assert exe.run(x, r)[0].tobytes() == want.tobytes()
    assert all(len(t) >= 3 for reg in regions for t in reg.modes.times.values())
