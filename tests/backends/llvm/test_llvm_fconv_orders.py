"""Float convolutions in other runtimes' float32 orders on the LLVM backend (conv_lower.py,
sum_order.py, fconv_kernels.py): grouped and depthwise convolutions with exact sums (within
1e-5 of the output's scale), ONNX Runtime's MLAS order (accumulate="mlas", any ``threads``) and
PyTorch's (accumulate="torch_cpu") bit for bit, global average pools in both orders, dense
products in MLAS's order (fdense_lower.py), and the listed ONNX and PyTorch networks built
whole (and ONNX ones imported with match="ort_disable_all"), against the interpreter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from partita.backends.llvm.lower.context import LLVMError

import partita as P
from partita.ir import Function, IRModule, TensorType, Var
from partita.ops import get_op

MODELS = Path(__file__).resolve().parents[2] / "models"
F32 = np.float32


def conv_graph(n, h, w, c, o, groups, kernel, stride, dilation, padding, layout, accumulate,
               threads, tail, seed):
    rng = np.random.default_rng(seed)
    kh, kw = kernel
    if layout == "NHWC":
        xs, ws, kl, axis = (n, h, w, c), (kh, kw, c // groups, o), "HWIO", 3
    else:
        xs, ws, kl, axis = (n, c, h, w), (o, c // groups, kh, kw), "OIHW", 1
    x = Var("x", TensorType(xs, "float32"))
    out = get_op("nn.conv2d")(
        x, rng.standard_normal(ws).astype(F32), strides=stride, padding=padding,
        dilation=dilation, groups=groups, data_layout=layout, kernel_layout=kl,
        accumulate=accumulate, threads=threads,
    )  # fmt: skip
    if tail in ("bias", "bias_relu"):
        out = get_op("nn.bias_add")(out, rng.standard_normal(o).astype(F32), axis=axis)
    if tail in ("relu", "bias_relu"):
        out = get_op("nn.relu")(out)
    return IRModule({"main": Function([x], out)}), xs


def compare(mod, xs, exact_bits: bool, seed=1, target="llvm"):
    exe = P.build(mod, target)
    assert [s.target for s in exe.steps] == ["llvm"]
    x = np.random.default_rng(seed).standard_normal(xs).astype(F32)
    got, want = exe.run(x)[0], P.interpret(mod, [x])[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    if exact_bits:
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    else:
        scale = float(np.abs(want).max()) or 1.0
        assert float(np.abs(got - want).max()) <= 1e-5 * scale
    return exe


def kinds_of(exe) -> set:
    return {k.split()[0] for k in exe.steps[0].region.kernels}


geometry = dict(
    h=st.integers(1, 12), w=st.integers(1, 12), cg=st.integers(1, 12),
    m=st.sampled_from([1, 2, 5, 8, 16, 21, 40]), kernel=st.tuples(st.integers(1, 3),
    st.integers(1, 3)), stride=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    padding=st.tuples(*[st.integers(0, 2)] * 4), layout=st.sampled_from(["NHWC", "NCHW"]),
    tail=st.sampled_from(["", "bias", "relu", "bias_relu"]), seed=st.integers(0, 99),
)  # fmt: skip


def _fits(h, w, kernel, dilation, padding):
    return all(d * (k - 1) + 1 <= size + a + b for size, k, d, a, b in
               zip((h, w), kernel, dilation, padding[::2], padding[1::2]))


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 2), groups=st.integers(1, 4), depthwise=st.booleans(),
       dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)), **geometry)
def test_grouped_and_depthwise_exact(n, groups, depthwise, dilation, h, w, cg, m, kernel,
                                     stride, padding, layout, tail, seed):
    padding = (padding[0], padding[1], padding[2], padding[3])
    assume(_fits(h, w, kernel, dilation, (padding[0], padding[2], padding[1], padding[3])))
    c, o = (cg * 4, cg * 4) if depthwise else (cg * groups, m * groups)
    g = c if depthwise else groups
    mod, xs = conv_graph(n, h, w, c, o, g, kernel, stride, dilation, padding, layout, "exact",
                         1, tail, seed)
    exe = compare(mod, xs, exact_bits=False)
    assert kinds_of(exe) & {"FDW", "FCONV", "FDENSE"}


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 2), groups=st.sampled_from([1, 1, 2, 3, "dw"]), threads=st.integers(1, 4),
       big_k=st.booleans(), dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       **geometry)  # fmt: skip
def test_mlas_order_bit_exact(n, groups, threads, big_k, dilation, h, w, cg, m, kernel, stride,
                              padding, layout, tail, seed):
    """Every split MLAS makes (threads, K blocks of StrideK, M = 1 kernels) reproduced."""
    assume(_fits(h, w, kernel, dilation, (padding[0], padding[2], padding[1], padding[3])))
    if big_k:  # K past one StrideK block (128): blocks summed then added
        cg = cg * 17
    if groups == "dw":
        c = o = g = cg
    else:
        c, o, g = cg * groups, m * groups, groups
    mod, xs = conv_graph(n, h, w, c, o, g, kernel, stride, dilation, padding, layout, "mlas",
                         threads, tail, seed)
    compare(mod, xs, exact_bits=True)


@settings(max_examples=20, deadline=None)
@given(depthwise=st.booleans(), n=st.integers(1, 2), **geometry)
def test_torch_cpu_order_bit_exact(depthwise, n, h, w, cg, m, kernel, stride, padding, layout,
                                   tail, seed):
    """PyTorch's MKL chains (K <= 320, one FMA chain from zero) and oneDNN's jit_dw."""
    assume(_fits(h, w, kernel, (1, 1), (padding[0], padding[2], padding[1], padding[3])))
    if depthwise:
        c = o = g = cg * 3
    else:
        n, c, o, g = 1, cg * 5, m, 1
        assume(c * kernel[0] * kernel[1] <= 320 and h * w * c <= 20480 and min(kernel) <= 3)
    mod, xs = conv_graph(n, h, w, c, o, g, kernel, stride, (1, 1), padding, layout, "torch_cpu",
                         1, tail, seed)
    exe = compare(mod, xs, exact_bits=True)
    assert kinds_of(exe) & {"FDW", "FCONV"}


@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 2), h=st.integers(1, 12), w=st.integers(1, 12), c=st.integers(1, 40),
       accumulate=st.sampled_from(["mlas", "torch_cpu"]),
       layout=st.sampled_from(["NHWC", "NCHW"]), seed=st.integers(0, 99))
def test_global_average_pool_orders_bit_exact(n, h, w, c, accumulate, layout, seed):
    xs = (n, h, w, c) if layout == "NHWC" else (n, c, h, w)
    x = Var("x", TensorType(xs, "float32"))
    out = get_op("nn.global_avg_pool2d")(x, layout=layout, accumulate=accumulate)
    exe = compare(IRModule({"main": Function([x], out)}), xs, exact_bits=True, seed=seed)
    assert kinds_of(exe) == {"FGAP"}


def test_mlas_threads_change_the_split_and_the_kernels_follow():
    """A 3x3 convolution of 40 pixels x 144 channels: one thread sums K = 1296 in 128-wide
    blocks; threads=2 splits the pixels in 16-aligned segments with their own blocking."""
    for threads in (1, 2, 4):
        mod, xs = conv_graph(1, 8, 5, 144, 24, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), "NCHW",
                             "mlas", threads, "bias", 0)
        exe = compare(mod, xs, exact_bits=True)
        assert kinds_of(exe) >= {"FIM2COL", "FCONV"}


def test_two_threads_and_the_sign_of_zero():
    """-threads=2 builds the same kernels; zeros keep their sign through the chains."""
    mod, xs = conv_graph(1, 6, 6, 16, 16, 16, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), "NHWC",
                         "torch_cpu", 1, "", 0)
    exe = compare(mod, xs, exact_bits=True, target="llvm -threads=2")
    x = -np.zeros(xs, F32)
    assert np.array_equal(exe.run(x)[0].view(np.uint32),
                          P.interpret(mod, [x])[0].view(np.uint32))


def test_mlas_single_pixel_and_single_channel_kernels():
    """A 1x1 convolution of one pixel (an SE block's, MobileNet v1's classifier) and a depthwise
    one over full-width windows: MLAS's M=1 kernel over a transposed B, 8 lanes reduced in the
    order of the output's 4-, 2- or 1-column block."""
    for c, o, h, w, kernel, groups in ((32, 7, 1, 1, (1, 1), 1), (300, 11, 1, 1, (1, 1), 1),
                                       (6, 6, 5, 3, (2, 3), 6), (4, 4, 3, 1, (3, 1), 4)):
        mod, xs = conv_graph(1, h, w, c, o, groups, kernel, (1, 1), (1, 1), (0, 0, 0, 0),
                             "NCHW", "mlas", 1, "bias", 0)
        compare(mod, xs, exact_bits=True)


