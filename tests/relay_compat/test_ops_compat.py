"""Ops TVM's pattern tests build that partita lacked: log and greater, against numpy."""

from __future__ import annotations

import numpy as np

from partita import relay


def _run(expr, x, data):
    mod = relay.transform.InferType()(relay.IRModule.from_expr(relay.Function([x], expr)))
    return mod["main"].body.checked_type, relay.interpret(mod, [data])[0]


def test_log_and_greater_match_numpy():
    x = relay.var("x", shape=(4,), dtype="float32")
    data = np.array([0.25, 1.0, 2.0, 10.0], "float32")
    ty, got = _run(relay.log(x), x, data)
    assert ty.dtype == "float32"
    np.testing.assert_array_equal(got, np.log(data))
    ty, got = _run(relay.greater(x, relay.const(1.0)), x, data)
    assert ty.dtype == "bool"
    np.testing.assert_array_equal(got, data > 1.0)
