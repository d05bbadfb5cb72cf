"""Shape and data-movement ONNX ops: Reshape, Flatten, (Un)Squeeze, Transpose, Concat, Split,
Slice, Pad, Resize, Shape, Constant. Shape operands must be constants (exporters' shape
arithmetic is folded before it gets here)."""

from __future__ import annotations

import numpy as np

from partita.ir import Expr

from .context import NodeContext, Unsupported
from .reader import to_array

INT64_MAX = 2**63 - 1


def constant(ctx: NodeContext) -> np.ndarray:
    """Constant -> its value (a numpy array the graph keeps as a constant)."""
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        v = ctx.attr(key)
        if v is None:
            continue
        if key == "value":
            return to_array(v, f"the value of Constant node #{ctx.index}")
        dtype = np.float32 if "float" in key else np.int64
        return np.asarray(v, dtype)
    raise Unsupported("a Constant without a tensor, float or int value")


def shape(ctx: NodeContext) -> np.ndarray:
    """Shape -> the static shape as an int64 constant (start/end as Python slicing)."""
    dims = np.asarray(ctx.shape(0), np.int64)
    start, end = ctx.attr("start", 0), ctx.attr("end", None)
    return dims[start:end].copy()


def reshape(ctx: NodeContext) -> Expr:
    """Reshape with a constant shape: 0 copies the input dimension (unless allowzero), -1 is
    inferred; the IR gets the explicit shape."""
    src = ctx.shape(0)
    target = [int(d) for d in ctx.value(1, "shape").reshape(-1)]
    if not ctx.attr("allowzero", 0):
        target = [src[i] if d == 0 and i < len(src) else d for i, d in enumerate(target)]
    return _reshape(ctx, target)


def _reshape(ctx: NodeContext, target) -> Expr:
    size = int(np.prod(ctx.shape(0)))
    if target.count(-1) == 1:
        known = int(np.prod([d for d in target if d != -1]))
        if known == 0 or size % known:
            ctx.fail(f"cannot reshape {list(ctx.shape(0))} to {target}")
        target[target.index(-1)] = size // known
    if int(np.prod(target)) != size or min(target, default=1) < 0:
        ctx.fail(f"cannot reshape {list(ctx.shape(0))} to {target}")
    return ctx.call("reshape", ctx.expr(0), newshape=tuple(target))


def flatten(ctx: NodeContext) -> Expr:
    s = ctx.shape(0)
    axis = int(ctx.attr("axis", 1))
    axis = axis + len(s) if axis < 0 else axis
    if not 0 <= axis <= len(s):
        ctx.fail(f"axis {ctx.attr('axis')} is out of range for rank {len(s)}")
    return _reshape(ctx, [int(np.prod(s[:axis])), int(np.prod(s[axis:]))])


def _raw_axes(ctx: NodeContext) -> list[int] | None:
    """The axes as given: input 1 from opset 13, the ``axes`` attribute before."""
    if ctx.opset >= 13:
        if not ctx.has_input(1):
            return None
        axes = ctx.value(1, "axes")
        if axes.dtype.kind not in "iu":
            ctx.fail(f"axes must be integers, got {axes.dtype}")
        return axes.reshape(-1).tolist()
    return list(ctx.ints("axes")) if ctx.attr("axes") is not None else None


def _axes(ctx: NodeContext, rank: int) -> list[int] | None:
    axes = _raw_axes(ctx)
    if axes is None:
        return None
    out = [a + rank if a < 0 else a for a in axes]
    if any(not 0 <= a < rank for a in out) or len(set(out)) != len(out):
        ctx.fail(f"axes {axes} are out of range or repeated for rank {rank}")
    return out


def squeeze(ctx: NodeContext) -> Expr:
    s = ctx.shape(0)
    axes = _axes(ctx, len(s))
    axes = [i for i, d in enumerate(s) if d == 1] if axes is None else axes
    if any(s[a] != 1 for a in axes):
        ctx.fail(f"cannot squeeze axes {axes} of shape {list(s)}")
    return _reshape(ctx, [d for i, d in enumerate(s) if i not in axes])


