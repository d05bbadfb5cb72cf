"""QDQ -> QNN: float ops between qnn.dequantize and qnn.quantize become qnn ops (pattern rewrites).

    from partita.frontends.qdq import qdq_to_qnn
    mod = qdq_to_qnn(mod, semantics="onnx")        # -> IRModule

Input: a module whose quantized tensors travel as ``qnn.quantize`` (``semantics`` as given) ->
``qnn.dequantize`` pairs around float ops, as ONNX's QuantizeLinear/DequantizeLinear or PyTorch's
quantize_per_tensor/dequantize import. Weights must be int8/uint8 Constants under a
``qnn.dequantize`` (per-channel along the output-channel axis allowed); biases either
``qnn.dequantize(int32 constant, input_scale * weight_scale, 0)`` or float constants, which are
quantized to int32 as round_half_even(float32(b) / float32(s_x * s_w)).

Rules (each a row of ``qdq_rules(semantics)``; the root is always the quantize):
    quantize([clip|relu](bias_add?(nn.conv2d(dq(x), dq(W)), b)))  -> [clip](qnn.requantize(
        bias_add?(qnn.conv2d(x, W), b_int32)))      (requantize scale: float32 s_x * s_w)
    quantize([clip|relu](add?(nn.dense(dq(x), [transpose](dq(W))), b)))  -> qnn.dense likewise
    quantize(add|multiply|subtract(dq(a), dq(b)))          -> qnn.add / qnn.mul / qnn.subtract
    quantize(nn.avg_pool2d(dq(x)))                           -> qnn.avg_pool2d
    quantize(nn.global_avg_pool2d(dq(x)) | mean(dq(x)))      -> qnn.mean
    quantize(concatenate((dq(a), dq(b), ...)))               -> qnn.concatenate
    quantize(sigmoid | tanh | nn.leaky_relu | nn.hardswish (dq(x)))  -> the qnn LUT op
    quantize(max_pool, reshape, transpose, squeeze, expand_dims, strided_slice, nn.pad, nearest
             resize, nn.relu, clip (dq(x)))  with equal in/out parameters -> the op on integers
    quantize(dq(x)) with equal parameters and dtype        -> x
Groups that fit none of them stay dequantize -> float op -> quantize (still correct: it is the
unfused computation). The qnn ops get ``semantics`` (rules whose qnn op lacks it are left out);
with "onnx" they compute what ONNX Runtime's fused QDQ kernels compute (docs/onnx.md).
"""

from __future__ import annotations

import numpy as np
from partita.patterns import RewriteTable, is_op, is_tuple, wildcard

from partita.ir import Call, Constant, Expr, Function, IRModule, Tuple, TupleGetItem
from partita.ir.visitor import post_order
from partita.ops import get_op
from partita.passes.infer_type import infer_type

from .qdq_parts import (  # noqa: F401  (quantize_value: re-exported)
    QTYPES,
    _act,
    _activation,
    _attrs,
    _call,
    _dq,
    _has_semantics,
    _params,
    _qtype,
    _quantized,
    _s,
    _scalar,
    _unary_ok,
    quantize_value,
)

__all__ = ["qdq_rules", "qdq_to_qnn", "quantize_value", "unshare_dequantize"]


def qdq_to_qnn(mod: IRModule, semantics: str = "onnx", trace=None) -> IRModule:
    """Rewrite every QDQ group of ``mod`` that fits a qnn op (see the module docstring); returns
    a new, typed module. ``trace`` is passed to ``partita.patterns.rewrite``."""
    mod = unshare_dequantize(mod)
    out = qdq_rules(semantics)(mod, trace=trace)
    return IRModule(dict(out.functions), attrs=mod.attrs)


def qdq_rules(semantics: str = "onnx") -> RewriteTable:
    """The QDQ -> QNN rewrite table for qnn.quantize ops of ``semantics``."""
    return RewriteTable(
        _compute_rules(semantics) + _integer_rules(semantics),
        require_type=True,
        name=f"qdq_to_qnn[{semantics}]",
    )


