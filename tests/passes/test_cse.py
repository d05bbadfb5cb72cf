"""EliminateCommonSubexpr: identical values are computed once."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from pass_graphs import assert_same_outputs, float_graphs, float_inputs, op

import partita as P
from partita.ir import (
    Call,
    Function,
    GlobalVar,
    IRModule,
    Span,
    Tuple,
    TupleGetItem,
    assert_structural_equal,
    const,
    iter_calls,
    post_order,
    var,
)
from partita.passes.cse import EliminateCommonSubexpr

relu, add, clip = op("nn.relu"), op("add"), op("clip")


def test_two_identical_relus_become_one():
    x = var("x", (1, 4))
    before = IRModule.from_expr(add(relu(x), relu(x)))
    r = relu(x)
    assert_structural_equal(EliminateCommonSubexpr()(before), IRModule.from_expr(add(r, r)))


def test_merging_cascades_through_merged_arguments():
    x = var("x", (4,))
    a = clip(relu(x), a_min=0.0, a_max=6.0)
    b = clip(relu(x), a_min=0.0, a_max=6.0)
    before = IRModule.from_expr(Tuple([add(a, x), add(b, x)]))
    r = add(clip(relu(x), a_min=0.0, a_max=6.0), x)
    assert_structural_equal(EliminateCommonSubexpr()(before), IRModule.from_expr(Tuple([r, r])))


def test_different_attrs_or_args_are_not_merged():
    x, y = var("x", (4,)), var("y", (4,))
    before = IRModule.from_expr(
        Tuple(
            [
                clip(x, a_min=0.0, a_max=6.0),
                clip(x, a_min=0.0, a_max=1.0),
                relu(x),
                relu(y),
                add(x, y),
                add(y, x),
            ]
        )
    )
    assert_structural_equal(EliminateCommonSubexpr()(before), before)


def test_equal_constants_merge_by_dtype_shape_and_bytes():
    x = var("x", (2,))
    c1, c2 = const(np.float32([1, 2])), const(np.float32([1, 2]))
    other_dtype = const(np.int32([1, 2]))
    other_shape = const(np.float32([[1, 2]]))
    neg_zero, zero = const(np.float32([-0.0, 0])), const(np.float32([0, 0]))
    cast = op("cast")(other_dtype, dtype="float32")
    before = IRModule.from_expr(
        Tuple([add(x, c1), add(x, c2), cast, add(x, other_shape), add(x, neg_zero), add(x, zero)])
    )
    out = EliminateCommonSubexpr()(before).main.body.fields
    assert out[0] is out[1]
    consts = {
        id(n) for n in post_order(EliminateCommonSubexpr()(before).main) if isinstance(n, type(c1))
    }
    assert len(consts) == 5  # c1 == c2; -0.0 differs from 0.0 in its bits


def test_large_constants_are_not_compared():
    x = var("x", (8,))
    before = IRModule.from_expr(
        Tuple([add(x, const(np.ones(8, np.float32))), add(x, const(np.ones(8, np.float32)))])
    )
    assert_structural_equal(EliminateCommonSubexpr(max_constant_elements=4)(before), before)
    out = EliminateCommonSubexpr()(before).main.body
    assert out.fields[0] is out.fields[1]


def test_tuples_and_getitems_merge():
    x, y = var("x", (2,)), var("y", (2,))
    t1, t2 = Tuple([x, y]), Tuple([x, y])
    before = IRModule.from_expr(add(TupleGetItem(t1, 0), TupleGetItem(t2, 0)))
    item = TupleGetItem(Tuple([x, y]), 0)
    assert_structural_equal(EliminateCommonSubexpr()(before), IRModule.from_expr(add(item, item)))


def test_skip_ops():
    x = var("x", (4,))
    before = IRModule.from_expr(add(relu(op("negative")(x)), relu(op("negative")(x))))
    out = EliminateCommonSubexpr(skip_ops=("nn.relu",))(before)
    neg = op("negative")(x)
    assert_structural_equal(out, IRModule.from_expr(add(relu(neg), relu(neg))))


def test_first_span_is_kept():
    x = var("x", (4,))
    s1, s2 = Span(1, "RELU", "a"), Span(2, "RELU", "b")
    out = EliminateCommonSubexpr()(IRModule.from_expr(add(relu(x, span=s1), relu(x, span=s2))))
    assert out.main.body.args[0].span == s1


def test_calls_to_globals_merge_and_composites_are_left_alone():
    x, a = var("x", (2,)), var("a", (2,))
    one = [const(np.float32(1)) for _ in range(3)]
    composite = Function([a], add(add(a, one[0]), add(a, one[1])), attrs={"Composite": "c"})
    main = Function(
        [x],
        add(
            Call(GlobalVar("f"), [x]),
            add(Call(GlobalVar("f"), [x]), Call(composite, [add(x, one[2])])),
        ),
    )
    mod = IRModule({"main": main, "f": Function([a], relu(a))})
    out = EliminateCommonSubexpr()(mod)
    body = out.main.body
    assert body.args[0] is body.args[1].args[0]
    assert body.args[1].args[1].op is composite


def test_inner_functions_are_separate_scopes():
    x, a = var("x", (2,)), var("a", (2,))
    one = [const(np.float32(1)) for _ in range(3)]
    inner = Function([a], add(add(a, one[0]), add(a, one[1])))
    out = EliminateCommonSubexpr()(IRModule.from_expr(Call(inner, [add(x, one[2])])))
    body = out.main.body.op.body
    assert body.args[0] is body.args[1]  # merged inside the function
    assert out.main.body.args[0].args[1] is not body.args[0].args[1]  # not across its boundary


@settings(max_examples=60, deadline=None)
@given(float_graphs(), st.integers(0, 2**16))
def test_random_graphs_compute_the_same_bits(mod, seed):
    out = EliminateCommonSubexpr()(mod)
    assert_same_outputs(mod, out, float_inputs(seed))
    seen = set()
    for call in iter_calls(out.main):
        key = (call.op, call.attrs, *map(id, call.args))
        assert key not in seen
        seen.add(key)


def test_written_in_the_text_format():
    before = P.parse("""
    def @main(%x: Tensor[(1, 4), float32]) {
      %0 = nn.relu(%x);
      %1 = nn.relu(%x);
      %2 = clip(%0, a_min=0f, a_max=6f);
      %3 = clip(%1, a_min=0f, a_max=6f);
      add(%2, %3)
    }""")
    expected = P.parse("""
    def @main(%x: Tensor[(1, 4), float32]) {
      %0 = nn.relu(%x);
      %1 = clip(%0, a_min=0f, a_max=6f);
      add(%1, %1)
    }""")
    assert_structural_equal(EliminateCommonSubexpr()(before), expected)


@settings(max_examples=40, deadline=None)
@given(float_graphs(max_steps=14), st.integers(0, 2**16))
def test_random_graphs_through_the_whole_pipeline(mod, seed):
    pipeline = P.Sequential(
        [
            P.FoldConstant(),
            P.SimplifyExpr(),
            P.EliminateCommonSubexpr(),
            P.DeadCodeElimination(),
            P.ConvertLayout(),
        ]
    )
    out = pipeline(mod)
    assert_same_outputs(mod, out, float_inputs(seed))
    again = pipeline(out)  # a second run finds nothing left to do
    assert_structural_equal(again, out)