@settings(max_examples=20, deadline=None)
@given(rows=st.sampled_from([1, 1, 2, 3, 7, 20]), n=st.integers(1, 40),
       k=st.sampled_from([1, 3, 8, 9, 17, 130, 300]), threads=st.integers(1, 3),
       op=st.sampled_from(["dense", "gemm", "gemm_t"]), packed=st.booleans(),
       relu=st.booleans(), seed=st.integers(0, 99))  # fmt: skip
def test_mlas_dense_and_gemm_bit_exact(rows, n, k, threads, op, packed, relu, seed):
    """nn.dense / nn.gemm in MlasGemm's order (thread split, K blocks, the M=1 kernels; the
    bias as C for nn.gemm) on FCONV, as a 1x1 convolution of ``rows`` pixels."""
    rng = np.random.default_rng(seed)
    x = Var("x", TensorType((rows, k), "float32"))
    acc = dict(accumulate="mlas_packed" if packed else "mlas", threads=threads)
    if op == "dense":
        out = get_op("nn.dense")(x, rng.standard_normal((n, k)).astype(F32), **acc)
        if relu:
            out = get_op("nn.relu")(out)
    else:
        w = rng.standard_normal((n, k) if op == "gemm_t" else (k, n)).astype(F32)
        out = get_op("nn.gemm")(x, w, rng.standard_normal(n).astype(F32),
                                transpose_b=op == "gemm_t", **acc)
    exe = compare(IRModule({"main": Function([x], out)}), (rows, k), exact_bits=True)
    assert "FCONV" in kinds_of(exe)


