"""ConvertLayout: NCHW graphs run in NHWC with transposes only at the boundaries."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pass_graphs import assert_same_outputs, op

import partita as P
from partita.ir import (
    Call,
    Function,
    IRModule,
    Span,
    Tuple,
    assert_structural_equal,
    const,
    iter_calls,
    var,
)
from partita.passes import Sequential
from partita.passes.convert_layout import ConvertLayout
from partita.passes.simplify_expr import SimplifyExpr

conv, relu, add, transpose = (op(n) for n in ("nn.conv2d", "nn.relu", "add", "transpose"))
TO_NHWC, TO_NCHW, OIHW_TO_HWIO = (0, 2, 3, 1), (0, 3, 1, 2), (2, 3, 1, 0)
RNG = np.random.default_rng(0)
SPAN = Span(4, "CONV_2D", "c1")


def weight(o, i, k=3, dtype=np.float32, rng=RNG):
    return rng.integers(-3, 4, (o, i, k, k)).astype(dtype)


def nhwc_conv(data, w, **attrs):
    return conv(
        data,
        const(np.transpose(w, OIHW_TO_HWIO)),
        data_layout="NHWC",
        kernel_layout="HWIO",
        **attrs,
    )


def names(mod):
    return [c.op.name for c in iter_calls(mod.main)]


def random_input(shape, dtype="float32"):
    if dtype == "float32":
        return {"x": RNG.integers(-4, 5, shape).astype(np.float32)}
    return {"x": RNG.integers(-128, 128, shape).astype(dtype)}


def test_conv_relu_conv_add_conv_has_transposes_only_at_the_ends():
    w1, w2, w3 = weight(4, 3), weight(4, 4), weight(2, 4, 1)
    bias = np.arange(4, dtype=np.float32).reshape(4, 1, 1)
    x = var("x", (1, 3, 8, 8))
    c1 = conv(x, const(w1), padding=(1, 1), span=SPAN)
    c2 = conv(relu(c1), const(w2), padding=(1, 1))
    before = IRModule.from_expr(conv(add(c2, const(bias)), const(w3)))

    t = transpose(x, axes=TO_NHWC)
    e1 = nhwc_conv(t, w1, padding=(1, 1))
    e2 = nhwc_conv(relu(e1), w2, padding=(1, 1))
    e3 = nhwc_conv(add(e2, const(bias.reshape(1, 1, 4))), w3)
    expected = IRModule.from_expr(transpose(e3, axes=TO_NCHW))

    out = ConvertLayout()(before)
    assert_structural_equal(out, expected)
    assert_structural_equal(SimplifyExpr()(out), expected)
    assert names(out).count("transpose") == 2
    first_conv = next(c for c in iter_calls(out.main) if c.op.name == "nn.conv2d")
    assert first_conv.span == SPAN
    assert_same_outputs(before, out, random_input((1, 3, 8, 8)))


def test_already_converted_or_unrequested_graphs_are_unchanged():
    x = var("x", (1, 8, 8, 3))
    nhwc = IRModule.from_expr(relu(nhwc_conv(x, weight(4, 3))))
    assert ConvertLayout()(nhwc).main is nhwc.main
    y = var("y", (1, 3, 8, 8))
    nchw = IRModule.from_expr(relu(conv(y, const(weight(4, 3)))))
    assert ConvertLayout(desired_layouts={})(nchw).main is nchw.main


def test_other_kernel_layouts_and_non_constant_weights():
    w = weight(4, 3)
    x, k = var("x", (1, 3, 6, 6)), var("k", (4, 3, 3, 3))
    before = IRModule.from_expr(Tuple([conv(x, const(w)), conv(x, k)]))
    out = ConvertLayout(desired_layouts={"nn.conv2d": ("NHWC", "OHWI")})(before)
    t = transpose(x, axes=TO_NHWC)
    ohwi = dict(data_layout="NHWC", kernel_layout="OHWI")
    c1 = conv(t, const(np.transpose(w, (0, 2, 3, 1))), **ohwi)
    c2 = conv(t, transpose(k, axes=(0, 2, 3, 1)), **ohwi)
    expected = Function([x, k], Tuple([transpose(c1, axes=TO_NCHW), transpose(c2, axes=TO_NCHW)]))
    assert_structural_equal(out, IRModule.from_expr(expected))
    # "default" keeps the kernel layout.
    out = ConvertLayout(desired_layouts={"nn.conv2d": ("NHWC", "default")})(before)
    assert {c.attrs.kernel_layout for c in iter_calls(out.main) if c.op.name == "nn.conv2d"} == {
        "OIHW"
    }
    assert_same_outputs(before, out, {**random_input((1, 3, 6, 6)), "k": w})


def test_unknown_ops_get_the_original_layout_back():
    x, w = var("x", (1, 2, 4, 4)), weight(3, 2)
    c = relu(conv(x, const(w)))
    before = IRModule.from_expr(
        Tuple([op("reshape")(c, newshape=(1, -1)), op("nn.softmax")(c, axis=1)])
    )
    out = ConvertLayout()(before)
    r = relu(nhwc_conv(transpose(x, axes=TO_NHWC), w))
    # reshape does not know layouts: it gets NCHW back; softmax follows with its axis.
    expected = Tuple(
        [
            op("reshape")(transpose(r, axes=TO_NCHW), newshape=(1, -1)),
            transpose(op("nn.softmax")(r, axis=3), axes=TO_NCHW),
        ]
    )
    assert_structural_equal(out, IRModule.from_expr(expected))
    assert_same_outputs(before, out, random_input((1, 2, 4, 4)))


def test_bias_add_pool_concatenate_and_mean_follow():
    x = var("x", (1, 2, 6, 6))
    c = op("nn.bias_add")(conv(x, const(weight(4, 2))), const(np.float32([1, 2, 3, 4])), axis=1)
    p = op("nn.max_pool2d")(c, pool_size=(2, 2), strides=(2, 2))
    g = op("nn.global_avg_pool2d")(c)
    cat = op("concatenate")(
        Tuple([p, op("nn.avg_pool2d")(c, pool_size=(2, 2), strides=(2, 2))]), axis=1
    )
    m = op("mean")(cat, axis=(2, 3))
    before = IRModule.from_expr(Tuple([m, g, op("sum")(cat, axis=(1,), keepdims=True)]))
    out = ConvertLayout()(before)
    calls = {c.op.name: c for c in iter_calls(out.main)}
    assert calls["nn.bias_add"].attrs.axis == 3
    assert calls["nn.max_pool2d"].attrs.layout == "NHWC"
    assert calls["nn.avg_pool2d"].attrs.layout == "NHWC"
    assert calls["nn.global_avg_pool2d"].attrs.layout == "NHWC"
    assert calls["concatenate"].attrs.axis == 3
    assert calls["mean"].attrs.axis == (1, 2)
    assert calls["sum"].attrs.axis == (3,)
    # mean's (N, C) result needs no transpose; the global pool and the sum go back to NCHW.
    assert names(out).count("transpose") == 3
    assert out.main.body.fields[0] is calls["mean"]
    assert_same_outputs(before, out, random_input((1, 2, 6, 6)))


def test_qnn_chain_with_per_channel_requantize():
    x = var("x", (1, 3, 5, 5), "int8")
    w = RNG.integers(-20, 20, (4, 3, 3, 3)).astype(np.int8)
    s, z = const(np.float32(0.05)), const(np.int32(0))
    wscale = const(np.float32([0.01, 0.02, 0.03, 0.04]))
    qc = op("qnn.conv2d")(x, const(w), const(np.int32(2)), z, s, wscale, padding=(1, 1))
    rq = op("qnn.requantize")(
        qc,
        const(np.float32([5e-4, 1e-3, 1.5e-3, 2e-3])),
        const(np.int32([0, 0, 0, 0])),
        const(np.float32(0.1)),
        const(np.int32(-3)),
        axis=1,
        out_dtype="int8",
    )
    clipped = op("clip")(rq, a_min=-3.0, a_max=127.0)
    deq = op("qnn.dequantize")(clipped, const(np.float32(0.1)), const(np.int32(-3)))
    before = IRModule.from_expr(deq)
    out = ConvertLayout()(before)
    calls = {c.op.name: c for c in iter_calls(out.main)}
    assert calls["qnn.conv2d"].attrs.data_layout == "NHWC"
    assert calls["qnn.conv2d"].args[1].data.shape == (3, 3, 3, 4)
    assert calls["qnn.requantize"].attrs.axis == 3
    assert calls["qnn.dequantize"].attrs.axis == -1  # scalar parameters: axis left alone
    assert names(out).count("transpose") == 2
    assert_same_outputs(before, out, random_input((1, 3, 5, 5), "int8"))


def qparams(scale=0.1, zp=-3):
    return [const(np.float32(scale)), const(np.int32(zp))]


def test_qnn_pad_add_pool_and_softmax_follow():
    x = var("x", (1, 2, 6, 6), "int8")
    w = RNG.integers(-20, 20, (3, 2, 3, 3)).astype(np.int8)
    qc = op("qnn.conv2d")(
        x,
        const(w),
        const(np.int32(-3)),
        const(np.int32(0)),
        const(np.float32(0.1)),
        const(np.float32(0.02)),
    )
    rq = op("qnn.requantize")(
        qc, const(np.float32(2e-3)), const(np.int32(0)), *qparams(), out_dtype="int8"
    )
    rq = op("nn.pad")(rq, const(np.int8(-3)), pad_width=((0, 0), (0, 0), (1, 1), (2, 0)))
    per_channel = [const(np.float32([0.1, 0.2, 0.3])), const(np.int32([1, -2, 3]))]
    added = op("qnn.add")(
        rq, const(np.int8(5)), *per_channel, *qparams(0.5, 0), *qparams(), lhs_axis=1
    )
    pooled = op("qnn.avg_pool2d")(added, *qparams(), *qparams(), pool_size=(2, 2))
    soft = op("qnn.softmax")(pooled, *qparams(), *qparams(1 / 256, -128), axis=1)
    before = IRModule.from_expr(soft)
    out = ConvertLayout()(before)
    calls = {c.op.name: c for c in iter_calls(out.main)}
    assert calls["nn.pad"].attrs.pad_width == ((0, 0), (1, 1), (2, 0), (0, 0))
    assert calls["qnn.add"].attrs.lhs_axis == 3 and calls["qnn.add"].attrs.rhs_axis == -1
    assert calls["qnn.avg_pool2d"].attrs.layout == "NHWC"
    assert calls["qnn.softmax"].attrs.axis == 3
    assert names(out).count("transpose") == 2
    assert_same_outputs(before, out, random_input((1, 2, 6, 6), "int8"))


def test_pools_follow_only_converted_inputs_and_can_be_requested():
    x = var("x", (1, 2, 4, 4))
    pool = op("nn.max_pool2d")(x, pool_size=(2, 2))
    before = IRModule.from_expr(relu(pool))
    assert ConvertLayout()(before).main is before.main
    out = ConvertLayout(desired_layouts={"nn.max_pool2d": "NHWC"})(before)
    p = op("nn.max_pool2d")(transpose(x, axes=TO_NHWC), pool_size=(2, 2), layout="NHWC")
    assert_structural_equal(out, IRModule.from_expr(transpose(relu(p), axes=TO_NCHW)))


def test_composites_are_left_alone_and_inner_functions_converted():
    a = var("a", (1, 2, 4, 4))
    comp = Function(
        [a], relu(conv(a, const(weight(2, 2)), padding=(1, 1))), attrs={"Composite": "npu.conv"}
    )
    plain = Function([a], relu(conv(a, const(weight(2, 2)))))
    x = var("x", (1, 2, 4, 4))
    out = ConvertLayout()(IRModule.from_expr(Call(plain, [Call(comp, [x])])))
    assert out.main.body.args[0].op is comp
    assert [c.op.name for c in iter_calls(out.main.body.op)].count("transpose") == 2


def test_bad_desired_layouts_are_refused():
    mod = IRModule.from_expr(relu(var("x", (1,))))
    with pytest.raises(P.OpNotFoundError, match="did you mean nn.conv2d"):
        ConvertLayout(desired_layouts={"nn.conv2": ("NHWC", "HWIO")})(mod)
    with pytest.raises(P.PartitaError, match="nn.relu has no layout attribute"):
        ConvertLayout(desired_layouts={"nn.relu": ("NHWC",)})(mod)
    with pytest.raises(P.PartitaError, match="does not support kernel_layout='HWCN'"):
        ConvertLayout(desired_layouts={"nn.conv2d": ("NHWC", "HWCN")})(mod)
    with pytest.raises(P.PartitaError, match=r"expected \(data layout, kernel layout\)"):
        ConvertLayout(desired_layouts={"nn.conv2d": ("NHWC", "HWIO", "x")})(mod)


# ---- random NCHW graphs: the interpreter gives the same bits before and after -------------------

UNARY = ["relu", "clip", "bias_add", "add_channel", "add_scalar", "max_pool", "reshape"]


@st.composite
def nchw_graphs(draw):
    c = draw(st.integers(1, 3))
    x = var("x", (1, c, 4, 4))
    pool = [x, _node(draw, "conv", x, c, [x])]
    for _ in range(draw(st.integers(1, 6))):
        a = pool[-1] if draw(st.booleans()) else draw(st.sampled_from(pool))
        channels = a.checked_type.shape[1] if a.type_or_none else P.infer_type(a).shape[1]
        kind = draw(st.sampled_from(["conv", "conv", "binary", "concat", *UNARY]))
        pool.append(_node(draw, kind, a, channels, pool))
    picks = draw(st.lists(st.sampled_from(pool[1:]), min_size=1, max_size=3, unique_by=id))
    return IRModule.from_expr(Tuple(picks) if len(picks) > 1 else picks[0])


def _node(draw, kind, a, channels, pool):
    if kind == "conv":
        o, g = draw(st.sampled_from([(channels, 1), (2 * channels, channels), (2, 1)]))
        rng = np.random.default_rng(draw(st.integers(0, 1000)))
        return conv(a, const(weight(o, channels // g, rng=rng)), padding=(1, 1), groups=g)
    if kind == "binary":
        b = draw(st.sampled_from(pool))
        same = P.infer_type(b).shape == P.infer_type(a).shape
        return add(a, b) if same else relu(a)
    if kind == "concat":
        return op("concatenate")(Tuple([a, relu(a)]), axis=1)
    if kind == "relu":
        return relu(a)
    if kind == "clip":
        return op("clip")(a, a_min=-2.0, a_max=3.0)
    if kind == "bias_add":
        return op("nn.bias_add")(a, const(np.arange(channels, dtype=np.float32)))
    if kind == "add_channel":
        return add(a, const(np.arange(channels, dtype=np.float32).reshape(channels, 1, 1)))
    if kind == "add_scalar":
        return add(const(np.float32(2)), a)
    if kind == "max_pool":
        return op("nn.max_pool2d")(a, pool_size=(3, 3), padding=(1, 1))
    return op("reshape")(a, newshape=(1, channels, -1, 2))  # not understood: back to NCHW


@settings(max_examples=40, deadline=None)
@given(nchw_graphs())
def test_random_nchw_graphs_compute_the_same_bits(mod):
    out = Sequential([ConvertLayout(), SimplifyExpr()])(mod)
    shape = mod.main.params[0].type_annotation.shape
    x = np.random.default_rng(len(names(mod))).integers(-4, 5, shape).astype(np.float32)
    assert_same_outputs(mod, out, {"x": x})
    for call in iter_calls(out.main):
        if call.op.name == "nn.conv2d":
            assert call.attrs.data_layout == "NHWC"


def test_long_chain_without_recursion():
    import sys

    x = var("x", (1, 2, 3, 3))
    e = conv(x, const(weight(2, 2)), padding=(1, 1))
    for i in range(5000):
        e = relu(e) if i % 2 else add(e, const(np.float32([1, 2]).reshape(2, 1, 1)))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        out = ConvertLayout()(IRModule.from_expr(e))
    finally:
        sys.setrecursionlimit(limit)
    assert names(out).count("transpose") == 2
