"""SimplifyExpr: identity reshape/transpose/cast/clip/requantize removed; chains merged."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pass_graphs import assert_same_outputs, float_graphs, float_inputs, op

import partita as P
from partita.ir import IRModule, Span, assert_structural_equal, const, iter_calls, var
from partita.passes.simplify_expr import SimplifyExpr

relu, reshape, transpose, clip, cast = (
    op(n) for n in ("nn.relu", "reshape", "transpose", "clip", "cast")
)
SPAN = Span(3, "RESHAPE", "r")


def check(before_expr, expected_expr):
    out = SimplifyExpr()(IRModule.from_expr(before_expr))
    assert_structural_equal(out, IRModule.from_expr(expected_expr))
    return out


def test_identity_reshape_is_removed():
    x = var("x", (2, 3, 4))
    check(relu(reshape(x, newshape=(0, -1, 4))), relu(x))
    check(relu(reshape(x, newshape=(6, 4))), relu(reshape(x, newshape=(6, 4))))


def test_reshape_of_reshape_is_one_reshape_with_the_outer_span():
    x = var("x", (2, 3, 4))
    out = check(
        reshape(reshape(x, newshape=(6, 4)), newshape=(4, -1), span=SPAN),
        reshape(x, newshape=(4, -1)),
    )
    assert out.main.body.span == SPAN
    # A 0 in the outer newshape referred to the inner result's dimension: it is resolved.
    check(reshape(reshape(x, newshape=(6, 4)), newshape=(0, 2, 2)), reshape(x, newshape=(6, 2, 2)))
    # ... and a pair that restores the shape disappears.
    check(relu(reshape(reshape(x, newshape=(24,)), newshape=(2, 3, 4))), relu(x))


def test_transposes():
    x = var("x", (1, 2, 3, 4))
    check(relu(transpose(x, axes=(0, 1, 2, 3))), relu(x))
    check(relu(transpose(transpose(x, axes=(0, 2, 3, 1)), axes=(0, 3, 1, 2))), relu(x))
    check(
        transpose(transpose(x, axes=(0, 2, 3, 1)), axes=(0, 2, 3, 1)),
        transpose(x, axes=(0, 3, 1, 2)),
    )
    check(transpose(transpose(x), axes=(-1, 0, 1, 2)), transpose(x, axes=(0, 3, 2, 1)))
    y = var("y", (5,))
    check(relu(transpose(y)), relu(y))


def test_identity_cast_only():
    x = var("x", (4,), "int8")
    check(relu(cast(x, dtype="int8")), relu(x))
    check(relu(cast(x, dtype="int32")), relu(cast(x, dtype="int32")))


@pytest.mark.parametrize(
    "dtype, lo, hi, removed",
    [
        ("int8", -128.0, 127.0, True),
        ("int8", -1000.0, math.inf, True),
        ("int8", -127.5, 127.9, False),  # ceil(-127.5) = -127: still clips -128
        ("uint8", 0.0, 255.0, True),
        ("int16", -128.0, 127.0, False),
        ("float32", -math.inf, math.inf, True),
        ("float16", -1e6, 1e6, True),  # +-1e6 rounds to +-inf in float16
        ("float32", -1e6, 1e6, False),
    ],
)
def test_full_range_clip(dtype, lo, hi, removed):
    x = var("x", (4,), dtype)
    c = clip(x, a_min=lo, a_max=hi)
    check(relu(c), relu(x) if removed else relu(c))


def test_clip_of_clip_takes_the_tighter_bounds():
    x = var("x", (4,), "float32")
    check(
        clip(clip(x, a_min=0.0, a_max=6.0), a_min=-1.0, a_max=1.0, span=SPAN),
        clip(x, a_min=0.0, a_max=1.0),
    )
    # Disjoint ranges give a constant: left alone.
    disjoint = clip(clip(x, a_min=0.0, a_max=1.0), a_min=2.0, a_max=3.0)
    check(disjoint, disjoint)
    # int8: the effective integer bounds are merged ([0, 0] and [1, 1] are disjoint).
    y = var("y", (4,), "int8")
    odd = clip(clip(y, a_min=0.0, a_max=0.6), a_min=0.4, a_max=1.0)
    check(odd, odd)
    check(
        clip(clip(y, a_min=-5.5, a_max=100.0), a_min=-10.0, a_max=7.2),
        clip(y, a_min=-5.0, a_max=7.0),
    )


def test_three_clips_collapse_to_one():
    x = var("x", (4,), "int8")
    three = clip(
        clip(clip(x, a_min=-100.0, a_max=100.0), a_min=-50.0, a_max=120.0),
        a_min=-128.0,
        a_max=127.0,
    )
    check(relu(three), relu(clip(x, a_min=-50.0, a_max=100.0)))


def test_identity_requantize():
    requantize = op("qnn.requantize")
    s, z = const(np.float32(0.5)), const(np.int32(3))
    x = var("x", (4,), "int8")
    check(
        relu(requantize(x, s, z, const(np.float32(0.5)), const(np.int32(3)), out_dtype="int8")),
        relu(x),
    )
    keep = [
        requantize(x, s, z, const(np.float32(0.25)), z, out_dtype="int8"),
        requantize(x, s, z, s, const(np.int32(4)), out_dtype="int8"),
        requantize(x, s, z, s, z, out_dtype="int16"),
        requantize(var("w", (4,), "int32"), s, z, s, z, out_dtype="int8"),  # saturates
    ]
    for k in keep:
        check(relu(k), relu(k))


def test_inner_functions_and_composites():
    x, a = var("x", (4,)), var("a", (4,))
    body = relu(cast(a, dtype="float32"))
    plain = P.Function([a], body)
    composite = P.Function([a], body, attrs={"Composite": "c"})
    out = SimplifyExpr()(IRModule.from_expr(P.Tuple([P.Call(plain, [x]), P.Call(composite, [x])])))
    fields = out.main.body.fields
    assert_structural_equal(fields[0].op.body, relu(a))
    assert fields[1].op is composite


def test_type_errors_surface():
    bad = clip(var("x", (4,), "bool"), a_min=0.0, a_max=1.0)
    with pytest.raises(P.TypeInferenceError, match="numeric"):
        SimplifyExpr()(IRModule.from_expr(bad))


BOUNDS = st.sampled_from(
    [-math.inf, -300.0, -128.0, -100.5, -3.0, -0.4, 0.0, 0.6, 2.0, 99.9, 127.0, 200.0, math.inf]
)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["int8", "uint8", "int16", "float32", "float16"]),
    st.lists(st.tuples(BOUNDS, BOUNDS), min_size=1, max_size=4),
    st.integers(0, 2**16),
)
def test_random_clip_chains_compute_the_same_bits(dtype, bounds, seed):
    x = var("x", (16,), dtype)
    e = x
    for lo, hi in bounds:
        lo, hi = min(lo, hi), max(lo, hi)
        finite = math.isfinite(lo) and math.isfinite(hi)
        if dtype.startswith(("int", "uint")) and finite and math.ceil(lo) > math.floor(hi):
            continue
        e = clip(e, a_min=lo, a_max=hi)
    before = IRModule.from_expr(relu(e))
    out = SimplifyExpr()(before)
    rng = np.random.default_rng(seed)
    if dtype.startswith("float"):
        data = rng.choice(
            np.array(
                [-np.inf, -500, -100.5, -1, -0.5, 0, 0.5, 0.6, 100, 6e4, np.inf, np.nan], dtype
            ),
            16,
        )
    else:
        info = np.iinfo(dtype)
        data = rng.integers(info.min, int(info.max) + 1, 16).astype(dtype)
    assert_same_outputs(before, out, {"x": data})
    n_clips = sum(c.op.name == "clip" for c in iter_calls(out.main))
    assert n_clips <= sum(c.op.name == "clip" for c in iter_calls(before.main))


@settings(max_examples=60, deadline=None)
@given(float_graphs(), st.integers(0, 2**16))
def test_random_graphs_compute_the_same_bits(mod, seed):
    out = SimplifyExpr()(mod)
    assert_same_outputs(mod, out, float_inputs(seed))
    for call in iter_calls(out.main):
        if call.op.name in ("reshape", "transpose"):
            assert call.args[0].checked_type != call.checked_type or call.op.name == "transpose"
            assert not (
                call.args[0].op.name == call.op.name if isinstance(call.args[0], P.Call) else False
            )


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["int8", "uint8", "int16"]),
    st.sampled_from(["tflite", "onnx"]),
    st.sampled_from([1e-3, 0.0235, 0.5, 3.0]),
    st.integers(-20, 20),
    st.booleans(),
    st.integers(0, 2**16),
)
def test_removed_requantize_was_an_identity(dtype, semantics, scale, zp, per_channel, seed):
    x = var("x", (2, 3), dtype)
    n = (3,) if per_channel else ()
    s = np.full(n, scale, np.float32) * (np.arange(3) + 1 if per_channel else 1)
    params = [const(s.astype(np.float32)), const(np.full(n, zp, np.int32))] * 2
    rq = op("qnn.requantize")(x, *params, axis=1, out_dtype=dtype, semantics=semantics)
    before = IRModule.from_expr(rq)
    out = SimplifyExpr()(before)
    assert out.main.body is out.main.params[0]
    info = np.iinfo(dtype)
    data = np.random.default_rng(seed).integers(info.min, int(info.max) + 1, (2, 3)).astype(dtype)
    assert_same_outputs(before, out, {"x": data})


def test_written_in_the_text_format():
    before = P.parse("""
    def @main(%x: Tensor[(1, 2, 3, 4), int8]) {
      %0 = transpose(%x, axes=[0, 2, 3, 1]);
      %1 = transpose(%0, axes=[0, 3, 1, 2]);
      %2 = clip(%1, a_min=-128f, a_max=127f);
      %3 = clip(%2, a_min=0f, a_max=100f);
      %4 = clip(%3, a_min=-5f, a_max=50f);
      %5 = reshape(%4, newshape=[2, 12]);
      %6 = reshape(%5, newshape=[1, 2, 3, 4]);
      cast(%6, dtype="int8")
    }""")
    expected = P.parse("""
    def @main(%x: Tensor[(1, 2, 3, 4), int8]) {
      clip(%x, a_min=0f, a_max=50f)
    }""")
    assert_structural_equal(SimplifyExpr()(before), expected)
