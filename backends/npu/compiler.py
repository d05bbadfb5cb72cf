"""Compile a partitioned function (composites named ``npu.*``) into an NPU Program.

Each composite becomes one operation: convolutions and FC layers get their weights in the MAC
array's layout (OHWI; depthwise as one HxW filter per channel), the int32 bias, and the output
stage's per-channel fixed-point multipliers and shifts, computed once here as TFLite's
QuantizeMultiplier does; activation functions become 256-entry tables evaluated on every input
value. Then feature maps are placed in SRAM (first fit, by liveness; what does not fit spills to
the configured off-chip memory) and operations whose maps exceed SRAM are split into stripes of
output rows.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from partita.backends.registry import BackendError

from partita.ir import Call, Constant, Function, Tuple, TupleGetItem, Var, post_order, substitute
from partita.ir.graph import dataflow_order
from partita.ops import get_op
from partita.ops.emulation.tflite_fixedpoint import quantize_multiplier_array
from partita.passes.infer_type import infer_type

from .config import NPUConfig
from .lstm_ops import lower as lower_lstm
from .memory import plan_memory
from .program import NPUOp, Program, TensorDesc
from .vela_access import unfused_table
from .vela_ops import lower_resize_bilinear, table_domain

INT_RANGE = {
    "int8": (-128, 127),
    "uint8": (0, 255),
    "int16": (-32768, 32767),
    "int32": (-(2**31), 2**31 - 1),
}


def _calls(fn: Function) -> dict[str, Call]:
    """The composite body's calls by op name (each op appears at most once in a pattern)."""
    return {c.op.name: c for c in post_order(fn.body) if isinstance(c, Call)}


def _const(expr) -> np.ndarray:
    if not isinstance(expr, Constant):
        raise BackendError(f"npu: expected a constant, got {expr.short()}")
    return np.asarray(expr.data)


def _bias(bias_add: Call) -> np.ndarray:
    """The int32 bias; a 16x8 op's int64 bias stays int64 (TFLite's may exceed int32)."""
    b = _const(bias_add.args[1])
    return b.astype(np.int64 if b.dtype == np.int64 else np.int32)


def _output_stage(calls: dict, out_dtype: str) -> tuple[dict, dict]:
    """Requantize (+ clip) as the output stage's parameters and per-channel arrays."""
    rq = calls["qnn.requantize"]
    in_scale, rq_zp = _const(rq.args[1]), _const(rq.args[2])
    out_scale, out_zp = _const(rq.args[3]), _const(rq.args[4])
    real = in_scale.astype(np.float64) / out_scale.astype(np.float64)
    lo, hi = INT_RANGE[out_dtype]
    if "clip" in calls:
        lo = max(lo, int(np.ceil(calls["clip"].attrs.a_min)))
        hi = min(hi, int(np.floor(calls["clip"].attrs.a_max)))
    params = {"rounding": rq.attrs.semantics, "act_min": lo, "act_max": hi, "out_dtype": out_dtype}
    if "clip" in calls:  # a fused activation, even where its bounds are the type's whole range
        params["activation"] = "clip"  # (the cycle model: vela_activation.py)
    if rq.args[0].checked_type.dtype == "int64":  # 16x8: int64 accumulators, TFLite's int64 MBQM
        params["acc_dtype"] = "int64"
    arrays = {
        "out_zp": np.atleast_1d(out_zp).astype(np.int32),
        "rq_zp": np.atleast_1d(rq_zp).astype(np.int32),
    }
    if rq.attrs.semantics == "tflite_double":
        arrays["scale"] = np.atleast_1d(real).astype(np.float64)
    elif rq.attrs.semantics == "onnx":  # MLAS: float32 scale, float32 product, half to even
        scale = in_scale.astype(np.float32) / out_scale.astype(np.float32)
        arrays["scale"] = np.atleast_1d(scale).astype(np.float32)
    else:
        q, shift = quantize_multiplier_array(np.atleast_1d(real))
        arrays["multiplier"] = np.asarray(q, np.int32)
        arrays["shift"] = np.asarray(shift, np.int32)
    return params, arrays


