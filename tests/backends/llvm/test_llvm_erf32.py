"""erf rounded to float32 without libm on most elements (emit/float/erf32.py): the same bits as
the interpreter (C's erf in float64, rounded) on every element, special values included."""

from __future__ import annotations

import math

import numpy as np
from partita.backends.llvm.emit.float import erf32

import partita as P
from partita import relay


def test_the_polynomials_stay_within_the_bound_of_libm():
    rng = np.random.default_rng(3)
    a = np.concatenate([np.linspace(0, erf32.TOP, 200_001)[:-1], rng.uniform(0, erf32.TOP, 50_000)])
    want = np.array([math.erf(v) for v in a])
    assert float(np.abs(erf32.evaluate(a) - want).max()) < erf32.BOUND / 4


def test_erf_and_an_exported_gelu_give_the_interpreters_bits():
    rng = np.random.default_rng(5)
    special = [0.0, -0.0, 1e-30, -1e-8, 5.9999, 6.0, -6.0, 7.5, 40.0, np.inf, -np.inf, np.nan,
               np.float32(0.476936), 2.0, -3.25]
    data = np.concatenate([rng.standard_normal(20_000) * 2, rng.uniform(-7, 7, 20_000),
                           np.array(special)]).astype(np.float32).reshape(1, -1)
    x = relay.var("x", shape=data.shape)
    # erf alone, and GELU as torch exports it: x * 0.5 * (1 + erf(x / sqrt(2))), each op float32
    root2 = relay.const(np.float32(1.4142135))
    gelu = relay.multiply(relay.multiply(x, relay.const(np.float32(0.5))), relay.add(
        relay.const(np.float32(1.0)), relay.erf(relay.divide(x, root2))))
    for body in (relay.erf(x), gelu):
        mod = relay.transform.InferType()(relay.IRModule.from_expr(relay.Function([x], body)))
        got = P.build(mod, "llvm").run(data)[0]
        want = P.interpret(mod, [data])[0]
        assert got.tobytes() == want.tobytes()