def unsqueeze(ctx: NodeContext) -> Expr:
    s = list(ctx.shape(0))
    raw = _raw_axes(ctx)
    if raw is None:
        ctx.fail("Unsqueeze needs axes")
    axes = _axes(ctx, len(s) + len(raw))
    out = []
    it = iter(s)
    for i in range(len(s) + len(axes)):
        out.append(1 if i in axes else next(it))
    return _reshape(ctx, out)


def transpose(ctx: NodeContext) -> Expr:
    perm = ctx.ints("perm")
    return ctx.call("transpose", ctx.expr(0), axes=perm if perm is not None else None)


def concat(ctx: NodeContext) -> Expr:
    axis = int(ctx.attr("axis", 0))
    fields = [ctx.expr(i) for i, name in enumerate(ctx.node.input) if name]
    return ctx.call("concatenate", ctx.tuple(fields), axis=axis)


def split(ctx: NodeContext) -> list[Expr]:
    s = ctx.shape(0)
    axis = int(ctx.attr("axis", 0))
    axis = axis + len(s) if axis < 0 else axis
    n = len(ctx.node.output)
    if ctx.has_input(1):
        sizes = [int(v) for v in ctx.value(1, "split").reshape(-1)]
    elif ctx.attr("split") is not None:
        sizes = list(ctx.ints("split"))
    else:  # equal parts; opset 18's num_outputs lets the last one be smaller
        part = -(-s[axis] // n)
        sizes = [min(part, s[axis] - part * i) for i in range(n)]
    if len(sizes) != n or sum(sizes) != s[axis] or min(sizes) <= 0:
        ctx.fail(f"split sizes {sizes} do not divide axis {axis} of {list(s)} into {n} parts")
    indices = tuple(int(v) for v in np.cumsum(sizes)[:-1])
    tup = ctx.call("split", ctx.expr(0), indices_or_sections=indices, axis=axis)
    return [ctx.item(tup, i) for i in range(n)]


def slice_(ctx: NodeContext) -> Expr:
    """Slice with constant starts/ends/axes/steps (Python slicing per axis, as ONNX)."""
    s = ctx.shape(0)
    starts = ctx.value(1, "starts").reshape(-1).tolist()
    ends = ctx.value(2, "ends").reshape(-1).tolist()
    axes = (
        ctx.value(3, "axes").reshape(-1).tolist() if ctx.has_input(3) else list(range(len(starts)))
    )
    steps = ctx.value(4, "steps").reshape(-1).tolist() if ctx.has_input(4) else [1] * len(starts)
    begin, end, strides, out_axes = [], [], [], []
    for b, e, a, st in zip(starts, ends, axes, steps):
        a = a + len(s) if a < 0 else a
        if st == 0 or not 0 <= a < len(s):
            ctx.fail(f"bad slice on axis {a} (step {st}) of shape {list(s)}")
        idx = np.arange(s[a])[
            slice(max(min(b, INT64_MAX), -INT64_MAX), max(min(e, INT64_MAX), -INT64_MAX), st)
        ]
        if idx.size == 0:
            raise Unsupported(f"an empty slice of axis {a}")
        last = int(idx[-1]) + (1 if st > 0 else -1)
        if st < 0 and last < 0:
            raise Unsupported("a negative-step slice that reaches index 0")
        begin.append(int(idx[0]))
        end.append(last)
        strides.append(int(st))
        out_axes.append(a)
    return ctx.call(
        "strided_slice",
        ctx.expr(0),
        begin=tuple(begin),
        end=tuple(end),
        strides=tuple(strides),
        axes=tuple(out_axes),
    )


def pad(ctx: NodeContext) -> Expr:
    """Pad (constant, reflect, edge) with constant pads; negative pads are unsupported."""
    rank = len(ctx.shape(0))
    pads = [int(v) for v in ctx.value(1, "pads").reshape(-1)]
    axes = list(range(rank))
    if ctx.has_input(3):
        axes = [a + rank if a < 0 else a for a in ctx.value(3, "axes").reshape(-1).tolist()]
    if len(pads) != 2 * len(axes):
        ctx.fail(f"pads {pads} must have 2 values per padded axis ({len(axes)})")
    if min(pads, default=0) < 0:
        raise Unsupported(f"negative pads {pads}")
    width = [[0, 0] for _ in range(rank)]
    for j, a in enumerate(axes):
        width[a] = [pads[j], pads[j + len(axes)]]
    mode = ctx.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        raise Unsupported(f"Pad mode {mode!r}")
    value = ctx.value(2, "constant_value").reshape(()) if ctx.has_input(2) else 0
    pad_value = ctx.const(np.asarray(value, ctx.dtype(0)))
    return ctx.call(
        "nn.pad", ctx.expr(0), pad_value, pad_width=tuple(map(tuple, width)), pad_mode=mode
    )


RESIZE_MODES = {"nearest": "nearest_neighbor", "linear": "linear"}
NEAREST = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}


