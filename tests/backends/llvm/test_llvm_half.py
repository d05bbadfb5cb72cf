"""float16 arithmetic on the LLVM backend (backends/llvm/half_lower.py): each float16 op widened
to its float32 kernels between casts, against the reference interpreter, with the tolerance
half_lower.WIDENED states for the op: "exact" the same bits; "values" the same values (a
zero's sign aside: +0.0 and -0.0 tying for a max); "rounded" at most one float16 step (the
reference rounds its float64 result once, the backend twice); "product" the same values on
dyadic data (every sum exact in float32; a zero's sign may differ, as the float32 kernels'
FMA chains give -0.0 where the reference's sum is +0.0) and, on random data, one float16
step plus the float32 kernel's summation error K * 2**-24 * sum |x * w|."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from partita.backends.llvm.lower.context import LLVMError
from partita.backends.llvm.lower.half import WIDENED

import partita as P
from partita.ir import Constant, Function, IRModule, TensorType, Tuple, TupleGetItem, Var
from partita.ops import get_op

H = np.float16


def var(name, shape, dtype="float16"):
    return Var(name, TensorType(tuple(shape), dtype))


def const(array):
    return Constant(np.ascontiguousarray(array))


def dyadic(rng, shape):
    """float16 multiples of 1/8 in [-2, 2]: products and their sums are exact in float32."""
    return (rng.integers(-16, 17, shape) / 8).astype(H)


def normal(rng, shape):
    """float16 normal data, with a few signed zeros."""
    x = rng.standard_normal(shape).astype(H)
    if x.size > 4:
        x.reshape(-1)[:2] = [H(-0.0), H(0.0)]
    return x


def steps(got, want) -> np.ndarray:
    """How many float16 values apart ``got`` and ``want`` are (nan must match nan; -0 = +0)."""
    assert got.dtype == want.dtype == np.float16 and got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want))

    def ordered(a):
        bits = np.ascontiguousarray(a).view(np.uint16).astype(np.int32)
        return np.where(bits & 0x8000, -(bits & 0x7FFF), bits)

    return np.where(np.isnan(want), 0, np.abs(ordered(got) - ordered(want)))


def build_run(params, body, feeds, kinds=None):
    """(llvm's outputs, the interpreter's) for ``fn(params) = body`` on ``feeds``, built as one
    llvm region; ``kinds``: kernels the region must contain."""
    mod = IRModule({"main": Function(params, body)})
    exe = P.build(mod, "llvm")
    assert [s.target for s in exe.steps] == ["llvm"]
    if kinds is not None:
        assert set(kinds) <= {k.split()[0] for k in exe.steps[0].region.kernels}
    got = exe.run(*feeds)
    got = got if isinstance(got, (list, tuple)) else [got]
    return [np.asarray(g) for g in got], [np.asarray(w) for w in P.interpret(mod, feeds)]


def assert_bits(params, body, feeds, kinds=None):
    for g, w in zip(*build_run(params, body, feeds, kinds)):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.array_equal(
            np.ascontiguousarray(g).view(np.uint8), np.ascontiguousarray(w).view(np.uint8)
        )


def assert_one_step(params, body, feeds, kinds=None, most=1):
    """Within ``most`` float16 steps (0: the same values, a zero's sign aside)."""
    for g, w in zip(*build_run(params, body, feeds, kinds)):
        assert steps(g, w).max(initial=0) <= most


# -- products ("product") --------------------------------------------------------------------


def conv_case(rng, n, hw, cin, cout, k, stride, pad, groups, layout, data):
    """A float16 convolution in ``layout`` (kernel HWIO or OIHW): (params, body, feeds)."""
    shape = (n, hw, hw, cin) if layout == "NHWC" else (n, cin, hw, hw)
    klayout = "HWIO" if layout == "NHWC" else "OIHW"
    wshape = (k, k, cin // groups, cout) if layout == "NHWC" else (cout, cin // groups, k, k)
    x = var("x", shape)
    body = get_op("nn.conv2d")(x, const(data(rng, wshape)), strides=(stride, stride),
                               padding=(pad,) * 4, groups=groups, data_layout=layout,
                               kernel_layout=klayout)  # fmt: skip
    return [x], body, [data(rng, shape)]


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 2), hw=st.integers(3, 7), cin=st.sampled_from([1, 2, 4]),
    cout=st.sampled_from([4, 6, 16]), k=st.integers(1, 3), stride=st.integers(1, 2),
    pad=st.integers(0, 1), grouping=st.sampled_from(["none", "two", "depthwise"]),
    layout=st.sampled_from(["NHWC", "NCHW"]), seed=st.integers(0, 99),
)  # fmt: skip
def test_convolution_on_dyadic_data_equals_the_reference(
    n, hw, cin, cout, k, stride, pad, grouping, layout, seed
):
    """Plain, grouped and depthwise, NHWC and NCHW (converted by the layout pass)."""
    groups = {"none": 1, "two": 2, "depthwise": cin}[grouping]
    assume(cin % groups == 0)
    cout = cin if grouping == "depthwise" else cout
    params, body, feeds = conv_case(
        np.random.default_rng(seed), n, hw, cin, cout, k, stride, pad, groups, layout, dyadic
    )
    assert_one_step(params, body, feeds, most=0)


