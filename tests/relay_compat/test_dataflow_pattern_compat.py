"""TVM's dataflow-pattern behaviours, written through partita.relay (names mirror TVM's tests)."""

from __future__ import annotations

import numpy as np

from partita import relay
from partita.relay.dataflow_pattern import (
    AttrPattern,
    CallPattern,
    DFPatternCallback,
    FunctionPattern,
    dominates,
    has_attr,
    is_constant,
    is_expr,
    is_op,
    is_tuple,
    is_tuple_get_item,
    is_var,
    rewrite,
    wildcard,
)


def _v(name, shape=(2, 3), dtype="float32"):
    return relay.var(name, shape=shape, dtype=dtype)


def test_expr_pattern():
    c = relay.const(1.0)
    assert is_expr(c).match(c) and not is_expr(c).match(relay.const(2.0))


def test_var_pattern():
    x, y = _v("x"), _v("y")
    assert is_var("x").match(x) and not is_var("x").match(y) and is_var().match(y)


def test_constant_pattern():
    assert is_constant().match(relay.const(np.ones((2, 2), "float32")))
    assert not is_constant().match(_v("x"))


def test_wildcard_pattern():
    assert wildcard().match(_v("x")) and wildcard().match(relay.const(1))


def test_match_call():
    x, y = _v("x"), _v("y")
    assert is_op("add")(wildcard(), wildcard()).match(relay.add(x, y))
    assert not is_op("add")(wildcard(), wildcard()).match(relay.multiply(x, y))


def test_match_call_commutive():
    x, y = _v("x"), _v("y")
    pat = is_op("add")(is_var("x"), is_var("y"))
    assert pat.match(relay.add(x, y)) and pat.match(relay.add(y, x))


def test_no_match_call_commutive():
    x, y = _v("x"), _v("y")
    pat = is_op("subtract")(is_var("x"), is_var("y"))
    assert pat.match(relay.subtract(x, y)) and not pat.match(relay.subtract(y, x))


def test_match_op_or():
    x, y = _v("x"), _v("y")
    pat = (is_op("add") | is_op("multiply"))(wildcard(), wildcard())
    assert pat.match(relay.add(x, y)) and pat.match(relay.multiply(x, y))
    assert not pat.match(relay.subtract(x, y))


def test_match_tuple():
    x, y = _v("x"), _v("y")
    t = relay.Tuple([x, y])
    assert is_tuple([is_var("x"), wildcard()]).match(t)
    assert is_tuple_get_item(is_tuple([wildcard(), wildcard()]), 1).match(relay.TupleGetItem(t, 1))
    assert not is_tuple_get_item(wildcard(), 0).match(relay.TupleGetItem(t, 1))


def test_match_option():
    x = _v("x")
    pat = is_op("nn.relu")(wildcard()).optional(lambda p: is_op("tanh")(p))
    assert pat.match(relay.nn.relu(x)) and pat.match(relay.tanh(relay.nn.relu(x)))
    assert not pat.match(relay.sigmoid(relay.nn.relu(x)))


def test_match_dtype_and_shape():
    typed = relay.transform.InferType()(
        relay.IRModule.from_expr(relay.nn.relu(_v("x", dtype="int8")))
    )
    body = typed["main"].body
    assert wildcard().has_dtype("int8").match(body)
    assert not wildcard().has_dtype("float32").match(body)
    assert wildcard().has_shape((2, 3)).match(body)
    assert not wildcard().has_shape((3, 2)).match(body)


def test_match_call_attr():
    x = _v("x", shape=(1, 4, 4, 2))
    w = relay.const(np.ones((1, 1, 2, 2), "float32"))
    conv = relay.nn.conv2d(x, w, data_layout="NHWC", kernel_layout="HWIO")
    pat = is_op("nn.conv2d")(wildcard(), wildcard())
    assert pat.has_attr({"data_layout": "NHWC"}).match(conv)
    assert not pat.has_attr({"data_layout": "NCHW"}).match(conv)
    assert has_attr({"kernel_layout": "HWIO"}, pat).match(conv)


def _diamond(x):
    r = relay.nn.relu(x)
    return relay.add(relay.tanh(r), relay.sigmoid(r))


