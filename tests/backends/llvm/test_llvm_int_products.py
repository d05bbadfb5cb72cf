"""Integer products on the LLVM backend (backends/llvm/int_products.py, product_kernels.py):
nn.conv2d / nn.conv2d_transpose of integers (GCONV), nn.batch_matmul of integers and
qnn.batch_matmul read as its accumulator or requantized with any semantics (IBMM), each against
the interpreter bit for bit over the dtypes' whole ranges (so sums wrap as the references'
int64 ones, cast to the output dtype, do); plus what stays refused, with its reason."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from partita.backends.llvm.errors import LLVMError

import partita as P
from partita.ir import Constant, Function, IRModule, TensorType, Tuple, Var
from partita.ops import get_op

F32, I32 = np.float32, np.int32
INTS = ["int8", "uint8", "int16", "int32", "int64"]
ISAS = ["plain", "avx2", "vnni"]  # the target variants (these kernels are scalar in each)
CONV_LAYOUTS = ["OIHW", "HWIO", "HWOI", "OHWI"]
CONVT_LAYOUTS = ["IOHW", "OIHW", "HWOI", "HWIO", "OHWI"]


def full_range(rng, shape, dtype, span=None):
    """Integers over the dtype's whole range (or +-span), a few of them its extremes."""
    info = np.iinfo(dtype)
    lo, hi = (int(info.min), int(info.max)) if span is None else (
        max(int(info.min), -span), min(int(info.max), span))
    x = rng.integers(lo, hi, shape, dtype=np.int64, endpoint=True).astype(dtype)
    flat = x.reshape(-1)
    if flat.size > 2 and span is None:
        flat[rng.integers(0, flat.size, 2)] = [lo, hi]
    return x


def build_and_compare(params, out, isa="plain", kinds=None, seed=0, span=None):
    """Build for llvm (one region), run on random inputs: the same bits as the interpreter."""
    mod = IRModule({"main": Function(params, out)})
    exe = P.build(mod, f"llvm -isa={isa}")
    assert [s.target for s in exe.steps] == ["llvm"]
    made = {k.split()[0] for k in exe.steps[0].region.kernels}
    if kinds is not None:
        assert kinds <= made, made
    rng = np.random.default_rng(seed)
    feeds = [full_range(rng, p.type_annotation.shape, p.type_annotation.dtype, span)
             for p in params]  # fmt: skip
    got = exe.run(*feeds)
    for g, w in zip(got, P.interpret(mod, feeds)):
        g, w = np.ascontiguousarray(g), np.ascontiguousarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.array_equal(g, w)
    return made


def in_layout(oihw: tuple, layout: str, names: str = "OIHW") -> tuple:
    """A kernel shape given as ``names`` sizes, in ``layout``."""
    return tuple(oihw[names.index(c)] for c in layout)


