"""TorchScript quantized ops -> QNN, with the arithmetic of PyTorch's x86 kernels.

fbgemm's conv / linear output stage is ``nearbyint((float(acc) + b / s_aw) * (s_aw / s_out)) +
zp_out`` in float32, s_aw = float32(s_in * s_w) per channel: nn.bias_add of the bias rounded to
int32, then qnn.requantize "fbgemm" with input_scale = s_aw, whose float32 input zero point
carries the bias's fraction. quantized::add is qnn.add "onnx" bit for bit on the tests.

PyTorch's "x86" engine hands a convolution to oneDNN instead when the CPU has AVX512-VNNI, the
groups are at most 100 and the weights are symmetric (qconv_prepack.cpp,
should_use_onednn_quant); the "onednn" engine hands it every convolution. oneDNN adds the float
bias after the scales: qnn.requantize "onednn" (``conv_kernel`` decides, docs/pytorch.md).
"""

from __future__ import annotations

import numpy as np

from partita.ir import Expr
from partita.ops.emulation.pytorch_x86 import onednn_inverse

from . import aten_nn, aten_tensor
from .context import INT_RANGES, NodeContext, QValue, Unsupported, f32, shape_of

# c10::ScalarType codes of the quantized dtypes.
SCALAR_TYPES = {12: "int8", 13: "uint8", 14: "int32"}


def qarg(ctx: NodeContext, i: int, name: str) -> QValue:
    v = ctx.arg(i, name)
    if not isinstance(v, QValue):
        ctx.fail(f"{name} must be a quantized tensor, got {type(v).__name__}")
    return v


def quantize_value(value: float, scale: float, zp: int) -> int:
    """PyTorch's quantize_val: nearbyint(zp + value * (1 / scale)) in float32."""
    t = np.float32(np.float32(value) * (np.float32(1) / np.float32(scale)))
    return int(np.rint(np.float32(np.float32(zp) + t)))


def _qparams(q: QValue):
    return f32(q.scale), np.int32(q.zero_point)


def quantize_per_tensor(ctx: NodeContext) -> QValue:
    """aten::quantize_per_tensor(x, scale, zero_point, dtype)."""
    x, scale, zp = ctx.tensor(0, "self"), ctx.number(1, "scale"), int(ctx.number(2, "zero_point"))
    dtype = SCALAR_TYPES.get(ctx.arg(3, "dtype"))
    if dtype not in ("int8", "uint8"):
        raise Unsupported(f"quantization to scalar type {ctx.arg(3, 'dtype')}")
    if not (np.isfinite(scale) and scale > 0):
        ctx.fail(f"scale must be positive and finite, got {scale}")
    # fbgemm's Quantize: fma(x, float32(1 / s), zp), half to even (issue 16 part 3: "onnx"'s
    # division differed within an ulp of a tie, a quantum at the input, 7 at the output)
    out = ctx.call("qnn.quantize", x, f32(scale), np.int32(zp), out_dtype=dtype, semantics="fbgemm")
    return QValue(out, scale, zp)


def dequantize(ctx: NodeContext) -> Expr:
    q = qarg(ctx, 0, "self")
    return ctx.call("qnn.dequantize", q.expr, *_qparams(q))


def _weight(ctx: NodeContext, w):
    """int8 weight array, its scale(s) and zero point(s) from a quantized torch tensor."""
    data = w.int_repr().numpy().astype(np.int8)
    if str(w.qscheme()) in ("torch.per_channel_affine", "torch.per_channel_symmetric"):
        if w.q_per_channel_axis() != 0:
            raise Unsupported(f"weights quantized along axis {w.q_per_channel_axis()}")
        return (
            data,
            w.q_per_channel_scales().numpy().astype(np.float32),
            w.q_per_channel_zero_points().numpy().astype(np.int32),
        )
    return data, f32(w.q_scale()), np.int32(w.q_zero_point())


