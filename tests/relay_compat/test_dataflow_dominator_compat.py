"""TVM's dominator patterns, the batch-norm fusion and partition built on them, and function
patterns, written through partita.relay (names mirror TVM's test_dataflow_pattern.py; the
language, matching and plain rewrites are in test_dataflow_pattern_compat.py)."""

from __future__ import annotations

import numpy as np

from partita import relay
from partita.relay.dataflow_pattern import (
    AttrPattern,
    CallPattern,
    DFPatternCallback,
    FunctionPattern,
    dominates,
    is_constant,
    is_op,
    is_tuple_get_item,
    rewrite,
    wildcard,
)

K_ELEMWISE = 0  # TVM's OpPatternKind value, as TVM's test file defines it


def _v(name, shape=(2, 3), dtype="float32"):
    return relay.var(name, shape=shape, dtype=dtype)


def _elemwise_diamond(dtype=None, shape=None):
    unary = wildcard().has_attr({"TOpPattern": K_ELEMWISE})(wildcard())
    reduction = is_op("add")(wildcard(), wildcard())
    if dtype is not None:
        unary = unary.has_dtype(dtype)
    if shape is not None:
        reduction = reduction.has_shape(shape)
    return dominates(is_op("nn.conv2d")(wildcard(), wildcard()), unary, reduction)


def _conv_branches(deeper=False, single=False):
    inp, weight = _v("input", shape=(1, 3, 12, 12)), _v("weight", shape=(3, 3, 3, 3))
    conv = relay.nn.conv2d(inp, weight)
    relu = relay.nn.relu(relay.nn.relu(conv))
    if deeper:
        relu = relay.tanh(relu)
    if single:
        return relay.add(relu, relay.tanh(relu))
    return relay.add(relu, relay.nn.leaky_relu(conv, alpha=0.0))


def test_match_dominator():
    """Any elementwise op (TVM's TOpPattern attribute, partita's op kind) on the paths."""
    diamond = _elemwise_diamond()
    assert diamond.match(_conv_branches())
    assert diamond.match(_conv_branches(deeper=True))
    assert diamond.match(_conv_branches(single=True))


def test_match_typed_dominator():
    assert _elemwise_diamond("float32", [1, 3, 10, 10]).match(_conv_branches())


def test_no_match_typed_dominator():
    assert not _elemwise_diamond("float32", [1, 1, 10, 10]).match(_conv_branches())
    assert not _elemwise_diamond("float16", [1, 3, 10, 10]).match(_conv_branches())


def test_AttrPattern():  # noqa: N802 (TVM's name)
    op = is_op("add").has_attr({"TOpPattern": K_ELEMWISE})
    assert isinstance(op, AttrPattern) and op.attrs["TOpPattern"] == K_ELEMWISE


def test_not_match_dominator():
    """TVM's four non-diamonds: two different convs (a "fake diamond"), an add (broadcast, not
    elementwise) on the path, a relu reading the graph input instead of the conv, no conv."""
    diamond = _elemwise_diamond()
    shape_in, shape_w = (1, 3, 12, 12), (3, 3, 3, 3)
    conv1 = relay.nn.conv2d(_v("input1", shape=shape_in), _v("weight1", shape=shape_w))
    conv2 = relay.nn.conv2d(_v("input2", shape=shape_in), _v("weight2", shape=shape_w))
    assert not diamond.match(relay.add(relay.nn.relu(conv1), relay.nn.leaky_relu(conv2, alpha=0.0)))
    inp, weight = _v("input", shape=shape_in), _v("weight", shape=shape_w)
    conv = relay.nn.conv2d(inp, weight)
    relu = relay.nn.relu(conv)
    assert not diamond.match(relay.add(relay.add(relu, relu), relay.nn.leaky_relu(conv, alpha=0.0)))
    wide = _v("wide", shape=(1, 3, 10, 10))
    assert not diamond.match(relay.add(relay.nn.relu(wide), relay.nn.leaky_relu(conv, alpha=0.0)))
    relu = relay.nn.relu(relay.nn.relu(wide))
    assert not diamond.match(relay.add(relu, relay.tanh(relu)))