def product_case(op, rng, data, m, k, n, flag):
    """A float16 matrix product ``op``: (params, body, feeds, K)."""
    x = var("x", (m, k))
    if op == "nn.dense":
        return [x], get_op(op)(x, const(data(rng, (n, k)))), [data(rng, (m, k))], k
    if op == "dense_var":
        w = var("w", (n, k))
        return [x, w], get_op("nn.dense")(x, w), [data(rng, (m, k)), data(rng, (n, k))], k
    if op == "nn.gemm":  # transpose_b: weight [N, K], else [K, N]; bias per column
        wshape = (n, k) if flag else (k, n)
        body = get_op(op)(x, const(data(rng, wshape)), const(data(rng, (n,))), transpose_b=flag)
        return [x], body, [data(rng, (m, k))], k
    if op == "nn.conv2d_transpose":
        xc = var("x", (1, k, m, m))
        body = get_op(op)(xc, const(data(rng, (k, n, 3, 3))), strides=(1 + flag,) * 2)
        return [xc], body, [data(rng, (1, k, m, m))], 9 * k
    a, b = var("a", (2, m, k)), var("b", (2, n, k) if flag else (2, k, n))
    feeds = [data(rng, (2, m, k)), data(rng, (2, n, k) if flag else (2, k, n))]
    if op == "einsum":
        eq = "bmk,bnk->bmn" if flag else "bmk,bkn->bmn"
        return [a, b], get_op(op)(Tuple([a, b]), equation=eq), feeds, k
    return [a, b], get_op(op)(a, b, transpose_b=flag), feeds, k


PRODUCTS = ["nn.dense", "dense_var", "nn.gemm", "nn.batch_matmul", "einsum",
            "nn.conv2d_transpose"]  # fmt: skip


@settings(max_examples=30, deadline=None)
@given(
    op=st.sampled_from(PRODUCTS),
    m=st.integers(1, 5),
    k=st.integers(1, 24),
    n=st.sampled_from([3, 16, 32]),
    flag=st.booleans(),
    seed=st.integers(0, 99),
)
def test_matrix_products_on_dyadic_data_equal_the_reference(op, m, k, n, flag, seed):
    params, body, feeds, _ = product_case(op, np.random.default_rng(seed), dyadic, m, k, n, flag)
    assert_one_step(params, body, feeds, most=0)


def abs_case(case):
    """The same product on |data| and |weights|: sum |x * w| per output (the error scale)."""
    return lambda rng, shape: np.abs(case(rng, shape))


@pytest.mark.parametrize("op", [*PRODUCTS, "nn.conv2d"])
def test_products_on_random_data_are_within_a_step_and_float32_summation(op):
    """Random normal data: within one float16 step plus K * 2**-24 * sum |x * w| (the float32
    FMA chains' bound), checked on both sides of the reference."""
    m, k, n = 4, 40, 32
    if op == "nn.conv2d":  # K = 3 * 3 * 8
        case, absolute = (
            (*conv_case(np.random.default_rng(5), 1, 6, 8, 32, 3, 1, 1, 1, "NHWC", data), 72)
            for data in (normal, abs_case(normal))
        )
    else:
        case, absolute = (
            product_case(op, np.random.default_rng(5), data, m, k, n, True)
            for data in (normal, abs_case(normal))
        )
    (got,), (want,) = build_run(*case[:3])
    scale = P.interpret(IRModule({"main": Function(absolute[0], absolute[1])}), absolute[2])[0]
    g, w = got.astype(np.float64), want.astype(np.float64)
    ulp = np.spacing(np.maximum(np.abs(got), np.abs(want))).astype(np.float64)
    bound = ulp + 2 * case[3] * 2.0**-24 * np.asarray(scale, np.float64)
    assert np.all(np.abs(g - w) <= bound)
    assert np.mean(steps(got, want) == 0) > 0.9  # mostly the same bits


# -- normalizations and sums ("rounded") ------------------------------------------------------