def weights(name, shape, dtype, runtime: bool, seed: int):
    """A weight Var (computed at run time: a function input) or a Constant of full-range values."""
    if runtime:
        return Var(name, TensorType(shape, dtype))
    return Constant(full_range(np.random.default_rng(seed), shape, dtype))


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 2), h=st.integers(1, 7), w=st.integers(1, 7), groups=st.integers(1, 3),
    cg=st.integers(1, 3), og=st.integers(1, 3), kernel=st.tuples(*[st.integers(1, 3)] * 2),
    strides=st.tuples(*[st.integers(1, 3)] * 2), dilation=st.tuples(*[st.integers(1, 2)] * 2),
    pads=st.tuples(*[st.integers(0, 2)] * 4), layout=st.sampled_from(["NHWC", "NCHW"]),
    kernel_layout=st.sampled_from(CONV_LAYOUTS), dtypes=st.tuples(*[st.sampled_from(INTS)] * 2),
    out_dtype=st.sampled_from(["", "int8", "uint8", "int16", "int32", "int64"]),
    runtime=st.booleans(), isa=st.sampled_from(ISAS), seed=st.integers(0, 99),
)  # fmt: skip
def test_integer_conv2d(n, h, w, groups, cg, og, kernel, strides, dilation, pads, layout,
                        kernel_layout, dtypes, out_dtype, runtime, isa, seed):
    """Any integer dtypes, groups, strides, dilation, padding and kernel layout; weights constant
    or computed at run time; the exact sum wrapped to out_dtype ("" = the data's dtype)."""
    (kh, kw), (top, left, bottom, right) = kernel, pads
    assume(h + top + bottom >= dilation[0] * (kh - 1) + 1)
    assume(w + left + right >= dilation[1] * (kw - 1) + 1)
    c, o = groups * cg, groups * og
    x = Var("x", TensorType((n, h, w, c) if layout == "NHWC" else (n, c, h, w), dtypes[0]))
    wt = weights("w", in_layout((o, cg, kh, kw), kernel_layout), dtypes[1], runtime, seed)
    out = get_op("nn.conv2d")(
        x, wt, strides=strides, padding=pads, dilation=dilation, groups=groups,
        data_layout=layout, kernel_layout=kernel_layout, out_dtype=out_dtype,
    )  # fmt: skip
    build_and_compare([x, wt] if runtime else [x], out, isa, {"GCONV"}, seed)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 2), h=st.integers(1, 5), w=st.integers(1, 5), groups=st.integers(1, 2),
    cg=st.integers(1, 3), og=st.integers(1, 3), kernel=st.tuples(*[st.integers(1, 3)] * 2),
    strides=st.tuples(*[st.integers(1, 3)] * 2), dilation=st.tuples(*[st.integers(1, 2)] * 2),
    pads=st.tuples(*[st.integers(0, 2)] * 4), extra=st.tuples(*[st.integers(0, 2)] * 2),
    layout=st.sampled_from(["NHWC", "NCHW"]), kernel_layout=st.sampled_from(CONVT_LAYOUTS),
    dtypes=st.tuples(*[st.sampled_from(INTS)] * 2),
    out_dtype=st.sampled_from(["", "int16", "int32", "int64"]), runtime=st.booleans(),
    isa=st.sampled_from(ISAS), seed=st.integers(0, 99),
)  # fmt: skip
def test_integer_conv2d_transpose(n, h, w, groups, cg, og, kernel, strides, dilation, pads,
                                  extra, layout, kernel_layout, dtypes, out_dtype, runtime,
                                  isa, seed):
    """Transposed: run-time weights, and the dtypes FCONVT does not take (int16, int64) with
    constant ones, as GCONV; the others stay FCONVT's."""
    output_padding = tuple(e % max(s, d) for e, s, d in zip(extra, strides, dilation))
    (kh, kw), (top, left, bottom, right) = kernel, pads
    oh = (h - 1) * strides[0] - top - bottom + dilation[0] * (kh - 1) + output_padding[0] + 1
    ow = (w - 1) * strides[1] - left - right + dilation[1] * (kw - 1) + output_padding[1] + 1
    assume(min(oh, ow) >= 1)
    c = groups * cg
    x = Var("x", TensorType((n, h, w, c) if layout == "NHWC" else (n, c, h, w), dtypes[0]))
    wt = weights("w", in_layout((c, og, kh, kw), kernel_layout, "IOHW"), dtypes[1], runtime, seed)
    out = get_op("nn.conv2d_transpose")(
        x, wt, strides=strides, padding=pads, dilation=dilation, groups=groups,
        output_padding=output_padding, data_layout=layout, kernel_layout=kernel_layout,
        out_dtype=out_dtype,
    )  # fmt: skip
    fconvt = not runtime and {dtypes[0], out_dtype or dtypes[0]} <= {"int8", "uint8", "int32"}
    build_and_compare([x, wt] if runtime else [x], out, isa, {"FCONVT" if fconvt else "GCONV"},
                      seed)


def _bmm_operands(b, m, k, n, bx1, by1, ta, tb, dtypes):
    bx, by = (1 if bx1 else b), (1 if by1 and not bx1 else b)
    x = Var("x", TensorType((bx, k, m) if ta else (bx, m, k), dtypes[0]))
    y = Var("y", TensorType((by, n, k) if tb else (by, k, n), dtypes[1]))
    return x, y


@settings(max_examples=30, deadline=None)
@given(
    b=st.integers(1, 3), m=st.integers(1, 6), k=st.integers(1, 9), n=st.integers(1, 6),
    bx1=st.booleans(), by1=st.booleans(), ta=st.booleans(), tb=st.booleans(),
    dtypes=st.tuples(*[st.sampled_from(INTS)] * 2),
    out_dtype=st.sampled_from(["", "int8", "int16", "int32", "int64"]),
    isa=st.sampled_from(ISAS), seed=st.integers(0, 99),
)  # fmt: skip
def test_integer_batch_matmul(b, m, k, n, bx1, by1, ta, tb, dtypes, out_dtype, isa, seed):
    """Transposes, a broadcast batch of 1, any integer dtypes: the exact sum wrapped."""
    x, y = _bmm_operands(b, m, k, n, bx1, by1, ta, tb, dtypes)
    out = get_op("nn.batch_matmul")(x, y, transpose_a=ta, transpose_b=tb, out_dtype=out_dtype)
    build_and_compare([x, y], out, isa, {"IBMM"}, seed)


SEMANTICS = ["tflite", "tflite_builtin", "tflite_double", "onnx", "fbgemm", "onednn"]