def test_match_diamond():
    path = is_op("tanh")(wildcard()) | is_op("sigmoid")(wildcard())
    pat = dominates(is_op("nn.relu")(wildcard()), path, is_op("add")(wildcard(), wildcard()))
    assert pat.match(_diamond(_v("x")))


def test_no_match_diamond():
    x = _v("x")
    r = relay.nn.relu(x)
    expr = relay.add(relay.tanh(r), relay.exp(r))  # exp is not a path op
    add = is_op("add")(wildcard(), wildcard())
    pat = dominates(is_op("nn.relu")(wildcard()), is_op("tanh")(wildcard()), add)
    assert not pat.match(expr)


class _AddToSub(DFPatternCallback):
    def __init__(self):
        super().__init__()
        self.a, self.b = wildcard(), wildcard()
        self.pattern = is_op("add")(self.a, self.b)

    def callback(self, pre, post, node_map):
        return relay.subtract(node_map[self.a][0], node_map[self.b][0])


def test_rewrite():
    x, y = _v("x"), _v("y")
    out = rewrite(_AddToSub(), relay.add(x, y))
    relay.assert_structural_equal(out, relay.subtract(x, y))


def test_nested_rewrite():
    x, y = _v("x"), _v("y")
    out = rewrite(_AddToSub(), relay.add(relay.add(x, y), y))
    relay.assert_structural_equal(out, relay.subtract(relay.subtract(x, y), y))


class _MulOneSimplify(DFPatternCallback):
    def __init__(self):
        super().__init__()
        self.x = wildcard()
        self.pattern = is_op("multiply")(self.x, is_expr(relay.const(1.0)))

    def callback(self, pre, post, node_map):
        return node_map[self.x][0]


def test_algebraic_simplify():
    x = _v("x")
    expr = relay.nn.relu(relay.multiply(x, relay.const(1.0)))
    relay.assert_structural_equal(rewrite(_MulOneSimplify(), expr), relay.nn.relu(x))


def test_partition_check():
    x = _v("x")
    expr = relay.nn.relu(relay.add(x, relay.const(1.0)))
    pat = is_op("nn.relu")(is_op("add")(wildcard(), is_constant()))
    wrapped = pat.partition(expr, {"Composite": "addrelu"})
    assert isinstance(wrapped.op, relay.Function)
    assert wrapped.op.attrs["Composite"] == "addrelu"
    refused = pat.partition(expr, {"Composite": "addrelu"}, check=lambda e: False)
    relay.assert_structural_equal(refused, expr)


def test_rewrite_once():
    x = _v("x")

    class ReluTwice(DFPatternCallback):
        def __init__(self):
            super().__init__(rewrite_once=True)
            self.pattern = is_op("nn.relu")(wildcard())

        def callback(self, pre, post, node_map):
            return relay.nn.relu(post)

    out = rewrite(ReluTwice(), relay.nn.relu(x))
    relay.assert_structural_equal(out, relay.nn.relu(relay.nn.relu(x)))


def test_match_type():
    typed = relay.transform.InferType()(relay.IRModule.from_expr(relay.nn.relu(_v("x"))))
    body = typed["main"].body
    assert wildcard().has_type(relay.TensorType((2, 3), "float32")).match(body)
    assert not wildcard().has_type(relay.TensorType((2, 3), "int8")).match(body)


def test_match_const():
    x = _v("x", shape=(1, 2, 4, 4))
    w = relay.const(np.ones((2, 2, 1, 1), "float32"))
    pat = is_op("nn.conv2d")(wildcard(), is_constant())
    assert pat.match(relay.nn.conv2d(x, w))
    assert not pat.match(relay.nn.conv2d(x, _v("w", shape=(2, 2, 1, 1))))


def _conv(x, w):
    return relay.nn.conv2d(x, w)


def test_at_most_one_parent():
    x, w = _v("x", shape=(1, 2, 4, 4)), _v("w", shape=(2, 2, 1, 1))
    top = _conv(x, w)
    lower = _conv(relay.tanh(top), w)  # a second parent behind a non-path node
    expr = relay.add(relay.nn.relu(lower), relay.nn.relu(top))
    pat = dominates(
        is_op("nn.conv2d")(wildcard(), wildcard()),
        is_op("nn.relu")(wildcard()),
        is_op("add")(wildcard(), wildcard()),
    )
    assert not pat.match(expr)