def test_what_is_still_refused_is_named():
    """MLAS's C computed at run time (weights computed at run time compile:
    test_llvm_runtime_weights.py; global averages of more than 4096 pixels, refused until
    session 9, run as loops: test_llvm_more_refusals.py)."""
    d = Var("d", TensorType((2, 8), "float32"))
    c = Var("c", TensorType((4,), "float32"))
    gemm = get_op("nn.gemm")(d, np.ones((4, 8), F32), c, accumulate="mlas")
    with pytest.raises(LLVMError, match=r"llvm cannot compile nn.gemm.*constant per column"):
        P.build(IRModule({"main": Function([d, c], gemm)}), "llvm")


# ---- whole networks ---------------------------------------------------------------------------

EXACT = ["onnx/ops/conv_depthwise.onnx", "onnx/nets/mobilenet_v1_025_96.onnx",
         "onnx/nets/mobilenet_v2_035_96.onnx", "onnx/nets/torch_mobilenetv2_64.onnx",
         "pytorch/float_mobilenetv2.pt2", "pytorch/float_ops.pt2"]  # fmt: skip
ORDERED = ["onnx/nets/mobilenet_v2_035_96.qdq_s8s8_pc.onnx",
           "onnx/nets/resnet_mini_64.qdq_s8s8_pc.onnx",
           "onnx/nets/torch_mobilenetv2_64.qdq_s8s8_pc.onnx",
           "pytorch/float_mobilenetv2.pt2@eager", "pytorch/float_ops.pt2@eager",
           "pytorch/pt2e_x86_mobilenetv2.pt2@eager", "pytorch/pt2e_x86_ops.pt2@eager",
           # match="ort_disable_all", ONNX Runtime on 2 threads: every float Conv, Gemm and
           # GlobalAveragePool in MLAS's order (MobileNet v1's classifier: one pixel, M=1)
           "onnx/nets/mobilenet_v1_025_96.onnx@ort2", "onnx/nets/mobilenet_v2_035_96.onnx@ort2",
           "onnx/nets/torch_mobilenetv2_64.onnx@ort2",
           "onnx/nets/mobilenet_v1_025_96.qdq_s8s8_pc.onnx@ort2"]  # fmt: skip