def test_match_fake_diamond():
    """The plain diamond pattern (one conv sub-pattern used twice) does not match two convs."""
    conv = is_op("nn.conv2d")(wildcard(), wildcard())
    diamond = is_op("add")(is_op("nn.relu")(conv), is_op("nn.leaky_relu")(conv))
    shape_in, shape_w = (1, 3, 12, 12), (3, 3, 3, 3)
    conv1 = relay.nn.conv2d(_v("input1", shape=shape_in), _v("weight1", shape=shape_w))
    conv2 = relay.nn.conv2d(_v("input2", shape=shape_in), _v("weight2", shape=shape_w))
    assert not diamond.match(relay.add(relay.nn.relu(conv1), relay.nn.leaky_relu(conv2, alpha=0.0)))


def test_not_match_dominator2():
    """The parent pattern matches at n8 and at n6 below it: one parent only, so no match."""
    pattern = dominates(
        is_op("nn.conv2d")(wildcard(), wildcard()),
        is_op("nn.relu")(wildcard()),
        is_op("add")(wildcard(), wildcard()),
    )
    x, w = _v("x", shape=(1, 3, 12, 12)), _v("w", shape=(3, 3, 1, 1))
    n6 = relay.nn.conv2d(x, w)
    n8 = relay.nn.conv2d(relay.tanh(n6), w)
    assert not pattern.match(relay.add(n8, relay.nn.relu(n6)))
    # the same graph with the second input from the parent itself is a diamond
    assert pattern.match(relay.add(n8, relay.nn.relu(n8)))


def test_partition_dominator():
    """A diamond wrapped whole, its inputs (the two products) as the function's parameters."""
    diamond = _elemwise_diamond()

    def generate(inp, weight):
        conv = relay.nn.conv2d(inp, weight)
        relu = relay.nn.relu(relay.nn.relu(conv))
        return relay.add(relu, relay.nn.leaky_relu(conv, alpha=0.0))

    inp, weight = _v("input", shape=(1, 3, 12, 12)), _v("weight", shape=(3, 3, 3, 3))
    part = diamond.partition(generate(relay.multiply(inp, inp), relay.multiply(weight, weight)))
    assert part.op.attrs["PartitionedFromPattern"] == "nn.conv2d_nn.relu_nn.relu_nn.leaky_relu_add_"
    i, w = _v("i", shape=(1, 3, 12, 12)), _v("w", shape=(3, 3, 3, 3))
    assert relay.structural_equal(part.op.body, generate(i, w), map_free_vars=True)
    assert relay.structural_equal(part.args[0], relay.multiply(inp, inp))


def _classic(inp, weight):
    conv = relay.nn.conv2d(inp, weight)
    relu = relay.nn.relu(relay.nn.relu(conv))
    return relay.add(relu, relay.nn.leaky_relu(conv, alpha=0.0))


def _deeper(inp, weight):
    conv = relay.nn.conv2d(inp, weight)
    relu = relay.tanh(relay.nn.relu(relay.nn.relu(conv)))
    return relay.add(relu, relay.nn.leaky_relu(conv, alpha=0.0))


def _single(inp, weight):
    relu = relay.nn.relu(relay.nn.relu(relay.nn.conv2d(inp, weight)))
    return relay.add(relu, relay.tanh(relu))


def _nested(inp, weight):
    conv = relay.nn.conv2d(inp, weight)
    relu = relay.nn.relu(conv)
    tanh = relay.tanh(relay.add(relu, relu))
    return relay.add(tanh, relay.nn.leaky_relu(conv, alpha=0.0))


def _fuzzy_diamond(inp=None, weight=None):
    unary = wildcard().has_attr({"TOpPattern": K_ELEMWISE})(wildcard()) | is_op("add")(
        wildcard(), wildcard()
    )
    conv = is_op("nn.conv2d")(inp or wildcard(), weight or wildcard())
    return dominates(conv, unary, is_op("add")(wildcard(), wildcard()))


