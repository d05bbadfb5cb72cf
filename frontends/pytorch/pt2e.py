"""PT2E specifics: the quantized_decomposed quantize / dequantize ops and float biases.

convert_pt2e leaves a float graph in which quantized_decomposed ops quantize and dequantize
activations (per tensor) and weights (per channel or per tensor); they become qnn.quantize /
qnn.dequantize here, and the shared QDQ rewrites (frontends/qdq.py) turn the groups around aten
ops into QNN ops afterwards.

- Rounding: PyTorch's reference quantize is round_half_even(x * float32(1 / scale)); the closest
  qnn semantics is "onnx" (x / scale, round half to even), equal except within one float32 ulp
  of a rounding tie. Under match="pytorch_eager" it is built exactly: multiply by float32(1 /
  scale), then qnn.quantize with scale 1.
- A quantization range narrower than the dtype's (x86 ``reduce_range``, XNNPACK's symmetric
  [-127, 127]) adds a clip after the quantize.
- Float biases of convolutions and linear layers whose input and weight are dequantized are
  quantized to int32 with scale s_in * s_w and zero point 0, as ExecuTorch's XNNPACK delegate
  does: round_half_even(b * float32(1 / float32(s_in * s_w))).
"""

from __future__ import annotations

import numpy as np

from partita.ir import Call, Constant, Expr

from .context import INT_RANGES, NodeContext, Unsupported, f32

TORCH_DTYPES = {
    "torch.int8": "int8",
    "torch.uint8": "uint8",
    "torch.int16": "int16",
    "torch.int32": "int32",
}


def _dtype(ctx: NodeContext, i: int) -> str:
    v = ctx.arg(i, "dtype")
    if str(v) not in TORCH_DTYPES:
        raise Unsupported(f"quantized dtype {v}")
    return TORCH_DTYPES[str(v)]


def _scalar(ctx: NodeContext, i: int, name: str, kind: type):
    """A per-tensor parameter: a Python number or (the .tensor overloads) a one-element
    constant tensor."""
    v = ctx.arg(i, name)
    if isinstance(v, Constant):
        if v.data.size != 1:
            ctx.fail(f"{name} must have one element, got shape {list(v.data.shape)}")
        v = v.data.reshape(()).item()
    elif isinstance(v, Expr):
        raise Unsupported(f"{name} is computed at run time (dynamic quantization)")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        ctx.fail(f"{name} must be a number, got {v!r}")
    v = kind(v)
    if name == "scale" and not (np.isfinite(v) and v > 0):
        ctx.fail(f"scale must be positive and finite, got {v}")
    return v


def _channel_params(ctx: NodeContext) -> tuple[np.ndarray, np.ndarray, int]:
    scales, zps = ctx.arg(1, "scales"), ctx.arg(2, "zero_points")
    if not isinstance(scales, Constant) or not isinstance(zps, (Constant, type(None))):
        raise Unsupported("per-channel scales and zero points must be constants")
    s = scales.data.astype(np.float32).reshape(-1)
    z = (
        np.zeros(s.shape, np.int32)
        if zps is None
        else zps.data.astype(np.int64).reshape(-1).astype(np.int32)
    )
    if not (np.all(np.isfinite(s)) and np.all(s > 0)):
        ctx.fail(f"per-channel scales must be positive and finite, got {s.tolist()[:8]}")
    return s, z, int(ctx.number(3, "axis"))


def _restrict(ctx: NodeContext, q: Expr, dtype: str, first: int) -> Expr:
    """A clip to [quant_min, quant_max] (arguments ``first`` and ``first + 1``) where that is
    narrower than the dtype's range."""
    qmin, qmax = int(ctx.number(first, "quant_min")), int(ctx.number(first + 1, "quant_max"))
    lo, hi = INT_RANGES[dtype]
    if qmin > qmax or qmin < lo or qmax > hi:
        ctx.fail(f"quant range [{qmin}, {qmax}] does not fit {dtype}")
    return q if (qmin, qmax) == (lo, hi) else ctx.call("clip", q, a_min=qmin, a_max=qmax)


