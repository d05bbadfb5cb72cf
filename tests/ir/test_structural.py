import numpy as np
import pytest

from partita.ir import (
    Function,
    IRModule,
    StructuralMismatch,
    assert_structural_equal,
    const,
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