class _DominatorRemoval(DFPatternCallback):
    def __init__(self):
        super().__init__()
        self.inp, self.weight = wildcard(), wildcard()
        self.pattern = _fuzzy_diamond(self.inp, self.weight)

    def callback(self, pre, post, node_map):
        return relay.nn.conv2d(node_map[self.inp][0], node_map[self.weight][0])


def test_quadruple_rewrite_dominator():
    inp, weight = _v("input", shape=(1, 3, 20, 20)), _v("weight", shape=(3, 3, 3, 3))
    out = _nested(_single(_deeper(_classic(inp, weight), weight), weight), weight)
    four = inp
    for _ in range(4):
        four = relay.nn.conv2d(four, weight)
    assert relay.structural_equal(rewrite(_DominatorRemoval(), out), four)


def test_quadruple_partition_dominator():
    inp, weight = _v("input", shape=(1, 3, 20, 20)), _v("weight", shape=(3, 3, 3, 3))
    out = _nested(_single(_deeper(_classic(inp, weight), weight), weight), weight)
    names = [
        "nn.conv2d_nn.relu_nn.relu_nn.leaky_relu_add_",
        "nn.conv2d_nn.relu_nn.relu_tanh_nn.leaky_relu_add_",
        "nn.conv2d_nn.relu_nn.relu_tanh_add_",
        "nn.conv2d_nn.relu_add_tanh_nn.leaky_relu_add_",
    ]
    call, seen = _fuzzy_diamond().partition(out), []
    while isinstance(call, relay.Call) and isinstance(call.op, relay.Function):
        seen.append(call.op)
        assert call.args[1] is weight
        call = call.args[0]
    assert call is inp
    assert [fn.attrs["PartitionedFromPattern"] for fn in seen] == names[::-1]
    for fn, make in zip(seen, (_nested, _single, _deeper, _classic)):
        assert relay.structural_equal(fn.body, make(*fn.params), map_free_vars=True)


class _Batchnorm(DFPatternCallback):
    """gamma * (x - mean) / sqrt(var + eps) + beta -> nn.batch_norm(...)[0]."""

    def __init__(self):
        super().__init__()
        self.x, self.var, self.mean = wildcard(), wildcard(), wildcard()
        self.beta, self.gamma, self.eps = wildcard(), wildcard(), is_constant()
        sqrt = is_op("sqrt")(self.var + self.eps)
        self.pattern = self.gamma * (self.x - self.mean) / sqrt + self.beta

    def callback(self, pre, post, node_map):
        get = lambda p: node_map[p][0]  # noqa: E731
        eps = float(get(self.eps).data)
        bn = relay.nn.batch_norm(
            get(self.x),
            get(self.gamma),
            get(self.beta),
            get(self.mean),
            get(self.var),
            epsilon=eps,
        ).astuple()
        return relay.TupleGetItem(bn, 0)


def _bn_vars():
    """(N, C) data: the (C,) statistics broadcast along axis 1 in the float form and are what
    nn.batch_norm takes, so both forms type."""
    x = _v("x", shape=(2, 3))
    return x, *(_v(n, shape=(3,)) for n in ("var", "mean", "beta", "gamma"))


def _bn_expr(x, var, mean, beta, gamma, sub=False):
    eps = relay.const(np.float32(1e-5))
    scaled = relay.divide(
        relay.multiply(gamma, relay.subtract(x, mean)), relay.sqrt(relay.add(var, eps))
    )
    return relay.subtract(scaled, beta) if sub else relay.add(scaled, beta)


def test_fuse_batchnorm():
    x, var, mean, beta, gamma = _bn_vars()
    out = rewrite(_Batchnorm(), _bn_expr(x, var, mean, beta, gamma))
    bn = relay.nn.batch_norm(x, gamma, beta, mean, var, epsilon=float(np.float32(1e-5))).astuple()
    assert relay.structural_equal(out, relay.TupleGetItem(bn, 0))
    import partita

    assert partita.infer_type(out).shape == (2, 3)


