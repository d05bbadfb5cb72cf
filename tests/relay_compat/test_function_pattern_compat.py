"""TVM's function-pattern behaviours through partita.relay: alternations of function patterns,
function patterns with wildcard ("fuzzy") bodies and any number of arguments, rewritten and
partitioned (names mirror TVM's test_dataflow_pattern.py)."""

from __future__ import annotations

from partita import relay
from partita.relay.dataflow_pattern import (
    DFPatternCallback,
    FunctionPattern,
    is_op,
    rewrite,
    wildcard,
)


def _v(name, shape=(2, 3), dtype="float32"):
    return relay.var(name, shape=shape, dtype=dtype)


def _conv_vars(*names):
    shapes = {"x": (1, 2, 6, 6), "w": (2, 2, 3, 3), "b": (1, 2, 4, 4)}
    return [_v(n, shape=shapes[n.rstrip("0123456789")]) for n in names]


def test_partition_optional_function():
    """An alternation of two function patterns: the call whose body matches the second is
    wrapped (the add after it is not part of the pattern)."""
    x, w, b = _conv_vars("x", "w", "b")
    x1, w1 = _conv_vars("x1", "w1")
    wc_x, wc_w, wc_x1, wc_w1 = (wildcard() for _ in range(4))
    sig = FunctionPattern([wc_x1, wc_w1], is_op("sigmoid")(is_op("nn.conv2d")(wc_x1, wc_w1)))
    rel = FunctionPattern([wc_x1, wc_w1], is_op("nn.relu")(is_op("nn.conv2d")(wc_x1, wc_w1)))
    pattern = sig(wc_x, wc_w) | rel(wc_x, wc_w)
    func = relay.Function([x1, w1], relay.nn.relu(relay.nn.conv2d(x1, w1)))
    out = pattern.partition(relay.add(relay.Call(func, [x, w]), b))
    x2, w2 = _conv_vars("x2", "w2")
    func2 = relay.Function([x2, w2], relay.Call(func, [x2, w2])).with_attr(
        "PartitionedFromPattern", "nn.conv2d_nn.relu_FunctionCall_"
    )
    assert relay.structural_equal(out, relay.add(relay.Call(func2, [x, w]), b), True)


def _fuzzy_function_pattern():
    wc_x, wc_w, wc_b, wc_x1, wc_w1 = (wildcard() for _ in range(5))
    return FunctionPattern([wc_x1, wc_w1], wildcard())(wc_x, wc_w) + wc_b


def test_rewrite_function_with_fuzzy_body():
    """A function pattern whose body is a wildcard matches any two-parameter function."""
    x, w, b = _conv_vars("x", "w", "b")
    x1, w1 = _conv_vars("x1", "w1")
    func = relay.Function([x1, w1], relay.nn.conv2d(x1, w1))
    expr = relay.add(relay.add(relay.Call(func, [x, w]), b), b)
    xw = _v("xw", shape=(1, 2, 4, 4))

    class Rewrite(DFPatternCallback):
        def __init__(self):
            super().__init__()
            self.pattern = _fuzzy_function_pattern()

        def callback(self, pre, post, node_map):
            return relay.add(xw, b)

    out = rewrite(Rewrite(), expr)
    assert relay.structural_equal(out, relay.add(relay.add(xw, b), b))


def test_partition_function_with_fuzzy_body():
    x, w, b = _conv_vars("x", "w", "b")
    x1, w1 = _conv_vars("x1", "w1")
    func = relay.Function([x1, w1], relay.nn.conv2d(x1, w1))
    expr = relay.add(relay.add(relay.Call(func, [x, w]), b), b)
    out = _fuzzy_function_pattern().partition(expr)
    x2, w2, b2 = _conv_vars("x2", "w2", "b2")
    func2 = relay.Function([x2, w2, b2], relay.add(relay.Call(func, [x2, w2]), b2)).with_attr(
        "PartitionedFromPattern", "nn.conv2d_FunctionCall_add_"
    )
    assert relay.structural_equal(out, relay.add(relay.Call(func2, [x, w, b]), b), True)


def test_partition_fuzzy_function_args():
    """A function of any arity whose body is an add, called with any arguments, then an add:
    partitioned for one, two and three parameters."""
    pattern = FunctionPattern(None, wildcard() + wildcard())(None) + wildcard()
    x, y, z, b = (_v(n) for n in "xyzb")
    for n in (1, 2, 3):
        params = [_v(f"p{i}") for i in range(n)]
        body = params[0] + params[0] if n == 1 else params[0] + params[1]
        if n == 3:
            body = body + params[2]
        f = relay.Function(params, body)
        call = relay.Call(f, [x, y, z][:n])
        out = pattern.partition(relay.add(call, b))
        fresh = [_v(f"q{i}") for i in range(n + 1)]
        label = ("add_" if n == 3 else "") + "add_FunctionCall_add_"
        expected = relay.Function(fresh, relay.add(relay.Call(f, fresh[:-1]), fresh[-1])).with_attr(
            "PartitionedFromPattern", label
        )
        assert relay.structural_equal(out, relay.Call(expected, [x, y, z][:n] + [b]), True)


def test_rewrite_with_pattern_recursion():
    """A wildcard redirected to a pattern that contains it: any chain of casts ending in a
    dense, matched whole at the outermost cast and rewritten once (TVM's three spellings)."""
    import numpy as np

    data = _v("data", shape=(2, 8))
    feat = relay.nn.dense(data, relay.const(np.zeros((4, 8), np.float32)))
    for _ in range(6):
        feat = relay.cast(feat, dtype="float32")
    expected = relay.nn.relu(feat)

    class TheRewrite(DFPatternCallback):
        def __init__(self, pattern):
            super().__init__(rewrite_once=True)
            self.pattern = pattern

        def callback(self, pre, post, node_map):
            return relay.nn.relu(post)

    def dense():
        return is_op("nn.dense")(wildcard(), wildcard())

    spellings = []
    redirect = wildcard()
    cast = is_op("cast")(redirect)
    redirect.redirect_to(cast | dense())  # call arguments
    spellings.append(cast)
    redirect = wildcard()
    cast = is_op("cast")(redirect | dense())  # alternation, left
    redirect.redirect_to(cast)
    spellings.append(cast)
    redirect = wildcard()
    cast = is_op("cast")(dense() | redirect)  # alternation, right
    redirect.redirect_to(cast)
    spellings.append(cast)
    for pattern in spellings:
        assert relay.structural_equal(rewrite(TheRewrite(pattern), feat), expected)
    # not a dense at the bottom: no match
    other = relay.cast(relay.cast(relay.abs(data), dtype="float32"), dtype="float32")
    assert not spellings[0].match(other)