def conv_kernel(engine: str, groups: int, symmetric: bool, avx512_vnni: bool) -> str:
    """The library PyTorch runs a quantized convolution with: "onednn" or "fbgemm"."""
    if engine == "onednn":
        return "onednn"
    if engine == "x86" and avx512_vnni and groups <= 100 and symmetric:
        return "onednn"
    return "fbgemm"


def pair_accumulate(kernel: str, depthwise: bool, channels_even: bool, avx512_vnni: bool) -> str:
    """qnn.conv2d's accumulate for a PyTorch convolution (measured, partita/ops/emulation/
    x86_int8.py): without AVX512-VNNI both libraries saturate pairs of products to int16,
    fbgemm along the im2col order, oneDNN within each tap and not in depthwise convolutions;
    fbgemm's depthwise kernels are AVX2 code and saturate on every CPU."""
    if kernel == "fbgemm":
        return "vpmaddubsw" if depthwise or not avx512_vnni else "exact"
    if avx512_vnni or depthwise:
        return "exact"
    return "vpmaddubsw" if channels_even else "vpmaddubsw_tap"


def onednn_scale(s_in: float, w_scale) -> np.ndarray:
    """oneDNN's per-channel src x weight scale as PyTorch hands it over: PyTorch passes
    float32(1 / s_in) and ideep gives oneDNN 1.0f / that, which oneDNN multiplies by
    float32(s_w) in float32."""
    src = np.float32(1.0) / np.float32(1.0 / float(s_in))
    return (src * np.asarray(w_scale, np.float32)).astype(np.float32)


def _output_stage(
    ctx: NodeContext, acc: Expr, q: QValue, w_scale, bias, axis: int, relu: bool,
    kernel: str = "fbgemm",
) -> QValue:
    """int32 accumulator -> quantized output, fbgemm's ReQuantizeOutput.

    ``kernel="integer"`` (integer semantics, what NPU toolchains compile): + the bias rounded
    to int32, qnn.requantize "tflite" (fixed-point multiplier, no float bias fraction).

    QNN form (default, bit-exact with fbgemm while |acc + bias| < 2**24): + int32 bias,
    qnn.requantize "fbgemm" with input_scale s_aw and the bias's fraction as a float32 input
    zero point [, clip at the zero point]. ``float_bias`` form (float ops, also exact): cast to
    float32, + float32(b / s_aw), * float32(s_aw / s_out), qnn.quantize with scale 1.
    """
    out_scale, out_zp = ctx.number(2, "output_scale"), int(ctx.number(3, "output_zero_point"))
    s_aw = (np.float32(q.scale) * w_scale).astype(np.float32)
    if kernel == "integer":
        if bias is not None:
            k, _ = fbgemm_bias(bias.detach().numpy().astype(np.float32), s_aw)
            acc = ctx.call("nn.bias_add", acc, k, axis=axis)
        out = ctx.call(
            "qnn.requantize",
            acc,
            s_aw,
            np.int32(0),
            f32(out_scale),
            np.int32(out_zp),
            axis=axis,
            out_dtype=q.dtype,
            semantics="tflite",
        )
    elif kernel == "onednn":
        out = _onednn_output_stage(ctx, acc, q, w_scale, bias, axis, out_scale, out_zp)
    elif ctx.options.get("float_bias"):
        out = _float_output_stage(ctx, acc, s_aw, bias, axis, out_scale, out_zp, q.dtype)
    else:
        zp_in = np.int32(0)
        if bias is not None:
            k, zp_in = fbgemm_bias(bias.detach().numpy().astype(np.float32), s_aw)
            acc = ctx.call("nn.bias_add", acc, k, axis=axis)
        out = ctx.call(
            "qnn.requantize",
            acc,
            s_aw,
            zp_in,
            f32(out_scale),
            np.int32(out_zp),
            axis=axis,
            out_dtype=q.dtype,
            semantics="fbgemm",
        )
    if relu:
        out = ctx.call("clip", out, a_min=out_zp, a_max=INT_RANGES[q.dtype][1])
    return QValue(out, out_scale, out_zp)


