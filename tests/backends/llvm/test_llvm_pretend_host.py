"""PARTITA_LLVM_HOST=NAME (runtime/jit.py): the process takes its host for the older CPU NAME, so
that the test suite sees what a machine of that kind sees, on any newer x86-64 CPU. The vector
tiers NAME lacks are off (host_isa, -isa=auto, AMX's grant, the plain tier's register width), a
forced tier the pretended host lacks runs through -emulate=yes or is refused by name, and native
code built so runs here with the interpreter's bits."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_checks import build_graph, isa_available
from partita.backends.llvm import peak
from partita.backends.llvm.errors import LLVMError
from partita.backends.llvm.runtime import jit

import partita as P

CASES = [("x86-64-v2", "plain", 1), ("x86-64-v3", "avx2", 2), ("alderlake", "avxvnni", 2),
         ("icelake-server", "vnni", 4)]


@pytest.mark.parametrize("name,isa,width", CASES)
def test_a_pretended_host_has_only_its_tiers(name, isa, width, monkeypatch, tmp_path):
    if not isa_available(isa):
        pytest.skip(f"this CPU is older than {name}")
    monkeypatch.setenv(jit.PRETEND_ENV, name)
    monkeypatch.setattr(jit, "_AMX", None)  # the grant is asked again under the new host
    monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path))
    assert jit.host_isa() == isa and jit.best_isa() == isa and not jit.amx_permitted()
    assert peak.plain_width() == width
    geo = {"hw": (9, 9), "k": (3, 3), "strides": (1, 1), "dilation": (1, 1),
           "padding": (1, 1, 1, 1)}
    mod, _ = build_graph("conv", "int8", 16, 32, geo, 5, True, None)
    x = np.random.default_rng(0).integers(-128, 128, (1, 9, 9, 16), dtype=np.int8)
    want = P.interpret(mod, [x])[0]
    assert np.array_equal(P.build(mod, "llvm").run(x)[0], want)
    if isa != "vnni":  # a tier the pretended host lacks: emulated, or refused by name
        assert np.array_equal(P.build(mod, "llvm -isa=vnni -emulate=yes").run(x)[0], want)
        with pytest.raises(P.PartitaError, match="vnni"):
            P.build(mod, "llvm -isa=vnni").run(x)


def test_an_unknown_pretended_host_is_refused(monkeypatch):
    monkeypatch.setenv(jit.PRETEND_ENV, "no-such-cpu")
    with pytest.raises(LLVMError, match="PARTITA_LLVM_HOST"):
        jit.host_features()
