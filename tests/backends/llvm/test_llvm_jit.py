"""Compiling a plan's kernels in parts (jit.compile_parts): forked children and this process in
parallel, or one after another; the blob of object files; a child that fails is redone here."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from partita.backends.llvm.runtime import jit
from partita.frontends import from_tflite
from test_llvm_threads import NETS

import partita as P


def build_fresh(tmp_path, monkeypatch, name, jobs=None):
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path / name))
    if jobs is None:  # the default: parts in forked children (conftest.py sets 1 for the suite)
        monkeypatch.delenv("PARTITA_COMPILE_JOBS", raising=False)
    else:
        monkeypatch.setenv("PARTITA_COMPILE_JOBS", jobs)
    mod = from_tflite(str(NETS / "resnet_mini_64.tflite"))
    return mod, P.build(mod, "llvm").steps[0].region


def test_parallel_and_serial_compiles_run_the_same(tmp_path, monkeypatch):
    forks = []
    real_fork = jit._fork_compile
    monkeypatch.setattr(jit, "_fork_compile", lambda *a, **k: forks.append(1) or real_fork(*a, **k))
    mod, parallel = build_fresh(tmp_path, monkeypatch, "a")
    assert len(forks) == 1  # by default the first part compiles in a child
    _, serial = build_fresh(tmp_path, monkeypatch, "b", jobs="1")
    assert len(forks) == 1
    assert not parallel.cached and not serial.cached
    assert parallel.obj.startswith(jit.MAGIC) and len(jit.split_objects(parallel.obj)) == 2
    x = np.random.default_rng(0).integers(-128, 128, (1, 64, 64, 3), dtype=np.int8)
    want = P.interpret(mod, [x])[0]
    assert np.array_equal(parallel.run([x])[0], want)
    assert np.array_equal(serial.run([x])[0], want)
    _, again = build_fresh(tmp_path, monkeypatch, "a")  # both parts from the cache
    assert again.cached and again.obj == parallel.obj


def test_object_blobs_round_trip_and_refuse_truncation():
    parts = [b"\x7fELF-one", b"\x7fELF-second"]
    blob = jit.MAGIC + (2).to_bytes(4, "little")
    for p in parts:
        blob += len(p).to_bytes(8, "little") + p
    assert jit.split_objects(blob) == parts
    assert jit.split_objects(b"\x7fELF-raw") == [b"\x7fELF-raw"]  # a single object as before
    with pytest.raises(ValueError, match="truncated"):
        jit.split_objects(blob[:-3])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="parts compile in forked children")
def test_a_child_that_fails_is_compiled_here(tmp_path, monkeypatch):
    parent, compile_ = os.getpid(), jit._compile

    def failing_in_children(text, cpu, features, unroll=True):
        if os.getpid() != parent:
            raise RuntimeError("out of memory in the child")
        return compile_(text, cpu, features, unroll)

    monkeypatch.setattr(jit, "_compile", failing_in_children)
    mod, region = build_fresh(tmp_path, monkeypatch, "c")
    x = np.random.default_rng(1).integers(-128, 128, (1, 64, 64, 3), dtype=np.int8)
    assert np.array_equal(region.run([x])[0], P.interpret(mod, [x])[0])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="parts compile in forked children")
def test_a_child_that_hangs_is_killed_and_compiled_here(tmp_path, monkeypatch):
    parent, compile_ = os.getpid(), jit._compile

    def hanging_in_children(text, cpu, features, unroll=True):
        if os.getpid() != parent:
            time.sleep(60)
        return compile_(text, cpu, features, unroll)

    monkeypatch.setattr(jit, "_compile", hanging_in_children)
    monkeypatch.setattr(jit, "CHILD_TIMEOUT", 0.5)
    mod, region = build_fresh(tmp_path, monkeypatch, "d")
    x = np.random.default_rng(2).integers(-128, 128, (1, 64, 64, 3), dtype=np.int8)
    assert np.array_equal(region.run([x])[0], P.interpret(mod, [x])[0])


def test_the_unroller_runs_for_float_plans_only_and_keys_the_cache(tmp_path, monkeypatch):
    """int8 plans (hand-unrolled vector kernels) compile without LLVM's loop unroller, float
    plans with it; the choice is part of the cache key, and both objects give the same bits."""
    from partita.backends.llvm.emit.module import generate_parts, wants_unrolling
    from partita.backends.llvm.lower.context import lower
    from partita.backends.llvm.plan import plan_digest

    mod = from_tflite(str(NETS / "resnet_mini_64.tflite"))
    plan = lower(mod["main"], "vnni" if jit.host_isa() == "vnni" else jit.host_isa())
    assert not wants_unrolling(plan)
    x = P.var("x", (4, 8), "float32")
    fmod = P.IRModule.from_expr(P.Function([x], P.get_op("nn.relu")(x)))
    assert wants_unrolling(lower(P.InferType()(fmod)["main"], "plain"))
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    objs = [jit.compile_parts(generate_parts(plan), source=plan_digest(plan), unroll=u)
            for u in (True, False)]
    assert not objs[0][1] and not objs[1][1]  # two entries: neither was a cache hit
    assert jit.compile_parts(generate_parts(plan), source=plan_digest(plan), unroll=False)[1]
    data = np.random.default_rng(0).integers(-128, 128, (1, 64, 64, 3), dtype=np.int8)
    exe = P.build(mod, "llvm")
    assert np.array_equal(exe.run(data)[0], P.interpret(mod, [data])[0])


def test_split_kernels_row_range_code_is_spread_over_the_parts(tmp_path, monkeypatch):
    """-threads=2: the split int8 kernels' wrappers stay with the drivers (they share the
    worker's state), their row-range functions (the heavy code) go to either part, and the
    build runs the same bits as one thread."""
    from partita.backends.llvm.emit.module import generate_parts
    from partita.backends.llvm.lower.context import lower

    mod = from_tflite(str(NETS / "resnet_mini_64.tflite"))
    plan = lower(mod["main"], "vnni" if jit.host_isa() == "vnni" else jit.host_isa(), 2)
    texts = [make() for make in generate_parts(plan)]
    assert all("_range" in text for text in texts)
    assert any(line.startswith("define") and "_range" in line
               for line in texts[0].splitlines())
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    x = np.random.default_rng(4).integers(-128, 128, (1, 64, 64, 3), dtype=np.int8)
    two = P.build(mod, "llvm -threads=2")
    assert np.array_equal(two.run(x)[0], P.interpret(mod, [x])[0])
