"""Golden outputs of the Relay text printer."""

import numpy as np
import pytest

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
    const,
    var,
)
from partita.ops import get_op
from partita.text import astext, print_expr, print_module

relu, add = get_op("nn.relu"), get_op("add")
quantize, dequantize = get_op("qnn.quantize"), get_op("qnn.dequantize")
T = "Tensor[(1, 8, 8, 4), int8]"
F = "Tensor[(1, 8, 8, 4), float32]"


def body(expr) -> str:
    """print_expr without the ``free_var`` declarations."""
    return "\n".join(line for line in print_expr(expr).splitlines() if "free_var" not in line)


def example() -> IRModule:
    x = var("x", (1, 8, 8, 4), "int8")
    h = relu(dequantize(x, const(0.05), const(-3)))
    return IRModule.from_expr(quantize(add(h, h), const(0.1), const(2), out_dtype="int8"))


def test_module_untyped():
    assert str(example()) == "\n".join(
        [
            '#[version = "0.0.5"]',
            f"def @main(%x: {T}) {{",
            "  %0 = qnn.dequantize(%x, 0.05f, -3);",
            "  %1 = nn.relu(%0);",
            "  %2 = add(%1, %1);",
            "  qnn.quantize(%2, 0.1f, 2)",
            "}",
        ]
    )


def test_module_typed_and_printer_does_not_infer():
    mod = example()
    assert "ty=" not in str(mod) and mod["main"].body._type is None
    P.InferType()(mod)
    assert print_module(mod) == "\n".join(
        [
            '#[version = "0.0.5"]',
            f"def @main(%x: {T}) -> {T} {{",
            f"  %0 = qnn.dequantize(%x, 0.05f, -3) /* ty={F} */;",
            f"  %1 = nn.relu(%0) /* ty={F} */;",
            f"  %2 = add(%1, %1) /* ty={F} */;",
            f"  qnn.quantize(%2, 0.1f, 2) /* ty={T} */",
            "}",
        ]
    )


@pytest.mark.parametrize(
    "value, dtype, text",
    [
        (0.05, "float32", "0.05f"),
        (0.05, "float16", "0.05f16"),
        (0.05, "float64", "0.05f64"),
        (1.0, "float32", "1f"),
        (-0.0, "float32", "-0f"),
        (1e20, "float32", "1e+20f"),
        (0.1, "float64", "0.1f64"),
        (1 / 3, "float32", "0.33333334f"),
        (2.5e-7, "float16", "2.4e-07f16"),
        (-3, "int32", "-3"),
        (3, "int64", "3i64"),
        (-32768, "int16", "-32768i16"),
        (3, "int8", "3i8"),
        (255, "uint8", "255u8"),
        (True, "bool", "True"),
        (False, "bool", "False"),
    ],
)
def test_scalar_literals(value, dtype, text):
    assert print_expr(const(value, dtype)) == text


@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
def test_non_finite_scalars_go_to_meta(value):
    c = const(value, "float32")
    text, constants = astext(relu(c))
    assert text == "nn.relu(meta[relay.Constant][0])" and constants == [c]


def test_attributes_print_like_relay_and_skip_defaults():
    x, w = var("x", (1, 8, 8, 4)), const(np.zeros((3, 3, 4, 8), np.float32))
    conv = get_op("nn.conv2d")(
        x,
        w,
        strides=(2, 2),
        padding=(1, 1, 1, 1),
        kernel_size=(3, 3),
        data_layout="NHWC",
        kernel_layout="HWIO",
    )
    pad = get_op("nn.pad")(conv, const(0.0), pad_width=((0, 0), (1, 1), (2, 2), (0, 0)))
    pool = get_op("nn.avg_pool2d")(pad, pool_size=(2, 2), layout="NHWC", count_include_pad=True)
    clip = get_op("clip")(get_op("nn.leaky_relu")(pool, alpha=0.2), a_min=0.0, a_max=6.0)
    assert body(clip).splitlines() == [
        "%0 = nn.conv2d(%x, meta[relay.Constant][0], strides=[2, 2], padding=[1, 1, 1, 1], "
        'kernel_size=[3, 3], data_layout="NHWC", kernel_layout="HWIO");',
        "%1 = nn.pad(%0, 0f, pad_width=[[0, 0], [1, 1], [2, 2], [0, 0]]);",
        '%2 = nn.avg_pool2d(%1, pool_size=[2, 2], layout="NHWC", count_include_pad=True);',
        "%3 = nn.leaky_relu(%2, alpha=0.2);",
        "clip(%3, a_min=0.0, a_max=6.0)",  # required attributes print even when "default-like"
    ]


def test_none_and_int_attributes():
    dense = get_op("nn.dense")(var("x", (1, 4)), const(np.ones((3, 4), np.float32)), units=3)
    assert body(dense) == "nn.dense(%x, meta[relay.Constant][0], units=3)"
    mean = get_op("mean")(var("x", (1, 4)), axis=None, keepdims=True)
    assert body(mean) == "mean(%x, keepdims=True)"