def _conv(fn: Function, out_dtype: str):
    calls = _calls(fn)
    conv = calls["qnn.conv2d"]
    layout = conv.attrs.kernel_layout
    weight = np.transpose(_const(conv.args[1]), [layout.index(c) for c in "OHWI"])
    params, arrays = _output_stage(calls, out_dtype)
    depthwise = conv.attrs.groups > 1
    if depthwise:  # (C, kh, kw, 1) -> (C, kh, kw)
        weight = weight[..., 0] if weight.shape[-1] == 1 else weight[:, :, :, 0]
    pad = (0, 0, 0, 0)
    pad_value = 0
    if "nn.pad" in calls:
        widths = calls["nn.pad"].attrs.pad_width
        pad = (widths[1][0], widths[2][0], widths[1][1], widths[2][1])
        pad_value = int(_const(calls["nn.pad"].args[1]))
    params.update(
        strides=list(conv.attrs.strides),
        dilation=list(conv.attrs.dilation),
        padding=list(conv.attrs.padding),
        explicit_pad=list(pad),
        pad_value=pad_value,
        in_zp=int(_const(conv.args[2])),
    )
    arrays.update(
        weights=weight.astype(weight.dtype, copy=True),
        w_zp=np.atleast_1d(_const(conv.args[3])).astype(np.int32),
    )
    if "nn.bias_add" in calls:
        arrays["bias"] = _bias(calls["nn.bias_add"])
    return ("DWCONV" if depthwise else "CONV"), params, arrays


def _fc(fn: Function, out_dtype: str):
    calls = _calls(fn)
    dense = calls["qnn.dense"]
    params, arrays = _output_stage(calls, out_dtype)
    params["in_zp"] = int(_const(dense.args[2]))
    arrays.update(
        weights=_const(dense.args[1]).copy(),
        w_zp=np.atleast_1d(_const(dense.args[3])).astype(np.int32),
    )
    if "nn.bias_add" in calls:
        arrays["bias"] = _bias(calls["nn.bias_add"])
    return "FC", params, arrays


def _lut(fn: Function, in_dtype: str, out_dtype: str):
    """Evaluate the composite (one op, or a chain of elementwise ops of one value) on all 256
    input values: the table the unit indexes."""
    calls = [c for c in post_order(fn.body) if isinstance(c, Call)]
    lo, hi = INT_RANGE[in_dtype]
    values: dict[int, np.ndarray] = {id(fn.params[0]): np.arange(lo, hi + 1, dtype=in_dtype)}

    def value(arg):
        return np.asarray(arg.data) if isinstance(arg, Constant) else values[id(arg)]

    for call in calls:
        args = table_domain(call, [value(a) for a in call.args])
        values[id(call)] = np.asarray(call.op.impl(*args, call.attrs))
    table = values[id(fn.body)].astype(out_dtype)
    name = "+".join(c.op.name for c in calls)
    params = {"op": name, "in_dtype": in_dtype, "out_dtype": out_dtype}
    if name == "qnn.leaky_relu" and in_dtype == "int16":  # Vela's LeakyRelu, or MULs and MAXIMUM
        q = [float(np.asarray(a.data)) for a in calls[0].args[1:]]
        params["rescales"] = q[:2] != q[2:]
    if name == "qnn.requantize":  # its zero points: whether regor folds it (vela_quantize.py)
        params["zero_points"] = [int(np.asarray(calls[0].args[i].data)) for i in (2, 4)]
    return "LUT", params, {"table": table}


def _unit(fn: Function, out_dtype: str):
    """The unit's operation: the QNN op, its attributes, constant operands, activation clamp."""
    calls = [c for c in post_order(fn.body) if isinstance(c, Call)]
    main = calls[0]
    lo, hi = INT_RANGE[out_dtype]
    if len(calls) > 1 and calls[-1].op.name == "clip":
        lo = max(lo, int(np.ceil(calls[-1].attrs.a_min)))
        hi = min(hi, int(np.floor(calls[-1].attrs.a_max)))
    position = {id(p): i for i, p in enumerate(fn.params)}

    def ref(arg) -> str:
        if id(arg) not in position:
            raise BackendError(f"npu: {main.op.name} reads {arg.short()}, not a partition input")
        return f"t{position[id(arg)]}"

    operands, arrays = [], {}
    for arg in main.args:
        if isinstance(arg, Constant):
            arrays[f"c{len(arrays)}"] = np.asarray(arg.data)
            operands.append(f"c{len(arrays) - 1}")
        elif isinstance(arg, Tuple):
            fields = []
            for f in arg.fields:
                if isinstance(f, Constant):  # qnn.concatenate's per-input scales and zero points
                    arrays[f"c{len(arrays)}"] = np.asarray(f.data)
                    fields.append(f"c{len(arrays) - 1}")
                else:
                    fields.append(ref(f))
            operands.append(fields)
        else:
            operands.append(ref(arg))
    attrs = (
        {f.name: _plain(getattr(main.attrs, f.name)) for f in dataclasses.fields(main.attrs)}
        if main.attrs is not None
        else {}
    )
    params = {
        "op": main.op.name,
        "attrs": attrs,
        "operands": operands,
        "act_min": lo,
        "act_max": hi,
        "out_dtype": out_dtype,
    }
    return "UNIT", params, arrays