def resize(ctx: NodeContext) -> Expr:
    """Resize of H and W (4-D NCHW) -> image.resize2d; cubic, antialias, roi, exclude_outside and
    keep_aspect_ratio_policy other than stretch are unsupported."""
    s = ctx.shape(0)
    mode = ctx.attr("mode", "nearest")
    if len(s) != 4 or mode not in RESIZE_MODES:
        raise Unsupported(f"Resize mode {mode!r} of a rank-{len(s)} tensor")
    if (
        ctx.attr("antialias", 0)
        or ctx.attr("exclude_outside", 0)
        or ctx.attr("keep_aspect_ratio_policy", "stretch") != "stretch"
        or ctx.attr("axes") is not None
    ):
        raise Unsupported("Resize with antialias, exclude_outside, axes or an aspect policy")
    ctm = ctx.attr("coordinate_transformation_mode", "half_pixel")
    if ctm == "tf_crop_and_resize":
        raise Unsupported("coordinate_transformation_mode 'tf_crop_and_resize'")
    size = _resize_size(ctx, s)
    if size[:2] != list(s[:2]):
        raise Unsupported("Resize of the batch or channel axes")
    nearest = ctx.attr("nearest_mode", "round_prefer_floor")
    if mode == "nearest" and nearest not in NEAREST:
        ctx.fail(f"nearest_mode {nearest!r} is not an ONNX value")
    if mode == "linear" and ctx.dtype(0) != "float32":
        raise Unsupported(f"linear Resize of {ctx.dtype(0)} data")
    return ctx.call(
        "image.resize2d",
        ctx.expr(0),
        size=tuple(size[2:]),
        layout="NCHW",
        method=RESIZE_MODES[mode],
        coordinate_transformation_mode=ctm,
        rounding_method=nearest,
    )


def _resize_size(ctx: NodeContext, s) -> list[int]:
    if ctx.has_input(3):
        return [int(v) for v in ctx.value(3, "sizes").reshape(-1)]
    if not ctx.has_input(2):
        ctx.fail("Resize needs scales or sizes")
    scales = ctx.value(2, "scales").astype(np.float32).reshape(-1)
    if scales.size == 0 and ctx.has_input(3):
        return [int(v) for v in ctx.value(3, "sizes").reshape(-1)]
    if scales.size != len(s):
        ctx.fail(f"scales {scales.tolist()} must have one value per axis of {list(s)}")
    return [int(np.floor(np.float32(d) * sc)) for d, sc in zip(s, scales)]


def reduce_mean(ctx: NodeContext) -> Expr:
    """ReduceMean (axes as attribute before opset 18, as input from 18) -> mean."""
    rank = len(ctx.shape(0))
    if ctx.opset >= 18:
        axes = ctx.value(1, "axes").reshape(-1).tolist() if ctx.has_input(1) else None
    else:
        axes = list(ctx.ints("axes")) if ctx.attr("axes") is not None else None
    if axes is None or len(axes) == 0:
        if ctx.attr("noop_with_empty_axes", 0):
            return ctx.expr(0)
        axes = list(range(rank))
    if ctx.dtype(0) != "float32":
        raise Unsupported(f"ReduceMean of {ctx.dtype(0)} data")
    axes = tuple(sorted(a + rank if a < 0 else a for a in axes))
    return ctx.call("mean", ctx.expr(0), axis=axes, keepdims=bool(ctx.attr("keepdims", 1)))
