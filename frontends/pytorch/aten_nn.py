"""Converters for float aten ops with weights: convolutions, linear layers, batch norm, pooling.

The schemas are aten's, shared by torch.export graphs and TorchScript graphs. PyTorch is NCHW:
every node is built with data_layout NCHW and kernel_layout OIHW.
"""

from __future__ import annotations

import numpy as np

from partita.ir import Constant, Expr

from .context import NodeContext, Unsupported, f32, shape_of
from .pt2e import bias_for


def _conv(
    ctx: NodeContext, x: Expr, w: Expr, b: Expr | None, stride, padding, dilation, groups: int
) -> Expr:
    if len(shape_of(x)) != 4 or len(shape_of(w)) != 4:
        raise Unsupported(
            f"only 2-D convolutions are supported (input {list(shape_of(x))}, "
            f"weight {list(shape_of(w))})"
        )
    if isinstance(padding, str):
        padding = _string_padding(ctx, padding, shape_of(w)[2:], dilation)
    padding = padding * 2 if len(padding) == 2 else padding
    out = ctx.call(
        "nn.conv2d",
        x,
        w,
        strides=stride,
        padding=padding,
        dilation=dilation,
        groups=groups,
        channels=shape_of(w)[0],
        kernel_size=shape_of(w)[2:],
        data_layout="NCHW",
        kernel_layout="OIHW",
        **torch_cpu_conv(ctx, shape_of(x), shape_of(w), dilation, groups),
    )
    if ctx.options.get("torch_cpu"):  # PyTorch adds the float bias to the float sum
        return ctx.call("nn.bias_add", out, b, axis=1) if b is not None else out
    b = bias_for(ctx, x, w, b)
    return ctx.call("nn.bias_add", out, b, axis=1) if b is not None else out


def torch_cpu_conv(ctx: NodeContext, xs, ws, dilation, groups: int) -> dict:
    """accumulate="torch_cpu" under match="pytorch_eager" for the float32 convolutions whose
    PyTorch kernel partita reproduces (partita/ops/torch_cpu.py), else nothing."""
    if not ctx.options.get("torch_cpu") or tuple(dilation) != (1, 1):
        return {}
    depthwise = groups == xs[1] == ws[0]
    mkl = (
        groups == 1
        and xs[0] == 1
        and int(np.prod(xs)) <= 20480
        and min(ws[2:]) <= 3
        and int(np.prod(ws[1:])) <= 320
    )  # partita.ops.emulation.torch_cpu.MAX_K
    return {"accumulate": "torch_cpu"} if depthwise or mkl else {}


