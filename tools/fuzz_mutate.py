"""Structure-aware mutations of TFLite and ONNX models, for tools/fuzz.py.

A mutation is a list of *edits* applied to a seed model, so that a finding can be shrunk to the
fewest edits that still show it, and any case can be rebuilt from (seed file, edits):

* TFLite edits are in-place writes ``("w", position, struct format, value)`` into the flatbuffer:
  the positions are those of real fields found by walking the model with the ``tflite`` package —
  tensor shapes (and the length of the shape vector: the rank), types, buffer indices,
  quantization scales, zero points and ``quantized_dimension``, operator opcode indices, input and
  output tensor indices, every field of the builtin options tables (strides, dilations, padding,
  activations, axes, ...), buffer lengths — plus plain byte flips anywhere.
* ONNX edits name a field of the ModelProto (``("attr", node, name, element, value)``,
  ``("dim", initializer, axis, value)``, ``("input_dim", ...)``, ``("drop_outputs", node)``,
  ``("rename_input", ...)``, ``("scale", ...)``, ``("opset", version)``, ``("op_type", ...)``,
  ``("truncate", initializer, length)``) or flip bytes of the serialized model.
"""

from __future__ import annotations

import struct

import numpy as np

INTS = [0, 1, -1, 2, 3, 7, 64, 255, 256, 4096, 65536, 1 << 20, 1 << 24, (1 << 31) - 1, -(1 << 31)]
BIG = [1 << 20, 1 << 31, 1 << 33, 1 << 40, -(1 << 40), (1 << 63) - 1]
FLOATS = [
    0.0,
    -0.0,
    1e-45,
    1e-38,
    1e-30,
    1e30,
    3.4e38,
    float("inf"),
    -float("inf"),
    float("nan"),
    -1.0,
    1.0,
    0.5,
    255.0,
]
ZERO_POINTS = [0, 1, -1, 127, 128, -128, 255, 256, 1 << 31, -(1 << 40)]


def _pick(rng, values):
    return values[int(rng.integers(len(values)))]


# ---- TFLite ------------------------------------------------------------------------------------


def tflite_fields(data: bytes) -> list[tuple]:
    """Every mutable field of the model: ``(kind, position, struct format)``."""
    import tflite

    model = tflite.Model.GetRootAsModel(data, 0)
    fields: list[tuple] = []
    for s in range(model.SubgraphsLength()):
        graph = model.Subgraphs(s)
        for t in range(graph.TensorsLength()):
            fields.extend(_tensor_fields(graph.Tensors(t)))
        for o in range(graph.OperatorsLength()):
            fields.extend(_operator_fields(graph.Operators(o)))
    for b in range(model.BuffersLength()):
        tab = model.Buffers(b)._tab
        o = tab.Offset(4)
        if o:
            fields.append(("buffer_length", tab.Vector(o) - 4, "<I"))
    return fields


def _vector(tab, slot, size, fmt, kind, with_length=True):
    o = tab.Offset(slot)
    if not o:
        return []
    start, n = tab.Vector(o), tab.VectorLen(o)
    out = [(kind, start + size * j, fmt) for j in range(n)]
    if with_length:
        out.append((kind + "_length", start - 4, "<I"))
    return out


def _scalar(tab, slot, fmt, kind):
    o = tab.Offset(slot)
    return [(kind, tab.Pos + o, fmt)] if o else []


def _tensor_fields(tensor) -> list[tuple]:
    tab = tensor._tab
    out = _vector(tab, 4, 4, "<i", "shape") + _scalar(tab, 6, "<b", "type")
    out += _scalar(tab, 8, "<I", "buffer")
    q = tensor.Quantization()
    if q is not None:
        qt = q._tab
        out += _vector(qt, 8, 4, "<f", "scale") + _vector(qt, 10, 8, "<q", "zero_point")
        out += _scalar(qt, 16, "<i", "quantized_dimension")
    return out