def _plain(value):
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def unit_attrs(params: dict):
    """The QNN op and its attributes object back from a UNIT operation's parameters."""
    op = get_op(params["op"])
    attrs = {
        k: tuple(_tuple(v) for v in x)
        if isinstance(x, list) and x and isinstance(x[0], list)
        else (tuple(x) if isinstance(x, list) else x)
        for k, x in params["attrs"].items()
    }
    return op, op.make_attrs(attrs)


def _tuple(v):
    return tuple(v) if isinstance(v, list) else v


def _lower(fn: Function, in_dtype: str, out_dtype: str):
    name = str(fn.attrs.get("Composite", ""))
    if name == "npu.conv2d":
        return _conv(fn, out_dtype)
    if name in ("npu.dense", "npu.lstm_dense"):  # lstm_dense: the LSTM's int32 recurrent FC
        return _fc(fn, out_dtype)
    if name in ("npu.lut", "npu.lut_chain"):
        return _lut(fn, in_dtype, out_dtype)
    if name == "npu.resize_bilinear":
        return lower_resize_bilinear(fn, out_dtype)
    if name.startswith("npu.lstm_"):
        return lower_lstm(fn, out_dtype)
    if name.startswith("npu."):
        return _unit(fn, out_dtype)
    raise BackendError(f"npu: cannot compile composite {name!r}")


def compile_function(function: Function, config: NPUConfig) -> Program:
    """The Program of one partitioned function."""
    tensors: list[TensorDesc] = []
    ids: dict[int, list[int]] = {}

    def new(expr) -> int:
        ty = expr.checked_type
        tensors.append(TensorDesc(tuple(int(d) for d in ty.shape), ty.dtype))
        return len(tensors) - 1

    for p in function.params:
        ids[id(p)] = [new(p)]
    ops: list[NPUOp] = []
    for node in dataflow_order(function.body):  # composites' bodies not entered
        if isinstance(node, Call) and isinstance(node.op, Function):
            fn = _bind_constants(node.op, node.args)
            ins = [t for a in node.args if not isinstance(a, Constant) for t in _ids_of(a, ids)]
            out = new(node)
            in_dtype = tensors[ins[0]].dtype if ins else node.checked_type.dtype
            kind, params, arrays = _lower(fn, in_dtype, node.checked_type.dtype)
            ops.append(NPUOp(kind, _name(node.op, node), ins, out, params, arrays))
            ids[id(node)] = [out]
        elif isinstance(node, Tuple):
            ids[id(node)] = [t for f in node.fields for t in _ids_of(f, ids)]
        elif isinstance(node, TupleGetItem):
            ids[id(node)] = [_ids_of(node.tuple_value, ids)[node.index]]
        elif isinstance(node, Call):  # a single op the partitioner left bare
            ins = [t for a in node.args if not isinstance(a, Constant) for t in _ids_of(a, ids)]
            out = new(node)
            fn = _as_composite(node)
            kind, params, arrays = _lower(fn, tensors[ins[0]].dtype, node.checked_type.dtype)
            ops.append(NPUOp(kind, _name(fn, node), ins, out, params, arrays))
            ids[id(node)] = [out]
    inputs = [ids[id(p)][0] for p in function.params]
    outputs = _ids_of(function.body, ids)
    ops = read_slices_at_offsets(fuse_activations(ops, outputs), outputs, tensors)
    program = Program(config.name, tensors, ops, inputs, outputs)
    plan_memory(program, config)
    return program


def fuse_activations(ops: list[NPUOp], outputs: list[int]) -> list[NPUOp]:
    """A LUT op whose input is a MAC op's output used nowhere else becomes that op's activation
    (its table applied after the output stage), as Vela fuses activations into the producing
    convolution: the intermediate map never goes to SRAM.

        CONV(x) -> t;  LUT(t) -> y      =>      CONV(x) -> y  with arrays["table"]
    """
    uses: dict[int, int] = {}
    for op in ops:
        for t in op.inputs:
            uses[t] = uses.get(t, 0) + 1
    producer = {op.output: op for op in ops}
    fused: list[NPUOp] = []
    for op in ops:
        mac = producer.get(op.inputs[0]) if op.kind == "LUT" else None
        if (
            mac is not None
            and not unfused_table(op)
            and mac.kind in ("CONV", "DWCONV", "FC")
            and "table" not in mac.arrays
            and uses[op.inputs[0]] == 1
            and op.inputs[0] not in outputs
        ):
            mac.arrays["table"], mac.output = op.arrays["table"], op.output
            mac.params["table_op"] = op.params.get("op")  # read by the cycle model only
            mac.name = f"{mac.name} + {op.name}"
            continue
        fused.append(op)
    return fused


