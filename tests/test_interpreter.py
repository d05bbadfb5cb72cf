import numpy as np
import pytest

import partita as P
from partita.ir import Call, Function, GlobalVar, IRModule, Tuple, TupleGetItem, const, var
from partita.ops import get_op

relu, add = get_op("nn.relu"), get_op("add")


def example_module():
    x = var("x", (1, 8, 8, 4), "int8")
    d = get_op("qnn.dequantize")(x, 0.05, -3)
    r = relu(d)
    q = get_op("qnn.quantize")(add(r, r), 0.1, 2, out_dtype="int8")
    return IRModule.from_expr(q)


def expected(x):
    # Independent float64 derivation: relu((x + 3) * 0.05) * 2 / 0.1, half away from zero.
    v = np.maximum((x.astype(np.float64) + 3) * np.float32(0.05), 0) * 2 / np.float32(0.1)
    return np.clip(np.floor(v + 0.5) + 2, -128, 127).astype(np.int8)


def test_inputs_by_name_position_and_keyword():
    mod = example_module()
    x = np.random.default_rng(0).integers(-128, 128, (1, 8, 8, 4)).astype(np.int8)
    by_name = P.interpret(mod, {"x": x})[0]
    assert np.array_equal(by_name, P.interpret(mod, [x])[0])
    assert np.array_equal(by_name, P.interpret(mod, x=x)[0])
    assert np.array_equal(by_name, expected(x))


def test_input_errors_name_the_input():
    mod = example_module()
    x = np.zeros((1, 8, 8, 4), np.int8)
    with pytest.raises(P.InterpreterError, match="missing input 'x'"):
        P.interpret(mod, {})
    with pytest.raises(P.InterpreterError, match="unknown input 'y'"):
        P.interpret(mod, {"x": x, "y": x})
    with pytest.raises(P.InterpreterError, match="'x' must be int8, got float32"):
        P.interpret(mod, {"x": x.astype(np.float32)})
    with pytest.raises(P.InterpreterError, match=r"'x' must have shape \(1, 8, 8, 4\)"):
        P.interpret(mod, {"x": np.zeros((1, 8, 8, 3), np.int8)})
    with pytest.raises(P.InterpreterError, match="expected 1 inputs"):
        P.interpret(mod, [x, x])


def test_composite_and_global_functions():
    p = var("p", (4,), "float32")
    composite = Function([p], relu(add(p, p)), attrs={"Composite": "npu.add_relu"})
    q = var("q", (4,), "float32")
    partition = Function(
        [q],
        Call(composite, [q]),
        attrs={"Compiler": "npu", "global_symbol": "npu_main_0", "Primitive": 1},
    )
    x = var("x", (4,), "float32")
    y = Call(GlobalVar("npu_main_0"), [x])
    main = Function([x], Tuple([y, TupleGetItem(Tuple([x, y]), 0)]))
    mod = IRModule({"main": main, "npu_main_0": partition})
    data = np.array([-1, 0, 1, 2], np.float32)
    out = P.interpret(mod, [data])
    assert len(out) == 2
    assert np.array_equal(out[0], np.maximum(2 * data, 0))
    assert np.array_equal(out[1], data)


def test_expression_and_constants():
    out = P.interpret(add(const(np.arange(3, dtype=np.float32)), const(1.0)))
    assert np.array_equal(out[0], np.array([1, 2, 3], np.float32))


def test_type_errors_surface_before_running():
    x = var("x", (2, 3), "float32")
    y = var("y", (4,), "float32")
    msg = r"add: shapes \(2, 3\) and \(4,\) do not broadcast"
    with pytest.raises(P.TypeInferenceError, match=msg):
        P.interpret(
            IRModule.from_expr(add(x, y)), [np.zeros((2, 3), np.float32), np.zeros(4, np.float32)]
        )


def test_bad_reference_output_is_caught():
    from partita.ops.registry import _REGISTRY, NoAttrs, register_op
    from partita.ops.relations import identity_rel

    @register_op("test.broken", inputs=("data",), attrs=NoAttrs, type_rel=identity_rel)
    def broken(data, attrs):
        return data.astype(np.float64)

    try:
        with pytest.raises(P.InterpreterError, match="test.broken.*returned"):
            P.interpret(get_op("test.broken")(var("x", (2,), "float32")), [np.zeros(2, np.float32)])
    finally:
        del _REGISTRY["test.broken"]