def _operator_fields(op) -> list[tuple]:
    tab = op._tab
    out = _scalar(tab, 4, "<I", "opcode_index")
    out += _vector(tab, 6, 4, "<i", "op_input") + _vector(tab, 8, 4, "<i", "op_output")
    options = op.BuiltinOptions()
    if options is not None:
        out += _table_fields(options, "option")
    return out


def _table_fields(tab, kind) -> list[tuple]:
    """Every present field of a flatbuffer table, sized by the gap to the next field."""
    buf, pos = tab.Bytes, tab.Pos
    vtable = pos - struct.unpack_from("<i", buf, pos)[0]
    vsize, tsize = struct.unpack_from("<HH", buf, vtable)
    offsets = sorted(
        {struct.unpack_from("<H", buf, vtable + 4 + 2 * k)[0] for k in range((vsize - 4) // 2)}
        - {0}
    )
    fmts = {1: "<b", 2: "<h", 4: "<i"}
    out = []
    for k, off in enumerate(offsets):
        size = min((offsets[k + 1] if k + 1 < len(offsets) else tsize) - off, 4)
        if size in fmts:
            out.append((kind, pos + off, fmts[size]))
    return out


def tflite_value(rng, kind: str, fmt: str):
    if fmt == "<f":
        return _pick(rng, FLOATS)
    if fmt == "<q":
        return _pick(rng, ZERO_POINTS)
    if kind == "type" or fmt == "<b":
        return int(rng.integers(-3, 20))
    if kind == "op_input" or kind == "op_output":
        return _pick(rng, [-1, 0, 1, 2, 5, 1000, (1 << 31) - 1])
    if fmt == "<h":
        return _pick(rng, [0, 1, -1, 2, 100, 32767, -32768])
    value = _pick(rng, INTS)
    return value & 0xFFFFFFFF if fmt == "<I" else value


def tflite_edits(rng, data: bytes, fields: list[tuple], count: int) -> list[tuple]:
    edits = []
    for _ in range(count):
        if not fields or rng.random() < 0.25:
            pos = int(rng.integers(len(data)))
            edits.append(("w", pos, "<B", int(rng.integers(256))))
            continue
        kind, pos, fmt = fields[int(rng.integers(len(fields)))]
        edits.append(("w", pos, fmt, tflite_value(rng, kind, fmt)))
    return edits


def apply_tflite(data: bytes, edits) -> bytes:
    out = bytearray(data)
    for _, pos, fmt, value in edits:
        try:
            struct.pack_into(fmt, out, pos, value)
        except struct.error:
            struct.pack_into(fmt, out, pos, 0)
    return bytes(out)


# ---- ONNX --------------------------------------------------------------------------------------

KINDS = (
    "attr",
    "dim",
    "input_dim",
    "drop_outputs",
    "rename_input",
    "scale",
    "zero_point",
    "opset",
    "op_type",
    "truncate",
    "flip",
)


def onnx_edits(rng, model, size: int, count: int) -> list[tuple]:
    graph = model.graph
    edits = []
    for _ in range(count):
        kind = _pick(rng, KINDS)
        edit = _onnx_edit(rng, kind, graph, size)
        if edit is not None:
            edits.append(edit)
    return edits


def _onnx_edit(rng, kind, graph, size):
    nodes, inits = graph.node, graph.initializer
    n = int(rng.integers(len(nodes))) if len(nodes) else None
    if kind == "attr" and n is not None and nodes[n].attribute:
        a = nodes[n].attribute[int(rng.integers(len(nodes[n].attribute)))]
        count = max(len(a.ints), len(a.floats), 1)
        value = _pick(rng, FLOATS) if a.type in (1, 6) else _pick(rng, INTS + BIG)
        return ("attr", n, a.name, int(rng.integers(count)), value)
    if kind in ("dim", "truncate", "scale", "zero_point") and len(inits):
        i = int(rng.integers(len(inits)))
        if kind == "dim" and inits[i].dims:
            return ("dim", i, int(rng.integers(len(inits[i].dims))), _pick(rng, INTS + BIG))
        if kind == "truncate":
            return ("truncate", i, int(rng.integers(0, 64)))
        if kind == "scale":
            return ("scale", i, _pick(rng, FLOATS))
        return ("zero_point", i, _pick(rng, ZERO_POINTS))
    if kind == "input_dim" and len(graph.input):
        i = int(rng.integers(len(graph.input)))
        rank = len(graph.input[i].type.tensor_type.shape.dim)
        if rank:
            return ("input_dim", i, int(rng.integers(rank)), _pick(rng, [0, -1, 3, 1 << 20] + BIG))
    if kind == "drop_outputs" and n is not None:
        return ("drop_outputs", n)
    if kind == "rename_input" and n is not None and nodes[n].input:
        return ("rename_input", n, int(rng.integers(len(nodes[n].input))), "nowhere")
    if kind == "opset":
        return ("opset", _pick(rng, [1, 6, 7, 10, 11, 12, 13, 17, 21, 99]))
    if kind == "op_type" and n is not None:
        return ("op_type", n, nodes[int(rng.integers(len(nodes)))].op_type)
    if kind == "flip":
        return ("flip", int(rng.integers(size)), int(rng.integers(256)))
    return None


def apply_onnx(seed_bytes: bytes, edits) -> bytes:
    import onnx

    model = onnx.load_from_string(seed_bytes)
    graph = model.graph
    flips = []
    for edit in edits:
        kind = edit[0]
        if kind == "flip":
            flips.append(edit)
        else:
            _APPLY[kind](model, graph, *edit[1:])
    out = bytearray(model.SerializeToString())
    for _, pos, value in flips:
        if pos < len(out):
            out[pos] = value
    return bytes(out)


def _attr(model, graph, n, name, k, value):
    for a in graph.node[n].attribute:
        if a.name != name:
            continue
        if a.type == 1:
            a.f = value
        elif a.type == 2:
            a.i = _int64(value)
        elif a.type == 6 and a.floats:
            a.floats[k % len(a.floats)] = value
        elif a.type == 7 and a.ints:
            a.ints[k % len(a.ints)] = _int64(value)


def _int64(value):
    return int(np.clip(value, -(1 << 63), (1 << 63) - 1)) if isinstance(value, int) else 0


def _dim(model, graph, i, axis, value):
    graph.initializer[i].dims[axis] = _int64(value)


def _truncate(model, graph, i, length):
    t = graph.initializer[i]
    if t.raw_data:
        t.raw_data = t.raw_data[:length]


def _scale(model, graph, i, value):
    t = graph.initializer[i]
    if t.data_type == 1 and len(t.raw_data) >= 4:
        t.raw_data = struct.pack("<f", value) + t.raw_data[4:]
    elif t.data_type == 1 and t.float_data:
        t.float_data[0] = value


def _zero_point(model, graph, i, value):
    t = graph.initializer[i]
    sizes = {2: ("<B", 1), 3: ("<b", 1), 6: ("<i", 4), 7: ("<q", 8)}
    if t.data_type in sizes and t.raw_data:
        fmt, size = sizes[t.data_type]
        bits = 8 * size
        wrapped = value % (1 << bits)
        raw = wrapped.to_bytes(size, "little")
        t.raw_data = raw + t.raw_data[size:]


def _input_dim(model, graph, i, axis, value):
    graph.input[i].type.tensor_type.shape.dim[axis].dim_value = _int64(value)


def _drop_outputs(model, graph, n):
    del graph.node[n].output[:]


def _rename_input(model, graph, n, k, name):
    graph.node[n].input[k] = name


def _opset(model, graph, version):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = version


def _op_type(model, graph, n, op_type):
    graph.node[n].op_type = op_type


_APPLY = {
    "attr": _attr,
    "dim": _dim,
    "truncate": _truncate,
    "scale": _scale,
    "zero_point": _zero_point,
    "input_dim": _input_dim,
    "drop_outputs": _drop_outputs,
    "rename_input": _rename_input,
    "opset": _opset,
    "op_type": _op_type,
}
