import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partita.ir import (
    Function,
    IRModule,
    Span,
    StructuralMismatch,
    assert_structural_equal,
    const,
    fingerprint,
    structural_equal,
    var,
)
from partita.ops import get_op

relu, add = get_op("nn.relu"), get_op("add")


def graph(shared=True, op=relu, value=1.0):
    x = var("x", (2, 2), "float32")
    a = op(x)
    b = a if shared else op(x)
    return add(add(a, b), const(np.full((2, 2), value, np.float32)))


def test_equal_graphs():
    assert structural_equal(graph(), graph())
    assert_structural_equal(IRModule.from_expr(graph()), IRModule.from_expr(graph()))


def test_sharing_matters():
    assert not structural_equal(graph(shared=True), graph(shared=False))


def test_constant_difference_is_reported_with_path():
    with pytest.raises(StructuralMismatch) as err:
        assert_structural_equal(graph(value=1.0), graph(value=2.0))
    text = str(err.value)
    assert "expr.args[1]" in text and "constant values differ" in text and "1.0 vs 2.0" in text


def test_attribute_difference():
    x = var("x", (4,), "float32")
    a = get_op("qnn.quantize")(x, 0.1, 0, out_dtype="int8")
    b = get_op("qnn.quantize")(x, 0.1, 0, out_dtype="uint8")
    with pytest.raises(StructuralMismatch, match="out_dtype='int8' vs 'uint8'"):
        assert_structural_equal(a, b)


def test_op_difference():
    x = var("x", (4,), "float32")
    with pytest.raises(StructuralMismatch, match="op differs: add vs subtract"):
        assert_structural_equal(add(x, x), get_op("subtract")(x, x))


def test_function_params_pair_by_position():
    def fn(name):
        p = var(name, (2,), "float32")
        return Function([p], relu(p), attrs={"Composite": "npu.relu"})

    assert structural_equal(fn("a"), fn("b"))
    assert not structural_equal(fn("a"), fn("a").with_attr("Composite", "npu.other"))


def test_modules_with_different_functions():
    m1 = IRModule.from_expr(graph())
    m2 = m1.with_function("other", Function([], const(1.0)))
    assert not structural_equal(m1, m2)


def test_type_annotation_difference():
    with pytest.raises(StructuralMismatch, match="type of %x differs"):
        assert_structural_equal(relu(var("x", (2,), "float32")), relu(var("x", (3,), "float32")))


# ---- fingerprint ----------------------------------------------------------------------------


def test_equal_graphs_have_equal_fingerprints_and_differences_change_them():
    assert fingerprint(graph()) == fingerprint(graph())
    base = fingerprint(graph())
    for other in (graph(shared=False), graph(op=get_op("negative")), graph(value=2.0)):
        assert not structural_equal(graph(), other)
        assert fingerprint(other) != base


def test_a_fingerprint_sees_every_constant_bit_that_equality_ignores():
    assert structural_equal(graph(value=0.0), graph(value=-0.0))
    assert fingerprint(graph(value=0.0)) != fingerprint(graph(value=-0.0))
    a = np.zeros((64, 64), np.int8)
    b = a.copy()
    b[63, 63] = 1
    x = var("x", (64, 64), "int8")
    assert fingerprint(add(x, const(a))) != fingerprint(add(x, const(b)))


def test_attributes_types_names_and_spans_are_in_the_fingerprint():
    x = var("x", (4,), "float32")
    q = get_op("qnn.quantize")
    signed, unsigned = (q(x, 0.1, 0, out_dtype=d) for d in ("int8", "uint8"))
    assert fingerprint(signed) != fingerprint(unsigned)
    wide, narrow = (relu(var("x", (n,), "float32")) for n in (2, 3))
    assert fingerprint(wide) != fingerprint(narrow)
    named = [relu(var(n, (2,), "float32")) for n in ("a", "b")]
    assert fingerprint(named[0]) != fingerprint(named[1])
    assert fingerprint(named[0], names=False) == fingerprint(named[1], names=False)
    spanned = [relu(x, span=Span(i, "RELU")) for i in (0, 1)]
    assert fingerprint(spanned[0]) != fingerprint(spanned[1])
    assert fingerprint(spanned[0], names=False) == fingerprint(spanned[1], names=False)


def test_function_attributes_are_in_the_fingerprint():
    p = var("p", (2,), "float32")
    fn = Function([p], relu(p), attrs={"Composite": "npu.relu"})
    assert fingerprint(fn) != fingerprint(fn.with_attr("Composite", "npu.other"))


def test_an_attribute_it_cannot_encode_is_a_type_error_not_a_guess():
    from partita.ir.structural import _encode

    assert _encode(np.arange(3)) != _encode(np.arange(3) + 1)
    with pytest.raises(TypeError, match="cannot encode a object attribute"):
        _encode(object())


KINDS = ["relu", "negative", "add", "share"]


@st.composite
def recipes(draw):
    """A tiny graph recipe drawn from a small space, so two draws are often equal."""
    return draw(st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 3), st.integers(0, 1)),
                         min_size=1, max_size=5))


def cook(recipe):
    x = var("x", (2,), "float32")
    pool = [x]
    for kind, pick, value in recipe:
        a = pool[pick % len(pool)]
        if kind == "relu":
            pool.append(relu(a))
        elif kind == "negative":
            pool.append(get_op("negative")(a))
        elif kind == "add":
            pool.append(add(a, const(np.full((2,), value, np.float32))))
        else:  # an equal but distinct copy of the last call, or the last node shared twice
            last = pool[-1]
            pool.append(add(last, last) if value else add(a, a))
    return pool[-1]


@settings(max_examples=200, deadline=None)
@given(recipes(), recipes())
def test_fingerprints_are_equal_exactly_when_graphs_are(r1, r2):
    a, b = cook(r1), cook(r2)
    assert (fingerprint(a) == fingerprint(b)) == structural_equal(a, b)
    assert fingerprint(a) == fingerprint(cook(r1))
