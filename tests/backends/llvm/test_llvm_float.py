"""The LLVM backend's float / integer / bool elementwise kernels and views
(backends/llvm/lower/float_ops.py): each op built for "llvm" against the reference interpreter
on random data, fused chains and random elementwise DAGs, batch norm, float16 data. The
products, reductions, norms and the BERT encoders: test_llvm_float_products.py."""

from __future__ import annotations

import numpy as np
import pytest
from float_checks import check, rand
from hypothesis import given, settings
from hypothesis import strategies as st

import partita as P
from partita import relay

SHAPES = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((1, 3, 1), (2, 1, 5)), ((), (3, 2))]


@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide", "maximum", "minimum"])
@pytest.mark.parametrize("shapes", SHAPES)
def test_binary_float_ops_broadcast(op, shapes):
    rng = np.random.default_rng(0)
    x, y = (relay.var(n, shape=s, dtype="float32") for n, s in zip("xy", shapes))
    feeds = [rand(rng, s, "float32") for s in shapes]
    check(relay.Function([x, y], getattr(relay, op)(x, y)), feeds)


@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "maximum", "minimum"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_binary_integer_ops_wrap_as_the_reference(op, dtype):
    rng = np.random.default_rng(1)
    x, y = relay.var("x", shape=(3, 4), dtype=dtype), relay.var("y", shape=(4,), dtype=dtype)
    feeds = [rand(rng, (3, 4), dtype), rand(rng, (4,), dtype)]
    feeds[0][0, 0] = np.iinfo(dtype).max  # wraps
    check(relay.Function([x, y], getattr(relay, op)(x, y)), feeds)


UNARY = ["negative", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "floor",
         "round"]  # fmt: skip


@pytest.mark.parametrize("op", UNARY)
def test_unary_float_ops(op):
    rng = np.random.default_rng(2)
    data = rng.standard_normal((4, 5)).astype(np.float32) * 3
    if op in ("log", "sqrt", "rsqrt"):
        data = np.abs(data) + np.float32(0.1)
    data[0, :3] = [0.5, -2.5, 1.5]  # round: half away from zero
    x = relay.var("x", shape=(4, 5), dtype="float32")
    # exp/log/tanh/sigmoid: the reference rounds numpy's float32 functions (within an ulp);
    # llvm rounds libm's double ones once (correctly rounded): they may differ by an ulp
    tol = 1e-6 if op in ("exp", "log", "tanh", "sigmoid") else 0
    check(relay.Function([x], getattr(relay, op)(x)), [data], rtol=tol, atol=tol)


@pytest.mark.parametrize("op", ["equal", "not_equal", "less", "less_equal", "greater",
                                "greater_equal"])  # fmt: skip
def test_comparisons_give_bools(op):
    rng = np.random.default_rng(3)
    x, y = relay.var("x", shape=(3, 4)), relay.var("y", shape=(1, 4))
    a = rng.integers(-2, 3, (3, 4)).astype(np.float32)
    b = rng.integers(-2, 3, (1, 4)).astype(np.float32)
    a[0, 0] = np.nan
    if not hasattr(relay, op):
        pytest.skip(f"no {op} op")
    check(relay.Function([x, y], getattr(relay, op)(x, y)), [a, b])