def unshare_dequantize(mod: IRModule) -> IRModule:
    """Give each consumer of a qnn.dequantize its own copy, so that a group's dequantize is never
    also used outside the group (exporters share one DequantizeLinear between consumers)."""
    dq = get_op("qnn.dequantize")
    out = {}
    for name, fn in mod.items():
        memo: dict[int, Expr] = {}
        for node in post_order(fn.body, enter_functions=False):
            memo[id(node)] = _copy_args(node, memo, dq)
        body = _fresh(fn.body, memo, dq)
        new = fn.with_body(body)
        infer_type(new)
        out[name] = new
    return IRModule(out, attrs=mod.attrs)


def _fresh(a: Expr, memo: dict, dq) -> Expr:
    new = memo.get(id(a), a)
    if type(new) is Call and new.op is dq:
        return Call(dq, new.args, new.attrs, new.span)
    return new


def _copy_args(node: Expr, memo: dict, dq) -> Expr:
    t = type(node)
    if t is Call and not isinstance(node.op, Function):
        args = [_fresh(a, memo, dq) for a in node.args]
        if all(a is b for a, b in zip(args, node.args)):
            return node
        return Call(node.op, args, node.attrs, node.span)
    if t is Tuple:
        fields = [_fresh(f, memo, dq) for f in node.fields]
        return (
            node if all(a is b for a, b in zip(fields, node.fields)) else Tuple(fields, node.span)
        )
    if t is TupleGetItem:
        value = memo.get(id(node.tuple_value), node.tuple_value)
        return node if value is node.tuple_value else TupleGetItem(value, node.index, node.span)
    return node


# ---- rules that compute: conv, dense, binary, pooling, concatenate, LUT activations ------------


def _int32_bias(b: Expr, in_scale: np.ndarray) -> Constant | None:
    """The int32 bias of an integer conv/dense: a dequantized int32 constant whose scale is
    input_scale * weight_scale (zero point 0), or a float constant quantized with that scale."""
    if type(b) is Call and b.op.name == "qnn.dequantize":
        data, bs, bz = b.args
        if not (
            isinstance(data, Constant)
            and data.data.dtype == np.int32
            and isinstance(bs, Constant)
            and isinstance(bz, Constant)
            and not np.any(bz.data)
        ):
            return None
        want = np.broadcast_to(in_scale, data.data.shape)
        got = np.broadcast_to(bs.data.astype(np.float32), data.data.shape)
        return data if np.allclose(got, want, rtol=1e-6, atol=0) else None
    if isinstance(b, Constant) and b.data.dtype == np.float32:
        q = np.rint(b.data / np.broadcast_to(in_scale, b.data.shape).astype(np.float32))
        if np.all(np.abs(q) < 2**31 - 1):
            return Constant(q.astype(np.int32), b.span)
    return None


def _matmul_out(semantics, q, ys, yz, acc, in_scale, bias, b, act, axis):
    """[+ int32 bias] -> qnn.requantize(in_scale -> ys, yz) -> [activation clip]."""
    if bias is not None:
        b = _int32_bias(b, in_scale)
        if b is None or b.data.ndim != 1:
            return None
        acc = _call("nn.bias_add", [acc, b], bias.span, axis=axis)
    s_in = Constant(in_scale if in_scale.size > 1 else in_scale.reshape(()), q.span)
    out = _call(
        "qnn.requantize",
        [acc, s_in, Constant(np.int32(0)), _s(ys), _s(yz)],
        q.span,
        axis=axis,
        out_dtype=q.attrs.out_dtype,
        semantics=semantics,
    )
    return _activation(out, act, ys, yz, q.attrs.out_dtype, act.span if act else q.span)


