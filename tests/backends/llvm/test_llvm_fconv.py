"""Float32 convolutions on the LLVM backend (backends/llvm/conv_lower.py: the float GEMM, bias and
relu in its epilogue, reading the taps from the zero-padded image in place when the output
channels are a multiple of 16, else from an IM2COL copy), float max pooling and global average
pooling, against the reference interpreter (exact sums rounded once; the kernels sum in float32,
so within float32 rounding of the output's scale)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import partita as P


def conv_module(h, w, cin, cout, k, stride, dilation, pad, layout, bias, relu, seed=0):
    rng = np.random.default_rng(seed)
    if layout == "NHWC":
        xs, ws, kl, axis = (1, h, w, cin), (k, k, cin, cout), "HWIO", 3
    else:
        xs, ws, kl, axis = (1, cin, h, w), (cout, cin, k, k), "OIHW", 1
    consts = [rng.standard_normal(ws).astype(np.float32),
              rng.standard_normal(cout).astype(np.float32)]
    body = (f"nn.conv2d(%x, meta[relay.Constant][0], strides=[{stride}, {stride}], "
            f"padding=[{pad}, {pad}, {pad}, {pad}], dilation=[{dilation}, {dilation}], "
            f'data_layout="{layout}", kernel_layout="{kl}")')
    if bias:
        body = f"nn.bias_add({body}, meta[relay.Constant][1], axis={axis})"
    if relu:
        body = f"nn.relu({body})"
    return P.parse(f"def @main(%x: Tensor[{xs}, float32]) {{\n  {body}\n}}", consts), xs


def assert_close(mod, target, xs, seed=1):
    exe = P.build(mod, target)
    assert [s.target for s in exe.steps] == ["llvm"]
    x = np.random.default_rng(seed).standard_normal(xs).astype(np.float32)
    got, want = exe.run(x)[0], P.interpret(mod, [x])[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    scale = float(np.abs(want).max()) or 1.0
    assert float(np.abs(got - want).max()) <= 1e-5 * scale
    return exe


@settings(max_examples=25, deadline=None)
@given(
    h=st.integers(3, 11),
    w=st.integers(3, 11),
    cin=st.integers(1, 20),
    cout=st.sampled_from([1, 5, 16, 32, 48]),
    k=st.sampled_from([1, 2, 3, 5]),
    stride=st.integers(1, 3),
    dilation=st.integers(1, 2),
    pad=st.integers(0, 2),
    layout=st.sampled_from(["NHWC", "NCHW"]),
    bias=st.booleans(),
    relu=st.booleans(),
)
def test_float_conv_equals_the_interpreter(
    h, w, cin, cout, k, stride, dilation, pad, layout, bias, relu
):
    if (k - 1) * dilation + 1 > min(h, w) + 2 * pad:
        return
    mod, xs = conv_module(h, w, cin, cout, k, stride, dilation, pad, layout, bias, relu)
    assert_close(mod, "llvm", xs)


def test_bias_and_relu_run_in_the_products_epilogue_and_two_threads_agree():
    mod, xs = conv_module(20, 20, 32, 64, 3, 1, 1, 1, "NHWC", True, True)
    one = assert_close(mod, "llvm -winograd=no", xs)  # (test_llvm_winograd.py: the default)
    kinds = [k.split()[0] for k in one.steps[0].region.kernels]
    assert kinds == ["FPAD", "FDENSE"]  # no im2col copy, no separate bias or relu pass
    two = assert_close(mod, "llvm -winograd=no -threads=2", xs)
    x = np.random.default_rng(4).standard_normal(xs).astype(np.float32)
    assert np.array_equal(one.run(x)[0], two.run(x)[0])  # rows split, same sums
    pointwise, xs = conv_module(6, 6, 16, 32, 1, 1, 1, 0, "NHWC", False, False)
    kinds = [k.split()[0] for k in assert_close(pointwise, "llvm", xs).steps[0].region.kernels]
    assert kinds == ["FDENSE"]  # a 1x1 convolution reads its input as rows


def test_relu_keeps_nan_as_numpy_does():
    mod, xs = conv_module(4, 4, 16, 16, 1, 1, 1, 0, "NHWC", False, True)
    exe = P.build(mod, "llvm")
    x = np.zeros(xs, np.float32)
    x[0, 1, 2, 3] = np.nan
    got, want = exe.run(x)[0], P.interpret(mod, [x])[0]
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.isnan(got).any()


@pytest.mark.parametrize("pool, stride, pad", [(3, 2, 1), (2, 2, 0), (3, 1, 1)])
def test_float_max_pool_and_global_average_pool(pool, stride, pad):
    consts = [np.ones((3, 3, 4, 8), np.float32) * 0.1]
    mod = P.parse(f"""
