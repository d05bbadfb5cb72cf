"""``partita info``: a model's inputs and outputs with their shape, dtype, scale and zero point,
so that a user can make the right ``--input`` file (``real = scale * (q - zero_point)``).

The quantization of a port is read from the graph: the scale and zero point of the first
quantized op that reads an input (through reshapes, transposes and pads, which keep values), and
of the quantized op that produces an output. A saved executable keeps only names, shapes and
dtypes.
"""

from __future__ import annotations

import numpy as np

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
    from partita.ir import Constant

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


def _users(main):
    from partita.ir import Call, post_order

    users: dict[int, list] = {}
    for node in post_order(main.body):
        if isinstance(node, Call):
            for i, arg in enumerate(node.args):
                users.setdefault(id(arg), []).append((node, i))
    return users


def _input_quant(var, users):
    from partita.ir import Op

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
    from partita.ir import Call, Op

    while isinstance(node, Call) and isinstance(node.op, Op):
        names = node.op.inputs
        if "output_scale" in names and "output_zero_point" in names:
            return (_value(node.args[names.index("output_scale")]),
                    _value(node.args[names.index("output_zero_point")]))
        if node.op.name not in PASS_THROUGH:
            return None
        node = node.args[0]
    return None


def _row(name, ty, quant) -> dict:
    row = {"name": name, "shape": list(ty.shape), "dtype": str(ty.dtype)}
    if quant is not None:
        row["scale"], row["zero_point"] = quant
    return row


def model_ports(mod) -> dict:
    """``{"inputs": [...], "outputs": [...]}`` of an imported module's ``main``."""
    from partita.ir import Tuple
    from partita.passes import InferType

    mod = InferType()(mod)
    main = mod["main"]
    users = _users(main)
    inputs = [_row(p.name_hint, p.checked_type, _input_quant(p, users)) for p in main.params]
    body = main.body
    fields = list(body.fields) if isinstance(body, Tuple) else [body]
    names = list(mod.attrs.get("output_names") or ())
    outputs = [
        _row(names[i] if i < len(names) else f"output_{i}", f.checked_type, _output_quant(f))
        for i, f in enumerate(fields)
    ]
    return {"inputs": inputs, "outputs": outputs}


def executable_ports(exe) -> dict:
    """The ports of a saved executable (it records no quantization)."""
    return {
        "inputs": [_row(p.name, p.type, None) for p in exe.inputs],
        "outputs": [_row(p.name, p.type, None) for p in exe.outputs],
    }


def render(info: dict) -> str:
    lines = []
    for kind in ("inputs", "outputs"):
        lines.append(f"{kind}:")
        for r in info[kind]:
            quant = (f"  scale {r['scale']:.6g} zero point {r['zero_point']}"
                     if isinstance(r.get("scale"), float) else
                     f"  scale {r['scale']} zero point {r['zero_point']}" if "scale" in r else
                     "")
            lines.append(f"  {r['name']}: {tuple(r['shape'])} {r['dtype']}{quant}")
    if info.get("note"):
        lines.append(info["note"])
    return "\n".join(lines)