def _operand_ok(x, x_s, x_z, w, w_s, ys, yz) -> bool:
    return (
        _scalar(x_s, x_z, ys, yz)
        and isinstance(w, Constant)
        and _qtype(x, w)
        and isinstance(w_s, Constant)
        and x_s.data.dtype == np.float32
    )


def _conv_rule(semantics):
    conv = is_op("nn.conv2d")(_dq("x"), _dq("w")).named("conv")
    body = conv.optional(lambda c: (is_op("nn.bias_add")(c, wildcard("b"))).named("bias"))

    def conv_to_qnn(q, ys, yz, conv, x, x_s, x_z, w, w_s, w_z, w_dq, bias=None, b=None, act=None):
        """quantize(act?(bias_add?(nn.conv2d(dq(x), dq(W))))) -> act?(requantize(bias_add?(
        qnn.conv2d(x, W))))"""
        if not _operand_ok(x, x_s, x_z, w, w_s, ys, yz):
            return None
        o_axis = conv.attrs.kernel_layout.index("O")
        if w_s.data.size > 1 and w_dq.attrs.axis % 4 != o_axis:
            return None
        acc = _call(
            "qnn.conv2d",
            [x, w, _s(x_z), w_z, _s(x_s), w_s],
            conv.span,
            **_attrs(conv),
            out_dtype="int32",
        )
        in_scale = (x_s.data.astype(np.float32) * w_s.data.astype(np.float32)).reshape(-1)
        axis = conv.attrs.data_layout.index("C")
        if bias is not None and bias.attrs.axis % 4 != axis:
            return None
        return _matmul_out(semantics, q, ys, yz, acc, in_scale, bias, b, act, axis)

    return _quantized(_act(body), semantics), conv_to_qnn


def _dense_rule(semantics):
    w = _dq("w") | is_op("transpose")(_dq("w")).named("wt")
    dense = is_op("nn.dense")(_dq("x"), w).named("dense")
    body = dense.optional(
        lambda c: (is_op("nn.bias_add")(c, wildcard("b")) | is_op("add")(c, wildcard("b"))).named(
            "bias"
        )
    )

    def dense_to_qnn(
        q, ys, yz, dense, x, x_s, x_z, w, w_s, w_z, w_dq, wt=None, bias=None, b=None, act=None
    ):
        """quantize(act?(add?(nn.dense(dq(x), [transpose](dq(W)))))) -> act?(requantize(
        add?(qnn.dense(x, W))))"""
        if not _operand_ok(x, x_s, x_z, w, w_s, ys, yz) or w.data.ndim != 2:
            return None
        axis = w_dq.attrs.axis % 2 if w_s.data.size > 1 else None
        data = w.data
        if wt is not None:
            data, axis = data.T, (None if axis is None else 1 - axis)
        if axis not in (None, 0):
            return None
        acc = _call(
            "qnn.dense",
            [x, Constant(np.ascontiguousarray(data), w.span), _s(x_z), w_z, _s(x_s), w_s],
            dense.span,
            out_dtype="int32",
        )
        in_scale = (x_s.data.astype(np.float32) * w_s.data.astype(np.float32)).reshape(-1)
        rank = len(dense.checked_type.shape)
        return _matmul_out(semantics, q, ys, yz, acc, in_scale, bias, b, act, rank - 1)

    return _quantized(_act(body), semantics), dense_to_qnn


BINARY = {"add": "qnn.add", "multiply": "qnn.mul", "subtract": "qnn.subtract"}
UNARY = {
    "sigmoid": "qnn.sigmoid",
    "tanh": "qnn.tanh",
    "nn.leaky_relu": "qnn.leaky_relu",
    "nn.hardswish": "qnn.hardswish",
}