def rounded_case(op, x, shape, axis, keep, rng):
    """A float16 ``op`` over ``axis`` of ``x``."""
    rank = len(shape)
    if op in ("sum", "mean"):
        return get_op(op)(x, axis=(axis,), keepdims=keep)
    if op == "nn.softmax":
        return get_op(op)(x, axis=axis)
    if op == "nn.layer_norm":
        c = shape[axis]
        return get_op(op)(x, const(normal(rng, (c,))), const(normal(rng, (c,))), axis=axis,
                          center=keep, scale=True)  # fmt: skip
    c = shape[axis]
    gamma, beta, mean = (const(normal(rng, (c,))) for _ in range(3))
    variance = const((np.abs(normal(rng, (c,))) + H(0.5)).astype(H))
    return TupleGetItem(get_op(op)(x, gamma, beta, mean, variance, axis=axis - rank), 0)


@settings(max_examples=30, deadline=None)
@given(
    op=st.sampled_from(["sum", "mean", "nn.softmax", "nn.layer_norm", "nn.batch_norm"]),
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=4), data=st.data(),
    keep=st.booleans(), scale=st.sampled_from([1, 8, 1000]), seed=st.integers(0, 99),
)  # fmt: skip
def test_normalizations_and_sums_are_within_one_step(op, shape, data, keep, scale, seed):
    """scale 1000: sums overflow float16 to inf, as the reference's."""
    axis = data.draw(st.integers(0, len(shape) - 1))
    rng = np.random.default_rng(seed)
    x = var("x", shape)
    feed = (normal(rng, shape).astype(np.float32) * scale).astype(H)
    assert_one_step([x], rounded_case(op, x, shape, axis, keep, rng), [feed])


@settings(max_examples=25, deadline=None)
@given(
    h=st.integers(1, 7), w=st.integers(1, 7), c=st.integers(1, 3),
    pool=st.tuples(st.integers(1, 3), st.integers(1, 3)), stride=st.integers(1, 2),
    pad=st.integers(0, 1), include=st.booleans(), ceil=st.booleans(),
    layout=st.sampled_from(["NHWC", "NCHW"]), op=st.sampled_from(["avg", "max", "global"]),
    seed=st.integers(0, 99),
)  # fmt: skip
def test_pooling(h, w, c, pool, stride, pad, include, ceil, layout, op, seed):
    """Average pooling (windows and global) within one step; max pooling the same values (nan,
    +-0.0 and inf included)."""
    assume(min(pool) > pad and pool[0] <= h + 2 * pad and pool[1] <= w + 2 * pad)
    shape = (2, h, w, c) if layout == "NHWC" else (2, c, h, w)
    x = var("x", shape)
    feed = normal(np.random.default_rng(seed), shape)
    attrs = {"pool_size": pool, "strides": (stride, stride), "padding": (pad,) * 4,
             "ceil_mode": ceil, "layout": layout}  # fmt: skip
    if op == "global":
        assert_one_step([x], get_op("nn.global_avg_pool2d")(x, layout=layout), [feed])
    elif op == "avg":
        body = get_op("nn.avg_pool2d")(x, count_include_pad=include, **attrs)
        assert_one_step([x], body, [feed], {"FPOOL"})
    else:
        feed.reshape(-1)[-3:] = [np.nan, np.inf, -np.inf][-feed.size :]
        assert_one_step([x], get_op("nn.max_pool2d")(x, **attrs), [feed], most=0)


# -- the same bits ("exact") ------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), data=st.data(),
    op=st.sampled_from(["max", "argmax"]), last=st.booleans(), keep=st.booleans(),
    seed=st.integers(0, 99),
)  # fmt: skip
def test_max_and_argmax(shape, data, op, last, keep, seed):
    """argmax the same bits, max the same values (+-0.0 ties aside: half_lower.WIDENED)."""
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, min_size=1))
    rng = np.random.default_rng(seed)
    feed = np.round(normal(rng, shape))  # ties
    if feed.size > 3:
        feed.reshape(-1)[rng.integers(0, feed.size, 2)] = [np.nan, -np.inf]
    x = var("x", shape)
    if op == "argmax":
        body = get_op(op)(x, axis=tuple(axes), keepdims=keep, select_last_index=last)
        assert_bits([x], body, [feed], {"ARGMAX"})
    else:
        assert_one_step([x], get_op(op)(x, axis=tuple(axes), keepdims=keep), [feed], most=0)


