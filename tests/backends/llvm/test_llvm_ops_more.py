"""Float average pooling and max pooling (FPOOL), linear resizing (FRESIZE), leaky relu, hardswish,
broadcast_to, qnn.requantize of any integer data, integer dense products (EXACT_INT_DENSE), integer
clip and division on the LLVM backend: bit for bit against the reference interpreter under
hypothesis, and the ONNX, PyTorch and TFLite test models that use them built whole."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import partita as P
from partita.cli.models import load_model
from partita.ir import Constant, Function, IRModule, TensorType, Var
from partita.ops import get_op

MODELS = Path(__file__).resolve().parents[2] / "models"
F32, I32 = np.float32, np.int32


def sample(rng, shape, dtype, span=None):
    """Random data: float32 normal (a few exact zeros of both signs), integers over the
    dtype's range (or +-span)."""
    if dtype == "float32":
        x = rng.standard_normal(shape).astype(np.float32) * F32(3)
        flat = x.reshape(-1)
        if flat.size > 4:
            flat[rng.integers(0, flat.size, 2)] = F32(-0.0)
            flat[rng.integers(0, flat.size, 1)] = F32(0.0)
        return x
    info = np.iinfo(dtype)
    lo, hi = (info.min, info.max) if span is None else (max(info.min, -span), min(info.max, span))
    return rng.integers(lo, hi + 1, shape, dtype=np.int64).astype(dtype)


def run_llvm(params, out, kinds=None, seed=0, feeds=None, draw=sample, target="llvm"):
    """Build Function(params, out) for ``target`` (one llvm region, with ``kinds`` among its
    kernels), run it on ``feeds`` (or ``draw(rng, shape, dtype)`` per parameter): the
    outputs and the interpreter's, as lists of contiguous arrays."""
    mod = IRModule({"main": Function(params, out)})
    exe = P.build(mod, target)
    assert [s.target for s in exe.steps] == ["llvm"]
    if kinds is not None:
        assert kinds <= {k.split()[0] for k in exe.steps[0].region.kernels}
    rng = np.random.default_rng(seed)
    if feeds is None:
        feeds = [draw(rng, p.type_annotation.shape, p.type_annotation.dtype) for p in params]
    got = exe.run(*feeds)
    got = got if isinstance(got, (list, tuple)) else [got]
    return ([np.ascontiguousarray(g) for g in got],
            [np.ascontiguousarray(w) for w in P.interpret(mod, feeds)])


def assert_same_bits(got, want):
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.array_equal(g.view(np.uint8), w.view(np.uint8))  # bits: -0.0, nan too


def assert_exact(params, out, kinds=None, seed=0, span=None, feeds=None):
    """Build for llvm (one region), run on random inputs: the same bits as the interpreter."""
    assert_same_bits(*run_llvm(params, out, kinds, seed, feeds,
                               lambda rng, shape, dtype: sample(rng, shape, dtype, span)))


@settings(max_examples=30, deadline=None)
@given(
    h=st.integers(1, 9), w=st.integers(1, 9), c=st.integers(1, 4), n=st.integers(1, 2),
    pool=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    strides=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    pads=st.tuples(*[st.integers(0, 2)] * 4), include=st.booleans(), ceil=st.booleans(),
    layout=st.sampled_from(["NHWC", "NCHW"]), seed=st.integers(0, 99),
)  # fmt: skip
def test_float_average_pooling(
    h, w, c, n, pool, strides, dilation, pads, include, ceil, layout, seed
):
    extent = [d * (k - 1) + 1 for d, k in zip(dilation, pool)]
    top, left, bottom, right = pads
    assume(max(top, bottom) < extent[0] and max(left, right) < extent[1])
    assume(extent[0] <= h + top + bottom and extent[1] <= w + left + right)
    shape = (n, h, w, c) if layout == "NHWC" else (n, c, h, w)
    x = Var("x", TensorType(shape, "float32"))
    out = get_op("nn.avg_pool2d")(
        x, pool_size=pool, strides=strides, dilation=dilation, padding=pads,
        count_include_pad=include, ceil_mode=ceil, layout=layout,
    )  # fmt: skip
    assert_exact([x], out, {"FPOOL"}, seed=seed)


