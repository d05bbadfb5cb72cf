"""PyTorch's arithmetic as partita reproduces it: qnn.requantize "fbgemm" (fbgemm's output stage)
and accumulate="torch_cpu" (PyTorch 2.13's float32 CPU conv2d and mean), against hand-computed
values and against single torch ops (the oracle)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import partita  # noqa: E402
from partita.errors import PartitaError  # noqa: E402
from partita.ir import const, var  # noqa: E402
from partita.ops.registry import get_op  # noqa: E402

F32 = np.float32


def requantize(data, s_in, zp_in, s_out, zp_out, **attrs):
    call = get_op("qnn.requantize")(
        const(np.asarray(data, np.int32)),
        const(s_in),
        const(zp_in),
        const(F32(s_out)),
        const(np.int32(zp_out)),
        semantics="fbgemm",
        **attrs,
    )
    return partita.interpret(call)[0]


def test_requantize_fbgemm_by_hand():
    # (data - zp_in) * (0.5 / 2.0): 100.25 * 0.25 = 25.0625 -> 25; -6.75 * 0.25 -> -1.6875 -> -2;
    # 10.25 * 0.25 = 2.5625 -> 3; + 3
    out = requantize([100, -7, 10], F32(0.5), F32(-0.25), 2.0, 3, out_dtype="int8")
    assert out.tolist() == [28, 1, 6]
    # 10 * 0.25 = 2.5 and 14 * 0.25 = 3.5 round half to even
    assert requantize([10, 14], F32(0.5), F32(0), 2.0, 3).tolist() == [5, 7]
    # per channel, int32 zero points and saturation
    out = requantize(
        [[1000, 40]],
        np.array([1.0, 0.5], F32),
        np.array([0, 0], np.int32),
        1.0,
        -10,
        axis=1,
        out_dtype="int8",
    )
    assert out.tolist() == [[127, 10]]


def test_requantize_fbgemm_rejects_float_zero_point_elsewhere():
    call = get_op("qnn.requantize")(
        var("x", (4,), "int32"),
        const(F32(0.5)),
        const(F32(0.25)),
        const(F32(1.0)),
        const(np.int32(0)),
        semantics="onnx",
    )
    with pytest.raises(PartitaError, match="input_zero_point must be int32"):
        partita.interpret(call, [np.zeros(4, np.int32)])


def test_requantize_fbgemm_equals_quantized_conv():
    """quantized::conv2d with a float bias on the fbgemm engine == qnn.conv2d + int32 bias +
    requantize "fbgemm" as the TorchScript frontend builds it."""
    from partita.frontends.pytorch.ts_ops import fbgemm_bias

    old, torch.backends.quantized.engine = torch.backends.quantized.engine, "fbgemm"
    try:
        g = torch.Generator().manual_seed(0)
        x = torch.quantize_per_tensor(
            torch.rand(1, 8, 6, 6, generator=g) * 4, 0.031, 3, torch.quint8
        )
        w = torch.quantize_per_channel(
            torch.randn(16, 8, 3, 3, generator=g) * 0.2,
            torch.rand(16, generator=g) * 0.004 + 0.001,
            torch.zeros(16, dtype=torch.long),
            0,
            torch.qint8,
        )
        bias = torch.randn(16, generator=g) * 0.5
        conv = torch.ao.nn.quantized.Conv2d(8, 16, 3, padding=1)
        conv.set_weight_bias(w, bias)
        conv.scale, conv.zero_point = 0.013, 70
        ref = conv(x).int_repr().numpy()
    finally:
        torch.backends.quantized.engine = old
    xi = x.int_repr().numpy().astype(np.int64) - 3
    wi = w.int_repr().numpy().astype(np.int64)
    acc = np.zeros((16, 6, 6), np.int64)
    xp = np.pad(xi[0], ((0, 0), (1, 1), (1, 1)))
    for i in range(3):
        for j in range(3):
            acc += np.einsum("oc,chw->ohw", wi[:, :, i, j], xp[:, i : i + 6, j : j + 6])
    s_aw = (F32(0.031) * w.q_per_channel_scales().numpy().astype(F32)).astype(F32)
    k, zp_in = fbgemm_bias(bias.numpy().astype(F32), s_aw)
    out = requantize(acc + k[:, None, None], s_aw, zp_in, 0.013, 70, axis=0, out_dtype="uint8")
    np.testing.assert_array_equal(out, ref[0])


def conv(data, weight, **attrs):
    call = get_op("nn.conv2d")(const(data), const(weight), accumulate="torch_cpu", **attrs)
    return partita.interpret(call)[0]


@pytest.mark.parametrize(
    "c,o,side,k,stride,groups,exact",
    [
        (3, 16, 32, 3, 2, 1, True),  # a stem: one FMA chain over K = 27
        (144, 32, 4, 1, 1, 1, True),  # pointwise, K = 144
        # K = 320: MKL picks its summation kernel by CPU (AVX-512 Intel vs Zen 4 differ), so only
        # the float32 error bound of a K-term sum holds on every x86-64 CPU
        (320, 8, 6, 1, 1, 1, False),
        (48, 48, 16, 3, 2, 48, True),  # depthwise (oneDNN jit_dw)
    ],
)
def test_torch_cpu_conv_equals_torch(c, o, side, k, stride, groups, exact):
    g = torch.Generator().manual_seed(c + o)
    x = torch.randn(1, c, side, side, generator=g)
    w = torch.randn(o, c // groups, k, k, generator=g)
    ref = torch.nn.functional.conv2d(x, w, None, stride, k // 2, 1, groups).numpy()
    ours = conv(x.numpy(), w.numpy(), strides=stride, padding=k // 2, groups=groups)
    attrs = dict(strides=stride, padding=k // 2, groups=groups)
    if exact:
        np.testing.assert_array_equal(ours, ref)
    else:  # |error| <= K * 2**-24 * sum |x * w| for any summation order
        magnitude = partita.interpret(
            get_op("nn.conv2d")(const(np.abs(x.numpy())), const(np.abs(w.numpy())), **attrs)
        )[0]
        bound = 1.01 * c * k * k * 2.0**-24 * magnitude.astype(np.float64)
        assert np.all(np.abs(ours.astype(np.float64) - ref) <= bound)
    exact_sum = partita.interpret(get_op("nn.conv2d")(const(x.numpy()), const(w.numpy()), **attrs))[
        0
    ]
    assert not np.array_equal(exact_sum, ref)  # the order matters on these shapes


def test_torch_cpu_conv_rejects_onednn_shapes():
    x, w = np.zeros((1, 32, 32, 32), F32), np.zeros((64, 16, 3, 3), F32)
    with pytest.raises(PartitaError, match="torch_cpu.*groups=2"):
        conv(x, w, groups=2)
    with pytest.raises(PartitaError, match="at most 320 products"):  # MKL's K blocking
        conv(np.zeros((1, 40, 4, 4), F32), np.zeros((8, 40, 3, 3), F32), padding=1)
    with pytest.raises(PartitaError, match="needs float32"):
        conv(x.astype(np.int8), w.astype(np.int8), groups=2)


@pytest.mark.parametrize("side", [2, 7, 40])  # 4 pixels, 49 (vectors + tail), 1600 (cascade)
def test_torch_cpu_mean_equals_torch(side):
    x = torch.randn(1, 16, side, side, generator=torch.Generator().manual_seed(side)) * 3
    ref = torch.nn.functional.adaptive_avg_pool2d(x, 1).numpy()
    call = get_op("nn.global_avg_pool2d")(const(x.numpy()), accumulate="torch_cpu")
    np.testing.assert_array_equal(partita.interpret(call)[0], ref)


@pytest.mark.parametrize("scale, zp", [(0.05005333200097084, 62), (0.0078125, 128), (0.3, 3)])
def test_quantize_fbgemm_equals_quantize_per_tensor(scale, zp):
    """aten::quantize_per_tensor on x86 is fbgemm's Quantize: fma(x, float32(1 / s), zp), half
    to even. The division ("onnx") differs within an ulp of a tie: 2 values in 1.3 million of an
    eager-mode MobileNetV2's inputs (issue 16 part 3), enough to move its output by 7 quanta."""
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            rng.standard_normal(200_000).astype(np.float32) * 3,
            # values next to ties: (k + 0.5 - zp) * s and the float32 values around it
            np.nextafter(
                ((np.arange(-300, 300) + 0.5) * np.float32(scale)).astype(np.float32),
                np.float32(np.inf),
            ),
            ((np.arange(-300, 300) + 0.5) * np.float32(scale)).astype(np.float32),
        ]
    )
    want = torch.quantize_per_tensor(torch.from_numpy(x), scale, zp, torch.quint8)
    call = get_op("qnn.quantize")(
        const(x), const(F32(scale)), const(np.int32(zp)), out_dtype="uint8", semantics="fbgemm"
    )
    out = partita.interpret(call)[0]
    assert np.array_equal(out, want.int_repr().numpy())