VIEW_ALIGN = 16  # bytes: a view's start along the innermost axis (the NPU's 16-byte bricks)


def _box(op: NPUOp, shape) -> tuple[list[int], list[int]] | None:
    """A unit-stride slice's [begin, end) box over the whole rank, or None."""
    a = op.params["attrs"]
    begin, end = a.get("begin"), a.get("end")
    if (
        a.get("axes")
        or a.get("slice_mode", "end") != "end"
        or any(s != 1 for s in a.get("strides") or [])
    ):
        return None
    if not (
        isinstance(begin, list) and isinstance(end, list) and len(begin) == len(end) == len(shape)
    ):
        return None
    if not all(0 <= b < e <= d for b, e, d in zip(begin, end, shape)):
        return None
    return [int(b) for b in begin], [int(e) for e in end]


def read_slices_at_offsets(ops: list[NPUOp], outputs: list[int], tensors) -> list[NPUOp]:
    """A unit-stride slice whose output is not a region output is not an operation: its readers
    read its input at an offset (``params["views"]``: per input None or [begin, end], the box of
    the source they read), as Vela reads slices. The box must start on a 16-byte boundary along
    the innermost axis; slices of slices compose."""
    alias: dict[int, tuple[int, list[int], list[int]]] = {}
    kept: list[NPUOp] = []
    for op in ops:
        if any(t in alias for t in op.inputs):
            views = list(op.params.get("views") or [None] * len(op.inputs))
            for i, t in enumerate(op.inputs):
                if t in alias:
                    op.inputs[i], begin, end = alias[t]
                    views[i] = [begin, end]
            op.params["views"] = views
        if (
            op.kind == "UNIT"
            and op.params.get("op") == "strided_slice"
            and op.output not in outputs
        ):
            src = op.inputs[0]
            view = (op.params.get("views") or [None])[0]
            shape = [e - b for b, e in zip(*view)] if view else list(tensors[src].shape)
            box = _box(op, shape)
            if box is not None and view is not None:  # a slice of a view: offsets add up
                box = tuple([v + x for v, x in zip(view[0], side)] for side in box)
            item = np.dtype(tensors[src].dtype).itemsize
            if box is not None and (box[0][-1] * item) % VIEW_ALIGN == 0:
                alias[op.output] = (src, box[0], box[1])
                continue
        kept.append(op)
    return kept


def _bind_constants(fn: Function, args) -> Function:
    """A composite with its constant arguments folded in (e.g. a scalar operand of qnn.mul)."""
    consts = {p: a for p, a in zip(fn.params, args) if isinstance(a, Constant)}
    if not consts:
        return fn
    body = substitute(fn.body, consts)
    kept = [p for p in fn.params if p not in consts]
    out = Function(kept, body, fn.ret_type, fn.attrs, fn.span)
    infer_type(out)
    return out


def _name(fn: Function, node: Call) -> str:
    name = str(fn.attrs["Composite"])
    if node.span is not None and node.span.op_type:
        name += f" ({node.span.op_type} #{node.span.index})"
    return name


LUT_NAMES = (
    "clip",
    "qnn.sigmoid",
    "qnn.tanh",
    "qnn.hardswish",
    "qnn.leaky_relu",
    "qnn.gelu",
    "qnn.requantize",
    "qnn.exp",
    "qnn.log",
    "qnn.rsqrt",
    "qnn.elu",
    "negative",
)


def _as_composite(call: Call) -> Function:
    """A bare op as a one-op composite over fresh parameters (its feature-map operands)."""
    params, args = [], []
    for a in call.args:
        if isinstance(a, Constant):
            args.append(a)
        elif isinstance(a, Tuple):
            fields = [Var(f"p{len(params) + i}", f.checked_type) for i, f in enumerate(a.fields)]
            params += fields
            args.append(Tuple(fields))
        else:
            params.append(Var(f"p{len(params)}", a.checked_type))
            args.append(params[-1])
    kind = "npu.lut" if call.op.name in LUT_NAMES else f"npu.{call.op.name}"
    fn = Function(params, Call(call.op, args, call.attrs, call.span), attrs={"Composite": kind})
    infer_type(fn)
    return fn


def _ids_of(expr, ids) -> list[int]:
    if isinstance(expr, (Var, Call, Tuple, TupleGetItem)) and id(expr) in ids:
        return ids[id(expr)]
    raise BackendError(f"npu: operand {expr.short()} is not a feature map of the partition")
