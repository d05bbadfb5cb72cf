"""Converters for operators that move data without arithmetic: RESHAPE, SQUEEZE, TRANSPOSE,
CONCATENATION, PAD, PADV2, STRIDED_SLICE, SPLIT, SPLIT_V. Quantized tensors pass through as
stored integers (TFLite copies them), except CONCATENATION, which rescales inputs whose
quantization differs from the output's."""

from __future__ import annotations

import numpy as np

from partita.ir import Expr

from .context import OpContext, Unsupported


def _ints(ctx: OpContext, i: int, what: str) -> list[int]:
    data = ctx.constant(i, what)
    if data.dtype.kind not in "iu":
        ctx.fail(f"{what} must be integers, got {data.dtype}")
    return [int(v) for v in data.reshape(-1)]


def _axis(ctx: OpContext, axis: int, ndim: int) -> int:
    if not -ndim <= axis < max(ndim, 1):
        ctx.fail(f"axis {axis} is out of range for rank {ndim}")
    return axis % ndim if ndim else 0


def reshape(ctx: OpContext) -> Expr:
    """RESHAPE to the shape input (a constant), else the new_shape option, else the declared
    output shape."""
    if ctx.has_input(1) and ctx.tensor(1).data is not None:
        shape = _ints(ctx, 1, "the shape")
    elif ctx.options.get("NewShape"):
        shape = list(ctx.opt("NewShape"))
    else:
        shape = list(ctx.out().shape)
    return ctx.call("reshape", ctx.expr(0), newshape=tuple(shape))


def squeeze(ctx: OpContext) -> Expr:
    dims = tuple(ctx.opt("SqueezeDims"))
    return ctx.call("squeeze", ctx.expr(0), axis=dims if dims else None)


def transpose(ctx: OpContext) -> Expr:
    return ctx.call("transpose", ctx.expr(0), axes=tuple(_ints(ctx, 1, "the permutation")))


def concatenation(ctx: OpContext) -> Expr:
    """CONCATENATION along the axis option; quantized inputs go through qnn.concatenate."""
    n = len(ctx.op.inputs)
    data = ctx.tuple([ctx.expr(i) for i in range(n)])
    out = ctx.out()
    axis = int(ctx.opt("Axis"))
    _check_concat_params(ctx, n, out)
    if not ctx.quantized():
        return ctx.activation(ctx.call("concatenate", data, axis=axis), out)
    if ctx.opt("FusedActivationFunction") != 0:
        raise Unsupported("a fused activation on a quantized concatenation")
    params = [ctx.qparams(ctx.tensor(i)) for i in range(n)]
    return ctx.call(
        "qnn.concatenate",
        data,
        ctx.tuple([s for s, _ in params]),
        ctx.tuple([z for _, z in params]),
        *ctx.qparams(out),
        axis=axis,
        semantics=ctx.sem("qnn.concatenate"),
    )


def _check_concat_params(ctx: OpContext, n: int, out) -> None:
    """TFLite's int8/int16 CONCATENATION requires every input to carry the output's scale and
    zero point (concatenation.cc: ``t->params.scale != output->params.scale`` fails to prepare);
    uint8 inputs may differ (the kernel requantizes)."""
    if out.dtype not in ("int8", "int16"):
        return
    for i in range(n):
        t = ctx.tensor(i)
        same = (
            t.quantized
            and out.quantized
            and (
                np.float32(t.scale[0]) == np.float32(out.scale[0])
                and int(t.zero_point[0]) == int(out.zero_point[0])
            )
        )
        if not same:
            ctx.fail(
                f"input {t.describe()} does not have the output's scale and zero point; TFLite's "
                f"{out.dtype} concatenation requires them equal (the kernel fails to prepare)"
            )


def mirror_pad(ctx: OpContext) -> Expr:
    """MIRROR_PAD in REFLECT mode (the edge not repeated): nn.pad "reflect" on the stored
    values. SYMMETRIC mode is not supported yet."""
    shape = ctx.shape(0)
    widths = ctx.constant(1, "the paddings")
    if widths.shape != (len(shape), 2) or widths.dtype.kind not in "iu":
        ctx.fail(f"the paddings must be an integer ({len(shape)}, 2) tensor")
    if int(ctx.opt("Mode")) != 0:
        raise Unsupported("MIRROR_PAD in SYMMETRIC mode")
    pad_width = tuple((int(a), int(b)) for a, b in widths)
    if any(b >= d or a >= d for (a, b), d in zip(pad_width, shape)):
        ctx.fail(f"reflect paddings {pad_width} must be smaller than the shape {shape}")
    dtype = ctx.expr(0).checked_type.dtype
    return ctx.call(
        "nn.pad",
        ctx.expr(0),
        ctx.const(np.zeros((), dtype)),
        pad_width=pad_width,
        pad_mode="reflect",
    )