def test_no_fuse_batchnorm():
    x, var, mean, beta, gamma = _bn_vars()
    fake = _bn_expr(x, var, mean, beta, gamma, sub=True)
    assert rewrite(_Batchnorm(), fake) is fake


def test_fuse_double_batchnorm():
    x, var, mean, beta, gamma = _bn_vars()
    twice = _bn_expr(_bn_expr(x, var, mean, beta, gamma), var, mean, beta, gamma)
    eps = float(np.float32(1e-5))
    bn = relay.nn.batch_norm(x, gamma, beta, mean, var, epsilon=eps)[0]
    bn2 = relay.nn.batch_norm(bn, gamma, beta, mean, var, epsilon=eps)[0]
    assert relay.structural_equal(rewrite(_Batchnorm(), twice), bn2)


def test_partial_fuse_double_batchnorm():
    x, var, mean, beta, gamma = _bn_vars()
    fake = _bn_expr(x, var, mean, beta, gamma, sub=True)
    out = rewrite(_Batchnorm(), _bn_expr(fake, var, mean, beta, gamma))
    eps = float(np.float32(1e-5))
    bn2 = relay.nn.batch_norm(fake, gamma, beta, mean, var, epsilon=eps)[0]
    assert relay.structural_equal(out, bn2)


def test_partition_batchnorm():
    x, var, mean, beta, gamma = _bn_vars()
    part = _Batchnorm().pattern.partition(_bn_expr(x, var, mean, beta, gamma))
    assert part.op.attrs["PartitionedFromPattern"] == "subtract_multiply_add_sqrt_divide_add_"
    assert [a.name_hint for a in part.args] == ["gamma", "x", "mean", "var", "beta"]


def test_partition_double_batchnorm():
    x, var, mean, beta, gamma = _bn_vars()
    twice = _bn_expr(_bn_expr(x, var, mean, beta, gamma), var, mean, beta, gamma)
    outer = _Batchnorm().pattern.partition(twice)
    inner = outer.args[1]
    name = "subtract_multiply_add_sqrt_divide_add_"
    assert outer.op.attrs["PartitionedFromPattern"] == inner.op.attrs["PartitionedFromPattern"]
    assert outer.op.attrs["PartitionedFromPattern"] == name
    assert [a.name_hint for a in inner.args] == ["gamma", "x", "mean", "var", "beta"]
    assert outer.args[0] is gamma and list(outer.args[2:]) == [mean, var, beta]
    assert outer.op is not inner.op  # two copies of the function, as in TVM


def test_FunctionPattern():  # noqa: N802 (TVM's name)
    wc1, wc2 = wildcard(), wildcard()
    f = FunctionPattern([wc1, wc2], is_op("add")(wc1, wc2))
    assert isinstance(f, FunctionPattern) and f.params == (wc1, wc2)
    assert isinstance(f.body, CallPattern) and f.body.args == (wc1, wc2)


def test_match_func():
    x, y = _v("x"), _v("y")
    wc1, wc2 = wildcard(), wildcard()
    assert FunctionPattern([wc1, wc2], wc1 + wc2).match(relay.Function([x, y], relay.add(x, y)))
    any_function = FunctionPattern(None, wildcard())
    assert any_function.match(relay.Function([x], x))
    assert any_function.match(relay.Function([x, y], relay.add(x, y)))


def test_no_match_func():
    x, y = _v("x"), _v("y")
    wc1, wc2 = wildcard(), wildcard()
    pat = FunctionPattern([wc1, wc2], wc1 + wc2)
    assert not pat.match(relay.Function([x, y], relay.subtract(x, y)))
    assert not pat.match(relay.Function([x], x))


def test_match_func_attr():
    x, y = _v("x"), _v("y")
    f = relay.Function([x, y], relay.add(x, y)).with_attr("Composite", "add")
    assert wildcard().has_attr({"Composite": "add"}).match(f)


