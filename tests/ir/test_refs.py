"""References (ref, ref_read, ref_write): types, evaluation order in the interpreter, the text
format, structural equality, and the passes that must not merge or move them."""

from __future__ import annotations

import numpy as np
import pytest
from partita.partition import partition_for

from partita import interpret
from partita.errors import PartitaError, TypeInferenceError
from partita.ir import (
    Call,
    Function,
    If,
    IRModule,
    RefCreate,
    RefRead,
    RefType,
    RefWrite,
    TensorType,
    Tuple,
    TupleType,
    assert_structural_equal,
    const,
    structural_equal,
    var,
)
from partita.ops import get_op
from partita.passes import EliminateCommonSubexpr, FoldConstant, InferType
from partita.text import parse


def op(name, *args, **attrs):
    return get_op(name)(*args, **attrs)


def _counter():
    """r = ref(x); ref_write(r, relu(-ref_read(r))); (write result, ref_read(r))."""
    x = var("x", (2,))
    r = RefCreate(x)
    w = RefWrite(r, op("nn.relu", op("negative", RefRead(r))))
    return IRModule.from_expr(Function([x], Tuple([w, RefRead(r)])))


def test_types():
    mod = InferType()(_counter())
    body = mod["main"].body
    w, read = body.fields
    assert w.type_or_none == TupleType([])
    assert w.ref.type_or_none == RefType(TensorType((2,), "float32"))
    assert read.type_or_none == TensorType((2,), "float32")


def test_reads_and_writes_happen_in_evaluation_order():
    feed = {"x": np.array([1.0, -2.0], "float32")}
    (out,) = interpret(_counter(), feed)  # the write's () flattens away
    np.testing.assert_array_equal(out, [0.0, 2.0])
    x = var("x", (2,))
    r = RefCreate(x)
    before = Tuple([RefRead(r), RefWrite(r, op("abs", x)), RefRead(r)])  # left to right
    first, last = interpret(Function([x], before), feed)
    np.testing.assert_array_equal(first, feed["x"])
    np.testing.assert_array_equal(last, [1.0, 2.0])


def test_each_evaluation_of_ref_makes_a_new_cell():
    a = var("a", (2,))
    cell = RefCreate(a)
    bump = Function([a], Tuple([RefWrite(cell, op("add", RefRead(cell), a)), RefRead(cell)]))
    x = var("x", (2,))
    twice = Tuple([Call(bump, [x]), Call(bump, [x])])
    outs = interpret(Function([x], twice), {"x": np.ones(2, "float32")})
    np.testing.assert_array_equal(outs[0], [2.0, 2.0])  # a fresh cell each call: 1 + 1
    np.testing.assert_array_equal(outs[1], [2.0, 2.0])


def test_type_errors_name_the_node():
    x = var("x", (2,))
    with pytest.raises(TypeInferenceError, match="RefRead.*not a reference"):
        InferType()(IRModule.from_expr(Function([x], RefRead(x))))
    r = RefCreate(x)
    bad = RefWrite(r, const(np.zeros(3, "float32")))
    with pytest.raises(TypeInferenceError, match=r"RefWrite.*writes Tensor\[\(3,\)"):
        InferType()(IRModule.from_expr(Function([x], bad)))


def test_only_the_branch_the_condition_picks_writes():
    x, c = var("x", (2,)), var("c", (), "bool")
    r = RefCreate(x)
    write = Tuple([RefWrite(r, op("abs", x))])
    body = Tuple([If(c, write, Tuple([Tuple([])])), RefRead(r)])
    fn = Function([x, c], body)
    feed = {"x": np.array([-1.0, 2.0], "float32")}
    np.testing.assert_array_equal(interpret(fn, {**feed, "c": np.bool_(True)})[0], [1.0, 2.0])
    np.testing.assert_array_equal(interpret(fn, {**feed, "c": np.bool_(False)})[0], feed["x"])


def test_text_round_trip():
    mod = InferType()(_counter())
    text = str(mod)
    assert "ref_write(%0, %3) /* ty=() */" in text and "ty=ref(Tensor[(2), float32])" in text
    assert_structural_equal(parse(text), mod)
    typed = parse("def @main(%r: ref(float32)) { ref_read(%r) }")
    assert typed["main"].params[0].type_annotation == RefType(TensorType((), "float32"))


def test_structural_equality_sees_the_cells():
    x = var("x", (2,))
    one = RefCreate(x)
    shared = Function([x], Tuple([RefRead(one), RefRead(one)]))
    y = var("y", (2,))
    separate = Function([y], Tuple([RefRead(RefCreate(y)), RefRead(RefCreate(y))]))
    assert not structural_equal(shared, separate)  # one cell vs two


def test_cse_and_folding_keep_every_read_and_cell():
    mod = _counter()
    for p in (EliminateCommonSubexpr(), FoldConstant()):
        out = p(mod)
        assert_structural_equal(out, mod)
    c = const(np.float32(1.0))
    two_cells = IRModule.from_expr(Function([], Tuple([RefCreate(c), RefCreate(c)])))
    fields = EliminateCommonSubexpr()(two_cells)["main"].body.fields
    assert fields[0] is not fields[1]


def test_only_the_reference_host_runs_references():
    mod = _counter()
    with pytest.raises(PartitaError, match="RefCreate: references .* only on the 'ref' host"):
        partition_for(mod, "llvm")
    out = partition_for(mod, "ref")
    feed = {"x": np.array([3.0, -4.0], "float32")}
    np.testing.assert_array_equal(interpret(out, feed), interpret(mod, feed))
