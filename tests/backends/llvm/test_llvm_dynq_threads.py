"""DynamicQuantizeLinear's fields (DYNQ, emit/data.py) over two threads: the range scan in
chunks whose ranges are taken in chunk order, and the data field's elements in chunks
(runtime/threads.py split_chunks); and the int32 product after it (DYNQ_DENSE), its weight
rows in chunks of whole tiles, a pooler's single row included. Both drivers (with the worker
and without it) give the bits of -threads=1 and of the interpreter; a small DYNQ stays on one
thread."""

from __future__ import annotations

import numpy as np
import pytest
from partita.backends.llvm.emit.data import DYNQ_CHUNK
from partita.backends.llvm.emit.int8.dynq_dense import dynq_dense_chunk
from partita.backends.llvm.lower.context import lower
from partita.backends.llvm.runtime.jit import host_isa
from partita.backends.llvm.runtime.threads import ThreadPool
from test_llvm_dynq_dense import dense_module, inputs

import partita as P
from partita.ir import Function, IRModule, TensorType, Var, get_op


def _module(shape):
    v = Var("x", TensorType(shape, "float32"))
    return P.InferType()(IRModule({"main": Function([v], get_op("qnn.dynamic_quantize")(v))}))


def _data(shape, case, rng):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    flat = x.reshape(-1)
    flat[5::1009] = -0.0
    if case == "min_in_last_chunk":  # the extremes in the last (short) chunk, past the lanes
        flat[-1], flat[-2] = -40.0, 55.0
    elif case == "positive":  # no negative value: lo stays +0.0 in every chunk
        x = np.abs(x)
        x.reshape(-1)[7] = -0.0
    return x


SHAPES = [(1, 128, 768),  # BERT's activations: 6 chunks
          (3, 11111)]  # 33,333 elements: a short last chunk, 5 elements past its last lane


@pytest.mark.parametrize("isa", ["plain", "avx2"])
@pytest.mark.parametrize("case", ["normal", "min_in_last_chunk", "positive"])
def test_dynq_split_over_two_threads_keeps_the_bits(isa, case, monkeypatch, tmp_path):
    if isa == "avx2" and host_isa() == "plain":
        pytest.skip("avx2 code does not run on this host")
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(11)
    for shape in SHAPES:
        assert np.prod(shape) > 2 * DYNQ_CHUNK
        mod = _module(shape)
        kernels = [k for k in lower(mod["main"], host_isa(), threads=2).kernels
                   if k.kind == "DYNQ"]
        # the range scanned once (field "range"), the data read in chunks; scale and zero point
        # one value each
        fields = {k.params["field"]: k for k in kernels}
        assert len(kernels) == 4 and set(fields) == {"range", 0, 1, 2}
        assert fields["range"].params.get("threads") == fields[0].params.get("threads") == 2
        assert kernels[0] is fields["range"] and fields[1].inputs == [fields["range"].output]
        x = _data(shape, case, rng)
        want = P.interpret(mod, [x])
        one = P.build(mod, f"llvm -isa={isa} -threads=1").run(x)
        for g, w in zip(one, want):
            assert g.tobytes() == w.tobytes()
        exe = P.build(mod, f"llvm -isa={isa} -threads=2")
        regions = [s.region for s in exe.steps if getattr(s.region, "modes", None) is not None]
        assert regions and all(r._alone is not None for r in regions)
        for r in regions:
            turns = iter(["pool", "alone"] * 3)
            r.modes.choose = lambda turns=turns: next(turns)  # both drivers, whatever the load
        for _ in range(6):
            for g, w in zip(exe.run(x), want):
                assert g.tobytes() == w.tobytes()
        assert all(len(t) >= 3 for r in regions for t in r.modes.times.values())


def test_small_dynq_stays_on_one_thread():
    mod = _module((64, 256))  # 16,384 elements
    assert all(k.params.get("threads", 1) == 1
               for k in lower(mod["main"], host_isa(), threads=2).kernels)


def _both_drivers(exe):
    regions = [s.region for s in exe.steps if getattr(s.region, "modes", None) is not None]
    assert regions and all(r._alone is not None for r in regions)
    for r in regions:
        turns = iter(["pool", "alone"] * 3)
        r.modes.choose = lambda turns=turns: next(turns)  # both drivers, whatever the load
    return regions