def _string_padding(ctx: NodeContext, mode: str, kernel, dilation) -> tuple[int, ...]:
    if mode == "valid":
        return (0, 0, 0, 0)
    if mode != "same":
        ctx.fail(f"padding must be 'same', 'valid' or a list of ints, got {mode!r}")
    total = [d * (k - 1) for k, d in zip(kernel, dilation)]
    # PyTorch puts the odd pixel of "same" padding at the end.
    return (total[0] // 2, total[1] // 2, total[0] - total[0] // 2, total[1] - total[1] // 2)


def conv2d(ctx: NodeContext) -> Expr:
    """aten.conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)."""
    padding = ctx.arg(4, "padding", 0)
    if not isinstance(padding, str):
        padding = ctx.ints(4, "padding", 2, 0)
    return _conv(
        ctx,
        ctx.tensor(0, "input"),
        ctx.tensor(1, "weight"),
        ctx.tensor(2, "bias", None),
        ctx.ints(3, "stride", 2, 1),
        padding,
        ctx.ints(5, "dilation", 2, 1),
        int(ctx.number(6, "groups", 1)),
    )


def convolution(ctx: NodeContext) -> Expr:
    """aten.convolution / aten._convolution(input, weight, bias, stride, padding, dilation,
    transposed, output_padding, groups, ...)."""
    x, w, b = ctx.tensor(0, "input"), ctx.tensor(1, "weight"), ctx.tensor(2, "bias", None)
    stride, padding = ctx.ints(3, "stride", 2), ctx.ints(4, "padding", 2)
    dilation, groups = ctx.ints(5, "dilation", 2), int(ctx.number(8, "groups"))
    if not ctx.arg(6, "transposed"):
        return _conv(ctx, x, w, b, stride, padding, dilation, groups)
    if len(shape_of(x)) != 4:
        raise Unsupported("only 2-D transposed convolutions are supported")
    out = ctx.call(
        "nn.conv2d_transpose",
        x,
        w,
        strides=stride,
        padding=padding * 2,
        dilation=dilation,
        groups=groups,
        output_padding=ctx.ints(7, "output_padding", 2),
        channels=shape_of(w)[1] * groups,
        kernel_size=shape_of(w)[2:],
        data_layout="NCHW",
        kernel_layout="IOHW",
    )
    return ctx.call("nn.bias_add", out, b, axis=1) if b is not None else out


def linear(ctx: NodeContext) -> Expr:
    """aten.linear(input, weight, bias=None): weight [out, in]."""
    x, w, b = ctx.tensor(0, "input"), ctx.tensor(1, "weight"), ctx.tensor(2, "bias", None)
    out = ctx.call("nn.dense", x, w, units=shape_of(w)[0])
    if not ctx.options.get("torch_cpu"):  # pytorch_eager keeps PyTorch's float bias
        b = bias_for(ctx, x, w, b)
    return ctx.call("nn.bias_add", out, b, axis=-1) if b is not None else out


def addmm(ctx: NodeContext) -> Expr:
    """aten.addmm(bias, x, mat2, beta=1, alpha=1) = beta * bias + alpha * x @ mat2."""
    if ctx.number(3, "beta", 1) != 1 or ctx.number(4, "alpha", 1) != 1:
        raise Unsupported("addmm with beta or alpha other than 1")
    b, x, m = ctx.tensor(0, "self"), ctx.tensor(1, "mat1"), ctx.tensor(2, "mat2")
    out = ctx.call("nn.dense", x, ctx.call("transpose", m, axes=(1, 0)))
    return ctx.call("add", out, b)


def matmul(ctx: NodeContext) -> Expr:
    """aten.mm / aten.matmul of 2-D tensors."""
    x, m = ctx.tensor(0, "self"), ctx.tensor(1, "mat2")
    if len(shape_of(x)) != 2 or len(shape_of(m)) != 2:
        raise Unsupported("only 2-D matrix products are supported")
    return ctx.call("nn.dense", x, ctx.call("transpose", m, axes=(1, 0)))


def batch_norm(ctx: NodeContext) -> Expr | list:
    """Inference batch norm (aten.batch_norm with training=False and
    aten._native_batch_norm_legit_no_training): x * k + (beta - mean * k), k = gamma /
    sqrt(var + eps), folded per channel into float32 constants."""
    no_training = "no_training" in ctx.target
    x = ctx.tensor(0, "input")
    params = [
        ctx.arg(i, n, None)
        for i, n in ((1, "weight"), (2, "bias"), (3, "running_mean"), (4, "running_var"))
    ]
    if not no_training and ctx.arg(5, "training"):
        raise Unsupported("batch norm in training mode (call model.eval() before exporting)")
    eps = ctx.number(6 if no_training else 7, "eps")
    if any(p is not None and not isinstance(p, Constant) for p in params) or params[2] is None:
        raise Unsupported("batch norm needs constant running statistics and affine parameters")
    c = shape_of(x)[1]
    gamma, beta, mean, var = (
        np.ones(c)
        if p is None and i == 0
        else np.zeros(c)
        if p is None
        else p.data.astype(np.float64)
        for i, p in enumerate(params)
    )
    k = gamma / np.sqrt(var + eps)
    bshape = (c,) + (1,) * (len(shape_of(x)) - 2)
    out = ctx.call(
        "add", ctx.call("multiply", x, f32(k).reshape(bshape)), f32(beta - mean * k).reshape(bshape)
    )
    # _native_batch_norm_legit_no_training returns (out, save_mean, save_invstd).
    return [out, None, None] if no_training else out


def _pool_args(ctx: NodeContext, first: int):
    kernel = ctx.ints(first, "kernel_size", 2)
    stride = ctx.ints(first + 1, "stride", None, ()) or kernel
    padding = ctx.ints(first + 2, "padding", 2, 0)
    return kernel, (stride * 2 if len(stride) == 1 else stride), padding


def max_pool2d(ctx: NodeContext) -> Expr | list:
    """aten.max_pool2d(x, kernel, stride=kernel, padding=0, dilation=1, ceil_mode=False);
    max_pool2d_with_indices returns (out, indices) and only ``out`` can be used."""
    kernel, stride, padding = _pool_args(ctx, 1)
    out = ctx.call(
        "nn.max_pool2d",
        ctx.tensor(0, "input"),
        pool_size=kernel,
        strides=stride,
        padding=padding * 2,
        dilation=ctx.ints(4, "dilation", 2, 1),
        ceil_mode=bool(ctx.arg(5, "ceil_mode", False)),
        layout="NCHW",
    )
    return [out, None] if "with_indices" in ctx.target else out


def avg_pool2d(ctx: NodeContext) -> Expr:
    """aten.avg_pool2d(x, kernel, stride=kernel, padding=0, ceil_mode=False,
    count_include_pad=True, divisor_override=None)."""
    kernel, stride, padding = _pool_args(ctx, 1)
    if ctx.arg(6, "divisor_override", None) is not None:
        raise Unsupported("avg_pool2d with divisor_override")
    return ctx.call(
        "nn.avg_pool2d",
        ctx.tensor(0, "input"),
        pool_size=kernel,
        strides=stride,
        padding=padding * 2,
        ceil_mode=bool(ctx.arg(4, "ceil_mode", False)),
        count_include_pad=bool(ctx.arg(5, "count_include_pad", True)),
        layout="NCHW",
    )


def adaptive_window(ctx: NodeContext, shape, size) -> tuple[int, int] | None:
    """The (kh, kw) window when adaptive pooling to ``size`` is a plain pooling; None = global."""
    size = tuple(shape[2 + i] if s is None else int(s) for i, s in enumerate(size))
    if size == (1, 1):
        return None
    if any(s <= 0 or d % s for d, s in zip(shape[2:], size)):
        raise Unsupported(
            f"adaptive pooling from {list(shape[2:])} to {list(size)}, which is "
            f"not a whole number of windows"
        )
    return tuple(d // s for d, s in zip(shape[2:], size))


def adaptive_avg_pool2d(ctx: NodeContext) -> Expr:
    """aten.adaptive_avg_pool2d(x, output_size): global average or an equal-window pooling."""
    x = ctx.tensor(0, "input")
    win = adaptive_window(ctx, shape_of(x), ctx.arg(1, "output_size"))
    if win is None:
        extra = {"accumulate": "torch_cpu"} if ctx.options.get("torch_cpu") else {}
        return ctx.call("nn.global_avg_pool2d", x, layout="NCHW", **extra)
    return ctx.call("nn.avg_pool2d", x, pool_size=win, strides=win, layout="NCHW")