def test_float_average_of_negative_zeros_keeps_the_reference_sign():
    """numpy's sum starts at +0.0, so an average of -0.0 taps is +0.0: the kernel's too."""
    x = Var("x", TensorType((1, 4, 4, 2), "float32"))
    out = get_op("nn.avg_pool2d")(x, pool_size=(2, 2), padding=(1, 1, 0, 0), layout="NHWC")
    assert_exact([x], out, {"FPOOL"}, feeds=[np.full((1, 4, 4, 2), -0.0, np.float32)])


@settings(max_examples=40, deadline=None)
@given(
    h=st.integers(2, 8), w=st.integers(2, 8), pool=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    stride=st.integers(1, 2), pad=st.integers(0, 1), ceil=st.booleans(),
    dtype=st.sampled_from(["float32", "int8", "uint8", "int32"]), seed=st.integers(0, 99),
    layout=st.sampled_from(["NCHW", "NHWC"]),
)  # fmt: skip
def test_max_pooling(h, w, pool, stride, pad, ceil, dtype, seed, layout):
    """FPOOL takes what lower.py's NHWC MAXPOOL does not (NCHW, int32); both: nan wins and of
    equal taps the later, as numpy's max (0.0 and -0.0)."""
    assume(min(pool) > pad and pool[0] <= h + 2 * pad and pool[1] <= w + 2 * pad)
    shape = (2, 3, h, w) if layout == "NCHW" else (2, h, w, 3)
    x = Var("x", TensorType(shape, dtype))
    out = get_op("nn.max_pool2d")(
        x, pool_size=pool, strides=(stride, stride), padding=(pad,) * 4, ceil_mode=ceil,
        layout=layout,
    )  # fmt: skip
    feeds = [sample(np.random.default_rng(seed), shape, dtype)]
    if dtype == "float32":
        feeds[0].reshape(-1)[:2] = np.nan
        feeds[0].reshape(-1)[7::5] = np.float32(-0.0)
        feeds[0].reshape(-1)[9::5] = np.float32(0.0)
    nhwc_8bit = layout == "NHWC" and dtype != "int32"
    assert_exact([x], out, {"MAXPOOL" if nhwc_8bit else "FPOOL"}, feeds=feeds)


@settings(max_examples=30, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data(),
    dtype=st.sampled_from(["float32", "int8", "uint8", "int32", "int64"]),
    last=st.booleans(), keep=st.booleans(), seed=st.integers(0, 99),
)  # fmt: skip
def test_argmax_and_integer_max(shape, data, dtype, last, keep, seed):
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)))
    x = Var("x", TensorType(tuple(shape), dtype))
    rng = np.random.default_rng(seed)
    feed = sample(rng, tuple(shape), dtype, span=3)  # small values: ties
    if dtype == "float32":
        feed = np.round(feed)
        feed.reshape(-1)[rng.integers(0, feed.size, 2)] = np.nan
    out = get_op("argmax")(x, axis=tuple(axes) or None, select_last_index=last, keepdims=keep)
    assert_exact([x], out, {"ARGMAX"}, feeds=[feed])
    if dtype != "float32":
        assert_exact([x], get_op("max")(x, axis=tuple(axes) or None), {"FREDUCE"}, feeds=[feed])


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_fills_are_elementwise_steps(dtype):
    x = Var("x", TensorType((2, 3), dtype))
    ones, zeros = get_op("ones_like")(x), get_op("zeros")(shape=(3,), dtype=dtype)
    out = get_op("where")(get_op("cast")(x, dtype="bool"), ones, zeros)
    feeds = [sample(np.random.default_rng(1), (2, 3), "int32", span=1).astype(dtype)]
    assert_exact([x], out, {"EWISE"}, feeds=feeds)


MODES = ["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn"]


