"""Converters for windowed and reducing operators: AVERAGE_POOL_2D, MAX_POOL_2D, MEAN, SUM,
RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR."""

from __future__ import annotations

import numpy as np

from partita.ir import Expr
from partita.limits import MemoryBudgetError, check_shape
from partita.ops.nn_image import resize_coordinates

from .context import INT_RANGES, OpContext, Unsupported
from .ops_conv import check_quantized_io, window_attrs
from .reader import MAX_ELEMENTS


def _pool_attrs(ctx: OpContext) -> dict:
    shape = ctx.shape(0)
    if len(shape) != 4:
        ctx.fail(f"the input must be 4-D NHWC, got {list(shape)}")
    size = (ctx.opt("FilterHeight"), ctx.opt("FilterWidth"))
    if min(size) < 1:
        ctx.fail(f"the filter size {size} must be positive")
    attrs = window_attrs(ctx, shape[1:3], size)
    del attrs["dilation"]
    return dict(attrs, pool_size=size, layout="NHWC")


def max_pool(ctx: OpContext) -> Expr:
    """MAX_POOL_2D: the window maximum of the stored values (padding never wins)."""
    y = ctx.call("nn.max_pool2d", ctx.expr(0), **_pool_attrs(ctx))
    return ctx.activation(y, ctx.out())


def avg_pool(ctx: OpContext) -> Expr:
    """AVERAGE_POOL_2D over the taps inside the input (padding is not counted)."""
    attrs = _pool_attrs(ctx)
    x, out = ctx.tensor(0), ctx.out()
    if not ctx.quantized():
        return ctx.activation(ctx.call("nn.avg_pool2d", ctx.expr(0), **attrs), out)
    check_quantized_io(ctx, x, out)
    y = ctx.call(
        "qnn.avg_pool2d",
        ctx.expr(0),
        *ctx.qparams(x),
        *ctx.qparams(out),
        **attrs,
        semantics=ctx.sem("qnn.avg_pool2d"),
    )
    return ctx.activation(y, out)


def reduce_axes(ctx: OpContext) -> tuple[int, ...]:
    """A reduction's axes input (operand 1), each checked against the input's rank before it is
    taken modulo the rank (a rank-0 input has no axis at all), sorted, without repeats."""
    ndim = len(ctx.shape(0))
    axes = ctx.constant(1, "the reduction axes").reshape(-1)
    out = []
    for a in (int(v) for v in axes):
        if not -ndim <= a < ndim:
            ctx.fail(f"reduction axis {a} is out of range for rank {ndim}")
        if a % ndim not in out:
            out.append(a % ndim)
    return tuple(sorted(out))


def mean(ctx: OpContext) -> Expr:
    """MEAN over the axes input, keep_dims option."""
    axes, keep = reduce_axes(ctx), bool(ctx.opt("KeepDims"))
    if not axes:
        return ctx.expr(0)  # TFLite's ReduceIsCopy (axis () would mean "all axes" here)
    if not ctx.quantized():
        return ctx.call("mean", ctx.expr(0), axis=axes, keepdims=keep)
    x, out = ctx.tensor(0), ctx.out()
    check_quantized_io(ctx, x, out)
    return ctx.call(
        "qnn.mean",
        ctx.expr(0),
        *ctx.qparams(x),
        *ctx.qparams(out),
        axis=axes,
        keepdims=keep,
        semantics=ctx.sem("qnn.mean"),
    )