def pad(ctx: OpContext) -> Expr:
    """PAD and PADV2: constant padding with 0 (the output zero point when quantized), or with
    PADV2's constant value as stored."""
    shape = ctx.shape(0)
    widths = ctx.constant(1, "the paddings")
    if widths.shape != (len(shape), 2) or widths.dtype.kind not in "iu":
        ctx.fail(
            f"the paddings must be an integer ({len(shape)}, 2) tensor, got "
            f"{list(widths.shape)} {widths.dtype}"
        )
    pad_width = tuple((int(a), int(b)) for a, b in widths)
    x, dtype = ctx.tensor(0), ctx.expr(0).checked_type.dtype
    if ctx.has_input(2):
        value = ctx.constant(2, "the constant value")
        if value.size != 1:
            ctx.fail(f"the constant value must be a scalar, got shape {list(value.shape)}")
        value = value.reshape(())
    elif x.quantized and dtype in ("int8", "uint8", "int16"):
        out = ctx.out()
        if out.zero_point is None:
            ctx.fail(f"{out.describe()} has no quantization parameters (the input has)")
        value = np.asarray(out.zero_point[0])
    else:
        value = np.zeros(())
    return ctx.call("nn.pad", ctx.expr(0), ctx.const(value.astype(dtype)), pad_width=pad_width)


def strided_slice(ctx: OpContext) -> Expr:
    """STRIDED_SLICE with begin/end masks, shrink_axis_mask and offset (no ellipsis or new
    axes). The index arithmetic is resolved here, per axis, as Python's slice.indices."""
    o = ctx.options
    if o["EllipsisMask"] or o["NewAxisMask"]:
        raise Unsupported("ellipsis_mask or new_axis_mask")
    shape = ctx.shape(0)
    begin, end = _ints(ctx, 1, "begin"), _ints(ctx, 2, "end")
    strides = _ints(ctx, 3, "strides") if ctx.has_input(3) else [1] * len(begin)
    if not len(begin) == len(end) == len(strides) <= len(shape) or 0 in strides:
        ctx.fail(f"begin {begin}, end {end} and strides {strides} do not fit {list(shape)}")
    starts, stops, steps, keep = [], [], [], []
    for i, dim in enumerate(shape):
        if i >= len(begin):
            start, stop, step = 0, dim, 1
        elif o["ShrinkAxisMask"] >> i & 1:
            b = begin[i] + dim if begin[i] < 0 else begin[i]
            if not 0 <= b < dim:
                ctx.fail(f"index {begin[i]} is out of range for axis {i} of size {dim}")
            start, stop, step = b, b + 1, 1
        else:
            b = None if o["BeginMask"] >> i & 1 else begin[i]
            e = None if o["EndMask"] >> i & 1 else end[i] + (begin[i] if o["Offset"] else 0)
            start, stop, step = slice(b, e, strides[i]).indices(dim)
        if not range(start, stop, step):
            start, stop, step = 0, 0, 1
        elif stop < 0:
            stop = -dim - 1  # strided_slice reads a negative end from the back
        starts.append(start), stops.append(stop), steps.append(step)
        if not (i < len(begin) and o["ShrinkAxisMask"] >> i & 1):
            keep.append(i)
    y = ctx.call(
        "strided_slice", ctx.expr(0), begin=tuple(starts), end=tuple(stops), strides=tuple(steps)
    )
    if len(keep) == len(shape):
        return y
    kept = tuple(y.checked_type.shape[i] for i in keep)
    return ctx.call("reshape", y, newshape=kept)