@settings(max_examples=30, deadline=None)
@given(
    h=st.integers(1, 7), w=st.integers(1, 7), c=st.integers(1, 3), n=st.integers(1, 2),
    oh=st.integers(1, 12), ow=st.integers(1, 12), mode=st.sampled_from(MODES),
    layout=st.sampled_from(["NHWC", "NCHW"]), seed=st.integers(0, 99),
)  # fmt: skip
def test_linear_resize(h, w, c, n, oh, ow, mode, layout, seed):
    shape = (n, h, w, c) if layout == "NHWC" else (n, c, h, w)
    x = Var("x", TensorType(shape, "float32"))
    out = get_op("image.resize2d")(
        x, size=(oh, ow), layout=layout, method="linear", coordinate_transformation_mode=mode
    )
    assert_exact([x], out, {"FRESIZE"}, seed=seed)


@settings(max_examples=15, deadline=None)
@given(alpha=st.floats(-2, 2, width=32), seed=st.integers(0, 99))
def test_leaky_relu_fuses_into_the_elementwise_chain(alpha, seed):
    x, y = Var("x", TensorType((3, 5, 4), "float32")), Var("y", TensorType((4,), "float32"))
    out = get_op("nn.leaky_relu")(get_op("add")(x, y), alpha=alpha)
    mod = IRModule({"main": Function([x, y], out)})
    assert [k.split()[0] for k in P.build(mod, "llvm").steps[0].region.kernels] == ["EWISE"]
    assert_exact([x, y], out, seed=seed)


@pytest.mark.parametrize("dtype", ["float32", "int8", "int32", "bool"])
def test_broadcast_to_and_hardswish_are_elementwise_steps(dtype):
    x = Var("x", TensorType((3, 1, 4), dtype))
    out = get_op("broadcast_to")(x, shape=(2, 3, 5, 4))
    if dtype == "float32":
        out = get_op("nn.hardswish")(get_op("multiply")(out, Constant(F32(2.5))))
    feeds = None
    if dtype == "bool":
        feeds = [np.random.default_rng(0).random((3, 1, 4)) < 0.5]
    assert_exact([x], out, {"EWISE"}, feeds=feeds)


SEMANTICS = ["tflite", "tflite_builtin", "tflite_double", "onnx", "fbgemm", "onednn"]


@settings(max_examples=80, deadline=None)
@given(
    dtype=st.sampled_from(["int16", "int32", "int64", "int8"]),
    out_dtype=st.sampled_from(["int8", "uint8", "int16", "int32"]),
    semantics=st.sampled_from(SEMANTICS), per_channel=st.booleans(),
    axis=st.sampled_from([-1, 1]), seed=st.integers(0, 999),
    log_ratio=st.floats(-12, 4),
)  # fmt: skip
def test_requantize_of_any_integer_data(
    dtype, out_dtype, semantics, per_channel, axis, seed, log_ratio
):
    shape = (2, 3, 5)
    n = shape[axis] if per_channel else 1
    rng = np.random.default_rng(seed)
    s_in = (rng.uniform(0.5, 2.0, n) * 2.0**log_ratio).astype(F32)
    s_out = rng.uniform(0.5, 2.0, n).astype(F32)
    zp_in = rng.integers(-20, 20, n).astype(I32)
    zp_out = rng.integers(-5, 5, n).astype(I32)
    if semantics in ("fbgemm", "onednn"):
        zp_in = (zp_in + F32(0.25)).astype(F32)  # the float bias they allow
    if semantics == "onednn":
        s_out = s_out[:1].repeat(n)  # one output scale (oneDNN's reciprocal is per tensor)
    if not per_channel:
        s_in, s_out, zp_in, zp_out = (v.reshape(()) for v in (s_in, s_out, zp_in, zp_out))
    x = Var("x", TensorType(shape, dtype))
    out = get_op("qnn.requantize")(
        x, s_in, zp_in, s_out, zp_out, axis=axis, out_dtype=out_dtype, semantics=semantics
    )
    span = 1 << 40 if dtype == "int64" else None  # TFLite's int64 form takes |x| < 2**47
    mod = IRModule({"main": Function([x], out)})
    try:
        P.interpret(mod, [np.zeros(shape, dtype)])
    except Exception:  # noqa: BLE001 - parameters the reference itself refuses
        assume(False)
    assert_exact([x], out, seed=seed, span=span)