def test_tuples_getitem_and_tuple_types():
    x = var("x", (4, 6))
    parts = get_op("split")(x, indices_or_sections=2, axis=1)
    both = Tuple([TupleGetItem(parts, 0), TupleGetItem(parts, 1)])
    mod = IRModule.from_expr(Tuple([get_op("concatenate")(both, axis=1), x]))
    P.InferType()(mod)
    a, b = "Tensor[(4, 3), float32]", "Tensor[(4, 6), float32]"
    assert str(mod).splitlines()[1:] == [
        f"def @main(%x: {b}) -> ({b}, {b}) {{",
        f"  %0 = split(%x, indices_or_sections=2, axis=1) /* ty=({a}, {a}) */;",
        f"  %1 = %0.0 /* ty={a} */;",
        f"  %2 = %0.1 /* ty={a} */;",
        f"  %3 = (%1, %2) /* ty=({a}, {a}) */;",
        f"  %4 = concatenate(%3, axis=1) /* ty={b} */;",
        f"  (%4, %x) /* ty=({b}, {b}) */",
        "}",
    ]
    assert body(Tuple([x])) == "(%x,)" and print_expr(Tuple([])) == "()"
    assert print_expr(TupleGetItem(Tuple([const(1)]), 0)) == "%0 = (1,);\n%0.0"


def test_composite_function_and_global_calls():
    p0, p1 = var("p0", (4,)), var("p1", (4,))
    fn = Function(
        [p0, p1],
        add(relu(p0), p1),
        attrs={"Composite": "npu.add_relu", "Primitive": 1, "scale": 0.5, "ok": True},
    )
    x, w = var("x", (4,)), const(np.arange(4, dtype=np.float32))
    y = var("y", (4,))
    helper = Function([y], relu(y))
    main = Function([x], Call(GlobalVar("helper"), [Call(fn, [x, w])]))
    text, constants = astext(IRModule({"helper": helper, "main": main}))
    assert text.splitlines()[1:] == [
        "def @helper(%y: Tensor[(4), float32]) {",
        "  nn.relu(%y)",
        "}",
        "",
        "def @main(%x: Tensor[(4), float32]) {",
        "  %1 = fn (%p0: Tensor[(4), float32], %p1: Tensor[(4), float32], "
        'Composite="npu.add_relu", Primitive=1, scale=0.5, ok=True) {',
        "    %0 = nn.relu(%p0);",
        "    add(%0, %p1)",
        "  };",
        "  %2 = %1(%x, meta[relay.Constant][0]);",
        "  @helper(%2)",
        "}",
    ]
    assert constants == [w]


def test_meta_constants_numbered_over_the_module_in_order_of_first_use():
    a, b = const(np.ones(2, np.float32)), const(np.zeros(2, np.float32))
    x, y = var("x", (2,)), var("y", (2,))
    mod = IRModule({"f": Function([x], add(add(x, b), a)), "main": Function([y], add(y, b))})
    text, constants = astext(mod)
    assert constants[0] is b and constants[1] is a and len(constants) == 2
    assert "add(%y, meta[relay.Constant][0])" in text


def test_shared_scalar_constant_is_bound_once():
    one = const(1.0)
    x = var("x", (4,))
    assert body(add(add(x, one), one)) == "%0 = 1f;\n%1 = add(%x, %0);\nadd(%1, %0)"
    # Shared between a composite and its caller: bound at the top so both scopes see it.
    p = var("p", (4,))
    fn = Function([p], add(p, one), attrs={"Composite": "c"})
    lines = print_expr(Function([x], add(Call(fn, [x]), one))).splitlines()
    assert lines[1] == "  %0 = 1f;" and lines[3] == "    add(%p, %0)"


def test_var_names_are_made_unique_and_quoted_when_needed():
    a, b, c = var("x", (2,)), var("x", (2,)), var("input:0", (2,))
    d = var("0", (2,))
    text = print_expr(Function([a, b, c, d], Tuple([a, b, c, d])))
    assert text.splitlines()[0] == (
        "fn (%x: Tensor[(2), float32], %x_1: Tensor[(2), float32], "
        '%"input:0": Tensor[(2), float32], %"0": Tensor[(2), float32]) {'
    )
    assert text.splitlines()[1] == '  (%x, %x_1, %"input:0", %"0")'


def test_spans_are_printed_as_comments():
    span = Span(3, "CONV_2D", "model/conv;bias:0")
    x = var("x", (4,), span=Span(0, "INPUT", "x"))
    call = Call(relu, [x], span=span)
    fn = Function([x], add(call, Constant(np.float32(2), span=Span(None, None, "c"))))
    assert print_expr(fn).splitlines() == [  # spans are off by default: readable text
        "fn (%x: Tensor[(4), float32]) {",
        "  %0 = nn.relu(%x);",
        "  add(%0, 2f)",
        "}",
    ]
    text = print_expr(fn, show_spans=True)
    assert text.splitlines() == [
        "fn (%x: Tensor[(4), float32] /* span=INPUT:0:x */) {",
        "  %0 = nn.relu(%x) /* span=CONV_2D:3:model/conv;bias:0 */;",
        "  add(%0, 2f /* span=::c */)",
        "}",
    ]
    odd = Span(None, "A:B", "x */ y", "m.tflite")
    assert print_expr(Call(relu, [x], span=odd), show_spans=True).splitlines()[-1] == (
        'nn.relu(%x) /* span="A:B"::"x *\\/ y" source="m.tflite" */'
    )


def test_print_expr_of_leaves_and_astext_errors():
    assert str(const(7, "int8")) == "7i8"
    assert print_expr(GlobalVar("f")) == "@f"
    with pytest.raises(P.PartitaError, match="IRModule or an expression"):
        astext(42)


def test_bare_expressions_declare_their_free_vars_like_relay():
    x, y = var("x", (1, 4), "int8"), var("y")
    assert print_expr(add(relu(x), y)).splitlines() == [
        "free_var %x: Tensor[(1, 4), int8];",
        "free_var %y;",
        "%0 = nn.relu(%x);",
        "add(%0, %y)",
    ]
    assert print_expr(x) == "free_var %x: Tensor[(1, 4), int8];\n%x"
