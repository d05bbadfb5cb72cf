"""FoldConstant: constant sub-graphs become constants; composites and partitions are untouched."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pass_graphs import assert_same_outputs, float_graphs, float_inputs, op

import partita as P
from partita.ir import (
    Call,
    Constant,
    Function,
    GlobalVar,
    IRModule,
    Span,
    Tuple,
    TupleGetItem,
    assert_structural_equal,
    const,
    iter_calls,
    var,
)
from partita.passes.fold_constant import FoldConstant

relu, add = op("nn.relu"), op("add")
SPAN = Span(7, "QUANTIZE", "w", "model.tflite")


def test_arithmetic_on_constants_folds():
    x = var("x", (3,), "float32")
    c = add(const(np.float32([1, 2, 3])), const(np.float32(0.5)))
    before = IRModule.from_expr(add(x, relu(op("negative")(c))))
    expected = IRModule.from_expr(add(x, const(np.float32([0, 0, 0]))))
    assert_structural_equal(FoldConstant()(before), expected)


def test_quantize_of_constant_weight_folds_to_int8_and_keeps_span():
    x = var("x", (4,), "int8")
    w = const(np.float32([0.1, -0.26, 1.0, 100.0]))
    q = op("qnn.quantize")(w, const(np.float32(0.02)), const(np.int32(1)), span=SPAN)
    out = FoldConstant()(IRModule.from_expr(add(x, q)))
    folded = out.main.body.args[1]
    # round(w / 0.02) + 1, half away from zero, saturated: 5, -13, 50, 5000 (float32 division).
    want = np.clip(np.round(np.float64([0.1, -0.26, 1.0, 100.0]) / 0.02) + 1, -128, 127)
    np.testing.assert_array_equal(folded.data, want.astype(np.int8))
    assert folded.data.dtype == np.int8 and folded.span == SPAN


def test_fold_qnn_false_leaves_qnn_calls():
    q = op("qnn.quantize")(const(np.float32([1.0])), const(np.float32(0.5)), const(np.int32(0)))
    before = IRModule.from_expr(add(var("x", (1,), "int8"), q))
    assert_structural_equal(FoldConstant(fold_qnn=False)(before), before)
    with P.PassContext(config={"FoldConstant": {"fold_qnn": False}}):
        assert_structural_equal(FoldConstant()(before), before)


def test_tuple_results_and_tuple_arguments_fold():
    x = var("x", (4,), "float32")
    parts = op("split")(const(np.arange(4, dtype=np.float32)), indices_or_sections=2)
    cat = op("concatenate")(Tuple([TupleGetItem(parts, 1), TupleGetItem(parts, 0)]))
    before = IRModule.from_expr(add(x, cat))
    expected = IRModule.from_expr(add(x, const(np.float32([2, 3, 0, 1]))))
    assert_structural_equal(FoldConstant()(before), expected)


def test_getitem_of_a_tuple_takes_the_field():
    x, y = var("x", (2,)), var("y", (2,))
    before = IRModule.from_expr(relu(TupleGetItem(Tuple([x, relu(y)]), 1)))
    # %x is unused now but stays a parameter: parameters are the function's interface.
    expected = IRModule.from_expr(Function([x, y], relu(relu(y))))
    assert_structural_equal(FoldConstant()(before), expected)


def test_composite_and_compiler_functions_are_not_entered():
    a = var("a", (2,))
    inner = add(a, add(const(np.float32([1, 2])), const(np.float32(1))))
    composite = Function([a], inner, attrs={"Composite": "npu.add"})
    x = var("x", (2,))
    main = Function([x], Call(composite, [x]))
    b = var("b", (2,))
    part = Function(
        [b],
        relu(add(b, add(const(np.float32(1)), const(np.float32(1))))),
        attrs={"Compiler": "npu", "global_symbol": "npu_0"},
    )
    before = IRModule({"main": Function([x], Call(GlobalVar("npu_0"), [main.body])), "npu_0": part})
    assert_structural_equal(FoldConstant()(before), before)


def test_plain_inner_function_is_folded():
    a, x = var("a", (2,)), var("x", (2,))
    fn = Function([a], add(a, add(const(np.float32(1)), const(np.float32(2)))))
    before = IRModule.from_expr(Call(fn, [x]))
    want = Function([a], add(a, const(np.float32(3))))
    assert_structural_equal(FoldConstant()(before), IRModule.from_expr(Call(want, [x])))


def test_large_new_constants_are_not_made_but_large_weights_fold():
    big = op("reshape")(const(np.float32([1.0, 2.0] * 8)), newshape=(4, 4))
    # The result (16 elements) is no larger than its argument: folded despite the limit.
    before = IRModule.from_expr(add(var("x", (4, 4)), big))
    out = FoldConstant(max_new_elements=8)(before)
    assert isinstance(out.main.body.args[1], Constant)
    # Broadcasting a scalar to 16 elements would create a new large constant: not folded.
    grow = add(const(np.float32(1)), const(np.zeros((4, 4), np.float32)))
    spread = IRModule.from_expr(add(var("x", (4, 4)), op("sum")(grow, axis=(0,), keepdims=True)))
    out = FoldConstant(max_new_elements=8)(spread)
    assert isinstance(out.main.body.args[1], Constant)  # 16 -> 4 elements: fine
    grow = op("expand_dims")(const(np.float32([1, 2])), axis=0, num_newaxis=4)
    tiny = IRModule.from_expr(add(var("x", (1, 1, 1, 1, 2)), add(grow, grow)))
    assert isinstance(FoldConstant(max_new_elements=1)(tiny).main.body.args[1], Constant)


def test_scalar_broadcast_to_large_shape_is_skipped():
    x = var("x", (64, 64), "float32")
    ones = add(const(np.float32(1)), const(np.float32([[0] * 64])))
    spread = add(ones, const(np.zeros((64, 1), np.float32)))
    before = IRModule.from_expr(add(x, spread))
    out = FoldConstant(max_new_elements=1000)(before)
    arg = out.main.body.args[1]
    assert arg.op.name == "add" and isinstance(arg.args[0], Constant)  # inner part folded only
    assert isinstance(FoldConstant()(before).main.body.args[1], Constant)


def test_invalid_constant_call_is_left_for_infer_type():
    bad = add(const(np.float32([1, 2])), const(np.float32([1, 2, 3])))
    before = IRModule.from_expr(add(var("x", (2,)), bad))
    out = FoldConstant()(before)
    assert_structural_equal(out, before)
    with pytest.raises(P.TypeInferenceError, match="do not broadcast"):
        P.InferType()(out)


def test_chain_is_folded_without_recursion():
    c = const(np.float32(1))
    for _ in range(3000):
        c = add(c, const(np.float32(1)))
    out = FoldConstant()(IRModule.from_expr(add(var("x", ()), c)))
    assert out.main.body.args[1].data == np.float32(3001)


@settings(max_examples=60, deadline=None)
@given(float_graphs(), st.integers(0, 2**16))
def test_random_graphs_compute_the_same_bits(mod, seed):
    out = FoldConstant()(mod)
    assert_same_outputs(mod, out, float_inputs(seed))
    for call in iter_calls(out.main):
        assert not all(isinstance(a, Constant) for a in call.args)