def reduce_sum(ctx: OpContext) -> Expr:
    """SUM. Quantized 8-bit: what TFLite's builtin kernels compute (optimized_ops'
    QuantizedMeanOrSum with compute_sum, in float32; BUILTIN_REF's int8 SUM is broken, see
    tests/backends/npu/test_npu_sum.py): the int32 sum S of the stored values, then
    round_half_away(float32(S) * scale + bias) + zp_out, saturated, with scale = s_in / s_out and
    bias = -zp_in * scale * n in float32. That is emitted as a qnn.requantize of S (input zero
    point zp_in * n) with semantics "tflite_double" (one double product, rounded half away) at a
    double scale chosen so that it gives the float32 formula's result for every reachable S, which
    is checked over the whole range (``_sum_exact_scale``); an integer op the NPU runs as a
    convolution. Where no such scale exists, the float32 formula itself, op by op. 16-bit: the
    reference requantize."""
    axes, keep = reduce_axes(ctx), bool(ctx.opt("KeepDims"))
    if not axes:
        return ctx.expr(0)
    if not ctx.quantized():
        return ctx.call("sum", ctx.expr(0), axis=axes, keepdims=keep)
    x, out = ctx.tensor(0), ctx.out()
    check_quantized_io(ctx, x, out)
    shape = ctx.shape(0)
    n = int(np.prod([shape[a] for a in axes]))
    lo, hi = INT_RANGES[x.dtype]
    if n * max(-lo, hi) > np.iinfo(np.int32).max:
        ctx.fail(f"SUM of {n} {x.dtype} values: the sum can pass int32, the accumulator "
                 f"TFLite's kernels and partita sum in")
    wide = ctx.call("cast", ctx.expr(0), dtype="int32")
    total = ctx.call("sum", wide, axis=axes, keepdims=keep)
    s_in, zp_in = ctx.qparams(x)
    zp_n = ctx.const(np.int32(int(zp_in.data) * n))
    semantics = "tflite"
    if x.dtype in ("int8", "uint8") and out.dtype in ("int8", "uint8"):
        scale = _sum_exact_scale(n, x, out)
        if scale is None:
            return _sum_builtin(ctx, total, n, x, out)
        s_in = ctx.const(np.float32(scale))
        semantics = "tflite_double"
    return ctx.call(
        "qnn.requantize",
        total,
        s_in,
        zp_n,
        *ctx.qparams(out),
        out_dtype=out.dtype,
        semantics=semantics,
    )


def _sum_builtin_formula(total: np.ndarray, n: int, x, out) -> np.ndarray:
    """TFLite's builtin 8-bit SUM output for int32 sums ``total`` (float32 arithmetic)."""
    scale = np.float32(x.scale[0]) / np.float32(out.scale[0])
    bias = np.float32(np.float32(-int(x.zero_point[0])) * scale) * np.float32(n)
    v = (total.astype(np.float32) * scale).astype(np.float32) + np.float32(bias)
    a = np.abs(v).astype(np.float64)
    r = np.sign(v).astype(np.int64) * np.floor(a + 0.5).astype(np.int64)
    lo, hi = INT_RANGES[out.dtype]
    return np.clip(r + int(out.zero_point[0]), lo, hi)


def _sum_exact_scale(n: int, x, out) -> float | None:
    """The requantize's float32 input scale s such that, with r = double(s) / double(s_out),
    saturate(round_half_away((S - zp_in * n) * r) + zp_out) equals TFLite's float32 formula for
    every S in [n * min, n * max] of the input type; None if there is none (or the range has
    more than 2**22 sums). Each S bounds r to an interval (the output's rounding interval over
    S - zp_in * n); float32 scales next to the middle of their intersection are checked over
    the whole range with the requantize's own arithmetic."""
    from partita.ops.emulation.tflite_fixedpoint import scale_round_half_away_double

    lo_in, hi_in = INT_RANGES[x.dtype]
    if n * (hi_in - lo_in) > 2**22:
        return None
    total = np.arange(n * lo_in, n * hi_in + 1, dtype=np.int64)
    want = _sum_builtin_formula(total, n, x, out)
    lo, hi = INT_RANGES[out.dtype]
    zp_out = int(out.zero_point[0])
    d = (total - int(x.zero_point[0]) * n).astype(np.float64)
    k = (want - zp_out).astype(np.float64)
    # the product d * r must lie in [k - 0.5, k + 0.5] (one-sided where the output saturates)
    below = np.where(want <= lo, -np.inf, k - 0.5)
    above = np.where(want >= hi, np.inf, k + 0.5)
    pos, neg = d > 0, d < 0
    with np.errstate(divide="ignore", invalid="ignore"):
        low = np.concatenate([below[pos] / d[pos], above[neg] / d[neg]])
        high = np.concatenate([above[pos] / d[pos], below[neg] / d[neg]])
    low_r, high_r = float(np.max(low, initial=0.0)), float(np.min(high, initial=np.inf))
    if not low_r < high_r or not np.isfinite(high_r):
        return None
    s_out = np.float64(np.float32(out.scale[0]))
    middle = np.float32((low_r + high_r) / 2 * s_out)  # scales are float32 constants
    for step in (0, 1, -1, 2, -2, 3, -3, 4, -4):
        scale = np.float32(middle + np.float32(step) * np.spacing(middle))
        got = np.clip(scale_round_half_away_double(d, np.float64(scale) / s_out) + zp_out, lo, hi)
        if np.array_equal(got, want):
            return float(scale)
    return None