@settings(max_examples=25, deadline=None)
@given(
    dtype=st.sampled_from(["int8", "uint8", "int16", "int32", "int64"]),
    out_dtype=st.sampled_from(["int32", "int64"]), const=st.booleans(),
    density=st.floats(0.0, 1.0), m=st.integers(1, 4), k=st.integers(1, 9),
    units=st.integers(1, 7), seed=st.integers(0, 99),
)  # fmt: skip
def test_integer_dense_products_are_exact(dtype, out_dtype, const, density, m, k, units, seed):
    rng = np.random.default_rng(seed)
    x = Var("x", TensorType((2, m, k), dtype))
    wdata = sample(rng, (units, k), dtype) * (rng.random((units, k)) < density)
    wdata = wdata.astype(dtype)
    params = [x]
    if const:
        w = Constant(wdata)
    else:
        w = Var("w", TensorType((units, k), dtype))
        params.append(w)
    out = get_op("nn.dense")(x, w, out_dtype=out_dtype)
    assert_exact(params, out, {"EXACT_INT_DENSE"}, seed=seed)


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8"])
def test_integer_division_and_clip_as_the_reference(dtype):
    x, y = Var("x", TensorType((4, 6), dtype)), Var("y", TensorType((6,), dtype))
    out = get_op("clip")(get_op("divide")(x, y), a_min=-7.5, a_max=1e30)
    rng = np.random.default_rng(3)
    info = np.iinfo(dtype)
    xs = sample(rng, (4, 6), dtype)
    xs[0, :3] = info.min  # MIN / -1 wraps
    ys = np.array([0, -1, 3, -7, 1, 2], dtype)  # / 0 gives 0
    assert_exact([x, y], out, {"EWISE"}, feeds=[xs, ys])


ONNX = MODELS / "onnx" / "ops"
TFLITE = MODELS / "tflite" / "ops"
FILES = [
    ONNX / "avg_pool.onnx", ONNX / "avg_pool_ceil.onnx", ONNX / "avg_pool_pad.onnx",
    ONNX / "leaky_relu.onnx", ONNX / "resize_linear.onnx", ONNX / "resize_linear_ac.onnx",
    MODELS / "pytorch" / "pt2e_xnnpack_ops.pt2",
    TFLITE / "resize_bilinear_align_corners.tflite", TFLITE / "resize_bilinear_asymmetric.tflite",
    TFLITE / "resize_bilinear_half_pixel.tflite", TFLITE / "sum_axis3.tflite",
    TFLITE / "sum_hw.tflite",
]  # fmt: skip


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_models_build_whole_and_equal_the_interpreter(path):
    mod = load_model(str(path))
    exe = P.build(mod, "llvm")
    assert [s.target for s in exe.steps] == ["llvm"]
    rng = np.random.default_rng(7)
    for _ in range(3):
        feeds = [sample(rng, p.checked_type.shape, p.checked_type.dtype)
                 for p in mod["main"].params]  # fmt: skip
        got = exe.run(*feeds)
        got = got if isinstance(got, (list, tuple)) else [got]
        for g, w in zip(got, P.interpret(mod, feeds)):
            g, w = np.ascontiguousarray(g), np.ascontiguousarray(w)
            assert g.dtype == w.dtype and np.array_equal(g.view(np.uint8), w.view(np.uint8))


@pytest.mark.parametrize(
    "op, attrs",
    [
        ("nn.avg_pool2d", {"pool_size": (2, 2), "layout": "NHWC"}),
        ("image.resize2d", {"size": (4, 4), "layout": "NHWC", "method": "linear"}),
    ],
)
def test_float16_runs_on_the_float32_kernels(op, attrs):
    """Widened between casts (half_lower.py; its tolerance tested in test_llvm_half.py)."""
    x = Var("x", TensorType((1, 3, 3, 2), "float16"))
    mod = IRModule({"main": Function([x], get_op(op)(x, **attrs))})
    kernels = {k.split()[0] for k in P.build(mod, "llvm").steps[0].region.kernels}
    assert kernels & {"FPOOL", "FRESIZE"}


