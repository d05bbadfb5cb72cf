"""rewrite(): DFPatternCallback and RewriteTable, fixed point, trace, types, spans, semantics."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from partita.patterns import (
    DFPatternCallback,
    PatternError,
    RewriteError,
    RewriteTable,
    constants,
    explain,
    find,
    is_constant,
    is_op,
    is_var,
    partition,
    rewrite,
    rewrite_pass,
    wildcard,
)
from pattern_graphs import (
    assert_same_outputs,
    conv_block,
    count_ops,
    int8_input,
    module,
    op,
    random_int8,
)

import partita as P
from partita.ir import Function, IRModule, Span, assert_structural_equal, const, var
from partita.ir.nodes import Call

relu, neg, add, clip = op("nn.relu"), op("negative"), op("add"), op("clip")


class CollapseRelu(DFPatternCallback):
    """relu(relu(x)) -> relu(x)"""

    def __init__(self):
        super().__init__()
        self.x = wildcard()
        self.inner = is_op("nn.relu")(self.x)
        self.pattern = is_op("nn.relu")(self.inner)

    def callback(self, pre, post, node_map):
        assert node_map[self.inner][0] is post.args[0]
        return node_map[self.inner][0]


def relu_chain(x, n):
    for _ in range(n):
        x = relu(x)
    return x


def test_callback_rewrites_to_a_fixed_point():
    x = var("x", (1, 4), "float32")
    out = rewrite(CollapseRelu(), relu_chain(x, 9))
    assert_structural_equal(out, relu(x))
    assert out.checked_type == P.TensorType((1, 4), "float32")  # re-typed


def test_table_passes_named_captures_and_none_falls_through():
    x = var("x", (1, 4), "float32")
    seen = []

    def never(x):
        seen.append(x)
        return None

    table = RewriteTable(
        [
            (is_op("negative")(is_op("negative")(wildcard("x"))), never),
            (is_op("negative")(is_op("negative")(wildcard("x"))), lambda x: x),
        ]
    )
    out = table(relu(neg(neg(x))))
    assert_structural_equal(out, relu(x))
    assert seen == [x]


def test_table_is_indexed_by_root_op():
    table = RewriteTable(
        [
            (is_op("nn.relu")(wildcard("x")), lambda x: None),
            (is_op("negative")(wildcard("x")), lambda x: None),
            (wildcard("x").where(lambda e: False), lambda x: None),
        ]
    )
    x = var("x", (1, 4), "float32")
    assert [r.name for r in table.index.for_node(relu(x))] == ["RewriteTable[0]", "RewriteTable[2]"]
    assert [r.name for r in table.index.for_node(x)] == ["RewriteTable[2]"]


def test_table_checks_capture_names_against_the_function():
    with pytest.raises(PatternError, match="takes y, but its pattern captures only x"):
        RewriteTable([(is_op("nn.relu")(wildcard("x")), lambda x, y: x)])
    optional_ok = RewriteTable([(is_op("nn.relu")(wildcard("x")), lambda x, y=None: x)])
    assert len(optional_ok) == 1


def test_unbound_optional_captures_arrive_as_none():
    x = var("x", (1, 4), "float32")
    got = []

    def record(x, c=None):
        got.append(c)
        return None

    p = is_op("nn.relu")(wildcard("x")).optional(lambda r: is_op("negative")(r).named("c"))
    RewriteTable([(p, record)])(relu(x))
    assert got == [None]


def test_rules_returning_garbage_fail_clearly():
    x = var("x", (1, 4), "float32")
    with pytest.raises(RewriteError, match="rule bad returned 3"):

        def bad(x):
            return 3

        RewriteTable([(is_op("nn.relu")(wildcard("x")), bad)])(relu(x))

    def broken(x):
        return x.attrs.nothing

    with pytest.raises(RewriteError, match="rule broken raised on a call to nn.relu: Attribute"):
        RewriteTable([(is_op("nn.relu")(wildcard("x")), broken)])(relu(relu(x)))

    class NoPattern(DFPatternCallback):
        pass

    with pytest.raises(PatternError, match="NoPattern.pattern must be a pattern"):
        rewrite(NoPattern(), relu(x))


def test_rules_that_undo_each_other_fail_naming_them():
    x, y = var("x", (1, 4), "float32"), var("y", (1, 4), "float32")

    def swap(a, b):
        return op("subtract")(b, a)

    table = RewriteTable([(is_op("subtract")(wildcard("a"), wildcard("b")), swap)])
    with pytest.raises(RewriteError, match=r"did not converge after 5 iterations.*swap \(1 times"):
        rewrite(table, op("subtract")(x, y), max_iterations=5)


def test_rebuilding_the_same_node_is_not_a_rewrite():
    x = var("x", (1, 4), "float32")
    table = RewriteTable([(is_op("nn.relu")(wildcard("x")), lambda x: relu(x))])
    e = relu(x)
    assert table(e) is e


def test_trace_lists_which_rule_fired_where(caplog):
    x = var("x", (1, 4), "float32")
    e = relu(neg(neg(x), span=Span(4, "NEG", "n")))
    table = RewriteTable(
        [(is_op("negative")(is_op("negative")(wildcard("x"))), lambda x: x, "drop_double_negation")]
    )
    log = []
    table(e, trace=log)
    assert len(log) == 1
    assert log[0].rule == "drop_double_negation" and "NEG #4" in log[0].where
    assert str(log[0]).startswith("[0] drop_double_negation: a call to negative (NEG #4")
    with caplog.at_level(logging.INFO, logger="partita.patterns"):
        table(e, trace=True)
    assert "drop_double_negation" in caplog.text


class TypedFold(DFPatternCallback):
    """clip(x) over the whole int8 range -> x (needs x's dtype)."""

    def __init__(self):
        super().__init__(require_type=True)
        self.pattern = is_op("clip")(wildcard())

    def callback(self, pre, post, node_map):
        info = np.iinfo(pre.args[0].checked_type.dtype)
        if pre.attrs.a_min <= info.min and pre.attrs.a_max >= info.max:
            return post.args[0]
        return post


def test_require_type_gives_callbacks_types():
    x = var("x", (1, 4), "int8")
    full = clip(relu(x), a_min=-128.0, a_max=127.0)
    narrow = clip(relu(x), a_min=0.0, a_max=6.0)
    assert_structural_equal(rewrite(TypedFold(), full), relu(x))
    assert rewrite(TypedFold(), narrow) is narrow


def test_rewrite_once():
    class Wrap(DFPatternCallback):
        def __init__(self):
            super().__init__(rewrite_once=True)
            self.pattern = is_op("nn.relu")(wildcard())

        def callback(self, pre, post, node_map):
            return relu(post)

    x = var("x", (1, 4), "float32")
    assert_structural_equal(rewrite(Wrap(), relu(x)), relu(relu(x)))


def test_spans_are_kept_and_new_nodes_inherit_the_root_span():
    x = var("x", (1, 4), "float32")
    e = relu(neg(neg(x, span=Span(1, "NEG")), span=Span(2, "NEG")), span=Span(3, "RELU"))
    table = RewriteTable(
        [(is_op("negative")(is_op("negative")(wildcard("x"))), lambda x: op("abs")(x))]
    )
    out = table(e)
    assert out.span == Span(3, "RELU")
    assert out.args[0].op.name == "abs" and out.args[0].span == Span(2, "NEG")


def test_a_shared_interior_blocks_the_match_as_in_tvm():
    x = var("x", (1, 4), "float32")
    inner = neg(x)
    e = add(neg(inner), inner)  # inner is used inside and outside neg(neg(x))
    p = is_op("negative")(is_op("negative")(wildcard("x")))
    table = RewriteTable([(p, lambda x: x)])
    assert table(e) is e
    why = explain(p, e.args[0], within=e)
    assert why.matched and "also used by a call to add" in why.refused


def test_outermost_match_is_taken_first():
    x = int8_input()
    y = conv_block(x, 4, 4, 1)  # conv -> bias -> requantize -> clip
    core = is_op("qnn.requantize")(wildcard(), *constants(4))
    p = core.optional(lambda r: is_op("clip")(r))
    hits = []

    class Record(DFPatternCallback):
        def __init__(self):
            super().__init__()
            self.pattern = p

        def callback(self, pre, post, node_map):
            hits.append(pre.op.name)
            return post

    rewrite(Record(), y)
    assert hits == ["clip"]  # one match, rooted at the clip, not a second one at requantize


def test_rewrite_of_modules_and_functions():
    x = var("x", (1, 4), "float32")
    fn = Function([x], relu(relu(x)))
    mod = IRModule({"main": fn, "other": Function([x], relu(relu(relu(x))))})
    out = rewrite([CollapseRelu()], mod)
    assert isinstance(out, IRModule) and set(out.functions) == {"main", "other"}
    assert count_ops(out["main"], "nn.relu") == 1 and count_ops(out["other"], "nn.relu") == 1
    out_fn = rewrite(CollapseRelu(), fn)
    assert isinstance(out_fn, Function) and out_fn.params == fn.params


def test_composite_bodies_are_left_alone():
    x, p = var("x", (1, 4), "float32"), var("p", (1, 4), "float32")
    comp = Function([p], relu(relu(p)), attrs={"Composite": "npu.relu"})
    e = relu(relu(Call(comp, [x])))
    out = rewrite(CollapseRelu(), e)
    assert out.op.name == "nn.relu" and out.args[0].op is comp


def test_node_map_answers_capture_names():
    class ByName(DFPatternCallback):
        def __init__(self):
            super().__init__()
            self.pattern = is_op("negative")(is_op("negative")(wildcard("x")))

        def callback(self, pre, post, node_map):
            with pytest.raises(PatternError, match="no capture named 'y'"):
                node_map["y"]
            return node_map["x"]

    x = var("x", (1, 4), "float32")
    assert rewrite(ByName(), neg(neg(x))) is x


# ---- semantics -----------------------------------------------------------------------------------


def drop_full_range_clip(x, rq):
    """clip(requantize(x) to int8) with bounds covering int8 -> requantize(x)"""
    return rq


def test_semantics_preserving_rewrite_keeps_the_bits():
    x = int8_input()
    y = conv_block(conv_block(x, 4, 8, 1), 8, 4, 2)
    mod = module(y)
    rq = is_op("qnn.requantize")(wildcard("x"), *constants(4)).named("rq")
    clip_p = is_op("clip")(rq).has_attr({"a_min": -128.0, "a_max": 127.0}).has_dtype("int8")
    out = RewriteTable([(clip_p, drop_full_range_clip)])(mod)
    assert count_ops(mod, "clip") == 2 and count_ops(out, "clip") == 0
    for _ in range(3):
        assert_same_outputs(mod, out, {"x": random_int8((1, 6, 6, 4))})


def test_const_folding_rule_keeps_the_bits():
    x = var("x", (1, 4), "int8")
    data = const(np.array([[0.3, -1.7, 12.0, 0.05]], np.float32))
    q = op("qnn.quantize")(data, const(np.float32(0.1)), const(np.int32(3)), out_dtype="int8")
    e = add(x, q)

    def fold(c, s, z, q):
        return const(P.interpret(q, {})[0])

    p = is_op("qnn.quantize")(
        is_constant().named("c"), is_constant().named("s"), is_constant().named("z")
    ).named("q")
    out = RewriteTable([(p, fold)])(e)
    assert count_ops(out, "qnn.quantize") == 0
    assert_same_outputs(e, out, {"x": np.array([[1, -2, 3, 100]], np.int8)})


@pytest.mark.slow
def test_a_100k_chain_rewrites_and_partitions_without_recursion():
    x = var("x", (1, 4), "float32")
    e = x
    for _ in range(100_000):
        e = relu(e)
    # The one match is at the bottom, so the whole chain above it is rebuilt.
    bottom = is_op("nn.relu")(is_var().named("x"))
    out = RewriteTable([(bottom, lambda x: neg(x))])(e)
    assert count_ops(out, "negative") == 1 and count_ops(out, "nn.relu") == 99_999
    parted = partition(bottom, e)
    assert len(find(bottom, e)) == 1 and isinstance(parted.op, op("nn.relu").__class__)


def test_commuted_qnn_add_keeps_each_operand_with_its_parameters():
    a, b = var("a", (1, 8), "int8"), var("b", (1, 8), "int8")
    f32, i32 = np.float32, np.int32
    params = [const(f32(0.05)), const(i32(-3)), const(f32(0.2)), const(i32(7))]
    e = op("qnn.add")(relu(b), a, *params, const(f32(0.1)), const(i32(1)))
    v, o = is_var().named("v"), wildcard("o")
    scales = [is_constant().named(n) for n in ("vs", "vz", "os", "oz")]
    p = is_op("qnn.add")(v, o, *scales, wildcard("s"), wildcard("z"))

    def var_first(v, o, vs, vz, os, oz, s, z):
        """qnn.add(o, v) -> qnn.add(v, o), each operand keeping its scale and zero point"""
        if isinstance(o, P.Var):
            return None
        return op("qnn.add")(v, o, vs, vz, os, oz, s, z)

    out = RewriteTable([(p, var_first)])(e)
    assert out.args[0] is a and float(out.args[2].data) == np.float32(0.2)
    rng = np.random.default_rng(3)
    for _ in range(3):
        inputs = {
            "a": rng.integers(-128, 128, (1, 8), dtype=np.int8),
            "b": rng.integers(-128, 128, (1, 8), dtype=np.int8),
        }
        assert_same_outputs(e, out, inputs)


def test_a_rewrite_is_a_named_pass():
    x = var("x", (1, 4), "float32")
    mod = module(relu(relu(relu(x))))
    step = rewrite_pass([CollapseRelu()], "CollapseRelu")
    assert step.name == "CollapseRelu"
    out = P.Sequential([step, P.InferType()])(mod)
    assert count_ops(out, "nn.relu") == 1
