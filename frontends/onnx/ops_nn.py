"""Float Conv, Gemm, MatMul, pooling, BatchNormalization and Softmax (NCHW, as ONNX)."""

from __future__ import annotations

import numpy as np

from partita.ir import Expr

from .context import NodeContext, Unsupported

FLOAT = ("float32",)


def spatial_padding(ctx: NodeContext, hw, kernel, strides, dilations) -> tuple[int, ...]:
    """(top, left, bottom, right) from ``pads`` or ``auto_pad`` (SAME_UPPER puts the odd pixel
    at the end, SAME_LOWER at the start, as ONNX)."""
    auto = ctx.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = ctx.ints("pads", (0, 0, 0, 0))
        if len(pads) != 4:
            ctx.fail(f"pads {list(pads)} must have 4 values for a 2-D operator")
        if min(pads) < 0:
            raise Unsupported(f"negative pads {list(pads)}")
        return pads
    if auto == "VALID":
        return (0, 0, 0, 0)
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        ctx.fail(f"auto_pad {auto!r} is not an ONNX value")
    begin, end = [], []
    for size, k, s, d in zip(hw, kernel, strides, dilations):
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small = total // 2
        begin.append(small if auto == "SAME_UPPER" else total - small)
        end.append(total - begin[-1])
    return (begin[0], begin[1], end[0], end[1])


def _window(ctx: NodeContext, kernel) -> tuple:
    strides = ctx.ints("strides", (1, 1))
    dilations = ctx.ints("dilations", (1, 1))
    if len(kernel) != 2 or len(strides) != 2 or len(dilations) != 2:
        raise Unsupported(f"only 2-D windows are supported (kernel {list(kernel)})")
    hw = ctx.shape(0)[2:]
    return strides, dilations, spatial_padding(ctx, hw, kernel, strides, dilations)


def conv_attrs(ctx: NodeContext, weight_shape) -> dict:
    """The qnn/nn conv2d attributes of an ONNX Conv-like node (NCHW data, OIHW weight)."""
    if len(ctx.shape(0)) != 4 or len(weight_shape) != 4:
        raise Unsupported(
            f"only 2-D convolution (4-D input) is supported, got input {list(ctx.shape(0))}"
        )
    kernel = ctx.ints("kernel_shape", tuple(weight_shape[2:]))
    if tuple(kernel) != tuple(weight_shape[2:]):
        ctx.fail(f"kernel_shape {list(kernel)} disagrees with weight shape {list(weight_shape)}")
    strides, dilations, padding = _window(ctx, kernel)
    return dict(
        strides=strides,
        padding=padding,
        dilation=dilations,
        groups=int(ctx.attr("group", 1)),
        channels=int(weight_shape[0]),
        kernel_size=tuple(kernel),
        data_layout="NCHW",
        kernel_layout="OIHW",
    )


def conv(ctx: NodeContext) -> Expr:
    """Conv(X, W, B) -> nn.conv2d [-> nn.bias_add on axis 1]."""
    _float(ctx)
    w = ctx.expr(1)
    out = ctx.call(
        "nn.conv2d", ctx.expr(0), w, **conv_attrs(ctx, w.checked_type.shape), **ctx.mlas()
    )
    if ctx.has_input(2):
        out = ctx.call("nn.bias_add", out, ctx.expr(2), axis=1)
    return out


def _float(ctx: NodeContext) -> None:
    if ctx.dtype(0) not in FLOAT:
        raise Unsupported(f"{ctx.op_type} on {ctx.dtype(0)} data")


def gemm(ctx: NodeContext) -> Expr:
    """Gemm: alpha * op(A) @ op(B) + beta * C -> nn.dense (weight (N, K)) + add."""
    _float(ctx)
    a, b = ctx.expr(0), ctx.expr(1)
    if len(ctx.shape(0)) != 2 or len(ctx.shape(1)) != 2:
        ctx.fail(f"Gemm takes 2-D A and B, got {list(ctx.shape(0))} and {list(ctx.shape(1))}")
    mlas = _mlas_gemm(ctx, a, b)
    if mlas is not None:
        return mlas
    if ctx.attr("transA", 0):
        a = ctx.call("transpose", a, axes=(1, 0))
    if not ctx.attr("transB", 0):
        b = _transposed(ctx, 1, b)
    out = ctx.call("nn.dense", a, b)
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    if alpha != 1.0:
        out = ctx.call("multiply", out, ctx.const(np.float32(alpha)))
    if ctx.has_input(2) and beta != 0.0:
        c = ctx.expr(2)
        if beta != 1.0:
            c = ctx.call("multiply", c, ctx.const(np.float32(beta)))
        out = ctx.call("add", out, c)
    return out


def _mlas_gemm(ctx: NodeContext, a: Expr, b: Expr) -> Expr | None:
    """Gemm in MLAS arithmetic (match="ort_disable_all"): nn.gemm with C as the bias (MLAS's
    beta = 1), or nn.dense for a transposed B without C; "mlas_packed" when B is an
    initializer (ONNX Runtime prepacks it); None where MLAS's path is not emulated (transA,
    alpha != 1, beta other than 0 or 1)."""
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    has_c = ctx.has_input(2) and beta != 0.0
    if not ctx.mlas() or ctx.attr("transA", 0) or alpha != 1.0 or beta not in (0.0, 1.0):
        return None
    trans_b, mlas = bool(ctx.attr("transB", 0)), ctx.mlas(packed=ctx.is_const(1))
    if not has_c and trans_b:
        return ctx.call("nn.dense", a, b, **mlas)
    c = ctx.expr(2) if has_c else ctx.const(np.float32(0.0))
    return ctx.call("nn.gemm", a, b, c, transpose_b=trans_b, **mlas)