def _binary_rules(semantics):
    rules = []
    for name, qname in BINARY.items():
        if not _has_semantics(qname, semantics):
            continue

        def binary_to_qnn(q, ys, yz, op, a, a_s, a_z, b, b_s, b_z, qname=qname):
            """quantize(add|multiply|subtract(dq(a), dq(b))) -> qnn.add|mul|subtract(a, b)"""
            dtype = q.attrs.out_dtype
            if not (
                _scalar(a_s, a_z, b_s, b_z, ys, yz)
                and _qtype(a, b)
                and a.checked_type.dtype == dtype == b.checked_type.dtype
            ):
                return None
            return _call(
                qname,
                [a, b, _s(a_s), _s(a_z), _s(b_s), _s(b_z), _s(ys), _s(yz)],
                op.span,
                semantics=semantics,
            )

        pattern = is_op(name)(_dq("a"), _dq("b")).named("op")
        rules.append((_quantized(pattern, semantics), binary_to_qnn, f"{name}_to_qnn"))
    return rules


def _unary_rules(semantics):
    rules = []
    for name, qname in UNARY.items():
        if not _has_semantics(qname, semantics):
            continue

        def unary_to_qnn(q, ys, yz, op, x, x_s, x_z, qname=qname):
            """quantize(sigmoid|tanh|leaky_relu|hardswish(dq(x))) -> the qnn LUT op"""
            if not _unary_ok(q, x, x_s, x_z, ys, yz):
                return None
            attrs = _attrs(op, drop=())
            return _call(
                qname, [x, *_params(x_s, x_z, ys, yz)], op.span, **attrs, semantics=semantics
            )

        pattern = is_op(name)(_dq("x")).named("op")
        rules.append((_quantized(pattern, semantics), unary_to_qnn, f"{name}_to_qnn"))
    return rules


def _pool_rules(semantics):
    def avg_pool_to_qnn(q, ys, yz, op, x, x_s, x_z):
        """quantize(nn.avg_pool2d(dq(x))) -> qnn.avg_pool2d(x)"""
        if not _unary_ok(q, x, x_s, x_z, ys, yz):
            return None
        return _call(
            "qnn.avg_pool2d",
            [x, *_params(x_s, x_z, ys, yz)],
            op.span,
            **_attrs(op),
            semantics=semantics,
        )

    def global_pool_to_qnn(q, ys, yz, op, x, x_s, x_z):
        """quantize(nn.global_avg_pool2d(dq(x))) -> qnn.mean(x, spatial axes, keepdims)"""
        if not _unary_ok(q, x, x_s, x_z, ys, yz):
            return None
        axes = (2, 3) if op.attrs.layout == "NCHW" else (1, 2)
        return _call(
            "qnn.mean",
            [x, *_params(x_s, x_z, ys, yz)],
            op.span,
            axis=axes,
            keepdims=True,
            semantics=semantics,
        )

    def mean_to_qnn(q, ys, yz, op, x, x_s, x_z):
        """quantize(mean(dq(x))) -> qnn.mean(x)"""
        if not _unary_ok(q, x, x_s, x_z, ys, yz):
            return None
        return _call(
            "qnn.mean", [x, *_params(x_s, x_z, ys, yz)], op.span, **_attrs(op), semantics=semantics
        )

    rules = [
        (_quantized(is_op("nn.avg_pool2d")(_dq("x")).named("op"), semantics), avg_pool_to_qnn),
        (
            _quantized(is_op("nn.global_avg_pool2d")(_dq("x")).named("op"), semantics),
            global_pool_to_qnn,
        ),
        (_quantized(is_op("mean")(_dq("x")).named("op"), semantics), mean_to_qnn),
    ]
    needed = {"avg_pool_to_qnn": "qnn.avg_pool2d"}
    return [r for r in rules if _has_semantics(needed.get(r[1].__name__, "qnn.mean"), semantics)]