def test_partition_overused():
    x, w = _v("x", shape=(1, 2, 4, 4)), _v("w", shape=(2, 2, 1, 1))
    conv = _conv(x, w)
    expr = relay.add(relay.nn.relu(conv), conv)  # conv escapes the match: no partition
    pat = is_op("nn.relu")(is_op("nn.conv2d")(wildcard(), wildcard()))
    relay.assert_structural_equal(pat.partition(expr), expr)


def test_double_partition():
    x = _v("x", shape=(1, 2, 4, 4))
    w1, w2 = _v("w1", shape=(2, 2, 1, 1)), _v("w2", shape=(2, 2, 1, 1))
    b1, b2 = _v("b1", shape=(2,)), _v("b2", shape=(2,))
    first = relay.nn.relu(relay.nn.bias_add(_conv(x, w1), b1))
    expr = relay.nn.bias_add(_conv(first, w2), b2)
    conv_bias = is_op("nn.bias_add")(is_op("nn.conv2d")(wildcard(), wildcard()), wildcard())
    out = is_op("nn.relu")(conv_bias).partition(expr, {"Composite": "conv_bias_relu"})
    out = conv_bias.partition(out, {"Composite": "conv_bias"})
    assert out.op.attrs["Composite"] == "conv_bias"
    assert out.args[0].op.attrs["Composite"] == "conv_bias_relu"


def test_partition_fuzzy_tuple():
    x, y = _v("x"), _v("y")
    pat = is_op("concatenate")(is_tuple(None))
    for fields in ([x], [x, y], [x, y, relay.add(x, y)]):
        out = pat.partition(relay.concatenate(fields, axis=0))
        assert isinstance(out.op, relay.Function) and len(out.args) == len(fields)


def test_match_call_attr_dtype():
    x = _v("x", dtype="int8")
    pat = is_op("cast")(wildcard()).has_attr({"dtype": "float32"})
    assert pat.match(relay.cast(x, dtype="float32"))
    assert not pat.match(relay.cast(x, dtype="int32"))


def test_rewrite_func():
    x, y = _v("x"), _v("y")
    p, q = _v("p"), _v("q")
    fn = relay.Function([p, q], relay.nn.relu(relay.multiply(p, q)))
    out = rewrite(_AddToSub(), relay.add(relay.Call(fn, [x, y]), y))
    assert is_op("subtract")(wildcard(), wildcard()).match(out)


def test_rewrite_func_with_attr():
    a, b, p, q = _v("a"), _v("b"), _v("p"), _v("q")
    fn = relay.Function([p, q], relay.add(p, q), attrs={"Composite": "add"})
    expr = relay.abs(relay.Call(fn, [a, b]))

    class Inline(DFPatternCallback):
        def __init__(self):
            super().__init__()
            self.pattern = wildcard().has_attr({"Composite": "add"})(wildcard(), wildcard())

        def callback(self, pre, post, node_map):
            return relay.add(post.args[0], post.args[1])

    out = rewrite(Inline(), expr)
    assert is_op("abs")(is_op("add")(wildcard(), wildcard())).match(out)


def test_partition_check_types():
    x, w = _v("x", shape=(1, 2, 4, 4)), _v("w", shape=(2, 2, 1, 1))
    mod = relay.transform.InferType()(relay.IRModule.from_expr(relay.nn.relu(_conv(x, w))))
    body = mod["main"].body
    pat = is_op("nn.relu")(is_op("nn.conv2d")(wildcard(), wildcard()))

    def nchw_batch_one(pre):
        conv = pre.args[0]
        return conv.attrs.data_layout == "NCHW" and conv.checked_type.shape[0] == 1

    out = pat.partition(body, check=nchw_batch_one)
    assert out.op.attrs["PartitionedFromPattern"] == "nn.conv2d_nn.relu_"
    relay.assert_structural_equal(pat.partition(body, check=lambda pre: False), body)