def @main(%x: Tensor[(1, 9, 9, 4), float32]) {{
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], data_layout="NHWC",
       kernel_layout="HWIO");
  %1 = nn.max_pool2d(%0, pool_size=[{pool}, {pool}], strides=[{stride}, {stride}],
       padding=[{pad}, {pad}, {pad}, {pad}], layout="NHWC");
  nn.global_avg_pool2d(%1, layout="NHWC")
}}""", consts)
    exe = assert_close(mod, "llvm", (1, 9, 9, 4))
    kinds = {k.split()[0] for k in exe.steps[0].region.kernels}
    assert {"MAXPOOL", "FREDUCE"} <= kinds



@settings(max_examples=12, deadline=None)
@given(
    hw=st.sampled_from([(1, 1), (1, 5), (3, 3), (2, 7), (7, 7)]),
    cin=st.sampled_from([256, 300, 384, 520]),
    cout=st.sampled_from([64, 80, 128, 208]),
    k=st.sampled_from([1, 3]),
    bias=st.booleans(),
    relu=st.booleans(),
    threads=st.sampled_from([1, 2]),
    isa=st.sampled_from(["avx2", "auto"]),  # 4 or 6-row register tiles
)
def test_few_rows_long_sums_run_in_k_blocks(hw, cin, cout, k, bias, relu, threads, isa):
    """Few output pixels, long sums (ResNet50's 7 x 7 layers): the product runs panel by panel
    in blocks of 128 k steps, the sums kept in the output between blocks (and bias and relu
    after the last), a shorter last row tile inside each block; one and two threads (split
    by column panels) equal the interpreter, and each other bit for bit."""
    h, w = hw
    mod, xs = conv_module(h + k - 1, w + k - 1, cin, cout, k, 1, 1, 0, "NHWC", bias, relu,
                          seed=cin + cout)
    exe = assert_close(mod, f"llvm -isa={isa} -threads={threads}", xs)
    x = np.random.default_rng(3).standard_normal(xs).astype(np.float32)  # a second run: the
    got, want = exe.run(x)[0], P.interpret(mod, [x])[0]  # output holds the last run's sums
    assert float(np.abs(got - want).max()) <= 1e-5 * float(np.abs(want).max())
    if threads == 2:
        x = np.random.default_rng(2).standard_normal(xs).astype(np.float32)
        one = P.build(mod, f"llvm -isa={isa}")
        assert np.array_equal(one.run(x)[0], exe.run(x)[0])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("relu, swap, shape", [(False, False, (24, 20, 32, 64)),
                                               (True, False, (7, 7, 256, 256)),
                                               (True, True, (6, 6, 16, 32))])
def test_a_residual_add_runs_in_the_products_epilogue(threads, relu, swap, shape):
    """ResNet's shortcut: conv -> bias -> add(shortcut computed before) [-> relu] is one
    FDENSE (the bias, then the residual, added to each sum in the graph's order); whichever
    product the walk reaches second takes the add. Two threads split the rows (24 x 20) or
    the column panels (7 x 7 x 256)."""
    h, w, c, o = shape
    rng = np.random.default_rng(5)
    consts = [rng.standard_normal(s).astype(np.float32)
              for s in ((1, 1, c, o), (3, 3, c, o), (o,))]
    add = "add(%1, %0)" if swap else "add(%0, %1)"
    body = f"nn.relu({add})" if relu else add
    mod = P.parse(f"""
def @main(%x: Tensor[(1, {h}, {w}, {c}), float32]) {{
  %0 = nn.conv2d(%x, meta[relay.Constant][0], data_layout="NHWC", kernel_layout="HWIO");
  %c = nn.conv2d(%x, meta[relay.Constant][1], padding=[1, 1, 1, 1], data_layout="NHWC",
       kernel_layout="HWIO");
  %1 = nn.bias_add(%c, meta[relay.Constant][2], axis=3);
  {body}
}}""", consts)
    exe = assert_close(mod, f"llvm -threads={threads}", (1, h, w, c))
    kinds = [k.split()[0] for k in exe.steps[0].region.kernels]
    # 32 channels or more: the 3 x 3 one as Winograd's (test_llvm_winograd.py), the add in it
    assert sorted(kinds) == sorted(["FDENSE", "FDENSE" if c < 32 else "FWINO", "FPAD"])
    if threads == 2:
        x = rng.standard_normal((1, h, w, c)).astype(np.float32)
        assert np.array_equal(exe.run(x)[0], P.build(mod, "llvm").run(x)[0])