def test_where_cast_logical_and_clip():
    rng = np.random.default_rng(4)
    m = relay.var("m", shape=(1, 6), dtype="int64")
    x = relay.var("x", shape=(2, 6), dtype="float32")
    mask = relay.equal(m, relay.const(np.int64(0)))
    masked = relay.where(mask, relay.const(np.float32(-1e4)), x)
    out = relay.clip(relay.add(masked, relay.cast(m, dtype="float32")), a_min=-5.0, a_max=5.0)
    feeds = [rng.integers(0, 2, (1, 6)).astype(np.int64), rand(rng, (2, 6), "float32")]
    check(relay.Function([m, x], out), feeds)
    f = relay.var("f", shape=(8,), dtype="float32")
    big = np.array([1e10, -1e10, np.nan, np.inf, 2.7, -2.7, 3e9, 0], np.float32)
    check(relay.Function([f], relay.cast(f, dtype="int32")), [big])
    b = relay.var("b", shape=(5,), dtype="bool")
    check(relay.Function([b], relay.logical_not(b)), [rng.random(5) < 0.5])


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("per_channel", [False, True])
def test_dequantize(axis, per_channel):
    rng = np.random.default_rng(5)
    x = relay.var("x", shape=(3, 4), dtype="int8")
    n = (3, 4)[axis] if per_channel else 1
    scale = relay.const(rng.random(n).astype(np.float32) if per_channel else np.float32(0.02))
    zp = relay.const(rng.integers(-3, 3, n).astype(np.int32) if per_channel else np.int32(1))
    out = relay.qnn.op.dequantize(x, scale, zp, axis=axis)
    check(relay.Function([x], out), [rand(rng, (3, 4), "int8")], rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["wrap", "clip", "fast"])
@pytest.mark.parametrize("dtype", ["float32", "uint8", "int64"])
def test_take(mode, dtype):
    """"fast" takes indices in [-size, size): a negative one counts from the end (it was clamped
    to 0 once; the op survey of session 8 found it)."""
    rng = np.random.default_rng(9)
    data = relay.var("d", shape=(7, 3), dtype=dtype)
    idx = relay.var("i", shape=(2, 4), dtype="int64")
    ids = np.array([[0, 6, -1, 9], [3, -8, 2, 2]], np.int64)
    if mode == "fast":  # out of range is the reference's error: only valid indices
        ids = np.array([[0, 6, -1, -7], [3, -2, 2, 2]], np.int64)
    out = relay.take(data, idx, axis=0, mode=mode)
    check(relay.Function([data, idx], out), [rand(rng, (7, 3), dtype), ids])
    out = relay.take(data, relay.const(np.array([2, 0], np.int32)), axis=1, mode=mode)
    check(relay.Function([data], out), [rand(rng, (7, 3), dtype)])


def test_elementwise_chains_fuse_into_one_kernel():
    """GELU's five elementwise ops (and a dequantize feeding an add) become one EWISE kernel
    each, computing exactly what the separate kernels would (each step rounded to float32)."""
    rng = np.random.default_rng(11)
    x = relay.var("x", shape=(4, 48))
    half, one, root2 = (relay.const(np.float32(v)) for v in (0.5, 1.0, 1.4142135))
    phi = relay.add(relay.erf(relay.divide(x, root2)), one)
    gelu = relay.multiply(relay.multiply(x, half), phi)
    exe = check(relay.Function([x], gelu), [rand(rng, (4, 48), "float32")], rtol=0, atol=0)
    prof = exe.profile(rand(rng, (4, 48), "float32"))
    kernels = [op.metrics.get("kernel") for step in prof.steps for op in step.ops]
    assert kernels == ["EWISE"]
    q = relay.var("q", shape=(4, 48), dtype="int8")
    deq = relay.qnn.op.dequantize(q, relay.const(np.float32(0.05)), relay.const(np.int32(3)))
    check(relay.Function([q, x], relay.add(deq, x)),
           [rand(rng, (4, 48), "int8"), rand(rng, (4, 48), "float32")], rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "int8", "int64", "float16"])
def test_split_fields_and_strided_slices(dtype):
    """Views copy elements of any dtype (float16 too: moved, never computed on)."""
    """split's fields (a tuple inside the segment, read by TupleGetItem) and strided_slice are
    copies at affine index maps derived from the ops' own reference implementations."""
    rng = np.random.default_rng(13)
    x = relay.var("x", shape=(2, 6, 5), dtype=dtype)
    parts = relay.split(x, indices_or_sections=3, axis=1)
    uneven = relay.split(x, indices_or_sections=(1, 4), axis=2)
    out = relay.Tuple([relay.TupleGetItem(parts, 2), relay.TupleGetItem(uneven, 1),
                       relay.strided_slice(x, begin=(1, 5, 0), end=(2, 0, 5), strides=(1, -2, 2))])
    check(relay.Function([x], out), [rand(rng, (2, 6, 5), dtype)])