def _concat_rule(semantics):
    def concat_to_qnn(q, ys, yz, op, tup):
        """quantize(concatenate((dq(a), dq(b), ...))) -> qnn.concatenate((a, b, ...))"""
        dq = get_op("qnn.dequantize")
        fields = tup.fields
        if not fields or not all(type(f) is Call and f.op is dq for f in fields):
            return None
        if not all(_unary_ok(q, f.args[0], f.args[1], f.args[2], ys, yz) for f in fields):
            return None
        data = Tuple([f.args[0] for f in fields], tup.span)
        scales = Tuple([_s(f.args[1]) for f in fields], tup.span)
        zps = Tuple([_s(f.args[2]) for f in fields], tup.span)
        return _call(
            "qnn.concatenate",
            [data, scales, zps, _s(ys), _s(yz)],
            op.span,
            axis=op.attrs.axis,
            semantics=semantics,
        )

    pattern = is_op("concatenate")(is_tuple().named("tup")).named("op")
    if not _has_semantics("qnn.concatenate", semantics):
        return []
    return [(_quantized(pattern, semantics), concat_to_qnn)]


def _compute_rules(semantics):
    return (
        [_conv_rule(semantics), _dense_rule(semantics)]
        + _binary_rules(semantics)
        + _unary_rules(semantics)
        + _pool_rules(semantics)
        + _concat_rule(semantics)
    )


# ---- rules that move integers: exact when input and output parameters are equal ---------------

MOVE_OPS = (
    "nn.max_pool2d",
    "reshape",
    "transpose",
    "squeeze",
    "expand_dims",
    "strided_slice",
    "image.resize2d",
    "nn.relu",
    "clip",
)


def _same_params(q, x, x_s, x_z, ys, yz) -> bool:
    return (
        _unary_ok(q, x, x_s, x_z, ys, yz)
        and np.float32(x_s.data.reshape(-1)[0]) == np.float32(ys.data.reshape(-1)[0])
        and int(x_z.data.reshape(-1)[0]) == int(yz.data.reshape(-1)[0])
    )


def _move_to_int(q, ys, yz, op, x, x_s, x_z):
    """quantize(op(dq(x))) -> op(x) for max pool, reshapes, nearest resize, relu and clip, when
    x and the result share scale, zero point and dtype (the float detour is exact)."""
    if not _same_params(q, x, x_s, x_z, ys, yz):
        return None
    name, dtype = op.op.name, q.attrs.out_dtype
    if name == "image.resize2d" and op.attrs.method != "nearest_neighbor":
        return None
    if name in ("nn.relu", "clip"):
        return _activation(x, op, ys, yz, dtype, op.span)
    return _call(name, [x], op.span, **_attrs(op, drop=()))


def _pad_to_int(q, ys, yz, op, x, x_s, x_z, value):
    """quantize(nn.pad(dq(x), v)) -> nn.pad(x, quantize(v)) with equal parameters, when v
    survives the round trip exactly."""
    if not _same_params(q, x, x_s, x_z, ys, yz) or not isinstance(value, Constant):
        return None
    dtype = q.attrs.out_dtype
    qv = quantize_value(float(value.data.reshape(-1)[0]), ys, yz, dtype)
    return _call(
        "nn.pad", [x, Constant(np.asarray(qv, dtype), value.span)], op.span, **_attrs(op, drop=())
    )


def _drop_qdq(q, ys, yz, x, x_s, x_z):
    """quantize(dq(x)) -> x with equal parameters and dtype."""
    return x if _same_params(q, x, x_s, x_z, ys, yz) else None


def _integer_rules(semantics):
    move = is_op(MOVE_OPS[0])
    for name in MOVE_OPS[1:]:
        move = move | is_op(name)
    return [
        (_quantized(move(_dq("x")).named("op"), semantics), _move_to_int),
        (
            _quantized(is_op("nn.pad")(_dq("x"), wildcard("value")).named("op"), semantics),
            _pad_to_int,
        ),
        (_quantized(_dq("x"), semantics), _drop_qdq),
    ]
