"""Float32 products whose weights are computed at run time on the LLVM backend
(backends/llvm/runtime_weights.py): WPACK lays the weights out as the compile-time packing does
and FCONV sums in the op's order, so ONNX Runtime's ("mlas", "mlas_packed") and PyTorch's
("torch_cpu") orders equal the interpreter bit for bit and exact sums are within float32
rounding (the tolerance of the constant-weight tests, test_llvm_fconv.py); transposed
convolutions sum in float64 (GCONV)."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import partita as P
from partita.ir import Constant, Function, IRModule, TensorType, Var
from partita.ops import get_op

F32 = np.float32
ISAS = ["plain", "avx2", "vnni"]


def run_both(params, out, isa, kinds, seed):
    mod = IRModule({"main": Function(params, out)})
    exe = P.build(mod, f"llvm -isa={isa}")
    assert [s.target for s in exe.steps] == ["llvm"]
    made = {k.split()[0] for k in exe.steps[0].region.kernels}
    assert kinds <= made, made
    rng = np.random.default_rng(seed)
    feeds = [rng.standard_normal(p.type_annotation.shape).astype(F32) for p in params]
    got, want = exe.run(*feeds)[0], P.interpret(mod, feeds)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    return got, want


def assert_close(got, want):
    """Within float32 rounding of the output's scale (test_llvm_fconv.assert_close)."""
    scale = float(np.abs(want).max()) or 1.0
    assert float(np.abs(got - want).max()) <= 1e-5 * scale


def assert_bits(got, want):
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def epilogue(out, o: int, layout: str, bias: bool, relu: bool, seed: int):
    """A constant bias along the channels and a relu, which FCONV fuses."""
    if bias:
        values = np.random.default_rng(seed).standard_normal(o).astype(F32)
        out = get_op("nn.bias_add")(out, Constant(values), axis=layout.index("C"))
    return get_op("nn.relu")(out) if relu else out


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 2), h=st.integers(1, 8), w=st.integers(1, 8), groups=st.integers(1, 3),
    cg=st.integers(1, 5), og=st.integers(1, 20), kernel=st.tuples(*[st.integers(1, 3)] * 2),
    strides=st.tuples(*[st.integers(1, 2)] * 2), dilation=st.tuples(*[st.integers(1, 2)] * 2),
    pads=st.tuples(*[st.integers(0, 1)] * 4), layout=st.sampled_from(["NHWC", "NCHW"]),
    kernel_layout=st.sampled_from(["OIHW", "HWIO", "OHWI"]),
    accumulate=st.sampled_from(["exact", "mlas", "torch_cpu"]), threads=st.integers(1, 4),
    depthwise=st.booleans(), bias=st.booleans(), relu=st.booleans(),
    isa=st.sampled_from(ISAS), seed=st.integers(0, 99),
)  # fmt: skip
def test_float_conv2d_with_runtime_weights(n, h, w, groups, cg, og, kernel, strides, dilation,
                                           pads, layout, kernel_layout, accumulate, threads,
                                           depthwise, bias, relu, isa, seed):
    """Grouped, depthwise and plain convolutions in either data layout (NCHW through the
    layout pass's transposes), bias and relu fused; MLAS's and PyTorch's orders bit for bit."""
    if depthwise:
        groups, cg, og = groups * cg, 1, 1
    (kh, kw), (top, left, bottom, right) = kernel, pads
    if accumulate == "torch_cpu":  # the convolutions whose PyTorch path the op reproduces
        dilation = (1, 1)
        if not depthwise:
            groups, n = 1, 1
            assume(min(kh, kw) <= 3 and cg * kh * kw <= 320)
    assume(h + top + bottom >= dilation[0] * (kh - 1) + 1)
    assume(w + left + right >= dilation[1] * (kw - 1) + 1)
    c, o = groups * cg, groups * og
    x = Var("x", TensorType((n, h, w, c) if layout == "NHWC" else (n, c, h, w), "float32"))
    oihw = (o, cg, kh, kw)
    wt = Var("w", TensorType(tuple(oihw["OIHW".index(a)] for a in kernel_layout), "float32"))
    out = get_op("nn.conv2d")(
        x, wt, strides=strides, padding=pads, dilation=dilation, groups=groups,
        data_layout=layout, kernel_layout=kernel_layout, accumulate=accumulate,
        threads=threads if accumulate == "mlas" else 1,
    )  # fmt: skip
    out = epilogue(out, o, layout, bias, relu, seed)
    got, want = run_both([x, wt], out, isa, {"WPACK", "FCONV"}, seed)
    (assert_close if accumulate == "exact" else assert_bits)(got, want)