@settings(max_examples=15, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data(),
       scale=st.booleans(), center=st.booleans(), eps=st.sampled_from([1e-5, 1e-3, 0.1]),
       whole=st.booleans())
def test_batch_norm_equals_the_interpreter_bit_for_bit(shape, data, scale, center, eps, whole):
    """nn.batch_norm (relay graphs; the frontends fold it) is BNORM: the reference's float64
    arithmetic per element, so the same bits; its other two fields are the moving mean and
    variance, passed through."""
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    c = shape[axis]
    rng = np.random.default_rng(len(shape) * 7 + c)
    x = relay.var("x", shape=tuple(shape))
    consts = [relay.const(rng.standard_normal(c).astype(np.float32)) for _ in range(3)]
    var = relay.const(rng.uniform(0.01, 3.0, c).astype(np.float32))
    bn = relay.nn.batch_norm(x, *consts, var, axis=axis, epsilon=eps, center=center, scale=scale)
    fields = [relay.TupleGetItem(bn, i) for i in range(3)]
    out = relay.Tuple([relay.nn.relu(fields[0]), fields[2], fields[1]]) if whole else fields[0]
    check(relay.Function([x], out), [rand(rng, tuple(shape), "float32")], rtol=0, atol=0)


def test_batch_norm_with_run_time_parameters():
    """Run-time gamma (and a constant rest) is read from its buffer: the same bits (more in
    test_llvm_survey_fixes.py)."""
    x, gamma = relay.var("x", shape=(4, 3)), relay.var("gamma", shape=(3,))
    one = relay.const(np.ones(3, np.float32))
    bn = relay.nn.batch_norm(x, gamma, one, one, one, axis=1)
    rng = np.random.default_rng(3)
    check(relay.Function([x, gamma], relay.TupleGetItem(bn, 0)),
           [rand(rng, (4, 3), "float32"), rand(rng, (3,), "float32")], rtol=0, atol=0)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_and_relu(approximate):
    rng = np.random.default_rng(15)
    x = relay.var("x", shape=(3, 40))
    data = rand(rng, (3, 40), "float32") * 3
    data[0, 0] = np.nan
    tol = 0 if approximate == "none" else 1e-6  # libm erf is the reference's; tanh may not be
    check(relay.Function([x], relay.nn.gelu(x, approximate=approximate)), [data],
           rtol=tol, atol=tol)
    check(relay.Function([x], relay.nn.relu(x)), [data], rtol=0, atol=0)
    i = relay.var("i", shape=(7,), dtype="int32")
    check(relay.Function([i], relay.nn.relu(i)), [np.arange(-3, 4, dtype=np.int32)])


def test_a_fused_producer_is_never_left_behind():
    """An int8 add whose only reader is an int8 relu (which alone would be a 256-entry table)
    is fused with it into one EWISE kernel."""
    rng = np.random.default_rng(16)
    a, c = relay.var("a", shape=(3, 8), dtype="int8"), relay.var("c", shape=(3, 8), dtype="int8")
    check(relay.Function([a, c], relay.nn.relu(relay.add(a, c))),
           [rand(rng, (3, 8), "int8"), rand(rng, (3, 8), "int8")])


_BIN = ["add", "subtract", "multiply", "maximum", "minimum", "divide"]

_UNARY = ["negative", "abs", "tanh", "sigmoid", "erf", "floor", "nn.relu"]