def fbgemm_bias(b: np.ndarray, s_aw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """fbgemm's float bias float32(b / s_aw) as an int32 bias k = round_half_even(b / s_aw) and
    the float32 remainder, negated, as qnn.requantize "fbgemm"'s input zero point (exact)."""
    fb = (b / s_aw).astype(np.float32)
    k = np.clip(np.rint(fb.astype(np.float64)), -(2.0**31), 2.0**31 - 1)
    return k.astype(np.int32), (k - fb.astype(np.float64)).astype(np.float32)


def _onednn_output_stage(ctx, acc, q, w_scale, bias, axis, out_scale, out_zp):
    """oneDNN: rint((float32(acc) * s + b) * inv + zp_out), float32 throughout (s from
    onednn_scale; inv as qnn.requantize "onednn" derives it). QNN form: qnn.requantize
    "onednn" with the negated float bias as its float32 input zero point; ``float_bias``: the
    same as float ops."""
    s = onednn_scale(q.scale, w_scale)
    n = s.size
    b = (np.zeros(n, np.float32) if bias is None
         else bias.detach().numpy().astype(np.float32))
    if not ctx.options.get("float_bias"):
        return ctx.call("qnn.requantize", acc, s, (-b).astype(np.float32), f32(out_scale),
                        np.int32(out_zp), axis=axis, out_dtype=q.dtype, semantics="onednn")
    shape = [1] * len(shape_of(acc))
    shape[axis] = -1
    v = ctx.call("multiply", ctx.call("cast", acc, dtype="float32"), s.reshape(shape))
    v = ctx.call("add", v, b.reshape(shape))
    v = ctx.call("multiply", v, onednn_inverse(f32(out_scale)))
    return ctx.call(
        "qnn.quantize", v, f32(1.0), np.int32(out_zp), out_dtype=q.dtype, semantics="fbgemm"
    )


def _float_output_stage(ctx, acc, s_aw, bias, axis, out_scale, out_zp, dtype):
    shape = [1] * len(shape_of(acc))
    shape[axis] = -1
    v = ctx.call("cast", acc, dtype="float32")
    if bias is not None:
        b = bias.detach().numpy().astype(np.float32)
        v = ctx.call("add", v, (b / s_aw).astype(np.float32).reshape(shape))
    mult = (s_aw / np.float32(out_scale)).astype(np.float32)
    v = ctx.call("multiply", v, mult.reshape(shape) if mult.size > 1 else mult)
    return ctx.call(
        "qnn.quantize", v, f32(1.0), np.int32(out_zp), out_dtype=dtype, semantics="onnx"
    )


def conv2d(relu: bool):
    """quantized::conv2d(x, packed, output_scale, output_zero_point) and conv2d_relu."""

    def convert(ctx: NodeContext) -> QValue:
        import torch

        q, packed = qarg(ctx, 0, "input"), ctx.arg(1, "packed_weight")
        if packed.transpose():
            raise Unsupported("transposed quantized convolution")
        w, b = torch.ops.quantized.conv2d_unpack(packed)
        data, ws, wz = _weight(ctx, w)
        groups, vnni = int(packed.groups()), ctx.options.get("avx512_vnni", False)
        kernel = conv_kernel(ctx.options.get("engine", "x86"), groups, not np.any(wz), vnni)
        depthwise = groups > 1 and data.shape[1] == 1 and data.shape[0] == groups
        accumulate = pair_accumulate(kernel, depthwise, data.shape[1] % 2 == 0, vnni)
        if ctx.options.get("integer"):  # exact sums, integer output stage (integer semantics)
            kernel, accumulate = "integer", "exact"
        acc = ctx.call(
            "qnn.conv2d",
            q.expr,
            data,
            np.int32(q.zero_point),
            wz,
            f32(q.scale),
            ws,
            strides=tuple(packed.stride()),
            padding=tuple(packed.padding()) * 2,
            dilation=tuple(packed.dilation()),
            groups=int(packed.groups()),
            channels=data.shape[0],
            kernel_size=data.shape[2:],
            data_layout="NCHW",
            kernel_layout="OIHW",
            accumulate=accumulate,
        )
        return _output_stage(ctx, acc, q, ws, b, 1, relu, kernel)

    return convert


def linear(relu: bool):
    """quantized::linear(x, packed, output_scale, output_zero_point) and linear_relu."""

    def convert(ctx: NodeContext) -> QValue:
        import torch

        q, packed = qarg(ctx, 0, "input"), ctx.arg(1, "packed_weight")
        w, b = torch.ops.quantized.linear_unpack(packed)
        data, ws, wz = _weight(ctx, w)
        acc = ctx.call(
            "qnn.dense",
            q.expr,
            data,
            np.int32(q.zero_point),
            wz,
            f32(q.scale),
            ws,
            units=data.shape[0],
            accumulate="exact"
            if ctx.options.get("avx512_vnni") or ctx.options.get("integer")
            else "vpmaddubsw",
        )
        # quantized::linear_prepack picks oneDNN only on the "onednn" engine ("x86": fbgemm)
        kernel = "onednn" if ctx.options.get("engine") == "onednn" else "fbgemm"
        if ctx.options.get("integer"):
            kernel = "integer"
        return _output_stage(ctx, acc, q, ws, b, -1, relu, kernel)

    return convert


def binary(op: str, relu: bool):
    """quantized::add / add_relu / mul / mul_relu(a, b, output_scale, output_zero_point)."""

    def convert(ctx: NodeContext) -> QValue:
        a, b = qarg(ctx, 0, "qa"), qarg(ctx, 1, "qb")
        scale, zp = ctx.number(2, "scale"), int(ctx.number(3, "zero_point"))
        out = ctx.call(
            op,
            a.expr,
            b.expr,
            *_qparams(a),
            *_qparams(b),
            f32(scale),
            np.int32(zp),
            semantics="onnx",
        )
        if relu:
            out = ctx.call("clip", out, a_min=zp, a_max=INT_RANGES[a.dtype][1])
        return QValue(out, scale, zp)

    return convert


def cat(ctx: NodeContext) -> QValue:
    """quantized::cat(tensors, dim, scale, zero_point)."""
    qs = ctx.arg(0, "qx")
    if not isinstance(qs, list) or not all(isinstance(q, QValue) for q in qs):
        ctx.fail("cat takes a list of quantized tensors")
    scale, zp = ctx.number(2, "scale"), int(ctx.number(3, "zero_point"))
    out = ctx.call(
        "qnn.concatenate",
        ctx.tuple([q.expr for q in qs]),
        ctx.tuple([ctx.const(f32(q.scale)) for q in qs]),
        ctx.tuple([ctx.const(np.int32(q.zero_point)) for q in qs]),
        f32(scale),
        np.int32(zp),
        axis=int(ctx.number(1, "dim")),
        semantics="onnx",
    )
    return QValue(out, scale, zp)


def clamp_q(lo: float | None, hi: float | None, read_args: bool):
    """relu / relu6 / hardtanh / clamp on a quantized tensor: a clip of the integers at the
    quantized bounds; scale and zero point are kept."""

    def convert(ctx: NodeContext) -> QValue:
        q = qarg(ctx, 0, "self")
        a, b = (ctx.arg(1, "min_val", lo), ctx.arg(2, "max_val", hi)) if read_args else (lo, hi)
        dmin, dmax = INT_RANGES[q.dtype]
        qlo = dmin if a is None else max(dmin, quantize_value(a, q.scale, q.zero_point))
        qhi = dmax if b is None else min(dmax, quantize_value(b, q.scale, q.zero_point))
        return QValue(ctx.call("clip", q.expr, a_min=qlo, a_max=qhi), q.scale, q.zero_point)

    return convert


def same_params(fn):
    """An aten op that moves or selects integers (pooling max, reshapes): run the float
    converter on the integer expression and keep scale and zero point."""

    def convert(ctx: NodeContext) -> QValue:
        q = qarg(ctx, 0, "self")
        inner = NodeContext(
            ctx.index,
            ctx.name,
            ctx.target,
            [q.expr] + ctx.args[1:],
            {},
            ctx.span.source,
            ctx.options,
        )
        return QValue(fn(inner), q.scale, q.zero_point)

    return convert


def adaptive_avg_pool2d(ctx: NodeContext) -> QValue:
    """aten::adaptive_avg_pool2d on a quantized tensor (output keeps the input's parameters)."""
    q = qarg(ctx, 0, "self")
    win = aten_nn.adaptive_window(ctx, shape_of(q.expr), ctx.arg(1, "output_size"))
    hw = tuple(shape_of(q.expr)[2:])
    win = tuple(win or hw)
    # PyTorch rounds nearbyint(zp + (S - zp * n) / n), i.e. the mean of the raw integers, half to
    # even; qnn.avg_pool2d "onnx" global (window = H x W) with zero points 0 computes exactly that
    # (equal input and output parameters: the zero point cancels). Other windows keep them.
    scale, zp = _qparams(q)
    zp = np.int32(0) if win == hw else zp
    out = ctx.call(
        "qnn.avg_pool2d",
        q.expr,
        scale,
        zp,
        scale,
        zp,
        pool_size=win,
        strides=win,
        layout="NCHW",
        semantics="onnx",
    )
    return QValue(out, q.scale, q.zero_point)


def avg_pool2d(ctx: NodeContext) -> QValue:
    """aten::avg_pool2d on a quantized tensor (output keeps the input's parameters)."""
    q = qarg(ctx, 0, "self")
    kernel, stride, padding = aten_nn._pool_args(ctx, 1)
    if ctx.arg(6, "divisor_override", None) is not None:
        raise Unsupported("avg_pool2d with divisor_override")
    out = ctx.call(
        "qnn.avg_pool2d",
        q.expr,
        *_qparams(q),
        *_qparams(q),
        pool_size=kernel,
        strides=stride,
        padding=padding * 2,
        ceil_mode=bool(ctx.arg(4, "ceil_mode", False)),
        count_include_pad=bool(ctx.arg(5, "count_include_pad", True)),
        layout="NCHW",
        semantics="onnx",
    )
    return QValue(out, q.scale, q.zero_point)


# Ops that take float tensors and still belong to this table.
FLOAT_INPUT = {"aten::quantize_per_tensor"}

QUANTIZED = {
    "aten::adaptive_avg_pool2d": adaptive_avg_pool2d,
    "aten::avg_pool2d": avg_pool2d,
    "aten::clamp": clamp_q(None, None, True),
    "aten::clone": same_params(aten_tensor.identity),
    "aten::contiguous": same_params(aten_tensor.identity),
    "aten::dequantize": dequantize,
    "aten::dropout": same_params(aten_tensor.identity),
    "aten::flatten": same_params(aten_tensor.flatten),
    "aten::hardtanh": clamp_q(-1.0, 1.0, True),
    "aten::hardtanh_": clamp_q(-1.0, 1.0, True),
    "aten::max_pool2d": same_params(aten_nn.max_pool2d),
    "aten::permute": same_params(aten_tensor.permute),
    "aten::quantize_per_tensor": quantize_per_tensor,
    "aten::relu": clamp_q(0.0, None, False),
    "aten::relu_": clamp_q(0.0, None, False),
    "aten::reshape": same_params(aten_tensor.reshape),
    "aten::squeeze": same_params(aten_tensor.squeeze),
    "aten::unsqueeze": same_params(aten_tensor.unsqueeze),
    "aten::view": same_params(aten_tensor.reshape),
    "quantized::add": binary("qnn.add", False),
    "quantized::add_relu": binary("qnn.add", True),
    "quantized::cat": cat,
    "quantized::conv2d": conv2d(False),
    "quantized::conv2d_relu": conv2d(True),
    "quantized::linear": linear(False),
    "quantized::linear_relu": linear(True),
    "quantized::mul": binary("qnn.mul", False),
    "quantized::mul_relu": binary("qnn.mul", True),
    "quantized::relu6": clamp_q(0.0, 6.0, False),
}