def split(ctx: OpContext) -> list[Expr]:
    """SPLIT (axis, data) into num_splits equal parts, one strided slice per output (data
    movement an NPU runs, like TFLite's copies)."""
    axis = _ints(ctx, 0, "the axis")
    if len(axis) != 1:
        ctx.fail("the axis must be a scalar")
    shape = ctx.shape(1)
    axis = _axis(ctx, axis[0], len(shape))
    n = int(ctx.opt("NumSplits"))
    if n < 1 or shape[axis] % n:
        ctx.fail(f"{n} splits do not divide an axis of size {shape[axis]}")
    return _slices(ctx, 1, axis, [shape[axis] // n] * n)


def split_v(ctx: OpContext) -> list[Expr]:
    """SPLIT_V (data, size_splits, axis); one size may be -1 (the rest)."""
    shape = ctx.shape(0)
    sizes, axis = _ints(ctx, 1, "the sizes"), _ints(ctx, 2, "the axis")
    if len(axis) != 1:
        ctx.fail("the axis must be a scalar")
    axis = _axis(ctx, axis[0], len(shape))
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = shape[axis] - (sum(sizes) + 1)
    if sum(sizes) != shape[axis] or min(sizes) < 0:
        ctx.fail(f"sizes {sizes} do not split an axis of size {shape[axis]}")
    return _slices(ctx, 0, axis, sizes)


def _slices(ctx: OpContext, data: int, axis: int, sizes: list[int]) -> list[Expr]:
    if len(sizes) != len(ctx.op.outputs):
        ctx.fail(f"splits into {len(sizes)} parts but has {len(ctx.op.outputs)} outputs")
    shape = ctx.shape(data)
    outs, start = [], 0
    for size in sizes:
        begin, end = [0] * len(shape), list(shape)
        begin[axis], end[axis] = start, start + size
        start += size
        outs.append(
            ctx.call(
                "strided_slice",
                ctx.expr(data),
                begin=tuple(begin),
                end=tuple(end),
                strides=(1,) * len(shape),
            )
        )
    return outs


def slice_(ctx: OpContext) -> Expr:
    """SLICE (data, begin, size); a size of -1 takes the rest of the axis."""
    shape = ctx.shape(0)
    begin, size = _ints(ctx, 1, "the begin"), _ints(ctx, 2, "the size")
    if len(begin) != len(shape) or len(size) != len(shape):
        ctx.fail(f"begin {begin} and size {size} must have one entry per axis of {shape}")
    end = [d if n == -1 else b + n for b, n, d in zip(begin, size, shape)]
    if any(not 0 <= b <= e <= d for b, e, d in zip(begin, end, shape)):
        ctx.fail(f"begin {begin} and size {size} do not fit the shape {shape}")
    return ctx.call(
        "strided_slice", ctx.expr(0), begin=tuple(begin), end=tuple(end), strides=(1,) * len(end)
    )


def expand_dims(ctx: OpContext) -> Expr:
    """EXPAND_DIMS: a reshape to the declared output shape (the data does not move)."""
    return ctx.call("reshape", ctx.expr(0), newshape=tuple(ctx.out().shape))


def _same_quantization(ctx: OpContext, tensors, out) -> None:
    """PACK and UNPACK copy stored values: TFLite requires one quantization throughout."""
    for t in tensors:
        same = t.quantized == out.quantized and (
            not t.quantized
            or (
                np.array_equal(np.asarray(t.scale), np.asarray(out.scale))
                and np.array_equal(np.asarray(t.zero_point), np.asarray(out.zero_point))
            )
        )
        if not same:
            ctx.fail("inputs and outputs must share one scale and zero point")


def pack(ctx: OpContext) -> Expr:
    """PACK (stack) along the axis option: each input reshaped with a unit axis, then
    concatenated."""
    n, out = len(ctx.op.inputs), ctx.out()
    axis = _axis(ctx, int(ctx.opt("Axis")), len(out.shape))
    _same_quantization(ctx, [ctx.tensor(i) for i in range(n)], out)
    parts = []
    for i in range(n):
        shape = list(ctx.shape(i))
        shape.insert(axis, 1)
        parts.append(ctx.call("reshape", ctx.expr(i), newshape=tuple(shape)))
    return ctx.call("concatenate", ctx.tuple(parts), axis=axis)


def unpack(ctx: OpContext) -> list[Expr]:
    """UNPACK (unstack) along the axis option: one slice per output, the axis dropped."""
    shape = ctx.shape(0)
    axis = _axis(ctx, int(ctx.opt("Axis")), len(shape))
    n = len(ctx.op.outputs)
    if n != shape[axis]:
        ctx.fail(f"unpacks {shape[axis]} slices but has {n} outputs")
    _same_quantization(ctx, [ctx.out(i) for i in range(n)], ctx.tensor(0))
    outs = []
    for i in range(n):
        begin = [0] * len(shape)
        end = list(shape)
        begin[axis], end[axis] = i, i + 1
        part = ctx.call(
            "strided_slice",
            ctx.expr(0),
            begin=tuple(begin),
            end=tuple(end),
            strides=(1,) * len(shape),
        )
        outs.append(ctx.call("reshape", part, newshape=tuple(ctx.out(i).shape)))
    return outs