def _sum_builtin(ctx: OpContext, total: Expr, n: int, x, out) -> Expr:
    """optimized_ops::QuantizedMeanOrSum with compute_sum, in float32: scale = s_in / s_out,
    bias = -zp_in * scale * n, int(round_half_away(S * scale + bias)) + zp_out, saturated."""
    scale = np.float32(x.scale[0]) / np.float32(out.scale[0])
    bias = np.float32(np.float32(-int(x.zero_point[0])) * scale) * np.float32(n)
    v = ctx.call("multiply", ctx.call("cast", total, dtype="float32"), ctx.const(scale))
    v = ctx.call("round", ctx.call("add", v, ctx.const(np.float32(bias))))
    v = ctx.call("add", ctx.call("cast", v, dtype="int32"), ctx.const(np.int32(out.zero_point[0])))
    lo, hi = INT_RANGES[out.dtype]
    return ctx.call("cast", ctx.call("clip", v, a_min=lo, a_max=hi), dtype=out.dtype)


def _resize_size(ctx: OpContext) -> tuple[int, int]:
    size = ctx.constant(1, "the output size").reshape(-1)
    if size.size != 2 or min(int(v) for v in size) < 1:
        ctx.fail(f"the output size must be two positive integers, got {size.tolist()}")
    shape = ctx.shape(0)
    if len(shape) != 4:
        ctx.fail(f"the input must be 4-D NHWC, got {list(shape)}")
    oh, ow = int(size[0]), int(size[1])
    if shape[0] * oh * ow * shape[3] > MAX_ELEMENTS or max(oh * shape[1], ow * shape[2]) > 2**28:
        ctx.fail(f"the output size {oh}x{ow} of a {list(shape)} input is absurd")
    return oh, ow


def _resize_mode(ctx: OpContext) -> tuple[bool, bool]:
    align, half = bool(ctx.opt("AlignCorners")), bool(ctx.opt("HalfPixelCenters"))
    if align and half:
        ctx.fail("align_corners and half_pixel_centers are both set")
    return align, half


def resize_nearest(ctx: OpContext) -> Expr:
    """RESIZE_NEAREST_NEIGHBOR: copies of stored values, TFLite's coordinate rounding."""
    size = _resize_size(ctx)
    align, half = _resize_mode(ctx)
    mode, rounding = (
        ("align_corners", "round")
        if align
        else ("tf_half_pixel_for_nn", "floor")
        if half
        else ("asymmetric", "floor")
    )
    return ctx.call(
        "image.resize2d",
        ctx.expr(0),
        size=size,
        layout="NHWC",
        method="nearest_neighbor",
        coordinate_transformation_mode=mode,
        rounding_method=rounding,
    )


def resize_bilinear(ctx: OpContext) -> Expr:
    """RESIZE_BILINEAR: float as image.resize2d; int8 as TFLite's ResizeBilinearInteger (10-bit
    fixed-point weights); uint8 as the float reference plus 0.5, truncated."""
    size = _resize_size(ctx)
    align, half = _resize_mode(ctx)
    mode = "align_corners" if align else "half_pixel" if half else "asymmetric"
    x = ctx.expr(0)
    dtype = x.checked_type.dtype
    attrs = dict(size=size, layout="NHWC", method="linear", coordinate_transformation_mode=mode)
    if dtype == "float32":
        return ctx.call("image.resize2d", x, **attrs)
    if dtype == "uint8" and ctx.semantics == "tflite_builtin":
        return _resize_bilinear_uint8_builtin(ctx, x, size, mode)
    if dtype == "uint8":
        y = ctx.call("image.resize2d", ctx.call("cast", x, dtype="float32"), **attrs)
        y = ctx.call("add", y, ctx.const(np.float32(0.5)))
        return ctx.call("cast", y, dtype="uint8")
    if dtype != "int8":
        raise Unsupported(f"RESIZE_BILINEAR of {dtype}")
    return _resize_bilinear_integer(ctx, x, size, align, half)


def _taps(out_size: int, in_size: int, mode: str):
    """ComputeInterpolationValues in float32: one-hot (out, in) selections of the lower and
    upper taps and the fraction of each output coordinate."""
    coords = resize_coordinates(out_size, in_size, mode)
    lo = np.clip(np.floor(coords), 0, None).astype(np.int64)
    hi = np.minimum(np.ceil(coords), in_size - 1).astype(np.int64)
    eye = np.eye(in_size, dtype=np.float32)
    return eye[lo], eye[hi], (coords - lo.astype(np.float32)).astype(np.float32)