def test_no_match_func_attr():
    x, y = _v("x"), _v("y")
    pat = wildcard().has_attr({"Composite": "add"})
    assert not pat.match(relay.Function([x, y], relay.add(x, y)).with_attr("RandomTest", "add"))
    assert not pat.match(relay.Function([x, y], relay.add(x, y)).with_attr("Composite", "conv"))


def test_partition_function():
    """A call to a function matched by its body (FunctionPattern as the callee) is wrapped with
    the add after it; the function stays the callee inside, named as Relay names it."""
    x, w = _v("x", shape=(1, 2, 6, 6)), _v("w", shape=(2, 2, 3, 3))
    b = _v("b", shape=(1, 2, 4, 4))
    x1, w1 = _v("x1", shape=(1, 2, 6, 6)), _v("w1", shape=(2, 2, 3, 3))
    wc_x, wc_w, wc_b, wc_x1, wc_w1 = (wildcard() for _ in range(5))
    pattern = FunctionPattern([wc_x1, wc_w1], is_op("nn.conv2d")(wc_x1, wc_w1))(wc_x, wc_w) + wc_b
    func = relay.Function([x1, w1], relay.nn.conv2d(x1, w1))
    out = pattern.partition(relay.add(relay.add(relay.Call(func, [x, w]), b), b))
    x2, w2, b2 = _v("x2", shape=(1, 2, 6, 6)), _v("w2", shape=(2, 2, 3, 3)), _v("b2", (1, 2, 4, 4))
    func2 = relay.Function([x2, w2, b2], relay.add(relay.Call(func, [x2, w2]), b2)).with_attr(
        "PartitionedFromPattern", "nn.conv2d_FunctionCall_add_"
    )
    expected = relay.add(relay.Call(func2, [x, w, b]), b)
    assert relay.structural_equal(out, expected, map_free_vars=True)


def test_partition_option():
    x, w, b = _v("x", shape=(1, 2, 6, 6)), _v("w", shape=(2, 2, 3, 3)), _v("b", shape=(2,))

    def conv_bias_relu(x, w, b):
        return relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w), b))

    conv = is_op("nn.conv2d")(wildcard(), wildcard())
    pattern1 = is_op("nn.relu")(conv.optional(lambda c: is_op("nn.bias_add")(c, wildcard())))
    conv = is_op("nn.conv2d")(wildcard(), wildcard())
    pattern2 = is_op("nn.bias_add")(conv, wildcard()).optional(lambda c: is_op("nn.relu")(c))
    relu = conv_bias_relu(x, w, b)
    xf, wf, bf = _v("xf", shape=(1, 2, 6, 6)), _v("wf", shape=(2, 2, 3, 3)), _v("bf", shape=(2,))
    func = relay.Function([xf, wf, bf], conv_bias_relu(xf, wf, bf)).with_attr(
        "PartitionedFromPattern", "nn.conv2d_nn.bias_add_nn.relu_"
    )
    for pattern in (pattern1, pattern2):
        assert pattern.match(relu)
        expected = relay.Call(func, [x, w, b])
        assert relay.structural_equal(pattern.partition(relu), expected, map_free_vars=True)


def test_overlappting_partitions():  # TVM's spelling
    """Two items of one batch_norm tuple: the matches overlap, so nothing is wrapped."""
    x, var, mean, beta, gamma = _bn_vars()
    bn = relay.nn.batch_norm(x, gamma, beta, mean, var, epsilon=1e-5).astuple()
    add = relay.add(relay.TupleGetItem(bn, 0), relay.TupleGetItem(bn, 0))
    bn_node = is_op("nn.batch_norm")(*(wildcard() for _ in range(5)))
    assert is_tuple_get_item(bn_node, 0).partition(add) is add