QUICK = {"onnx/ops/conv_depthwise.onnx", "pytorch/float_ops.pt2@eager",
         "pytorch/pt2e_x86_ops.pt2@eager", "onnx/nets/mobilenet_v1_025_96.onnx@ort2"}


def _model(name):
    from partita.cli.models import load_model

    path = MODELS / name.split("@")[0]
    if path.suffix == ".pt2":
        pytest.importorskip("torch")
    if path.suffix == ".onnx":
        pytest.importorskip("onnx")
    if name.endswith("@ort2"):
        from partita.frontends import from_onnx

        return from_onnx(path, match="ort_disable_all", ort_threads=2)
    return load_model(path, **({"match": "pytorch_eager"} if name.endswith("@eager") else {}))


def _marks(name):
    return () if name in QUICK else (pytest.mark.slow,)


@pytest.mark.parametrize(
    "name, bits",
    [pytest.param(n, False, marks=_marks(n)) for n in EXACT]
    + [pytest.param(n, True, marks=_marks(n)) for n in ORDERED],
)
def test_networks_build_whole_and_equal_the_interpreter(name, bits):
    mod = _model(name)
    exe = P.build(mod, "llvm")
    assert [s.target for s in exe.steps] == ["llvm"]
    for seed in range(2):
        rng = np.random.default_rng(seed)
        feeds = [rng.standard_normal(p.checked_type.shape).astype(p.checked_type.dtype)
                 for p in mod["main"].params]
        for got, want in zip(exe.run(*feeds), P.interpret(mod, feeds)):
            if bits:
                assert np.array_equal(got, want)
            else:
                scale = float(np.abs(want).max()) or 1.0
                assert float(np.abs(got - want).max()) <= 1e-5 * scale


@pytest.mark.parametrize("isa", ["avx2", "plain"])
def test_fconv_tile_orders_and_short_tiles_give_the_same_bits(monkeypatch, tmp_path, isa):
    """FCONV's loops over row tiles and 16-channel strips in either nesting (conv.fconv_order,
    forced), AVX2's 6 x 1 register tile with a shorter last tile (13 rows = 6 + 6 + 1, 43
    channels = 2 strips + 11 lanes) and later K blocks (K = 300: MLAS's 128-step blocks, each
    added into C): every build bit-exact with the interpreter."""
    from partita.backends.llvm.emit.float import conv

    monkeypatch.setenv("PARTITA_REGION_CACHE", "0")  # a cached region would hide the patch,
    mod, xs = conv_graph(1, 1, 13, 300, 43, 1, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), "NHWC",
                         "mlas", 1, "bias_relu", 5)
    wide, _ = conv_graph(1, 2, 2, 160, 96, 1, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), "NHWC",
                         "mlas", 1, "bias", 6)
    assert conv.fconv_order({"size": 13}, 43) == "cols"  # more channels than rows
    assert conv.fconv_order({"size": 4}, 3) == "rows"
    for order in ("rows", "cols"):
        monkeypatch.setenv("PARTITA_CACHE_DIR", str(tmp_path / order))  # and cached objects
        monkeypatch.setattr(conv, "FCONV_ORDER", order)
        exe = compare(mod, xs, True, target=f"llvm -isa={isa}")
        assert [k.split()[0] for k in exe.steps[0].region.kernels] == ["FCONV"]
        compare(wide, (1, 2, 2, 160), True, target=f"llvm -isa={isa}")