def test_partition_parallel_branch_with_same_input():
    x, w = _v("x", shape=(1, 2, 4, 4)), _v("w", shape=(2, 2, 1, 1))
    left, right = _v("l", shape=(1, 2, 4, 4)), _v("r", shape=(1, 2, 4, 4))
    conv = _conv(x, w)
    expr = relay.add(relay.multiply(left, conv), relay.add(conv, right))
    pat = is_op("add")(
        is_op("multiply")(wildcard(), wildcard()), is_op("add")(wildcard(), wildcard())
    )
    out = pat.partition(expr)
    assert len(out.op.params) == 3  # conv is one parameter, not two
    assert [a.name_hint if isinstance(a, relay.Var) else "conv" for a in out.args] == [
        "l",
        "conv",
        "r",
    ]


def test_partition_constant_embedding():
    x, b = _v("x", shape=(1, 2, 4, 4)), _v("b", shape=(2,))
    wc = relay.const(np.ones((2, 2, 1, 1), "float32"))
    expr = relay.nn.relu(relay.nn.bias_add(_conv(x, wc), b))
    conv = is_op("nn.conv2d")
    lifted = is_op("nn.relu")(is_op("nn.bias_add")(conv(wildcard(), wildcard()), wildcard()))
    embedded = is_op("nn.relu")(is_op("nn.bias_add")(conv(wildcard(), is_constant()), wildcard()))
    assert len(lifted.partition(expr).args) == 3  # a wildcard-matched constant is lifted
    assert len(embedded.partition(expr).args) == 2  # an is_constant() match stays inside


K_ELEMWISE, K_BROADCAST = 0, 1  # TVM's OpPatternKind values, as TVM's test file defines them


def test_match_op_attr():
    pat = is_op("add").has_attr({"TOpPattern": K_BROADCAST})(wildcard(), wildcard())
    x, y = _v("x"), _v("y")
    assert pat.match(relay.add(x, y))


def test_no_match_op_attr():
    x, y = _v("x", shape=(2, 3)), _v("y", shape=(4, 3))
    dense = is_op("nn.dense").has_attr({"TOpPattern": K_ELEMWISE})(wildcard(), wildcard())
    assert not dense.match(relay.nn.dense(x, y))
    add = is_op("add").has_attr({"TOpPattern": K_BROADCAST})(wildcard(), wildcard())
    assert not add.match(relay.subtract(x, x))


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
    """TVM's cases but two — the "fake diamond" (two convs) and the relu reading the graph input
    — which partita matches: a child's inputs that never reach the parent are left free (a
    listed difference)."""
    diamond = _elemwise_diamond()
    inp, weight = _v("input", shape=(1, 3, 12, 12)), _v("weight", shape=(3, 3, 3, 3))
    # an add (broadcast, not elementwise) on the path
    conv = relay.nn.conv2d(inp, weight)
    relu = relay.nn.relu(conv)
    relu = relay.add(relu, relu)
    assert not diamond.match(relay.add(relu, relay.nn.leaky_relu(conv, alpha=0.0)))
    # no conv at all
    wide = _v("wide", shape=(1, 3, 10, 10))
    relu = relay.nn.relu(relay.nn.relu(wide))
    assert not diamond.match(relay.add(relu, relay.tanh(relu)))


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
        )
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
    bn = relay.nn.batch_norm(x, gamma, beta, mean, var, epsilon=float(np.float32(1e-5)))
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
    bn = relay.TupleGetItem(relay.nn.batch_norm(x, gamma, beta, mean, var, epsilon=eps), 0)
    bn2 = relay.TupleGetItem(relay.nn.batch_norm(bn, gamma, beta, mean, var, epsilon=eps), 0)
    assert relay.structural_equal(rewrite(_Batchnorm(), twice), bn2)


def test_partial_fuse_double_batchnorm():
    x, var, mean, beta, gamma = _bn_vars()
    fake = _bn_expr(x, var, mean, beta, gamma, sub=True)
    out = rewrite(_Batchnorm(), _bn_expr(fake, var, mean, beta, gamma))
    eps = float(np.float32(1e-5))
    bn2 = relay.TupleGetItem(relay.nn.batch_norm(fake, gamma, beta, mean, var, epsilon=eps), 0)
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
    bn = relay.nn.batch_norm(x, gamma, beta, mean, var, epsilon=1e-5)
    add = relay.add(relay.TupleGetItem(bn, 0), relay.TupleGetItem(bn, 0))
    bn_node = is_op("nn.batch_norm")(*(wildcard() for _ in range(5)))
    assert is_tuple_get_item(bn_node, 0).partition(add) is add