def test_fuse_batchnorm_commutation():
    """beta + ..., (gamma * d) / s and gamma * (d / s) all match the batch-norm pattern (TVM's
    matcher commutes add and re-associates multiply/divide)."""
    x, var, mean, beta, gamma = _bn_vars()
    eps = relay.const(np.float32(1e-5))
    d, s = relay.subtract(x, mean), relay.sqrt(relay.add(var, eps))
    forms = [
        relay.add(beta, relay.divide(relay.multiply(gamma, d), s)),
        relay.add(relay.divide(relay.multiply(gamma, d), s), beta),
        relay.add(relay.multiply(gamma, relay.divide(d, s)), beta),
        relay.add(relay.multiply(relay.divide(d, s), gamma), beta),
    ]
    eps_value = float(np.float32(1e-5))
    bn = relay.nn.batch_norm(x, gamma, beta, mean, var, epsilon=eps_value).astuple()
    for form in forms:
        assert relay.structural_equal(rewrite(_Batchnorm(), form), relay.TupleGetItem(bn, 0))


def test_division_pattern_is_reassociated_both_ways():
    a, b, c = _v("a"), _v("b"), _v("c")
    wa, wb, wc = wildcard(), wildcard(), wildcard()
    div_of_mul = (wa * wb) / wc
    assert div_of_mul.match(relay.multiply(a, relay.divide(b, c)))
    assert div_of_mul.match(relay.multiply(relay.divide(b, c), a))
    mul_of_div = wa * (wb / wc)
    assert mul_of_div.match(relay.divide(relay.multiply(a, b), c))
    # no divide inside, or another op: nothing to regroup
    assert not div_of_mul.match(relay.multiply(a, relay.add(b, c)))
    assert not ((wa + wb) / wc).match(relay.multiply(a, relay.divide(b, c)))


def test_not_fuse_multi_diamond():
    """The diamond add(relu(conv), leaky_relu(conv)) feeds another add with the conv: the
    outer add is not the diamond."""
    conv = is_op("nn.conv2d")(wildcard(), wildcard())
    diamond = is_op("add")(is_op("nn.relu")(conv), is_op("nn.leaky_relu")(conv))
    inp, weight = _v("input", shape=(1, 3, 12, 12)), _v("weight", shape=(3, 3, 3, 3))
    c = relay.nn.conv2d(inp, weight)
    inner = relay.add(relay.nn.relu(c), relay.nn.leaky_relu(c, alpha=0.0))
    assert diamond.match(inner)
    assert not diamond.match(relay.add(inner, c))


def test_matched_outside_but_dominated():
    """conv -> add -> multiply matched while the add also feeds a sigmoid that only flows into
    the multiply: the partition takes the sigmoid as an input and the conv and add are kept
    outside for it (computed twice, as TVM does); the bits are unchanged."""
    data, weight = _v("data", shape=(1, 4, 8, 8)), _v("weight", shape=(4, 4, 3, 3))
    bias = _v("bias", shape=(1, 4, 8, 8))
    conv = relay.nn.conv2d(data, weight, padding=(1, 1))
    add = relay.add(conv, bias)
    expr = relay.multiply(add, relay.sigmoid(add))
    pattern = is_op("multiply")(
        is_op("add")(is_op("nn.conv2d")(wildcard(), wildcard()), wildcard()), wildcard()
    )
    out = pattern.partition(expr)
    assert out.op.attrs["PartitionedFromPattern"] == "nn.conv2d_add_multiply_"
    assert [a.short() if not isinstance(a, relay.Var) else a.name_hint for a in out.args][:3] == [
        "data",
        "weight",
        "bias",
    ]
    assert out.args[3].op.name == "sigmoid"
    rng = np.random.default_rng(0)
    feed = {
        n: rng.standard_normal(v.type_annotation.shape).astype("float32")
        for n, v in (("data", data), ("weight", weight), ("bias", bias))
    }
    got = relay.interpret(relay.IRModule.from_expr(out), feed)[0]
    np.testing.assert_array_equal(got, relay.interpret(relay.IRModule.from_expr(expr), feed)[0])
    # an outside user that reaches the output on its own still refuses the match
    both = relay.Tuple([relay.multiply(add, relay.sigmoid(add)), relay.sigmoid(add)])
    assert relay.structural_equal(pattern.partition(both), both)