def quantize_per_tensor(ctx: NodeContext) -> Expr:
    """quantize_per_tensor(x, scale, zero_point, quant_min, quant_max, dtype)."""
    x = ctx.tensor(0, "input")
    scale, zp = _scalar(ctx, 1, "scale", float), _scalar(ctx, 2, "zero_point", int)
    dtype = _dtype(ctx, 5)
    if ctx.options.get("torch_cpu"):  # exactly PyTorch's round(x * float32(1.0 / scale)) + zp
        x = ctx.call("multiply", x, f32(1.0 / scale))
        scale = 1.0
    q = ctx.call("qnn.quantize", x, f32(scale), np.int32(zp), out_dtype=dtype, semantics="onnx")
    return _restrict(ctx, q, dtype, 3)


def dequantize_per_tensor(ctx: NodeContext) -> Expr:
    """dequantize_per_tensor(x, scale, zero_point, quant_min, quant_max, dtype)."""
    x = ctx.tensor(0, "input")
    scale, zp = _scalar(ctx, 1, "scale", float), _scalar(ctx, 2, "zero_point", int)
    _check_input_dtype(ctx, x, _dtype(ctx, 5))
    return ctx.call("qnn.dequantize", x, f32(scale), np.int32(zp))


def quantize_per_channel(ctx: NodeContext) -> Expr:
    """quantize_per_channel(x, scales, zero_points, axis, quant_min, quant_max, dtype)."""
    x = ctx.tensor(0, "input")
    s, z, axis = _channel_params(ctx)
    dtype = _dtype(ctx, 6)
    q = ctx.call("qnn.quantize", x, s, z, axis=axis, out_dtype=dtype, semantics="onnx")
    return _restrict(ctx, q, dtype, 4)


def dequantize_per_channel(ctx: NodeContext) -> Expr:
    """dequantize_per_channel(x, scales, zero_points, axis, quant_min, quant_max, dtype)."""
    x = ctx.tensor(0, "input")
    s, z, axis = _channel_params(ctx)
    _check_input_dtype(ctx, x, _dtype(ctx, 6))
    return ctx.call("qnn.dequantize", x, s, z, axis=axis)


def _check_input_dtype(ctx: NodeContext, x: Expr, dtype: str) -> None:
    if x.checked_type.dtype != dtype:
        ctx.fail(f"dequantizes a {x.checked_type.dtype} tensor declared as {dtype}")


# ---- float biases -------------------------------------------------------------------------------


def dequantized_params(x: Expr) -> tuple[np.ndarray, int] | None:
    """(scale, axis) of ``qnn.dequantize(_, const scale, const zp)``, else None."""
    if not (
        isinstance(x, Call)
        and getattr(x.op, "name", None) == "qnn.dequantize"
        and isinstance(x.args[1], Constant)
    ):
        return None
    return x.args[1].data.astype(np.float32), x.attrs.axis


def quantize_bias(b: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """round_half_even(b * float32(1 / scale)) in float32, saturated to int32."""
    inv = (np.float32(1) / scale.astype(np.float32)).astype(np.float32)
    v = np.rint((b.astype(np.float32) * inv).astype(np.float32)).astype(np.float64)
    return np.clip(v, -(2.0**31), 2.0**31 - 1).astype(np.int32)


def bias_for(ctx: NodeContext, x: Expr, w: Expr, b: Expr | None) -> Expr | None:
    """A float constant bias of a layer with dequantized input and weight becomes
    qnn.dequantize(int32 bias, s_in * s_w, 0) (per channel along axis 0 for per-channel
    weights); any other bias is returned as it is."""
    xp, wp = dequantized_params(x), dequantized_params(w)
    if (
        b is None
        or xp is None
        or wp is None
        or not isinstance(b, Constant)
        or b.checked_type.dtype != "float32"
        or xp[0].size != 1
        or b.data.ndim != 1
    ):
        return b
    scale = (xp[0].reshape(()) * wp[0].reshape(-1)).astype(np.float32)
    if scale.size not in (1, b.data.size) or (scale.size > 1 and wp[1] != 0):
        return b
    scale = scale.reshape(()) if scale.size == 1 else scale
    q = quantize_bias(b.data, scale)
    return ctx.call("qnn.dequantize", ctx.const(q), scale, np.zeros(scale.shape, np.int32), axis=0)