@settings(max_examples=20, deadline=None)
@given(
    n=st.integers(1, 2), h=st.integers(1, 6), w=st.integers(1, 6), groups=st.integers(1, 2),
    cg=st.integers(1, 4), og=st.integers(1, 4), kernel=st.tuples(*[st.integers(1, 3)] * 2),
    strides=st.tuples(*[st.integers(1, 3)] * 2), dilation=st.tuples(*[st.integers(1, 2)] * 2),
    pads=st.tuples(*[st.integers(0, 2)] * 4), layout=st.sampled_from(["NHWC", "NCHW"]),
    kernel_layout=st.sampled_from(["IOHW", "OIHW", "HWIO"]), isa=st.sampled_from(ISAS),
    seed=st.integers(0, 99),
)  # fmt: skip
def test_float_conv2d_transpose_with_runtime_weights(n, h, w, groups, cg, og, kernel, strides,
                                                     dilation, pads, layout, kernel_layout,
                                                     isa, seed):
    (kh, kw), (top, left, bottom, right) = kernel, pads
    oh = (h - 1) * strides[0] - top - bottom + dilation[0] * (kh - 1) + 1
    ow = (w - 1) * strides[1] - left - right + dilation[1] * (kw - 1) + 1
    assume(min(oh, ow) >= 1)
    c = groups * cg
    x = Var("x", TensorType((n, h, w, c) if layout == "NHWC" else (n, c, h, w), "float32"))
    iohw = (c, og, kh, kw)
    wt = Var("w", TensorType(tuple(iohw["IOHW".index(a)] for a in kernel_layout), "float32"))
    out = get_op("nn.conv2d_transpose")(
        x, wt, strides=strides, padding=pads, dilation=dilation, groups=groups,
        data_layout=layout, kernel_layout=kernel_layout,
    )  # fmt: skip
    assert_close(*run_both([x, wt], out, isa, {"GCONV"}, seed))


@settings(max_examples=30, deadline=None)
@given(
    rows=st.lists(st.integers(1, 7), min_size=1, max_size=2), k=st.integers(1, 300),
    units=st.integers(1, 40), gemm=st.booleans(), tb=st.booleans(),
    accumulate=st.sampled_from(["mlas", "mlas_packed"]), threads=st.integers(1, 4),
    bias=st.sampled_from(["none", "scalar", "n"]), relu=st.booleans(),
    isa=st.sampled_from(ISAS), seed=st.integers(0, 99),
)  # fmt: skip
def test_mlas_dense_and_gemm_with_runtime_weights(rows, k, units, gemm, tb, accumulate,
                                                  threads, bias, relu, isa, seed):
    """MlasGemm's order with B computed at run time (either orientation for nn.gemm, its
    bias as MLAS's C; nn.dense with a fused bias and relu): bit for bit."""
    x = Var("x", TensorType((*rows, k), "float32"))
    tb = tb if gemm else True
    wt = Var("w", TensorType((units, k) if tb else (k, units), "float32"))
    values = np.random.default_rng(seed).standard_normal(units).astype(F32)
    if gemm:
        c = Constant(values[:1].reshape(()) if bias == "scalar" else values)
        out = get_op("nn.gemm")(x, wt, c, transpose_b=tb, accumulate=accumulate,
                                threads=threads)
    else:
        out = get_op("nn.dense")(x, wt, accumulate=accumulate, threads=threads)
        out = get_op("nn.bias_add")(out, Constant(values), axis=-1) if bias != "none" else out
        out = get_op("nn.relu")(out) if relu else out
    assert_bits(*run_both([x, wt], out, isa, {"WPACK", "FCONV"}, seed))


@settings(max_examples=25, deadline=None)
@given(
    b=st.integers(1, 4), m=st.integers(1, 20), k=st.integers(1, 300), n=st.integers(1, 40),
    tb=st.booleans(), threads=st.integers(1, 4), isa=st.sampled_from(ISAS),
    seed=st.integers(0, 99),
)  # fmt: skip
def test_mlas_batch_matmul(b, m, k, n, tb, threads, isa, seed):
    """MlasGemmBatch (ONNX MatMul of 3-D operands under ONNX Runtime's order): each product on
    its share of the threads, its M=1 and N=1 kernels included, bit for bit (FBMM's exact sums
    were within float32 rounding only)."""
    x = Var("x", TensorType((b, m, k), "float32"))
    y = Var("y", TensorType((b, n, k) if tb else (b, k, n), "float32"))
    out = get_op("nn.batch_matmul")(x, y, transpose_b=tb, accumulate="mlas", threads=threads)
    assert_bits(*run_both([x, y], out, isa, {"WPACK", "FCONV"}, seed))
