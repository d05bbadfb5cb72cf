"""The LLVM host backend: native code equals the interpreter bit for bit, saves and loads
without compiling, caches object code, and names what it cannot compile."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from partita.frontends import from_tflite

import partita as P

NETS = Path(__file__).resolve().parents[2] / "models" / "tflite" / "nets"
NAMES = [
    "mobilenet_v1_025_128",
    "mobilenet_v2_035_96",
    "mobilenet_v3_small_075_96",
    "resnet_mini_64",
    "mobilenet_v2_035_96_uint8",
    "mobilenet_v2_035_96_float_io",
]


def sample(ty, seed):
    rng = np.random.default_rng(seed)
    if ty.dtype == "float32":
        return (rng.standard_normal(ty.shape) * 2).astype(np.float32)
    info = np.iinfo(ty.dtype)
    return rng.integers(info.min, info.max, ty.shape, dtype=ty.dtype, endpoint=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_whole_nets_on_llvm_and_npu_llvm_equal_the_interpreter(name, tmp_path):
    mod = from_tflite(str(NETS / f"{name}.tflite"))
    exe = P.build(mod, "llvm")
    mixed = P.build(mod, "npu, llvm")
    exe.save(tmp_path / "m.partita")
    loaded = P.load(tmp_path / "m.partita")
    for seed in range(2):
        x = sample(exe.input_types[0], seed)
        want = P.interpret(mod, [x])[0]
        for e in (exe, mixed, loaded):
            assert np.array_equal(e.run(x)[0], want)


def test_a_second_compile_comes_from_the_cache_and_a_corrupt_entry_is_rebuilt(
    tmp_path, monkeypatch
):
    from partita.backends.llvm.runtime.jit import cache_dir

    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))  # it spoils every entry it sees
    mod = from_tflite(str(NETS / "resnet_mini_64.tflite"))
    first = P.build(mod, "llvm").steps[0].region
    second = P.build(mod, "llvm").steps[0].region
    assert second.cached and second.obj == first.obj
    for entry in [*cache_dir().glob("*.o"), *cache_dir().glob("*.region")]:
        entry.write_bytes(b"garbage")
    third = P.build(mod, "llvm").steps[0].region
    assert not third.cached and third.obj == first.obj
    x = sample(third.input_types[0], 5)
    assert np.array_equal(third.run([x])[0], P.interpret(mod, [x])[0])


def test_unsupported_ops_are_named():
    mod = P.parse("""
def @main(%x: Tensor[(2, 8), float32], %w: Tensor[(4, 8), float32], %c: Tensor[(4,), float32]) {
  nn.gemm(%x, %w, %c)
}""")
    with pytest.raises(P.PartitaError, match=r"llvm cannot compile nn.gemm: a bias computed at "
                       r"run time .*'ref' host"):
        P.build(mod, "llvm")


def test_corrupt_region_bytes_are_refused():
    from partita.backends.llvm import load_region

    with pytest.raises(P.PartitaError, match="corrupt llvm region"):
        load_region(b"\x05\x00\x00\x00{bad}")
