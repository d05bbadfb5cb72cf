"""float16 kernels call libgcc's / compiler-rt's conversion helpers (double -> half has no
instruction). MCJIT resolves a symbol the process has not loaded to address 0, so before the
fix a float16 kernel segfaulted in any process where no earlier import had loaded libgcc_s
(a test run on its own did; the whole file, after torch's import, did not). A fresh
interpreter with only partita imported is the case that matters."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = """
import numpy as np
import partita as P
from partita.ir import Function, IRModule, TensorType, Var
from partita.ops import get_op

x = Var("x", TensorType((3, 17), "float16"))
for op in ("tanh", "exp", "nn.hardswish"):
    mod = P.InferType()(IRModule({"main": Function([x], get_op(op)(x))}))
    data = np.linspace(-3, 3, 51, dtype=np.float16).reshape(3, 17)
    got = P.build(mod, "llvm").run(data)[0]
    want = P.interpret(mod, [data])[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3)
print("ok")
"""


@pytest.mark.parametrize("isa", ["plain", "avx2"])
def test_float16_kernels_run_in_a_fresh_process(tmp_path, isa):
    from partita.backends.llvm.host_cpu import lacking

    if lacking([isa]):
        pytest.skip(f"this CPU cannot run {isa} code")
    env = dict(os.environ, PARTITA_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    script = SCRIPT.replace('"llvm"', f'"llvm -isa={isa}"')
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "ok"


def test_the_helpers_resolve_once_llvm_is_initialised():
    from partita.backends.llvm.runtime import jit

    jit.ensure_initialized()
    assert jit.missing_helpers() == []
