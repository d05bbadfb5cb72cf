"""print -> parse -> print is the identity, and parse(print(m)) is structurally m (with spans)."""

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    post_order,
    var,
)
from partita.ops import get_op
from partita.text import astext, parse, print_expr

SHAPE = (2, 3)
relu, add, subtract = get_op("nn.relu"), get_op("add"), get_op("subtract")
quantize, dequantize, clip = get_op("qnn.quantize"), get_op("qnn.dequantize"), get_op("clip")
NAMES = st.sampled_from(["x", "x", "y", "input.1", "serving_default:0", "0", "_a", "p0"])
SPANS = st.none() | st.builds(
    Span,
    st.none() | st.integers(-5, 10**6),
    st.none() | st.sampled_from(["CONV_2D", "A:B", "", "x */"]),
    st.none() | st.text(max_size=12),
    st.none() | st.just("m.tflite"),
)
SCALARS = {
    "float32": st.floats(width=32, allow_nan=False, allow_infinity=False),
    "float16": st.floats(width=16, allow_nan=False, allow_infinity=False),
    "float64": st.floats(allow_nan=False, allow_infinity=False),
    "int8": st.integers(-128, 127),
    "uint8": st.integers(0, 255),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "bool": st.booleans(),
}


class _Builder:
    """Random well-typed graphs over Tensor[(2, 3), float32] with sharing of every kind."""

    def __init__(self, draw, helpers):
        self.draw, self.helpers = draw, helpers
        self.scalars: list[Constant] = []
        self.metas: list[Constant] = []
        self.functions: list[Function] = []

    def pick(self, pool):
        return pool[self.draw(st.integers(0, len(pool) - 1))]

    def scalar(self, dtype="float32"):
        if dtype == "float32" and self.scalars and self.draw(st.booleans()):
            return self.pick(self.scalars)  # a shared scalar constant
        c = Constant(np.array(self.draw(SCALARS[dtype]), dtype=dtype), self.draw(SPANS))
        if dtype == "float32":
            self.scalars.append(c)
        return c

    def step(self, pool):
        kind = self.draw(
            st.sampled_from(
                ["relu", "binary", "scalar", "qdq", "meta", "tuple", "composite", "global", "clip"]
            )
        )
        span, a, b = self.draw(SPANS), self.pick(pool), self.pick(pool)
        if kind == "relu":
            return Call(relu, [a], span=span)
        if kind == "binary":
            return Call(self.draw(st.sampled_from([add, subtract])), [a, b], span=span)
        if kind == "scalar":
            return Call(add, [a, self.scalar()], span=span)
        if kind == "qdq":
            q = quantize(
                a,
                self.scalar(),
                const(self.draw(SCALARS["int8"])),
                out_dtype=self.draw(st.sampled_from(["int8", "uint8", "int16"])),
                semantics=self.draw(st.sampled_from(["tflite", "onnx"])),
            )
            return Call(dequantize, [q, self.scalar(), const(0)], span=span)
        if kind == "meta":
            if not self.metas or self.draw(st.booleans()):
                data = self.draw(st.lists(st.floats(-4, 4, width=32), min_size=6, max_size=6))
                self.metas.append(const(np.array(data, np.float32).reshape(SHAPE)))
            return Call(add, [a, self.pick(self.metas)], span=span)
        if kind == "tuple":  # tuples also carry scalars of every dtype
            dtypes = self.draw(st.lists(st.sampled_from(sorted(SCALARS)), min_size=1, max_size=4))
            tup = Tuple([a, b, *(self.scalar(d) for d in dtypes)], self.draw(SPANS))
            return TupleGetItem(tup, self.draw(st.integers(0, 1)), span)
        if kind == "composite":
            return Call(self.composite(), [a, b], span=span)
        if kind == "global" and self.helpers:
            return Call(GlobalVar(self.pick(self.helpers)), [a, b], span=span)
        lo = self.draw(st.floats(-10, 10))
        return clip(a, a_min=lo, a_max=lo + self.draw(st.floats(0, 10)), span=span)

    def composite(self):
        if self.functions and self.draw(st.booleans()):
            return self.pick(self.functions)  # one function object called twice
        params = [var(self.draw(NAMES), SHAPE) for _ in range(2)]
        inner = _Builder(self.draw, [])
        inner.scalars = self.scalars  # scalar constants shared across scopes get hoisted
        body = inner.body(params, 3, tensor=True)
        attrs = {"Composite": self.draw(st.sampled_from(["npu.conv", "npu.add_relu"]))}
        if self.draw(st.booleans()):
            attrs.update(Primitive=1, ratio=0.25, flag=self.draw(st.booleans()))
        fn = Function(params, body, attrs=attrs, span=self.draw(SPANS))
        self.functions.append(fn)
        return fn

    def body(self, params, max_steps, tensor=False):
        pool = list(params)
        for _ in range(self.draw(st.integers(1, max_steps))):
            pool.append(self.step(pool))
        if not tensor and self.draw(st.integers(0, 3)) == 0:
            return Tuple([pool[-1], self.pick(pool)])
        return pool[-1]


