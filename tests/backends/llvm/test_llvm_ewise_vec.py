"""EWISE's vector rows (emit/float/ewise_vec.py): erf and GELU as torch exports it, in lanes of 8
(16 on the AVX-512 tiers) with the per-lane straddle test and libm's fix-up, give the
interpreter's bits on random float32 bit patterns (NaNs, infinities, subnormals, -0.0 included),
on -isa=plain, -isa=avx2 and -isa=vnni (-emulate=yes where the CPU lacks AVX-512: the same IR
for the host's vectors), for row lengths around the lane count (the scalar remainder) and
broadcast operands."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_checks import llvm_target
from partita.backends.llvm.emit.float import ewise_vec

import partita as P
from partita import relay

ISAS = ["plain", "avx2", "vnni"]


def modules(shape):
    x = relay.var("x", shape=shape)
    root2 = relay.const(np.float32(1.4142135))
    gelu = relay.multiply(relay.multiply(x, relay.const(np.float32(0.5))), relay.add(
        relay.const(np.float32(1.0)), relay.erf(relay.divide(x, root2))))
    # a broadcast operand along the rows (stride 0 on the vector axis) and a negated erf
    col = relay.const(np.linspace(-2, 2, shape[-1]).astype(np.float32))
    mixed = relay.subtract(relay.negative(relay.erf(relay.multiply(x, col))), x)
    # batch norm + relu (ResNet's), and maximum / minimum with a broadcast operand
    bn = relay.nn.relu(relay.add(relay.multiply(x, col), relay.const(np.float32(0.25))))
    minmax = relay.minimum(relay.maximum(x, col), relay.negative(col))
    for body in (relay.erf(x), gelu, mixed, bn, minmax):
        yield relay.transform.InferType()(relay.IRModule.from_expr(relay.Function([x], body)))


def check(data, isa):
    for mod in modules(data.shape):
        got = P.build(mod, llvm_target(isa, " -threads=1")).run(data)[0]
        want = P.interpret(mod, [data])[0]
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("isa", ISAS)
def test_the_modules_take_the_vector_rows(isa, monkeypatch, tmp_path):
    """Emitted afresh (empty caches): each module's EWISE takes ewise_rows."""
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PARTITA_COMPILE_JOBS", "1")
    calls = []
    real = ewise_vec.ewise_rows
    monkeypatch.setattr(ewise_vec, "ewise_rows", lambda *a: calls.append(1) or real(*a))
    data = np.random.default_rng(2).standard_normal((2, 21)).astype(np.float32)
    check(data, isa)
    from partita.backends.llvm.lower.context import lower

    kernels = [k for mod in modules(data.shape) for k in lower(mod["main"], isa).kernels
               if k.kind == "EWISE"]
    assert len(calls) == len(kernels) >= 5  # every EWISE of every module
    lanes = {k.params.get("lanes", ewise_vec.LANES) for k in kernels}
    assert lanes == {16 if isa == "vnni" else 8}


@settings(max_examples=10, deadline=None)
@given(n=st.sampled_from([8, 13, 16, 61]), rows=st.sampled_from([1, 3]), isa=st.sampled_from(ISAS),
       data=st.data())
def test_random_float32_bit_patterns(n, rows, isa, data):
    """Shapes from a small set (their object code is cached), bit patterns over all 2^32."""
    bits = data.draw(st.lists(st.integers(0, 2**32 - 1), min_size=n * rows, max_size=n * rows))
    check(np.array(bits, np.uint32).view(np.float32).reshape(rows, n), isa)


@pytest.mark.parametrize("isa", ISAS)
def test_specials_and_straddling_values(isa):
    rng = np.random.default_rng(11)
    special = np.array([0.0, -0.0, 1e-30, -1e-8, 1e-45, 5.9999, 6.0, -6.0, 7.5, 40.0, np.inf,
                        -np.inf, np.nan, -np.nan, 0.476936, 2.0, -3.25], np.float32)
    data = np.concatenate([special, rng.standard_normal(4000).astype(np.float32) * 3,
                           rng.uniform(-7, 7, 4003).astype(np.float32)]).reshape(1, -1)
    check(data, isa)


@pytest.mark.parametrize("isa", ISAS)
def test_two_threads_split_rows_above_the_vector_axis(isa):
    """Large enough for EWISE's two-thread split (the first axis halved): same bits."""
    rng = np.random.default_rng(4)
    data = (rng.standard_normal((4, 1 << 15 | 3)) * 3).astype(np.float32)
    mod = list(modules(data.shape))[1]
    got = P.build(mod, llvm_target(isa, " -threads=2")).run(data)[0]
    assert got.tobytes() == P.interpret(mod, [data])[0].tobytes()


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("n", [8, 16, 45])
def test_int32_cast_dequantization_in_vectors(isa, n, monkeypatch, tmp_path):
    """cast(int32 -> float32) * scale + bias (a dynamic-int8 product's dequantization) takes
    the vector rows and gives the interpreter's bits, int32 values past 2^24 (rounded) and the
    extremes included."""
    calls = []
    real = ewise_vec.ewise_rows
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")  # emitted afresh, in this process
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PARTITA_COMPILE_JOBS", "1")
    monkeypatch.setattr(ewise_vec, "ewise_rows", lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(n)
    acc = relay.var("acc", shape=(3, n), dtype="int32")
    scale = relay.const(np.float32(0.0123))
    bias = relay.const(rng.standard_normal(n).astype(np.float32))
    body = relay.add(bias, relay.multiply(relay.cast(acc, "float32"), scale))
    mod = relay.transform.InferType()(relay.IRModule.from_expr(relay.Function([acc], body)))
    data = rng.integers(-(2**31), 2**31, (3, n), dtype=np.int64).astype(np.int32)
    data[0, :4] = [2**31 - 1, -(2**31), 2**24 + 1, -(2**25) - 3]
    got = P.build(mod, llvm_target(isa, " -threads=1")).run(data)[0]
    assert got.tobytes() == P.interpret(mod, [data])[0].tobytes()
    assert calls