def _transposed(ctx: NodeContext, i: int, e: Expr) -> Expr:
    if ctx.is_const(i):
        return ctx.const(np.ascontiguousarray(ctx.value(i, "B").T))
    return ctx.call("transpose", e, axes=(1, 0))


def matmul(ctx: NodeContext) -> Expr:
    """MatMul: a 2-D B becomes nn.dense (B transposed); 3-D A and B nn.batch_matmul."""
    _float(ctx)
    sa, sb = ctx.shape(0), ctx.shape(1)
    if ctx.mlas() and len(sb) == 2 and len(sa) >= 2:
        # MLAS multiplies by B as stored ([K, N]); a zero C sums like beta = 0
        return ctx.call(
            "nn.gemm",
            ctx.expr(0),
            ctx.expr(1),
            ctx.const(np.float32(0.0)),
            transpose_b=False,
            **ctx.mlas(packed=ctx.is_const(1)),
        )
    if len(sb) == 2 and len(sa) >= 1:
        return ctx.call("nn.dense", ctx.expr(0), _transposed(ctx, 1, ctx.expr(1)))
    if len(sa) == 3 and len(sb) == 3:
        mlas = ctx.mlas() if sa[0] == sb[0] else {}
        return ctx.call("nn.batch_matmul", ctx.expr(0), ctx.expr(1), transpose_b=False, **mlas)
    raise Unsupported(f"MatMul of shapes {list(sa)} and {list(sb)}")


def _pool_common(ctx: NodeContext) -> dict:
    if len(ctx.shape(0)) != 4:
        raise Unsupported(f"only 2-D pooling (4-D input) is supported, got {list(ctx.shape(0))}")
    kernel = ctx.ints("kernel_shape")
    if kernel is None:
        ctx.fail("kernel_shape is required")
    strides, dilations, padding = _window(ctx, kernel)
    return dict(
        pool_size=kernel,
        strides=strides,
        dilation=dilations,
        padding=padding,
        layout="NCHW",
        ceil_mode=bool(ctx.attr("ceil_mode", 0)),
    )


def max_pool(ctx: NodeContext) -> Expr:
    """MaxPool -> nn.max_pool2d (any dtype: int8/uint8 pool their raw values)."""
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        raise Unsupported("the Indices output of MaxPool")
    if ctx.attr("storage_order", 0):
        raise Unsupported("storage_order=1")
    return ctx.call("nn.max_pool2d", ctx.expr(0), **_pool_common(ctx))


def avg_pool(ctx: NodeContext) -> Expr:
    """AveragePool -> nn.avg_pool2d."""
    _float(ctx)
    attrs = _pool_common(ctx)
    return ctx.call(
        "nn.avg_pool2d",
        ctx.expr(0),
        **attrs,
        count_include_pad=bool(ctx.attr("count_include_pad", 0)),
    )


def global_avg_pool(ctx: NodeContext) -> Expr:
    """GlobalAveragePool -> nn.global_avg_pool2d (NCHW)."""
    _float(ctx)
    if len(ctx.shape(0)) != 4:
        raise Unsupported(f"GlobalAveragePool of a rank-{len(ctx.shape(0))} tensor")
    return ctx.call("nn.global_avg_pool2d", ctx.expr(0), layout="NCHW", **ctx.mlas(threads=False))


def global_max_pool(ctx: NodeContext) -> Expr:
    """GlobalMaxPool -> max over the spatial axes, kept."""
    rank = len(ctx.shape(0))
    return ctx.call("max", ctx.expr(0), axis=tuple(range(2, rank)), keepdims=True)


def batch_norm(ctx: NodeContext) -> Expr:
    """BatchNormalization (inference) -> x * a + b, a = scale / sqrt(var + eps), b = B - mean * a
    (per channel, computed in float32)."""
    _float(ctx)
    if len([o for o in ctx.node.output if o]) > 1:
        raise Unsupported("training-mode BatchNormalization")
    scale, bias, mean, var = (
        np.asarray(ctx.value(i, n), np.float32)
        for i, n in ((1, "scale"), (2, "B"), (3, "mean"), (4, "var"))
    )
    eps = np.float32(ctx.attr("epsilon", 1e-5))
    a = (scale / np.sqrt(var + eps)).astype(np.float32)
    b = (bias - mean * a).astype(np.float32)
    shape = (-1,) + (1,) * (len(ctx.shape(0)) - 2)
    out = ctx.call("multiply", ctx.expr(0), ctx.const(a.reshape(shape)))
    return ctx.call("add", out, ctx.const(b.reshape(shape)))


def softmax(ctx: NodeContext) -> Expr:
    """Softmax (opset >= 13: along one axis) -> nn.softmax."""
    _float(ctx)
    return ctx.call("nn.softmax", ctx.expr(0), axis=int(ctx.attr("axis", -1)))
