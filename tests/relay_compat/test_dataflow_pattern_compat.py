"""TVM's dataflow-pattern behaviours — the language, matching, rewrites and partitions — written
through partita.relay (names mirror TVM's tests; dominators, the batch-norm fusion and function
patterns are in test_dataflow_dominator_compat.py)."""

from __future__ import annotations

import numpy as np

from partita import relay
from partita.relay.dataflow_pattern import (
    DFPatternCallback,
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


def test_match_op():
    """An op is an expression: is_op matches the op itself (TVM's relay.op.op.get)."""
    assert is_op("add").match(relay.op.op.get("add"))
    assert wildcard().match(relay.op.get("add"))


def test_no_match_op():
    assert not is_op("add").match(relay.op.op.get("subtract"))


def test_match_op_alternatives_against_an_op():
    """TVM's test_match_op_or: an alternation of ops matched against an op."""
    add_or_sub = is_op("add") | is_op("subtract")
    assert add_or_sub.match(relay.op.op.get("add"))
    assert add_or_sub.match(relay.op.op.get("subtract"))
    assert not add_or_sub.match(relay.op.op.get("multiply"))


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


def test_match_call_with_any_arguments():
    """``p(None)``: a call with any number of arguments (TVM's spelling)."""
    x, y = _v("x"), _v("y")
    any_call = wildcard()(None)
    assert any_call.match(relay.nn.relu(x)) and any_call.match(relay.add(x, y))
    assert not any_call.match(x)
    assert is_op("add")(None).match(relay.add(x, y))
    assert not is_op("add")(None).match(relay.multiply(x, y))
    assert str(is_op("add")(None)) == "is_op('add')(None)"
