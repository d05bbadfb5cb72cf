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


def test_attributes_positionally_in_relays_order():
    """relay.reshape(x, [20, 5]), relay.clip(x, 0, 6), relay.concatenate(t, 1) as TVM writes
    them; ops whose Relay order differs take attributes by keyword only, loudly."""
    import pytest

    from partita.errors import ArityError

    x = relay.var("x", shape=(10, 10), dtype="float32")
    assert relay.reshape(x, [20, 5]).attrs.newshape == (20, 5)
    clip = relay.clip(x, 0, 6)
    assert (clip.attrs.a_min, clip.attrs.a_max) == (0.0, 6.0)
    assert relay.concatenate([x, x], 1).attrs.axis == 1
    assert relay.op.concatenate([x, x], 1).attrs.axis == 1
    assert relay.split(x, 2, 1).astuple().attrs.axis == 1
    with pytest.raises(ArityError, match="give attributes by keyword"):
        relay.reshape(x, [20, 5], 3)
    with pytest.raises(ArityError, match="give attributes by keyword"):
        relay.qnn.op.conv2d(x, x, 0, 0, 1.0, 1.0, (3, 3))
    with pytest.raises(ArityError, match="attribute a_min got an expression"):
        relay.clip(x, x)


def test_zeros_and_einsum():
    a, b = relay.var("a", shape=(10, 10)), relay.var("b", shape=(10, 10))
    r = relay.einsum([relay.reshape(a, [20, 5]), relay.reshape(b, [20, 5])], "...ab,...cb->...ac")
    mod = relay.transform.InferType()(relay.IRModule.from_expr(relay.Function([a, b], r)))
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((10, 10)).astype("float32") for _ in range(2))
    want = np.einsum("...ab,...cb->...ac", x.reshape(20, 5), y.reshape(20, 5))
    np.testing.assert_allclose(relay.interpret(mod, [x, y])[0], want, rtol=1e-5, atol=1e-5)
    z = relay.zeros(shape=(2, 3), dtype="int8")
    np.testing.assert_array_equal(
        relay.interpret(relay.IRModule.from_expr(z), [])[0], np.zeros((2, 3), "int8")
    )
