"""The float32 exp and erf (partita/ops/float32_math.py, emitted by emit/float/math32.py) in
compiled kernels: softmax (FSOFTMAX), erf, GELU as torch exports it and nn.gelu (EWISE, vector
rows and scalar remainder) give the interpreter's bits on -isa=plain and -isa=avx2, one and two
threads, special values included; the emitted code has no fused multiply-add."""

from __future__ import annotations

import numpy as np
import pytest

import partita as P
from partita import relay

ISAS = ["plain", "avx2"]
SPECIAL = [0.0, -0.0, 1e-30, -1e-8, 1e-40, 0.99, 1.0, -1.0, 3.9199, 3.92, -3.92, 5.9999, 6.0,
           -6.0, 7.5, 40.0, 88.7, 89.5, -87.4, -103.5, -120.0, np.inf, -np.inf, np.nan, 2.0,
           -3.25, 0.476936]


def _mod(body, x):
    return relay.transform.InferType()(relay.IRModule.from_expr(relay.Function([x], body)))


def _same(mod, data, target):
    got = P.build(mod, target).run(data)[0]
    want = P.interpret(mod, [data])[0]
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("isa", ISAS)
def test_erf_and_gelus_give_the_interpreters_bits(isa):
    rng = np.random.default_rng(5)
    data = np.concatenate([rng.standard_normal(20_000) * 2, rng.uniform(-7, 7, 20_000),
                           np.array(SPECIAL)]).astype(np.float32).reshape(1, -1)
    x = relay.var("x", shape=data.shape)
    # erf alone, GELU as torch exports it (x * 0.5 * (1 + erf(x / sqrt(2))), each op float32)
    # and nn.gelu (ORT's Gelu / BiasGelu)
    root2 = relay.const(np.float32(1.4142135))
    torch_gelu = relay.multiply(relay.multiply(x, relay.const(np.float32(0.5))), relay.add(
        relay.const(np.float32(1.0)), relay.erf(relay.divide(x, root2))))
    for body in (relay.erf(x), torch_gelu, relay.nn.gelu(x)):
        _same(_mod(body, x), data, f"llvm -isa={isa} -threads=1")


def _softmax_data(shape, rng):
    data = (rng.standard_normal(shape) * 4).astype(np.float32)
    flat = data.reshape(-1)
    finite = np.array([v for v in SPECIAL if np.isfinite(v)], np.float32)[: flat.size]
    flat[: finite.size] = finite  # no inf / nan here
    return data


@pytest.mark.parametrize("isa", [*ISAS, "auto"])
@pytest.mark.parametrize(("shape", "axis"), [((3, 5, 128), -1), ((2, 7, 13), -1), ((4, 5), -1),
                                             ((2, 3, 29), -1), ((2, 3, 97), -1), ((2, 3, 24), -1),
                                             ((2, 21, 6), 1), ((3, 9, 4), 1)])
def test_softmax_gives_the_interpreters_bits(isa, shape, axis):
    """Contiguous rows (16-float steps, an 8-float group, a tail, each alone and together;
    ``auto``: the host's widest vectors) and lines across an inner axis (8-lane groups and a
    tail)."""
    data = _softmax_data(shape, np.random.default_rng(len(shape) + shape[-1]))
    x = relay.var("x", shape=shape)
    _same(_mod(relay.nn.softmax(x, axis=axis), x), data, f"llvm -isa={isa} -threads=1")


def test_softmax_over_two_threads_and_special_rows():
    """Split rows (row_split) give one thread's bits; rows of -inf (masked), with huge values,
    with +inf or nan give what the interpreter gives (nan rows compared as nan)."""
    shape = (4, 64, 72)
    data = _softmax_data(shape, np.random.default_rng(9))
    data[0, 0, :] = -np.inf
    data[0, 1, 3] = np.inf
    data[0, 2, 5] = np.nan
    data[0, 3, :] = np.float32(3e38)
    data[0, 4, :] = -np.float32(3e38)
    data[0, 4, 7] = 0.0
    x = relay.var("x", shape=shape)
    mod = _mod(relay.nn.softmax(x, axis=-1), x)
    want = P.interpret(mod, [data])[0]
    for threads in (1, 2):
        got = P.build(mod, f"llvm -isa=avx2 -threads={threads}").run(data)[0]
        np.testing.assert_array_equal(got, want)
        finite = ~np.isnan(want)
        assert got[finite].tobytes() == want[finite].tobytes()
    assert np.isnan(want[0, :3]).all() and not np.isnan(want[0, 3:]).any()


def test_no_fused_multiply_add_in_the_emitted_code(monkeypatch):
    """The kernels' IR for -isa=avx2, compiled as the JIT compiles it but for a CPU with FMA
    (Zen 3): no vfmadd / vfmsub / vfnmadd anywhere (LLVM contracts nothing: no fast-math or
    contract flags), so the float32 steps stay the reference's roundings."""
    from partita.backends import llvm as llvm_backend
    from partita.backends.llvm.runtime import jit

    class Captured(Exception):
        pass

    texts = []

    def compile_parts(parts, *args, **kwargs):
        texts.extend(t() for t in parts)
        raise Captured

    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    monkeypatch.setattr(llvm_backend, "compile_parts", compile_parts)
    x = relay.var("x", shape=(4, 128))
    torch_gelu = relay.multiply(relay.multiply(x, relay.const(np.float32(0.5))), relay.add(
        relay.const(np.float32(1.0)), relay.erf(relay.divide(x, relay.const(np.float32(1.4))))))
    body = relay.add(relay.nn.softmax(torch_gelu, axis=-1), relay.nn.gelu(x))
    with pytest.raises(Captured):
        P.build(_mod(body, x), "llvm -isa=avx2 -threads=1")
    assert texts
    import llvmlite.binding as llvm

    with jit.LLVM_LOCK:
        machine = jit._machine("znver3", "+avx2,+fma,+avx,+sse4.1")
        for text in texts:
            module = llvm.parse_assembly(text)
            pb = llvm.create_pass_builder(machine, llvm.PipelineTuningOptions(speed_level=3))
            pb.getModulePassManager().run(module, pb)
            asm = machine.emit_assembly(module)
            assert "vmulps" in asm or "vmulss" in asm
            fused = [ln for ln in asm.splitlines() if "vfmadd" in ln or "vfmsub" in ln
                     or "vfnmadd" in ln or "vfnmsub" in ln]
            assert not fused, fused[:5]
