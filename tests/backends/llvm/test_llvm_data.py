"""Data movement (GATHER: pad, nearest resize, concatenation), quantized
average pooling (AVGPOOL, both semantics) and grouped convolutions on the LLVM backend, bit for
bit against the reference interpreter under hypothesis."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import partita as P
from partita.ir import Function, IRModule, TensorType, Tuple, Var
from partita.ops import get_op

F32, I32 = np.float32, np.int32


def sample(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def assert_exact(params, out, kinds=None, seed=0):
    mod = IRModule({"main": Function(params, out)})
    exe = P.build(mod, "llvm")
    assert [s.target for s in exe.steps] == ["llvm"]
    if kinds is not None:
        assert kinds <= {k.split()[0] for k in exe.steps[0].region.kernels}
    rng = np.random.default_rng(seed)
    feeds = [sample(rng, p.checked_type.shape if p.checked_type else p.type_annotation.shape,
                    p.type_annotation.dtype) for p in params]
    got = exe.run(*feeds)
    got = got if isinstance(got, (list, tuple)) else [got]
    want = P.interpret(mod, feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w)


@settings(max_examples=30, deadline=None)
@given(
    h=st.integers(1, 9), w=st.integers(1, 9), c=st.integers(1, 5),
    pool=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    stride=st.integers(1, 3), pad=st.integers(0, 2), include=st.booleans(),
    ceil=st.booleans(), semantics=st.sampled_from(["tflite", "onnx"]),
    dtype=st.sampled_from(["int8", "uint8"]), rescale=st.booleans(),
    layout=st.sampled_from(["NHWC", "NCHW"]), seed=st.integers(0, 99),
)  # fmt: skip
def test_quantized_average_pooling(
    h, w, c, pool, stride, pad, include, ceil, semantics, dtype, rescale, layout, seed
):
    assume(min(pool) > pad and pool[0] <= h + 2 * pad and pool[1] <= w + 2 * pad)
    shape = (1, h, w, c) if layout == "NHWC" else (1, c, h, w)
    x = Var("x", TensorType(shape, dtype))
    zp = 3 if dtype == "int8" else 130
    s_out, zp_out = (F32(0.07), I32(zp - 5)) if rescale else (F32(0.05), I32(zp))
    out = get_op("qnn.avg_pool2d")(
        x, F32(0.05), I32(zp), s_out, zp_out, pool_size=pool, strides=(stride, stride),
        padding=(pad, pad, pad, pad), count_include_pad=include, ceil_mode=ceil,
        layout=layout, semantics=semantics,
    )  # fmt: skip
    assert_exact([x], out, seed=seed)


@settings(max_examples=20, deadline=None)
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=4),
    widths=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=4, max_size=4),
    value=st.integers(-128, 127),
)
def test_pad_is_a_gather(shape, widths, value):
    x = Var("x", TensorType(tuple(shape), "int8"))
    out = get_op("nn.pad")(x, np.int8(value), pad_width=tuple(widths[: len(shape)]))
    assert_exact([x], out, {"GATHER"})


@pytest.mark.parametrize("mode", ["asymmetric", "half_pixel", "align_corners"])
@pytest.mark.parametrize("rounding", ["round", "floor", "round_prefer_ceil"])
@pytest.mark.parametrize("size", [(7, 3), (2, 9)])
def test_nearest_resize_is_a_gather(mode, rounding, size):
    x = Var("x", TensorType((1, 4, 5, 3), "uint8"))
    out = get_op("image.resize2d")(
        x, size=size, layout="NHWC", method="nearest_neighbor",
        coordinate_transformation_mode=mode, rounding_method=rounding,
    )  # fmt: skip
    assert_exact([x], out, {"GATHER"})


@settings(max_examples=20, deadline=None)
@given(
    axis=st.integers(0, 2), sizes=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    dtype=st.sampled_from(["int8", "uint8", "int32"]),
)
def test_concatenate_is_a_gather(axis, sizes, dtype):
    params = []
    for i, n in enumerate(sizes):
        shape = [2, 3, 2]
        shape[axis] = n
        params.append(Var(f"x{i}", TensorType(tuple(shape), dtype)))
    out = get_op("concatenate")(Tuple(params), axis=axis)
    assert_exact(params, out, {"GATHER"})


@pytest.mark.parametrize("semantics", ["tflite", "onnx"])
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_quantized_concatenation_rescales_by_table(semantics, dtype):
    xs = [Var(f"x{i}", TensorType((1, 3, 4, c), dtype)) for i, c in enumerate((2, 5, 3))]
    zp = 0 if dtype == "int8" else 128
    scales = Tuple([P.ir.Constant(F32(s)) for s in (0.05, 0.1, 0.07)])
    zps = Tuple([P.ir.Constant(I32(zp + d)) for d in (0, 4, -7)])
    out = get_op("qnn.concatenate")(Tuple(xs), scales, zps, F32(0.07), I32(zp - 7), axis=3,
                                    semantics=semantics)
    assert_exact(xs, out, {"GATHER", "LUT"})
    # a constant among the fields is data like the others (the build used to crash on it)
    const = P.ir.Constant(np.arange(24, dtype=dtype).reshape(1, 3, 4, 2))
    out = get_op("qnn.concatenate")(Tuple([xs[0], const, xs[2]]), scales, zps, F32(0.07),
                                    I32(zp - 7), axis=3, semantics=semantics)
    assert_exact([xs[0], xs[2]], out, {"GATHER"})
    out = get_op("concatenate")(Tuple([const, xs[0]]), axis=3)
    assert_exact([xs[0]], out, {"GATHER"})


@pytest.mark.parametrize("groups, cin, cout", [(2, 4, 6), (4, 4, 8), (3, 6, 3)])
@pytest.mark.parametrize("isa", ["vnni", "plain"])
def test_grouped_convolutions_run_as_one_convolution(groups, cin, cout, isa, monkeypatch):
    from partita.backends.llvm.runtime.jit import host_isa

    if isa == "vnni" and host_isa() != "vnni":  # its instructions as exact stand-ins
        monkeypatch.setenv("PARTITA_LLVM_EMULATE", "yes")
    monkeypatch.setenv("PARTITA_LLVM_ISA", isa)
    rng = np.random.default_rng(groups)
    x = Var("x", TensorType((1, 6, 6, cin), "uint8"))
    w = rng.integers(0, 256, (cout, 3, 3, cin // groups)).astype(np.uint8)
    conv = get_op("qnn.conv2d")(
        x, w, I32(120), I32(131), F32(0.05), F32(0.01), padding=(1, 1, 1, 1), groups=groups,
        data_layout="NHWC", kernel_layout="OHWI", out_dtype="int32",
    )  # fmt: skip
    out = get_op("qnn.requantize")(conv, F32(0.0005), I32(0), F32(0.08), I32(128),
                                   out_dtype="uint8")
    # VCONV when w - w_zp fits int8 (here: not for every draw), else the plain CONV
    assert_exact([x], out)