@st.composite
def modules(draw):
    functions, helpers = {}, []
    for k in range(draw(st.integers(0, 2))):
        params = [var(draw(NAMES), SHAPE, span=draw(SPANS)) for _ in range(2)]
        body = _Builder(draw, list(helpers)).body(params, 4, tensor=True)
        functions[f"helper_{k}"] = Function(params, body, span=draw(SPANS))
        helpers.append(f"helper_{k}")
    params = [var(draw(NAMES), SHAPE, span=draw(SPANS)) for _ in range(draw(st.integers(1, 3)))]
    main = Function(params, _Builder(draw, helpers).body(params, 8))
    order = list(functions.items()) + [("main", main)]
    if draw(st.booleans()):
        order.reverse()
    return IRModule(dict(order))


def _spans(mod):
    return [n.span for fn in mod.functions.values() for n in post_order(fn)]


@settings(max_examples=100, deadline=None)
@given(modules())
def test_print_parse_print_is_the_identity(mod):
    text, constants = astext(mod, show_spans=True)
    again = parse(text, constants)
    P.assert_structural_equal(again, mod)
    assert list(again) == list(mod)
    assert _spans(again) == _spans(mod)
    text2, constants2 = astext(again, show_spans=True)
    assert text2 == text
    assert all(a is b for a, b in zip(constants2, constants)) and len(constants2) == len(constants)


@settings(max_examples=25, deadline=None)
@given(modules())
def test_typed_modules_round_trip(mod):
    P.InferType()(mod)
    text, constants = astext(mod, show_spans=True)
    assert "/* ty=" in text
    again = P.InferType()(parse(text, constants))
    P.assert_structural_equal(again, mod)
    assert astext(again, show_spans=True)[0] == text
    for name in mod.functions:  # graph, types and constants survive; names may not (the
        # printer renames clashing variables: %x, %x -> %x, %x_1)
        assert P.fingerprint(again[name], names=False) == P.fingerprint(mod[name], names=False)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(sorted(SCALARS)).flatmap(
        lambda d: st.tuples(st.just(d), SCALARS[d] | st.sampled_from([0, 1]))
    )
)
def test_scalar_literals_round_trip_bit_exactly(case):
    dtype, value = case
    c = const(np.array(value, dtype=dtype))
    back = parse(f"def @main() {{ {print_expr(c)} }}")["main"].body
    assert back.data.dtype == c.data.dtype
    assert back.data.tobytes() == c.data.tobytes()


def test_non_finite_scalars_round_trip_through_meta():
    values = [const(np.float32(np.nan)), const(np.float16(-np.inf)), const(np.float64(np.inf))]
    mod = IRModule.from_expr(Tuple(values))
    text, constants = astext(mod, show_spans=True)
    assert len(constants) == 3
    P.assert_structural_equal(parse(text, constants), mod)


def test_attributes_round_trip_for_conv_and_friends():
    x = var("x", (1, 8, 8, 4), "int8")
    w = const(np.ones((3, 3, 4, 8), np.int8))
    zp, sc = const(0), const(0.5)
    conv = get_op("qnn.conv2d")(
        x,
        w,
        zp,
        zp,
        sc,
        const(np.full(8, 0.25, np.float32)),
        strides=(2, 2),
        padding=(1, 1),
        kernel_size=(3, 3),
        data_layout="NHWC",
        kernel_layout="HWIO",
        channels=8,
    )
    rq = get_op("qnn.requantize")(
        conv,
        const(np.full(8, 0.125, np.float32)),
        zp,
        sc,
        zp,
        axis=3,
        out_dtype="uint8",
        semantics="onnx",
    )
    pad = get_op("nn.pad")(
        dequantize(rq, sc, zp), const(0.0), pad_width=((0, 0), (1, 1), (1, 1), (0, 0))
    )
    mod = P.InferType()(IRModule.from_expr(pad))
    text, constants = astext(mod, show_spans=True)
    assert "pad_width=[[0, 0], [1, 1], [1, 1], [0, 0]]" in text and "axis=3" in text
    again = parse(text, constants)
    P.assert_structural_equal(again, mod)
    assert astext(P.InferType()(again), show_spans=True)[0] == text


@pytest.mark.slow
def test_long_chain_prints_and_parses_without_recursion():
    n = 100_000
    x = var("x", (4,), "float32", span=Span(0, "INPUT", "x"))
    one, e = const(np.float32(1.0)), x
    for i in range(n):
        e = Call(
            (relu, add, subtract)[i % 3],
            [e] if i % 3 == 0 else [e, one],
            span=Span(i, "OP", f"t{i}") if i % 1000 == 0 else None,
        )
    mod = IRModule.from_expr(e)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        text, constants = astext(mod, show_spans=True)
        again = parse(text, constants)
    finally:
        sys.setrecursionlimit(limit)
    assert text.count("\n") == n + 3  # header, def line, the shared 1f, n calls, closing brace
    P.assert_structural_equal(again, mod)
    assert _spans(again) == _spans(mod)
