"""The float GEMM's register tiles (backends/llvm/float_gemm.py) on shapes whose column count is
not a multiple of 16: the last vector is masked (its weight panel zero-padded at compile time),
for every bias form, one and two threads and each ISA's tile; within float32 rounding of the
interpreter's exact sums (FMA chains in k order)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import partita as P
from partita import relay


@settings(max_examples=20, deadline=None)
@given(
    m=st.sampled_from([1, 3, 7, 49]),
    k=st.sampled_from([5, 64, 300]),
    n=st.sampled_from([17, 37, 100, 1000]),
    form=st.sampled_from(["dense", "n", "mn", "scalar", "b-as-kn"]),
    relu=st.booleans(),
    target=st.sampled_from(["llvm", "llvm -threads=2", "llvm -isa=avx2"]),
)
def test_a_masked_last_vector_equals_the_interpreter(m, k, n, form, relu, target):
    rng = np.random.default_rng(m * 7 + n)
    x = relay.var("x", shape=(m, k))
    tb = form != "b-as-kn"
    w = relay.const(rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32))
    if form == "dense":
        out = relay.nn.dense(x, w)
    else:
        bshape = {"n": (n,), "mn": (m, n), "scalar": (1,), "b-as-kn": (n,)}[form]
        bias = relay.const(rng.standard_normal(bshape).astype(np.float32))
        out = relay.nn.gemm(x, w, bias, transpose_b=tb)
    out = relay.nn.relu(out) if relu else out
    mod = relay.transform.InferType()(relay.IRModule.from_expr(relay.Function([x], out)))
    exe = P.build(mod, target)
    kinds = [kk.split()[0] for kk in exe.steps[0].region.kernels]
    assert kinds[0] == "FDENSE"
    a = rng.standard_normal((m, k)).astype(np.float32)
    got, want = exe.run(a)[0], P.interpret(mod, [a])[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    scale = float(np.abs(want).max()) or 1.0
    assert float(np.abs(got - want).max()) <= 2e-6 * scale * max(1.0, np.sqrt(k) / 8)
