"""The quantization of a model's inputs and outputs, read from its graph: what ``real = scale *
(q - zero_point)`` a user needs to make an input file (``partita info``, saved with each Port).

An input's scale and zero point are those of the first quantized op that reads it (through ops
that keep them: reshapes, transposes, pads, clips, max pooling, slices); an output's, those of
the quantized op that produces it. A float port, or one only non-quantized ops touch, has none.
"""

from __future__ import annotations

import numpy as np

from partita.ir import Call, Constant, Op, Tuple, post_order

# ops that keep a quantized tensor's scale and zero point (they move or clip its values)
PASS_THROUGH = {"reshape", "transpose", "nn.pad", "layout_transform", "squeeze", "expand_dims",
                "nn.batch_flatten", "copy", "clip", "nn.max_pool2d", "strided_slice"}
# an argument's name -> the names of its scale and zero point among the op's inputs
ARG_QUANT = {
    "data": ("input_scale", "input_zero_point"),
    "lhs": ("lhs_scale", "lhs_zero_point"),
    "rhs": ("rhs_scale", "rhs_zero_point"),
    "x": ("x_scale", "x_zero_point"),
    "y": ("y_scale", "y_zero_point"),
}


def _value(node):
    if not isinstance(node, Constant):
        return None
    value = np.asarray(node.data)
    return value.item() if value.size == 1 else value.reshape(-1).tolist()


def _quant_of_arg(call, index: int):
    names = call.op.inputs
    if index >= len(names) or names[index] not in ARG_QUANT:
        return None
    scale, zp = ARG_QUANT[names[index]]
    if scale not in names or zp not in names:
        return None
    return _value(call.args[names.index(scale)]), _value(call.args[names.index(zp)])


def _users(body) -> dict[int, list]:
    users: dict[int, list] = {}
    for node in post_order(body):
        if isinstance(node, Call):
            for i, arg in enumerate(node.args):
                users.setdefault(id(arg), []).append((node, i))
    return users


def _input_quant(var, users):
    frontier, seen = [var], set()
    while frontier:
        node = frontier.pop(0)
        if id(node) in seen:
            continue
        seen.add(id(node))
        for call, i in users.get(id(node), []):
            if not isinstance(call.op, Op):
                continue
            found = _quant_of_arg(call, i)
            if found is not None:
                return found
            if call.op.name in PASS_THROUGH and i == 0:
                frontier.append(call)
    return None


def _output_quant(node):
    while isinstance(node, Call) and isinstance(node.op, Op):
        names = node.op.inputs
        if "output_scale" in names and "output_zero_point" in names:
            return (_value(node.args[names.index("output_scale")]),
                    _value(node.args[names.index("output_zero_point")]))
        if node.op.name not in PASS_THROUGH:
            return None
        node = node.args[0]
    return None


def quantization(main) -> tuple[list, list]:
    """``(inputs, outputs)``: per port of the function ``main``, ``(scale, zero_point)`` or
    None (each a number, or a list per channel)."""
    users = _users(main.body)
    body = main.body
    fields = list(body.fields) if isinstance(body, Tuple) else [body]
    return [_input_quant(p, users) for p in main.params], [_output_quant(f) for f in fields]
