"""The Relay text parser: graph form, types, meta constants, spans, errors with positions."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import partita as P
from partita.errors import ParseError
from partita.ir import (
    Call,
    Constant,
    Function,
    GlobalVar,
    Span,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    Var,
)
from partita.text import parse

PROGRAM = """\
def @main(%x: Tensor[(1, 8, 8, 4), int8]) -> Tensor[(1, 8, 8, 4), int8] {
  %0 = qnn.dequantize(%x, 0.05f, -3);
  %1 = nn.relu(%0);
  %2 = add(%1, %1);
  qnn.quantize(%2, 0.1f, 2, out_dtype="int8")
}
"""


def test_program_parses_as_written_and_runs():
    mod = parse(PROGRAM)
    main = mod["main"]
    assert [p.name_hint for p in main.params] == ["x"]
    assert main.ret_type == TensorType((1, 8, 8, 4), "int8")
    q = main.body
    assert q.op.name == "qnn.quantize" and q.attrs.out_dtype == "int8"
    scale, zp = q.args[1].data, q.args[2].data
    assert (
        scale.dtype == np.float32 and scale == np.float32(0.1) and zp.dtype == np.int32 and zp == 2
    )
    added = q.args[0]
    assert added.args[0] is added.args[1] and added.args[0].op.name == "nn.relu"
    deq = added.args[0].args[0]
    assert deq.args[0] is main.params[0] and deq.args[2].data == -3
    P.InferType()(mod)
    assert q.checked_type == TensorType((1, 8, 8, 4), "int8")
    x = np.arange(-128, 128, dtype=np.int8).reshape(1, 8, 8, 4)
    out = P.interpret(mod, [x])[0]
    # (x + 3) * 0.05 -> relu -> doubled -> / 0.1: exactly max(x + 3, 0) steps, then + 2, saturated.
    expected = np.clip(np.maximum(x.astype(np.int32) + 3, 0) + 2, -128, 127).astype(np.int8)
    assert out.dtype == np.int8 and np.array_equal(out, expected)


def test_version_header_comments_and_free_form_whitespace():
    text = (
        '#[version = "0.0.5"]\n// a line comment\n/* a\nblock */ def   @main(\n  %x :'
        " Tensor[ (4) , float32 ] , ) {\n add( nn.relu(%x) /* inline */, %x )  // done\n}\n"
    )
    body = parse(text)["main"].body
    assert body.op.name == "add" and body.args[0].op.name == "nn.relu"
    assert body.args[0].args[0] is body.args[1]


def test_bare_expression_becomes_main_with_free_vars():
    mod = parse("add(nn.relu(%x), %y)")
    assert [p.name_hint for p in mod["main"].params] == ["x", "y"]
    declared = parse("free_var %y: Tensor[(4), int8];\nfree_var %x;\nadd(%x, %y)")["main"]
    assert [(p.name_hint, p.type_annotation) for p in declared.params] == [
        ("x", None),
        ("y", TensorType((4,), "int8")),
    ]
    fn = parse("fn (%a: float32) -> float32 { %a }")["main"]
    assert fn.params[0].type_annotation == TensorType((), "float32")


def test_types():
    text = (
        "def @f(%a: Tensor[(4), int8], %b: Tensor[(4,), int8], %c: Tensor[(), float16], "
        "%d: uint8, %e: (Tensor[(1, 2), bool], float64), %g: (int64,), %h: ()) { %a }"
    )
    params = parse(text)["f"].params
    t4 = TensorType((4,), "int8")
    assert params[0].type_annotation == t4 and params[1].type_annotation == t4
    assert params[2].type_annotation == TensorType((), "float16")
    assert params[3].type_annotation == TensorType((), "uint8")
    assert params[4].type_annotation == TupleType(
        [TensorType((1, 2), "bool"), TensorType((), "float64")]
    )
    assert params[5].type_annotation == TupleType([TensorType((), "int64")])
    assert params[6].type_annotation == TupleType([])


@pytest.mark.parametrize(
    "literal, dtype, value",
    [
        ("0.05f", "float32", np.float32(0.05)),
        ("0.05", "float32", np.float32(0.05)),
        ("1f", "float32", 1.0),
        ("0.05f16", "float16", np.float16(0.05)),
        ("0.05f64", "float64", 0.05),
        ("-3", "int32", -3),
        ("3i64", "int64", 3),
        ("-7i16", "int16", -7),
        ("3i8", "int8", 3),
        ("3u8", "uint8", 3),
        ("True", "bool", True),
        ("False", "bool", False),
        ("1e-05f", "float32", np.float32(1e-05)),
        ("2i32", "int32", 2),
    ],
)
def test_scalar_literals(literal, dtype, value):
    c = parse(f"def @main() {{ {literal} }}")["main"].body
    assert isinstance(c, Constant) and c.data.shape == () and c.data.dtype == dtype
    assert c.data == value


def test_tuples_getitem_and_function_calls():
    text = """def @main(%x: Tensor[(4), float32]) {
      %0 = fn (%p: Tensor[(4), float32], Composite="npu.relu", Primitive=1, f=0.5, b=False) {
        nn.relu(%p)
      };
      %1 = (%0(%x), %x, (%x,), ());
      %2 = ((%1.2).0, %1.0);
      %3 = %1.2.0;
      (%2, %3, @g(%x), @g)
    }
    def @g(%y) { %y }"""
    mod = parse(text)
    main = mod["main"]
    fn = main.body.fields[0].fields[0].tuple_value.tuple_value.fields[0].op
    assert isinstance(fn, Function) and dict(fn.attrs) == {
        "Composite": "npu.relu",
        "Primitive": 1,
        "f": 0.5,
        "b": False,
    }
    tup = main.body.fields[0]
    assert isinstance(tup, Tuple) and isinstance(tup.fields[0], TupleGetItem)
    nested = main.body.fields[1]
    assert nested.index == 0 and nested.tuple_value.index == 2  # %1.2.0
    g_call, g_ref = main.body.fields[2], main.body.fields[3]
    assert isinstance(g_call, Call) and g_call.op == GlobalVar("g") and g_ref == GlobalVar("g")
    assert list(mod) == ["main", "g"]


def test_meta_constants_bind_the_given_objects():
    w = P.const(np.arange(6, dtype=np.int8).reshape(2, 3))
    text = "def @main(%x) { add(add(%x, meta[relay.Constant][0]), meta[relay.Constant][1]) }"
    body = parse(text, [w, np.ones(3, np.float32)])["main"].body
    assert body.args[0].args[1] is w
    assert body.args[1].data.dtype == np.float32 and body.args[1].data.shape == (3,)
    same = parse("def @main() { (meta[relay.Constant][0], meta[relay.Constant][0]) }", [w])
    assert same["main"].body.fields[0] is same["main"].body.fields[1] is w
    as_dict = parse("def @main() { meta[relay.Constant][0] }", {"relay.Constant": [w]})
    assert as_dict["main"].body is w


def test_attribute_values():
    text = (
        "def @main(%x: Tensor[(1, 8, 8, 4), float32]) { nn.avg_pool2d(%x, pool_size=[2, 2], "
        'strides=(2, 2), padding=[1, 1], layout="NHWC", count_include_pad=True) }'
    )
    attrs = parse(text)["main"].body.attrs
    assert attrs.pool_size == (2, 2) and attrs.strides == (2, 2)
    assert attrs.padding == (1, 1, 1, 1) and attrs.layout == "NHWC" and attrs.count_include_pad
    clip = parse("def @main(%x) { clip(%x, a_min=-inf, a_max=1e-05) }")["main"].body.attrs
    assert clip.a_min == float("-inf") and clip.a_max == 1e-05
    pad = parse("def @main(%x) { nn.pad(%x, 0f, pad_width=[[0, 0], [1, 2]]) }")["main"].body
    assert pad.attrs.pad_width == ((0, 0), (1, 2))
    dense = parse("def @main(%x, %w) { nn.dense(%x, %w, units=None) }")["main"].body
    assert dense.attrs.units is None


def test_spans_are_read_back():
    text = """def @main(%x: Tensor[(4), float32] /* span=INPUT:0:x */) {
      %0 = nn.relu(%x) /* ty=Tensor[(4), float32] */ /* span=RELU:3:model/relu;1:0 */;
      %1 = (%0, 2f /* span=::c */) /* span=PACK:: */;
      %2 = %1.0 /* ty=Tensor[(4), float32] span=UNPACK:4:"a\\"b" source="m.tflite" */;
      %2
    } /* span=SUBGRAPH:0: */"""
    main = parse(text)["main"]
    assert main.params[0].span == Span(0, "INPUT", "x")
    tgi = main.body
    assert tgi.span == Span(4, "UNPACK", 'a"b', "m.tflite")
    assert tgi.tuple_value.span == Span(None, "PACK", None)
    assert tgi.tuple_value.fields[0].span == Span(3, "RELU", "model/relu;1:0")
    assert tgi.tuple_value.fields[1].span == Span(None, None, "c")
    assert main.span == Span(0, "SUBGRAPH", None)
    assert parse("def @main() { 1f /* span of this: free prose */ }")["main"].body.span is None


def _error(text, constants=None) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse(text, constants)
    return info.value


MAIN = "def @main(%x: Tensor[(4), float32]) {\n"


@pytest.mark.parametrize(
    "body, line, column, message",
    [
        ("  nn.rleu(%x)\n}", 2, 3, "unknown op 'nn.rleu' (did you mean nn.relu"),
        (
            '  qnn.quantize(%x, 0.1f, 2,\n    out_dtype="int7")\n}',
            3,
            15,
            "attribute 'out_dtype' must be one of",
        ),
        ("  qnn.quantize(%x, 0.1f, 2, bogus=1)\n}", 2, 29, "unknown attribute 'bogus'"),
        ("  clip(%x, a_min=2.0)\n}", 2, 3, "missing required attribute 'a_max'"),
        ("  clip(%x, a_min=2.0, a_max=1.0)\n}", 2, 3, "a_min (2.0) must not exceed a_max (1.0)"),
        ("  %0 = nn.relu(%x);\n  add(%0, %y)\n}", 3, 11, "undefined variable %y"),
        ("  %0 = nn.relu(%x);\n  add(%0, %1)\n}", 3, 11, "%1 is not defined"),
        ("  add(%x, meta[relay.Constant][0])\n}", 2, 11, "needs the constants"),
        ("  %0 = nn.relu(%x);\n  %1 = add(%0, %0);\n", 1, 37, "unterminated block"),
        ("  nn.relu(%x)\n", 1, 37, "unterminated block"),
        ("  add(%x, %x) /* no end\n}", 2, 15, "unterminated comment"),
        ('  nn.pad(%x, 0f, pad_mode="edge)\n}', 2, 27, "unterminated string"),
        ("  add(%x, %x,\n", 2, 14, "expected an expression, got the end of the input"),
        ("  add(%x)\n}", 2, 3, "add takes 2 arguments (lhs, rhs), got 1"),
        ("  add(%x, 300i8)\n}", 2, 11, "300 does not fit int8"),
        ("  add(%x, 3q7)\n}", 2, 11, "unknown literal suffix 'q7'"),
        ("  add(%x, 1e60f)\n}", 2, 11, "overflows float32"),
        ("  clip(a_min=0.0, %x, a_max=1.0)\n}", 2, 19, "positional argument after the attributes"),
        ("  match (%x) {}\n}", 2, 3, "'match' is not supported"),
        ("  let %y %x;\n  %y\n}", 2, 10, "expected '=' after let %y"),
        ("  let 3 = %x;\n  %y\n}", 2, 7, "expected a variable after 'let'"),
        ("  if (%x) { %x } %x\n}", 2, 18, "expected 'else'"),
        ("  %0 = nn.relu(%x);\n  %0 = nn.relu(%0);\n  %0\n}", 3, 3, "%0 is already defined"),
        ("  %0 = nn.relu(%x)\n  %0\n}", 3, 3, "expected ';' after the binding of %0"),
        ("  nn.relu(%x);\n}", 2, 14, "expected '}' after the function's result"),
        ("  @missing(%x)\n}", 2, 3, "undefined global function @missing (defined: @main)"),
        ('  "text"\n}', 2, 3, "a string can only be an attribute value"),
        ("  nn.relu\n}", 2, 3, "ops are called"),
        ("  %x.a\n}", 2, 6, "expected a tuple index"),
    ],
)
def test_errors_point_at_line_and_column(body, line, column, message):
    err = _error(MAIN + body)
    assert (err.line, err.column) == (line, column), str(err)
    assert message in str(err)
    assert err.source_line == (MAIN + body).splitlines()[line - 1]


@pytest.mark.parametrize(
    "text, line, column, message",
    [
        ("def @main(%x: Tensor[(1, 8), int7]) { %x }", 1, 30, "unknown dtype 'int7'"),
        ("def @main(%x: Tensor[(1, -8), int8]) { %x }", 1, 26, "a dimension is a non-negative"),
        ("def @main(%x: Tensor[1, 8], int8]) { %x }", 1, 22, "expected a shape like (1, 8, 8, 4)"),
        ("def @main(%x: Tensor[(1, 8)]) { %x }", 1, 28, "',' then a dtype"),
        ("def @main(%x: Tensr[(1, 8), int8]) { %x }", 1, 15, "unknown dtype 'Tensr'"),
        ("def @main(%x: int8, %x: int8) { %x }", 1, 21, "parameter %x is declared twice"),
        ("def @f(%x, A=1, A=2) { %x }", 1, 17, "function attribute 'A' is given twice"),
        ('def @f(%x, A="\\q") { %x }', 1, 14, "bad string literal"),
        ('def @f(%"a\\q") { 1f }', 1, 8, "bad string literal"),
        ("def @f(%x, A=[1]) { %x }", 1, 14, "a function attribute is a string, number or bool"),
        ("def @f() { 1f }\ndef @f() { 2f }", 2, 5, "@f is defined twice"),
        ("def @main() { 1f }\n#[metadata]", 2, 3, "#[metadata] sections are not supported"),
        (
            "def @main() { fn (%p) { %p }(1f, k=1) }",
            1,
            34,
            "a call to a function takes no attributes",
        ),
        ("def @main() { meta[relay.Constant][3] }", 1, 15, "out of range: 1 constants were given"),
        ("def @main() { meta[relay.Function][0] }", 1, 20, "only meta[relay.Constant]"),
        ("def @main() { 1f /* span=A:x:b */ }", 1, 18, "malformed span comment"),
        ("main(%x) { 1f }", 1, 1, "unknown op 'main'"),  # not a def: read as a bare expression
        ("nn.relu(%x) { 1f }", 1, 13, "expected the end of the input after the result"),
        ("def main() { 1f }", 1, 5, "expected a function name like @main"),
        ("def @main(%x: int8) { %x } $", 1, 28, "unexpected character '$'"),
    ],
)
def test_module_level_errors(text, line, column, message):
    err = _error(text, [P.const(np.ones(2, np.float32))] if "meta" in text else None)
    assert (err.line, err.column) == (line, column), str(err)
    assert message in str(err)


def test_error_message_shows_the_source_line_with_a_caret():
    err = _error("def @main(%x) {\n  nn.rleu(%x)\n}")
    first, source, caret = str(err).splitlines()
    assert first.startswith("line 2, column 3: unknown op 'nn.rleu' (did you mean nn.relu")
    assert (source, caret) == ("    nn.rleu(%x)", "    ^")
    assert isinstance(err, P.PartitaError)


def test_bad_inputs():
    with pytest.raises(ParseError, match="expects a str"):
        parse(b"def @main() { 1f }")
    with pytest.raises(ParseError, match="constants must be a list"):
        parse("def @main() { 1f }", constants=np.ones(3))


def test_deeply_nested_inline_calls_fail_cleanly_or_parse():
    shallow = "nn.relu(" * 50 + "%x" + ")" * 50
    assert parse(shallow)["main"].body.op.name == "nn.relu"
    deep = "nn.relu(" * 5000 + "%x" + ")" * 5000
    with pytest.raises(ParseError, match="nested too deeply"):
        parse(deep)


def test_var_objects_are_scoped_per_function():
    text = "def @main(%x: int8) { %0 = fn (%x: int8) { %x }; %0(%x) }"
    main = parse(text)["main"]
    inner = main.body.op
    assert inner.body is inner.params[0] and main.body.args[0] is main.params[0]
    assert inner.params[0] is not main.params[0] and isinstance(inner.body, Var)


FUZZ_SOURCE = """#[version = "0.0.5"]
def @main(%x: Tensor[(1, 8, 8, 4), int8] /* span=IN:0:x */, %w: Tensor[(3, 3, 4, 8), int8]) {
  %0 = qnn.dequantize(%x, 0.05f, -3) /* ty=Tensor[(1, 8, 8, 4), float32] */;
  %1 = nn.conv2d(%0, %w, strides=[2, 2], padding=[1, 1], data_layout="NHWC");
  %2 = fn (%p: Tensor[(4), float32], Composite="a") { nn.relu(%p) };
  %3 = (%1, %2(%1), meta[relay.Constant][0]);
  %4 = nn.pad(%3.0, 0f, pad_width=[[0, 0], [1, 1]]);
  %5 = clip(%4, a_min=-inf, a_max=6.0);
  qnn.quantize(%5, 0.1f, 2i64, out_dtype="int8") // end
}
def @g(%y) { @main(%y, %y) }
"""
FUZZ_ALPHABET = '%@()[]{},;:=.-0123456789abefxyz"\\/*# \nTensorint8relay.Constant_'


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, len(FUZZ_SOURCE)),
    st.integers(0, 8),
    st.text(alphabet=FUZZ_ALPHABET, max_size=6),
)
def test_mangled_programs_fail_only_with_parse_errors(pos, cut, insert):
    text = FUZZ_SOURCE[:pos] + insert + FUZZ_SOURCE[pos + cut :]
    try:
        mod = parse(text, [P.const(np.ones(3, np.float32))])
    except ParseError as e:
        assert 1 <= e.line <= text.count("\n") + 1 and e.column >= 1
    else:
        assert isinstance(mod, P.IRModule)
