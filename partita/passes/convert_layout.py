"""ConvertLayout: run convolutions in the desired layout and carry that layout through the ops
that do not care, so that transposes appear only where the layout really changes.

    %0 = nn.conv2d(%x, meta[Constant][0] /* OIHW */, data_layout="NCHW", kernel_layout="OIHW")
    %1 = add(nn.relu(%0), meta[Constant][1] /* (8, 1, 1) */)
    nn.conv2d(%1, meta[Constant][2], data_layout="NCHW", kernel_layout="OIHW")
->
    %0 = transpose(%x, axes=[0, 2, 3, 1])
    %1 = nn.conv2d(%0, meta[Constant][0] /* HWIO */, data_layout="NHWC", kernel_layout="HWIO")
    %2 = add(nn.relu(%1), meta[Constant][1] /* (1, 1, 8) */)
    %3 = nn.conv2d(%2, meta[Constant][2] /* HWIO */, data_layout="NHWC", kernel_layout="HWIO")
    transpose(%3, axes=[0, 3, 1, 2])

Every value is tracked as (new expression, perm): the new expression is the original value
transposed by ``perm`` (None: the original layout). An op that is not understood gets its
arguments back in the original layout, which is always correct.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from partita.errors import PartitaError
from partita.ir.module import IRModule
from partita.ir.nodes import Call, Constant, Expr, Function, Tuple, TupleGetItem
from partita.ir.types import TensorType
from partita.ir.visitor import post_order
from partita.ops.registry import Op, get_op

from .infer_type import infer_type
from .infra import module_pass
from .rewrite_util import is_opaque, rewrite_module, typed

DEFAULT_LAYOUTS = {"nn.conv2d": ("NHWC", "HWIO"), "qnn.conv2d": ("NHWC", "HWIO")}

# Ops with layout attributes: op -> (data layout attribute, kernel layout attribute or None).
LAYOUT_OPS = {
    "nn.conv2d": ("data_layout", "kernel_layout"),
    "qnn.conv2d": ("data_layout", "kernel_layout"),
    "nn.conv2d_transpose": ("data_layout", "kernel_layout"),
    "nn.max_pool2d": ("layout", None),
    "nn.avg_pool2d": ("layout", None),
    "nn.global_avg_pool2d": ("layout", None),
    "qnn.avg_pool2d": ("layout", None),
    "image.resize2d": ("layout", None),
}


@module_pass("ConvertLayout", opt_level=2)
def ConvertLayout(mod: IRModule, ctx, desired_layouts: dict | None = None) -> IRModule:
    """Convert the ops named in ``desired_layouts`` ({op: (data layout, kernel layout)}; a kernel
    layout of "default" keeps the op's) to those layouts, transposing constant weights directly
    and activations with ``transpose``; pooling and resize follow the layout of their input, and
    layout-agnostic ops (elementwise and broadcasting ops, per-channel ops with an ``axis``,
    concatenate, reductions) keep the new layout with their axes and constants adjusted.

        nn.conv2d(%x, W, "NCHW", "OIHW")  ->  transpose(nn.conv2d(transpose(%x, axes=[0, 2, 3, 1]),
                                              W', "NHWC", "HWIO"), axes=[0, 3, 1, 2])
    """
    layouts = _check_desired(DEFAULT_LAYOUTS if desired_layouts is None else desired_layouts)
    for fn in mod.functions.values():
        if not is_opaque(fn):
            infer_type(fn, mod)
    return rewrite_module(mod, lambda m: _Converter(m, layouts))


def _check_desired(desired) -> dict:
    if not isinstance(desired, dict):
        raise PartitaError(f"ConvertLayout: desired_layouts must be a dict, got {desired!r}")
    out = {}
    for name, value in desired.items():
        get_op(name)  # an unknown name fails with the closest known ones
        if name not in LAYOUT_OPS:
            raise PartitaError(
                f"ConvertLayout: {name} has no layout attribute (convertible: "
                f"{', '.join(sorted(LAYOUT_OPS))})"
            )
        value = (value,) if isinstance(value, str) else tuple(value)
        if not 1 <= len(value) <= 2 or not all(isinstance(v, str) for v in value):
            raise PartitaError(
                f"ConvertLayout: {name}: expected (data layout, kernel layout), "
                f"got {desired[name]!r}"
            )
        out[name] = (value[0], value[1] if len(value) > 1 else "default")
        for attr, layout in zip(LAYOUT_OPS[name], out[name]):
            _check_layout(name, attr, layout)
    return out


def _check_layout(name: str, attr: str | None, layout: str) -> None:
    """Refuse a layout the op's attribute schema does not offer."""
    if attr is None or layout == "default":
        return
    fields = {f.name: f for f in dataclasses.fields(get_op(name).attrs_type)}
    options = fields[attr].metadata.get("choices", ())
    if options and layout not in options:
        raise PartitaError(
            f"ConvertLayout: {name} does not support {attr}={layout!r} (it "
            f"supports {', '.join(options)})"
        )


# ---- permutations: new = transpose(original, perm); None is the identity -----------------------


def layout_perm(src: str, dst: str) -> tuple[int, ...] | None:
    """The perm taking a tensor in layout ``src`` to ``dst`` (same letters), None if equal."""
    if sorted(src) != sorted(dst) or len(set(src)) != len(src):
        raise PartitaError(f"cannot convert layout {src} to {dst}")
    return _norm(tuple(src.index(c) for c in dst))


def _norm(p):
    return None if p is None or p == tuple(range(len(p))) else tuple(p)


def _inverse(p):
    inv = [0] * len(p)
    for i, a in enumerate(p):
        inv[a] = i
    return tuple(inv)


def _then(p, q):
    """The perm from a value already transposed by p to the original transposed by q."""
    inv = _inverse(p) if p is not None else None
    q = q if q is not None else tuple(range(len(p)))
    return _norm(tuple(inv[a] for a in q) if inv is not None else q)


class _Converter:
    def __init__(self, mod: IRModule, layouts: dict):
        self.mod, self.layouts = mod, layouts
        self.values: dict[int, tuple[Expr, tuple | None]] = {}
        self.transposed: dict[tuple, Expr] = {}

    def visit(self, fn: Function) -> Function:
        for node in post_order(fn, enter_functions=False):
            self.values[id(node)] = self.convert(node, fn)
        return self.values[id(fn)][0]

    # -- values in a chosen layout ---------------------------------------------------------------

    def original(self, old: Expr) -> Expr:
        """The converted value of ``old`` in its original layout."""
        return self.as_perm(old, None)

    def as_perm(self, old: Expr, q) -> Expr:
        """The converted value of ``old`` transposed by ``q`` (None: original layout); constants
        are transposed directly, other values by one shared ``transpose`` call."""
        new, p = self.values[id(old)]
        r = _then(p, q) if p is not None else _norm(q)
        if r is None:
            return new
        key = (id(new), r)
        if key not in self.transposed:
            if isinstance(new, Constant):
                out = Constant(np.ascontiguousarray(np.transpose(new.data, r)), new.span)
            else:
                out = typed(get_op("transpose")(new, axes=r, span=new.span), self.mod)
            self.transposed[key] = out
        return self.transposed[key]

    # -- nodes ---------------------------------------------------------------------------------

    def convert(self, node: Expr, root: Function):
        if isinstance(node, Call) and isinstance(node.op, Op):
            return self.convert_call(node)
        if isinstance(node, Function):
            return self.convert_function(node, root), None
        if isinstance(node, Call):
            op = self.values[id(node.op)][0] if isinstance(node.op, Function) else node.op
            return self.rebuild(node, [self.original(a) for a in node.args], op), None
        if isinstance(node, Tuple):
            fields = [self.original(f) for f in node.fields]
            same = all(a is b for a, b in zip(fields, node.fields))
            return (node if same else typed(Tuple(fields, node.span), self.mod)), None
        if isinstance(node, TupleGetItem):
            value = self.original(node.tuple_value)
            if value is node.tuple_value:
                return node, None
            return typed(TupleGetItem(value, node.index, node.span), self.mod), None
        return node, None  # Var, Constant, GlobalVar

    def convert_function(self, fn: Function, root: Function) -> Function:
        if fn is not root:
            return fn if is_opaque(fn) else _Converter(self.mod, self.layouts).visit(fn)
        body = self.original(fn.body)
        if body is fn.body:
            return fn
        return typed(fn.with_body(body), self.mod)

    def convert_call(self, call: Call):
        handler = HANDLERS.get(call.op.name)
        wanted = call.op.name in self.layouts
        if handler is not None and (wanted or any(self.perm_of(a) for a in _inputs(call))):
            try:
                done = handler(self, call)
                if done is not None:
                    return typed(done[0], self.mod), _norm(done[1])
            except PartitaError:
                pass  # the op refuses the new layout: it keeps the original one
        return self.rebuild(call, [self.original(a) for a in call.args]), None

    def rebuild(self, call: Call, args, op=None) -> Expr:
        op = call.op if op is None else op
        if op is call.op and all(a is b for a, b in zip(args, call.args)):
            return call
        attrs = call.attrs if isinstance(op, Op) else None
        return typed(Call(op, args, attrs, call.span), self.mod)

    def perm_of(self, old: Expr):
        return self.values[id(old)][1]


def _inputs(call: Call):
    """The call's arguments, with the fields of a Tuple argument (concatenate) in its place."""
    for a in call.args:
        if isinstance(a, Tuple):
            yield from a.fields
        else:
            yield a


def rank(e: Expr) -> int:
    t = e.checked_type
    return t.ndim if isinstance(t, TensorType) else -1


def _with_attrs(call: Call, args, **changes) -> Call:
    attrs = {**dataclasses.asdict(call.attrs), **changes}
    return Call(call.op, args, attrs, call.span)


# ---- handlers: (converter, call) -> (new call, output perm) or None to keep the original ------


def convert_layout_op(cv: _Converter, call: Call):
    """Convolutions take the desired layout; pooling and resize follow their input's layout."""
    data_attr, kernel_attr = LAYOUT_OPS[call.op.name]
    src = getattr(call.attrs, data_attr)
    if call.op.name in cv.layouts:
        dst, kernel_dst = cv.layouts[call.op.name]
    elif kernel_attr is None and cv.perm_of(call.args[0]) is not None:
        dst, kernel_dst = "".join(src[i] for i in cv.perm_of(call.args[0])), "default"
    else:
        return None
    q = layout_perm(src, dst)
    args, changes = [cv.as_perm(call.args[0], q)], {data_attr: dst}
    if kernel_attr is not None:
        kernel_src = getattr(call.attrs, kernel_attr)
        kernel_dst = kernel_src if kernel_dst == "default" else kernel_dst
        args.append(cv.as_perm(call.args[1], layout_perm(kernel_src, kernel_dst)))
        changes[kernel_attr] = kernel_dst
    args += [cv.original(a) for a in call.args[len(args) :]]
    if all(a is b for a, b in zip(args, call.args)) and q is None:
        return None
    return _with_attrs(call, args, **changes), q


def convert_broadcast(cv: _Converter, call: Call):
    """Elementwise and broadcasting ops: every argument in the layout of the first converted
    full-rank one; lower-rank constants are padded to full rank, transposed and trimmed."""
    n = rank(call)
    p = next((cv.perm_of(a) for a in call.args if rank(a) == n and cv.perm_of(a)), None)
    if p is None:
        return None
    args = [cv.as_perm(a, p) if rank(a) == n else _broadcast_operand(cv, a, p) for a in call.args]
    if any(a is None for a in args):
        return None
    return Call(call.op, args, call.attrs, call.span), p


def _broadcast_operand(cv: _Converter, old: Expr, p):
    """A lower-rank operand of a broadcast in layout p: (C, 1, 1) against NCHW -> (1, 1, C)."""
    shape, new = old.checked_type.shape, cv.original(old)
    if all(d == 1 for d in shape):
        return new  # broadcasts the same way in any layout
    if not isinstance(new, Constant):
        return None
    data = np.transpose(new.data.reshape((1,) * (len(p) - len(shape)) + shape), p)
    while data.ndim > len(shape) and data.shape[0] == 1:
        data = data.reshape(data.shape[1:])
    return Constant(np.ascontiguousarray(data), new.span)


def convert_channel_op(cv: _Converter, call: Call):
    """Ops whose ``axis`` says where per-channel parameters apply (qnn.quantize, dequantize,
    requantize, nn.bias_add): the axis follows the layout, the parameters are unchanged."""
    data, params = call.args[0], call.args[1:]
    p = cv.perm_of(data)
    if p is None:
        return None
    args = [cv.as_perm(data, p), *(cv.original(a) for a in params)]
    if all(a.checked_type.size == 1 for a in params):
        try:  # one value for every channel: the axis does not matter, keep the attributes
            return typed(Call(call.op, args, call.attrs, call.span), cv.mod), p
        except PartitaError:
            pass
    return _with_attrs(call, args, axis=p.index(call.attrs.axis % rank(data))), p


def convert_axis_op(cv: _Converter, call: Call):
    """Ops computing along ``axis`` (softmax): the axis follows the layout."""
    data = call.args[0]
    p = cv.perm_of(data)
    if p is None:
        return None
    args = [cv.as_perm(data, p), *(cv.original(a) for a in call.args[1:])]
    return _with_attrs(call, args, axis=p.index(call.attrs.axis % rank(data))), p


def convert_qnn_binary(cv: _Converter, call: Call):
    """qnn.add / subtract / mul: both operands in one layout (as ``add``); per-channel
    parameters of a full-rank operand keep their channel through ``lhs_axis``/``rhs_axis``."""
    n = rank(call)
    p = next((cv.perm_of(a) for a in call.args[:2] if rank(a) == n and cv.perm_of(a)), None)
    if p is None:
        return None
    operands, changes = [], {}
    for side, arg, params in (
        ("lhs", call.args[0], call.args[2:4]),
        ("rhs", call.args[1], call.args[4:6]),
    ):
        per_channel = any(a.checked_type.size > 1 for a in params)
        if rank(arg) == n:
            operands.append(cv.as_perm(arg, p))
            if per_channel:
                changes[f"{side}_axis"] = p.index(getattr(call.attrs, f"{side}_axis") % n)
        elif per_channel:
            return None
        else:
            operands.append(_broadcast_operand(cv, arg, p))
    if any(a is None for a in operands):
        return None
    args = [*operands, *(cv.original(a) for a in call.args[2:])]
    return _with_attrs(call, args, **changes), p


def convert_pad(cv: _Converter, call: Call):
    """nn.pad: the (before, after) pairs follow the layout."""
    data = call.args[0]
    p = cv.perm_of(data)
    if p is None:
        return None
    pad_width = tuple(call.attrs.pad_width[a] for a in p)
    args = [cv.as_perm(data, p), cv.original(call.args[1])]
    return _with_attrs(call, args, pad_width=pad_width), p


def convert_concatenate(cv: _Converter, call: Call):
    """concatenate((a, b, ...), axis): the fields in one layout, the axis following it."""
    tup = call.args[0]
    n = rank(call)
    p = (
        next((cv.perm_of(f) for f in tup.fields if cv.perm_of(f)), None)
        if isinstance(tup, Tuple)
        else None
    )
    if p is None:
        return None
    fields = typed(Tuple([cv.as_perm(f, p) for f in tup.fields], tup.span), cv.mod)
    args = [fields, *(cv.original(a) for a in call.args[1:])]
    return _with_attrs(call, args, axis=p.index(call.attrs.axis % n)), p


def convert_reduce(cv: _Converter, call: Call):
    """sum / mean / max / qnn.mean: the reduced axes follow the layout; without keepdims the
    result keeps the order of the surviving axes."""
    data = call.args[0]
    p, n = cv.perm_of(data), rank(data)
    if p is None:
        return None
    args = [cv.as_perm(data, p), *(cv.original(a) for a in call.args[1:])]
    axis = call.attrs.axis
    if axis:
        axis = tuple(sorted(p.index(a % n) for a in axis))
    reduced = (
        set(range(n))
        if not axis
        else set(axis if not call.attrs.exclude else [i for i in range(n) if i not in axis])
    )
    if call.attrs.keepdims:
        out = p
    else:
        kept = [p[i] for i in range(n) if i not in reduced]  # original axes, in new order
        out = tuple(sorted(kept).index(a) for a in kept)
    return _with_attrs(call, args, axis=axis), out


def _generic_handler(op: Op):
    if op.name in LAYOUT_OPS:
        return convert_layout_op
    if op.name in _SPECIAL:
        return _SPECIAL[op.name]
    # An attribute naming axes or a layout makes the op layout-dependent: it needs a handler.
    names = " ".join(f.name for f in dataclasses.fields(op.attrs_type))
    if op.kind in ("elemwise", "broadcast") and not any(
        word in names for word in ("axis", "axes", "layout")
    ):
        return convert_broadcast
    return None


_SPECIAL = {
    "qnn.quantize": convert_channel_op,
    "qnn.dequantize": convert_channel_op,
    "qnn.requantize": convert_channel_op,
    "nn.bias_add": convert_channel_op,
    "nn.softmax": convert_axis_op,
    "qnn.softmax": convert_axis_op,
    "qnn.add": convert_qnn_binary,
    "qnn.subtract": convert_qnn_binary,
    "qnn.mul": convert_qnn_binary,
    "nn.pad": convert_pad,
    "concatenate": convert_concatenate,
    "qnn.concatenate": convert_concatenate,
    "sum": convert_reduce,
    "mean": convert_reduce,
    "max": convert_reduce,
    "qnn.mean": convert_reduce,
}


class _Handlers(dict):
    """Handlers by op name, resolved on first use (ops register in parallel modules)."""

    def get(self, name, default=None):
        if name not in self:
            self[name] = _generic_handler(get_op(name))
        return dict.get(self, name) or default


HANDLERS = _Handlers()


def quantized_convs_to_nhwc(mod: IRModule, name: str) -> IRModule:
    """What the NPU and LLVM backends run before partitioning: ConvertLayout of qnn.conv2d to
    NHWC / HWIO, then SimplifyExpr to cancel the transpose pairs, when ``mod`` has an NCHW
    quantized convolution; otherwise ``mod`` itself (NHWC graphs such as TFLite's)."""
    from partita.ir import iter_calls

    from .infer_type import InferType
    from .infra import Sequential
    from .simplify_expr import SimplifyExpr

    nchw = any(
        getattr(call.op, "name", None) == "qnn.conv2d" and call.attrs.data_layout != "NHWC"
        for fn in mod.functions.values()
        for call in iter_calls(fn.body)
    )
    if not nchw:
        return mod
    steps = [ConvertLayout(desired_layouts={"qnn.conv2d": ("NHWC", "HWIO")}), SimplifyExpr(),
             InferType()]
    return Sequential(steps, name=name)(mod)
