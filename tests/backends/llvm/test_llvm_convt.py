"""nn.conv2d_transpose (FCONVT, backends/llvm/convt_lower.py) against the interpreter: layouts,
strides, dilations, asymmetric padding, output padding, groups, batches; float32 data, and
integer data with integer weights (exact int64 sums wrapped to the output dtype, bit for bit)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import partita as P


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    layout=st.sampled_from(["NCHW", "NHWC"]),
    n=st.integers(1, 2),
    groups=st.sampled_from([1, 2]),
    cpg=st.integers(1, 3),
    opg=st.integers(1, 3),
    hw=st.tuples(st.integers(1, 5), st.integers(1, 5)),
    k=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    stride=st.integers(1, 3),
    dilation=st.integers(1, 2),
    pad=st.tuples(*[st.integers(0, 1)] * 4),
    extra=st.integers(0, 2),
    seed=st.integers(0, 2**16),
    types=st.sampled_from([("float32", "float32", "float32"), ("int8", "int8", "int32"),
                           ("uint8", "int8", "int32"), ("int8", "int8", "int8"),
                           ("int32", "int32", "int32")]),
)
def test_transposed_convolutions_equal_the_interpreter(
    layout, n, groups, cpg, opg, hw, k, stride, dilation, pad, extra, seed, types
):
    c, o = cpg * groups, opg * groups
    shape = (n, c, *hw) if layout == "NCHW" else (n, *hw, c)
    out_pad = min(extra, max(stride, dilation) - 1)
    dtype, wtype, out_dtype = types
    x = P.var("x", shape, dtype)
    rng = np.random.default_rng(seed)

    def draw(shape, t):
        if t == "float32":
            return rng.standard_normal(shape).astype(np.float32)
        info = np.iinfo(t)
        return rng.integers(info.min, info.max, shape, dtype=t, endpoint=True)

    w = P.const(draw((c, opg, *k), wtype))
    y = P.get_op("nn.conv2d_transpose")(
        x, w, strides=(stride, stride), dilation=(dilation, dilation), padding=pad,
        groups=groups, output_padding=(out_pad, out_pad), channels=o, kernel_size=k,
        data_layout=layout, kernel_layout="IOHW",
        out_dtype="" if out_dtype == dtype else out_dtype,
    )
    try:
        mod = P.InferType()(P.IRModule.from_expr(P.Function([x], y)))
    except P.PartitaError:
        return  # padding that leaves no output: the op refuses it itself
    data = draw(shape, dtype)
    got = P.build(mod, "llvm").run(data)[0]
    want = P.interpret(mod, [data])[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    if out_dtype != "float32":
        assert np.array_equal(got, want)
        return
    # float64 sums in another order than the reference's: equal to float32 rounding
    assert np.allclose(got, want, rtol=1e-6, atol=1e-6)


def test_other_integer_dtypes_run_on_the_generic_kernel():
    """int16 data (once refused): GCONV (backends/llvm/int_products.py), bit for bit;
    test_llvm_int_products.py covers every integer dtype and run-time weights."""
    x = P.var("x", (1, 2, 3, 3), "int16")
    w = P.const(np.arange(36, dtype=np.int16).reshape(2, 2, 3, 3) * 900)
    y = P.get_op("nn.conv2d_transpose")(x, w, channels=2, kernel_size=(3, 3),
                                          kernel_layout="IOHW", out_dtype="int32")
    mod = P.IRModule.from_expr(P.Function([x], y))
    exe = P.build(mod, "llvm")
    assert "GCONV" in {k.split()[0] for k in exe.steps[0].region.kernels}
    data = np.random.default_rng(0).integers(-32768, 32767, (1, 2, 3, 3)).astype(np.int16)
    assert np.array_equal(exe.run(data)[0], P.interpret(mod, [data])[0])
