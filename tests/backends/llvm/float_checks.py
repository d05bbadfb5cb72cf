"""What the LLVM float kernel tests share (test_llvm_float.py, test_llvm_float_products.py): a
Relay function built for "llvm" against the reference interpreter, and random feeds of a dtype."""

from __future__ import annotations

import numpy as np

import partita as P
from partita import relay


def check(fn, feeds, rtol=1e-6, atol=1e-7):
    mod = relay.transform.InferType()(relay.IRModule.from_expr(fn))
    exe = P.build(mod, "llvm")
    want = P.interpret(mod, feeds)
    got = exe.run(*feeds)
    got = got if isinstance(got, (list, tuple)) else [got]
    for w, g in zip(want, got):
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)
    return exe


def rand(rng, shape, dtype):
    if dtype in ("float16", "float32"):
        return rng.standard_normal(shape).astype(dtype)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dtype)