@st.composite
def elementwise_dags(draw):
    """A random DAG of float32 elementwise ops over broadcasting inputs: values shared by
    several readers (not fused) and chains (fused), compares feeding where."""
    shapes = [(2, 3, 4), (3, 4), (1, 4), (2, 1, 1)]
    values = [relay.var(f"v{i}", shape=s) for i, s in enumerate(shapes[: draw(st.integers(1, 4))])]
    params = list(values)
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["bin", "bin", "unary", "where", "const"]))
        pick = lambda: values[draw(st.integers(0, len(values) - 1))]  # noqa: E731
        if kind == "bin":
            values.append(getattr(relay, draw(st.sampled_from(_BIN)))(pick(), pick()))
        elif kind == "unary":
            name = draw(st.sampled_from(_UNARY))
            fn = relay.nn.relu if name == "nn.relu" else getattr(relay, name)
            values.append(fn(pick()))
        elif kind == "where":
            a, b = pick(), pick()
            values.append(relay.where(relay.less(a, b), a, relay.multiply(b, relay.const(2.0))))
        else:
            values.append(relay.add(pick(), relay.const(np.float32(draw(st.floats(-3, 3))))))
    outs = [values[-1]] + draw(st.lists(st.sampled_from(values[len(params):]), max_size=2))
    body = outs[0] if len(outs) == 1 else relay.Tuple(outs)
    return relay.Function(params, body), [p.type_annotation.shape for p in params]


@given(elementwise_dags(), st.integers(0, 2**16))
@settings(max_examples=25, deadline=None)
def test_random_elementwise_dags_equal_the_interpreter(case, seed):
    """Fusion keeps every value the interpreter computes: each step is rounded to float32 as
    a separate kernel would store it, so only the float32 math functions may differ (an ulp)."""
    fn, shapes = case
    rng = np.random.default_rng(seed)
    feeds = [rng.standard_normal(s).astype(np.float32) * 2 for s in shapes]
    check(fn, feeds, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis", [1, -1])
def test_bias_add(axis):
    rng = np.random.default_rng(19)
    x = relay.var("x", shape=(2, 3, 4))
    n = 3 if axis == 1 else 4
    b = relay.var("b", shape=(n,))
    out = relay.nn.relu(relay.nn.bias_add(x, b, axis=axis))
    check(relay.Function([x, b], out), [rand(rng, (2, 3, 4), "float32"),
                                         rand(rng, (n,), "float32")], rtol=0, atol=0)


_HALF_EXACT = ["negative", "abs", "floor", "round", "nn.relu", "nn.hardswish", "nn.leaky_relu",
               "add", "subtract", "multiply", "divide", "maximum", "minimum", "sqrt"]

_HALF_MATH = ["exp", "log", "rsqrt", "tanh", "sigmoid", "erf", "nn.gelu"]


@pytest.mark.parametrize("op", _HALF_EXACT + _HALF_MATH + ["chain", "cast", "compare"])
def test_float16_elementwise(op):
    """float16 data in EWISE kernels: each op computed in float64 and rounded to half, as the
    reference (numpy's float16: float32 then half) stores it: arithmetic bit-exact, libm
    functions within one half ulp (they were refused until session 8)."""
    from partita.ir import Function as F
    from partita.ir import IRModule, TensorType, Var
    from partita.ops import get_op

    rng = np.random.default_rng(len(op))
    x, y = (Var(n, TensorType((3, 17), "float16")) for n in "xy")
    if op == "chain":
        body, params = get_op("tanh")(get_op("add")(get_op("multiply")(x, y), x)), [x, y]
    elif op == "cast":
        body, params = get_op("cast")(get_op("add")(x, x), dtype="float32"), [x]
    elif op == "compare":
        body, params = get_op("where")(get_op("less")(x, y), x, y), [x, y]
    elif op in ("add", "subtract", "multiply", "divide", "maximum", "minimum"):
        body, params = get_op(op)(x, y), [x, y]
    else:
        body, params = get_op(op)(x), [x]
    mod = P.InferType()(IRModule({"main": F(params, body)}))
    positive = op in ("log", "sqrt", "rsqrt")
    feeds = [(rng.uniform(0.05, 3.0, (3, 17)) * (1 if positive else rng.choice([-1, 1], (3, 17))))
             .astype(np.float16) for _ in params]
    got, want = P.build(mod, "llvm").run(*feeds)[0], P.interpret(mod, feeds)[0]
    assert got.dtype == want.dtype
    if op in _HALF_MATH or op == "chain":
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3)
    else:
        assert np.array_equal(got, want)
