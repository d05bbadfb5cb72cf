"""The region cache (backends/llvm/region_cache.py): a second build of a model neither lowers
nor compiles; any change to the graph, its constants, the options or partita's source misses;
a corrupt entry is rebuilt."""

from __future__ import annotations

import numpy as np
import partita.backends.llvm as llvm_backend
import pytest
from partita.backends.llvm.runtime import cache as region_cache
from partita.backends.llvm.runtime.jit import cache_dir

import partita as P

TEXT = """
def @main(%x: Tensor[(1, 8, 8, 4), int8]) {
  %0 = qnn.conv2d(%x, meta[relay.Constant][0], 3, 0, 0.05f, 0.02f, padding=[1, 1, 1, 1],
                  data_layout="NHWC", kernel_layout="OHWI", out_dtype="int32");
  %1 = qnn.requantize(%0, 0.001f, 0, 0.1f, -4, out_dtype="int8");
  clip(%1, a_min=-128f, a_max=127f)
}"""


def model(weight_value=1, text=TEXT):
    weights = np.full((6, 3, 3, 4), weight_value, np.int8)
    weights[0, 0, 0, 0] = -7
    return P.parse(text, [weights])


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))


def lowerings(monkeypatch) -> list:
    """Counts lower() calls made by compile_region."""
    calls = []
    real = llvm_backend.lower_function

    def counting(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(llvm_backend, "lower_function", counting)
    return calls


def run_and_check(mod, seed=0):
    exe = P.build(mod, "llvm")
    x = np.random.default_rng(seed).integers(-128, 128, (1, 8, 8, 4), dtype=np.int8)
    assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])
    return exe.steps[0].region


def test_a_second_build_neither_lowers_nor_compiles(monkeypatch):
    calls = lowerings(monkeypatch)
    first = run_and_check(model())
    assert len(calls) == 1 and not first.cached
    assert len(list(cache_dir().glob("*.region"))) == 1
    second = run_and_check(model())  # a new module: equal, not the same objects
    assert len(calls) == 1 and second.cached and second.obj == first.obj


@pytest.mark.parametrize(
    "change",
    [
        lambda: model(weight_value=2),  # one constant's values
        lambda: model(text=TEXT.replace("0.1f, -4", "0.125f, -4")),  # a scale
        lambda: model(text=TEXT.replace("a_min=-128f", "a_min=-100f")),  # an op attribute
    ],
    ids=["weights", "scale", "attribute"],
)
def test_any_change_to_the_graph_misses(monkeypatch, change):
    calls = lowerings(monkeypatch)
    run_and_check(model())
    run_and_check(change(), seed=1)
    assert len(calls) == 2
    assert len(list(cache_dir().glob("*.region"))) == 2


def test_options_and_source_are_in_the_key(monkeypatch):
    calls = lowerings(monkeypatch)
    mod = model()
    # tiers named: on a plain host "llvm" (auto) is -isa=plain, the same key (built, not run:
    # avx2 code is compiled on any host)
    P.build(mod, "llvm -isa=avx2")
    P.build(mod, "llvm -isa=plain")
    P.build(mod, "llvm -isa=plain -threads=2")
    assert len(calls) == 3
    monkeypatch.setattr(region_cache, "source_digest", lambda: b"an edited partita")
    run_and_check(mod)
    assert len(calls) == 4


def test_a_corrupt_entry_is_rebuilt(monkeypatch):
    calls = lowerings(monkeypatch)
    run_and_check(model())
    (entry,) = cache_dir().glob("*.region")
    entry.write_bytes(entry.read_bytes()[:100])  # the checksum no longer matches
    region = run_and_check(model())
    assert len(calls) == 2 and region.cached  # lowered again; the object code was cached
    run_and_check(model())
    assert len(calls) == 2  # the rebuilt entry is read


def test_an_entry_whose_checksum_matches_but_does_not_load_is_rebuilt(monkeypatch):
    from partita.backends.llvm.runtime.jit import write_entry

    calls = lowerings(monkeypatch)
    run_and_check(model())
    (entry,) = cache_dir().glob("*.region")
    write_entry(entry, b"\x05\x00\x00\x00{bad}")
    run_and_check(model())
    assert len(calls) == 2


def test_a_function_that_cannot_be_fingerprinted_is_compiled_uncached(monkeypatch):
    def refuse(_fn, names=True):
        raise TypeError("fingerprint: cannot encode a Widget attribute exactly")

    monkeypatch.setattr(region_cache, "fingerprint", refuse)
    calls = lowerings(monkeypatch)
    run_and_check(model())
    run_and_check(model())
    assert len(calls) == 2 and not list(cache_dir().glob("*.region"))


def test_the_cache_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")
    calls = lowerings(monkeypatch)
    run_and_check(model())
    second = run_and_check(model())
    assert len(calls) == 2 and second.cached  # lowered again; the object code was cached
    assert not list(cache_dir().glob("*.region"))


def test_the_cache_keeps_to_its_size_limit_least_recently_used_first(monkeypatch):
    """Past PARTITA_CACHE_SIZE the least recently used entries go, each with its checksum, down
    to 80% of the limit; the entry just written stays; a hit counts as a use."""
    import os

    from partita.backends.llvm.runtime.jit import read_entry, trim_cache, write_entry

    paths = [cache_dir() / f"{name}.o" for name in "abcd"]
    for age, path in enumerate(paths):  # a: the oldest
        write_entry(path, bytes(1000))
        for p in (path, path.with_suffix(".sha256")):
            os.utime(p, (0, 1000 + 10 * age))
    assert read_entry(paths[0]) is not None  # a used again: now the most recent
    monkeypatch.setenv("PARTITA_CACHE_SIZE", "4000")  # 4 x (1000 + a 64-byte checksum)
    trim_cache(keep=paths[1])
    left = sorted(p.name for p in cache_dir().iterdir())
    # 4256 bytes: over 4000, trimmed to 3200 at most; b, the oldest, is kept; c goes
    assert left == ["a.o", "a.sha256", "b.o", "b.sha256", "d.o", "d.sha256"]


def test_a_build_trims_the_cache_and_a_bad_size_is_refused(monkeypatch):
    run_and_check(model(weight_value=1))
    monkeypatch.setenv("PARTITA_CACHE_SIZE", "1k")
    run_and_check(model(weight_value=2))  # only the region just written is left
    assert [p.suffix for p in sorted(cache_dir().iterdir())] == [".region", ".sha256"]
    assert run_and_check(model(weight_value=2)).cached
    monkeypatch.setenv("PARTITA_CACHE_SIZE", "lots")
    with pytest.raises(P.PartitaError, match="PARTITA_CACHE_SIZE='lots'"):
        P.build(model(weight_value=3), "llvm")