@settings(max_examples=20, deadline=None)
@given(
    size=st.tuples(st.integers(1, 9), st.integers(1, 9)), hw=st.integers(1, 5),
    mode=st.sampled_from(["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"]),
    layout=st.sampled_from(["NHWC", "NCHW"]), out=st.sampled_from(["", "float32"]),
    seed=st.integers(0, 99),
)  # fmt: skip
def test_linear_resize_is_exact(size, hw, mode, layout, out, seed):
    """The reference resizes float16 data in float32 (TFLite's expression), as FRESIZE does."""
    shape = (1, hw, hw + 1, 2) if layout == "NHWC" else (1, 2, hw, hw + 1)
    x = var("x", shape)
    body = get_op("image.resize2d")(
        x,
        size=size,
        layout=layout,
        method="linear",
        coordinate_transformation_mode=mode,
        out_dtype=out,
    )
    assert_bits([x], body, [normal(np.random.default_rng(seed), shape)], {"FRESIZE"})


@pytest.mark.parametrize("semantics", ["tflite", "onnx", "fbgemm"])
def test_quantize_of_float16_is_exact(semantics):
    x = var("x", (3, 20))
    feed = (np.arange(60).reshape(3, 20) / 4 - 7.5).astype(H)  # ties of x / 0.5
    body = get_op("qnn.quantize")(x, const(np.array(0.5, np.float32)),
                                  const(np.array(3, np.int32)), out_dtype="int8",
                                  semantics=semantics)  # fmt: skip
    assert_bits([x], body, [feed], {"QUANT"})


# -- graphs, other dtypes, refusals ------------------------------------------------------------


def test_a_float16_block_converts_each_input_once():
    """conv -> bias -> relu -> softmax, the input read by two convolutions (one conversion),
    a float32 out_dtype read as such, batch_norm returned whole: dyadic data keeps the products
    exact, softmax within a step."""
    rng = np.random.default_rng(3)
    x = var("x", (1, 5, 5, 4))
    conv = [get_op("nn.conv2d")(x, const(dyadic(rng, (3, 3, 4, 16))), padding=(1, 1, 1, 1),
                                data_layout="NHWC", kernel_layout="HWIO", out_dtype=dtype)
            for dtype in ("", "float32")]  # fmt: skip
    act = get_op("nn.relu")(get_op("nn.bias_add")(conv[0], const(dyadic(rng, (16,))), axis=3))
    soft = get_op("nn.softmax")(act, axis=-1)
    mod = IRModule({"main": Function([x], Tuple([soft, conv[1]]))})
    exe = P.build(mod, "llvm")
    kernels = exe.steps[0].region.kernels
    casts = [k for k in kernels if k.startswith("EWISE")]
    # x to float32 once, the first conv's result to float16, bias + relu, softmax's two casts
    assert len(casts) == 5
    feed = dyadic(rng, (1, 5, 5, 4))
    got, want = exe.run(feed), P.interpret(mod, [feed])
    assert steps(got[0], want[0]).max() <= 1
    assert got[1].dtype == np.float32 and np.array_equal(got[1], want[1])
    y = var("y", (2, 3, 4))
    whole = rounded_case("nn.batch_norm", y, (2, 3, 4), 1, True, rng).tuple_value
    for g, w in zip(*build_run([y], whole, [normal(rng, (2, 3, 4))])):
        assert steps(g, w).max() <= 1


def test_every_widened_op_is_tested_here():
    assert set(WIDENED) == set(PRODUCTS[:1] + PRODUCTS[2:] + [
        "nn.conv2d", "nn.softmax", "nn.layer_norm", "nn.batch_norm", "sum", "mean",
        "nn.avg_pool2d", "nn.global_avg_pool2d", "max", "argmax", "nn.max_pool2d",
        "image.resize2d", "qnn.quantize"])  # fmt: skip


@pytest.mark.parametrize("case", ["gemm_bias", "softmax_constant"])
def test_refused_float16_ops_name_the_op_and_the_reason(case):
    """A widened op whose float32 form the backend refuses is refused, naming both."""
    x = var("x", (3, 8))
    if case == "gemm_bias":  # nn.gemm takes a constant bias only
        c = var("c", (5,))
        params = [x, c]
        body = get_op("nn.gemm")(x, const(np.ones((5, 8), H)), c)
        match = r"float16 nn\.gemm: it is computed in float32.*cannot compile nn\.gemm"
    else:  # nn.softmax of a constant: FSOFTMAX reads a buffer
        params, body = [x], get_op("add")(x, get_op("nn.softmax")(const(np.ones((3, 8), H))))
        match = r"float16 nn\.softmax: it is computed in float32.*cannot compile nn\.softmax"
    with pytest.raises(LLVMError, match=match):
        P.build(IRModule({"main": Function(params, body)}), "llvm")