@settings(max_examples=40, deadline=None)
@given(
    b=st.integers(1, 3), m=st.integers(1, 5), k=st.integers(1, 9), n=st.integers(1, 5),
    bx1=st.booleans(), ta=st.booleans(), tb=st.booleans(),
    dtypes=st.tuples(*[st.sampled_from(["int8", "uint8", "int16"])] * 2),
    zps=st.tuples(st.integers(-100, 100), st.integers(-100, 100)),
    runtime_zp=st.booleans(), acc=st.sampled_from(["int32", "int64"]),
    requantize=st.sampled_from([None, *SEMANTICS]), axis=st.sampled_from([None, 0, 1, 2]),
    out_dtype=st.sampled_from(["int8", "uint8", "int16"]), s_out=st.floats(0.005, 0.2),
    isa=st.sampled_from(ISAS), seed=st.integers(0, 99),
)  # fmt: skip
def test_qnn_batch_matmul(b, m, k, n, bx1, ta, tb, dtypes, zps, runtime_zp, acc, requantize,
                          axis, out_dtype, s_out, isa, seed):
    """qnn.batch_matmul's accumulator read as such (int32 or int64, zero points constant or
    computed at run time), or requantized with every semantics, per tensor or per channel along
    ``axis``: one IBMM kernel (8-bit tflite per tensor stays QBMM's)."""
    x, y = _bmm_operands(b, m, k, n, bx1, False, ta, tb, dtypes)
    params = [x, y]
    if runtime_zp:
        zx, zy = Var("zx", TensorType((), "int32")), Var("zy", TensorType((), "int32"))
        params += [zx, zy]
    else:
        zx, zy = I32(zps[0]), I32(zps[1])
    if requantize in ("tflite", "tflite_builtin"):  # int64 data: a 16-bit multiplier, whose
        acc = "int32"  # shift range the scales here may leave (refused, with the reason)
    out = get_op("qnn.batch_matmul")(
        x, y, zx, zy, F32(0.1), F32(0.2), transpose_a=ta, transpose_b=tb, out_dtype=acc
    )
    kinds = {"IBMM"}
    if requantize is not None:
        shape = (b, m, n)
        size = 1 if axis is None else shape[axis]
        rng = np.random.default_rng(seed)
        s_in = (rng.uniform(0.5, 2.0, size) / (4096 * np.sqrt(k))).astype(F32)
        zp_in = rng.integers(-50, 50, size).astype(I32)
        zp_out = rng.integers(-5, 5, size).astype(I32) + (128 if out_dtype == "uint8" else 0)
        out = get_op("qnn.requantize")(
            out, s_in if axis is not None else s_in[0], zp_in if axis is not None else zp_in[0],
            F32(s_out), zp_out if axis is not None else zp_out[0], axis=-1 if axis is None
            else axis, out_dtype=out_dtype, semantics=requantize,
        )  # fmt: skip
        if (requantize == "tflite" and axis is None and out_dtype in ("int8", "uint8")
                and set(dtypes) <= {"int8", "uint8"} and not runtime_zp):
            kinds = {"QBMM"}
    # small zero points when computed at run time (the feeds span +-100: int32 zero points)
    build_and_compare(params, out, isa, kinds, seed, span=100 if runtime_zp else None)


@pytest.mark.parametrize("semantics", SEMANTICS)
def test_qnn_batch_matmul_int32_accumulator_wraps_before_requantize(semantics):
    """int16 products whose sum passes 2**31: the reference wraps the int32 accumulator, then
    requantizes it (a scale of 2**-24 brings the wrapped values into range)."""
    x = Var("x", TensorType((1, 2, 3), "int16"))
    y = Var("y", TensorType((1, 2, 3), "int16"))
    acc = get_op("qnn.batch_matmul")(x, y, I32(0), I32(0), F32(1), F32(1))
    out = get_op("qnn.requantize")(acc, F32(2.0**-24), I32(0), F32(1.0), I32(0),
                                   out_dtype="int16", semantics=semantics)
    mod = IRModule({"main": Function([x, y], out)})
    feeds = [np.full((1, 2, 3), -32768, np.int16), np.array([[[-32768] * 3, [1, 2, 3]]], np.int16)]
    got, want = P.build(mod, "llvm").run(*feeds)[0], P.interpret(mod, feeds)[0]
    assert want[0, 0, 0] == -64  # 3 * 2**30 wrapped to -2**30, times 2**-24
    assert np.array_equal(got, want)


def test_qnn_batch_matmul_accumulator_read_twice_is_stored_then_requantized():
    """An accumulator that is also an output keeps its own buffer (IBMM), and its requantize
    is an EWISE step over it."""
    x = Var("x", TensorType((2, 3, 7), "int8"))
    y = Var("y", TensorType((2, 4, 7), "uint8"))
    acc = get_op("qnn.batch_matmul")(x, y, I32(3), I32(128), F32(0.1), F32(0.2))
    out = get_op("qnn.requantize")(acc, F32(0.02), I32(1), F32(0.5), I32(-3), semantics="onnx")
    made = build_and_compare([x, y], Tuple([acc, out]), kinds={"IBMM", "EWISE"})
    assert "QBMM" not in made


def test_what_stays_refused_names_the_op_and_the_reason():
    """nn.gemm's bias computed at run time: MLAS preloads C with it (a constant), FDENSE adds a
    constant one."""
    x = Var("x", TensorType((3, 5), "float32"))
    w = Var("w", TensorType((4, 5), "float32"))
    bias = Var("bias", TensorType((4,), "float32"))
    for accumulate, reason in (("mlas", "bias other than a constant per column"),
                               ("exact", "bias computed at run time")):
        out = get_op("nn.gemm")(x, w, bias, accumulate=accumulate)
        mod = IRModule({"main": Function([x, w, bias], out)})
        with pytest.raises(LLVMError, match=rf"llvm cannot compile nn\.gemm.*{reason}"):
            P.build(mod, "llvm")