@pytest.mark.parametrize("op", ["nn.batch_norm", "split", "qnn.dynamic_quantize"])
def test_a_tuple_valued_op_returned_whole(op):
    """The function's result is the op's whole tuple: each field is lowered as the TupleGetItem
    that would read it (these were refused until session 8)."""
    x = Var("x", TensorType((1, 4, 6, 6), "float32"))
    if op == "nn.batch_norm":
        body = get_op(op)(x, *[Constant(np.full(4, 0.5 + i, np.float32)) for i in range(4)])
    elif op == "split":
        body = get_op(op)(x, indices_or_sections=2, axis=1)
    else:
        body = get_op(op)(x)
    mod = P.InferType()(IRModule({"main": Function([x], body)}))
    data = np.random.default_rng(4).standard_normal((1, 4, 6, 6)).astype(np.float32)
    got, want = P.build(mod, "llvm").run(data), P.interpret(mod, [data])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w)


BATCHED = [
    ("nn.max_pool2d", "int8", {"pool_size": (2, 2), "padding": (1, 0, 1, 1)}),
    ("nn.max_pool2d", "float32", {"pool_size": (3, 2), "strides": (2, 1)}),
    ("qnn.avg_pool2d", "int8", {"pool_size": (2, 2), "semantics": "tflite"}),
    ("qnn.avg_pool2d", "uint8", {"pool_size": (2, 3), "semantics": "onnx", "padding": (1,) * 4}),
    ("mean", "int8", {"axis": (1, 2), "keepdims": True}),
]


@pytest.mark.parametrize("op, dtype, attrs", BATCHED, ids=lambda v: str(v)[:20])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_pooling_kernels_loop_over_the_batch(op, dtype, attrs, layout):
    """MAXPOOL, AVGPOOL and FMEAN once read only the first image of a batch."""
    if op == "mean" and layout == "NCHW":
        pytest.skip("FMEAN is NHWC only")
    shape = (3, 5, 6, 4) if layout == "NHWC" else (3, 4, 5, 6)
    x = Var("x", TensorType(shape, dtype))
    if op == "qnn.avg_pool2d":
        zp = I32(3 if dtype == "int8" else 130)
        out = get_op(op)(x, F32(0.05), zp, F32(0.07), zp, layout=layout, **attrs)
    elif op == "mean":  # FMEAN: the mean of dequantized 8-bit data
        out = get_op(op)(get_op("qnn.dequantize")(x, F32(0.05), I32(3)), **attrs)
    else:
        out = get_op(op)(x, layout=layout, **attrs)
    assert_exact([x], out, seed=5)


BUILTIN = sorted(
    p.name for p in TFLITE.glob("*.tflite")
    if p.name.startswith(("conv2d_", "dwconv_", "fc_", "quantize_", "mean_", "softmax"))
)  # fmt: skip


@pytest.mark.parametrize("name", BUILTIN)
def test_tflite_builtin_semantics_build_and_equal_the_interpreter(name):
    """TFLite's optimized kernels' arithmetic (semantics="tflite_builtin"): the output stage
    rounding ties upward twice, MEAN's 16-channel blocks, SOFTMAX's float table."""
    from partita.frontends import from_tflite

    mod = from_tflite(str(TFLITE / name), semantics="tflite_builtin")
    exe = P.build(mod, "llvm")
    rng = np.random.default_rng(11)
    for _ in range(3):
        feeds = [sample(rng, p.checked_type.shape, p.checked_type.dtype)
                 for p in mod["main"].params]  # fmt: skip
        for g, w in zip(exe.run(*feeds), P.interpret(mod, feeds)):
            assert g.dtype == w.dtype and np.array_equal(g, w)