def _resize_bilinear_uint8_builtin(ctx: OpContext, x: Expr, size, mode: str) -> Expr:
    """optimized_ops::ResizeBilinear for uint8 (ResizeBilinearGenericSmallChannel): the four
    taps (y0x0, y0x1, y1x0, y1x1) times float32 products of the fractions, summed left to right
    in float32, + 0.5, truncated. Taps are gathered exactly by one-hot matrix products."""
    _, h, w, _ = x.checked_type.shape
    (y0, y1, dy), (x0, x1, dx) = _taps(size[0], h, mode), _taps(size[1], w, mode)
    one = np.float32(1)
    dy, dx = dy.reshape(1, -1, 1, 1), dx.reshape(1, 1, -1, 1)
    weights = ((one - dy) * (one - dx), (one - dy) * dx, dy * (one - dx), dy * dx)
    v = ctx.call("transpose", ctx.call("cast", x, dtype="float32"), axes=(0, 2, 3, 1))
    total = None
    for k, (sy, sx) in enumerate(((y0, x0), (y0, x1), (y1, x0), (y1, x1))):
        rows = ctx.call("transpose", ctx.call("nn.dense", v, ctx.const(sy)), axes=(0, 3, 2, 1))
        tap = ctx.call("transpose", ctx.call("nn.dense", rows, ctx.const(sx)), axes=(0, 1, 3, 2))
        term = ctx.call("multiply", tap, ctx.const(weights[k].astype(np.float32)))
        total = term if total is None else ctx.call("add", total, term)
    total = ctx.call("add", total, ctx.const(np.float32(0.5)))
    return ctx.call("cast", total, dtype="uint8")


def _resize_weights(out_size: int, in_size: int, align: bool, half: bool) -> np.ndarray:
    """(out, in) integer weights of ComputeInterpolationValuesInteger: 1024 - f on the lower
    tap, f on the upper (the same pixel when both clamp to it)."""
    scale = ((1 << 10) * in_size + out_size // 2) // out_size
    if align and out_size > 1:
        scale = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    w = np.zeros((out_size, in_size), np.int64)
    for i in range(out_size):
        v = i * scale + (scale // 2 - (1 << 9) if half else 0)
        lo = max(int(v / 1024), 0)  # C division truncates toward zero (exact: 1024 = 2**10)
        if lo >= in_size:  # TFLite would read past the input (its lower tap is not clamped)
            raise ValueError(f"output pixel {i} of {out_size} maps to input pixel {lo}, past "
                             f"the input's {in_size}")
        hi = min(int((v + 1023) / 1024), in_size - 1)
        frac = v - 1024 * lo
        w[i, lo] += 1024 - frac
        w[i, hi] += frac
    return w


def _resize_bilinear_integer(ctx: OpContext, x: Expr, size, align: bool, half: bool) -> Expr:
    """sum of v * wy * wx over the four taps, exactly, as two integer matrix products (the
    weights are separable), then (s + sign(s) * 2**19) / 2**20 truncated."""
    _, h, w, _ = x.checked_type.shape
    if min(h, w, *size) <= 0:
        ctx.fail(f"cannot resize an input of {h}x{w} pixels to {size[0]}x{size[1]}")
    for out_size, in_size in zip(size, (h, w)):  # the weight matrices are constants
        try:
            check_shape((out_size, in_size), 8, f"its {out_size}x{in_size} resize weights")
        except MemoryBudgetError as e:
            raise MemoryBudgetError(f"operator #{ctx.op.index} {ctx.op.name}: {e}") from None
    try:
        wy = _resize_weights(size[0], h, align, half)
        wx = _resize_weights(size[1], w, align, half)
    except ValueError as e:
        ctx.fail(f"cannot resize {h}x{w} pixels to {size[0]}x{size[1]}: {e}")
    v = ctx.call("transpose", ctx.call("cast", x, dtype="int64"), axes=(0, 2, 3, 1))
    v = ctx.call("nn.dense", v, ctx.const(wy), out_dtype="int64")  # (N, W, C, OH)
    v = ctx.call("transpose", v, axes=(0, 3, 2, 1))  # (N, OH, C, W)
    v = ctx.call("nn.dense", v, ctx.const(wx), out_dtype="int64")  # (N, OH, C, OW)
    v = ctx.call("transpose", v, axes=(0, 1, 3, 2))
    half_unit = ctx.call(
        "multiply", ctx.call("clip", v, a_min=-1, a_max=1), ctx.const(np.int64(1 << 19))
    )
    v = ctx.call("divide", ctx.call("add", v, half_unit), ctx.const(np.int64(1 << 20)))
    return ctx.call("cast", v, dtype=x.checked_type.dtype)
