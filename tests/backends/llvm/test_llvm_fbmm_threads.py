"""FBMM over two threads (emit/float/gemm.py batches): attention-sized batched products (B read
as [K][N], and as [N][K] with K a multiple of 16) split by batch into chunks that the driver's
thread and its worker claim one at a time. Both drivers (with the worker and without it) give
the bits of -threads=1; small products stay on one thread."""

from __future__ import annotations

import numpy as np
import pytest
from partita.backends.llvm.lower.context import lower
from partita.backends.llvm.runtime.jit import host_isa

import partita as P
from partita import relay


def _bmm(bx, m, k, n, transpose_b):
    x = relay.var("x", shape=(bx, m, k))
    w = relay.var("w", shape=(bx, n, k) if transpose_b else (bx, k, n))
    body = relay.nn.batch_matmul(x, w, transpose_b=transpose_b)
    return P.InferType()(relay.IRModule.from_expr(relay.Function([x, w], body)))


@pytest.mark.parametrize("isa", sorted({"plain", host_isa()} & {"plain", "avx2"}))
@pytest.mark.parametrize("transpose_b", [False, True])
def test_split_batches_give_one_threads_bits(isa, transpose_b):
    rng = np.random.default_rng(4)
    mod = _bmm(12, 128, 64, 128, transpose_b)
    plan = lower(mod["main"], host_isa(), threads=2).kernels
    ks = [k for k in plan if k.kind == "FBMM"]
    assert len(ks) == 1 and ks[0].params.get("threads") == 2
    assert ks[0].params["dot" if transpose_b else "vec"]
    x = rng.standard_normal((12, 128, 64)).astype(np.float32)
    w = rng.standard_normal((12, 128, 64) if transpose_b else (12, 64, 128)).astype(np.float32)
    one = P.build(mod, f"llvm -isa={isa} -threads=1").run(x, w)[0]
    np.testing.assert_allclose(one, P.interpret(mod, [x, w])[0], rtol=1e-4, atol=1e-4)
    exe = P.build(mod, f"llvm -isa={isa} -threads=2")
    regions = [s.region for s in exe.steps if getattr(s.region, "modes", None) is not None]
    assert regions and all(r._alone is not None for r in regions)
    for r in regions:
        turns = iter(["pool", "alone"] * 3)
        r.modes.choose = lambda turns=turns: next(turns)  # both drivers, whatever the load
    for _ in range(6):
        assert exe.run(x, w)[0].tobytes() == one.tobytes()


def test_small_batched_products_stay_on_one_thread():
    mod = _bmm(2, 16, 32, 16, False)
    plan = lower(mod["main"], host_isa(), threads=2).kernels
    assert all(k.params.get("threads", 1) == 1 for k in plan if k.kind == "FBMM")