@pytest.mark.parametrize("isa", ["plain", "avx2"])
@pytest.mark.parametrize(("m", "accumulate"), [(1, "vpmaddubsw"), (5, "exact")])
def test_dynq_dense_weight_rows_in_chunks(isa, m, accumulate, monkeypatch, tmp_path):
    """770 weight rows of K = 768 (a pooler's row: 591 K weights, split): 12 chunks of 68 rows
    (17 tiles), the last of 22 with a 2-row tail; both drivers give the interpreter's bits."""
    if isa == "avx2" and host_isa() == "plain":
        pytest.skip("avx2 code does not run on this host")
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PARTITA_COMPILE_JOBS", "1")
    claims = []
    real = ThreadPool.split_chunks
    monkeypatch.setattr(ThreadPool, "split_chunks", lambda self, k, b, ps, total,
                        size, emit, **kw: claims.append((k.kind, total, size)) or
                        real(self, k, b, ps, total, size, emit, **kw))
    k_, n = 768, 770
    assert dynq_dense_chunk(n) == 68 and -(-n // 68) == 12
    mod = dense_module(m, k_, n, "uint8", "int8", accumulate, 4)
    dense = [k for k in lower(mod["main"], host_isa(), threads=2).kernels
             if k.kind == "DYNQ_DENSE"]
    assert len(dense) == 1 and dense[0].params.get("threads") == 2
    xs = inputs(m, k_, "uint8", 4)
    want = P.interpret(mod, xs)[0]
    assert P.build(mod, f"llvm -isa={isa} -threads=1").run(*xs)[0].tobytes() == want.tobytes()
    exe = P.build(mod, f"llvm -isa={isa} -threads=2")
    assert ("DYNQ_DENSE", n, 68) in claims
    regions = _both_drivers(exe)
    for _ in range(6):
        assert exe.run(*xs)[0].tobytes() == want.tobytes()
    assert all(len(t) >= 3 for r in regions for t in r.modes.times.values())


@pytest.mark.parametrize("isa", ["amx", "vnni", "avx2"])
@pytest.mark.parametrize("x_dtype", ["uint8", "int8"])
def test_dynq_dense_parts_pack_their_own_rows(isa, x_dtype, monkeypatch, tmp_path):
    """A split DYNQ_DENSE (BERT's 128 x 768 x 768 shape, exact sums: AMX tiles on -isa=amx,
    VNNI's register tile on vnni) packs x' in each part that finds chunks left, the worker's
    into a second scratch (lower/dynamic_int8.py scratch_bytes): both drivers give the
    interpreter's bits, and the workspace holds both copies."""
    from partita.backends.llvm.lower.dynamic_int8 import scratch_bytes
    from partita.backends.llvm.runtime.jit import runs_isa

    if not runs_isa(isa):
        pytest.skip(f"{isa} code does not run on this host")
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    m, k_, n = 128, 768, 768
    mod = dense_module(m, k_, n, x_dtype, "int8", "exact", 6)
    plan = lower(mod["main"], isa, threads=2)
    dense = [k for k in plan.kernels if k.kind == "DYNQ_DENSE"]
    assert len(dense) == 1 and dense[0].params.get("threads") == 2
    assert (dense[0].params["isa"] == "amx") == (isa == "amx")
    scratch = plan.buffers[dense[0].inputs[-1]]
    assert int(np.prod(scratch[0])) * np.dtype(scratch[1]).itemsize >= 2 * scratch_bytes(
        dense[0].params)
    xs = inputs(m, k_, x_dtype, 7)
    want = P.interpret(mod, xs)[0]
    assert P.build(mod, f"llvm -isa={isa} -threads=1").run(*xs)[0].tobytes() == want.tobytes()
    exe = P.build(mod, f"llvm -isa={isa} -threads=2")
    regions = _both_drivers(exe)
    for _ in range(6):
        assert exe.run(*xs)[0].tobytes() == want.tobytes()
    assert all(len(t) >= 3 for r in regions for t in r.modes.times.values())
