"""Build small TFLite flatbuffers by hand (with the ``tflite`` package's builder functions), for
tests that need models no converter writes: malformed ones, float ones, rare operators."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

import flatbuffers
import numpy as np
import tflite

TYPES = {"float32": 0, "float16": 1, "int32": 2, "uint8": 3, "int64": 4, "bool": 6, "int16": 7,
         "int8": 9}
CODES = {k: v for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}


@dataclass
class T:
    """A tensor: data makes it a constant; scale/zp make it quantized."""

    name: str
    shape: tuple
    dtype: str = "float32"
    data: np.ndarray | None = None
    scale: list | None = None
    zp: list | None = None
    qdim: int = 0
    raw: bytes | None = None  # buffer bytes that need not match the shape
    signature: tuple | None = None  # shape_signature (-1 = dynamic)


@dataclass
class Op:
    """An operator: builtin name, tensor indices, (options class, {field: value})."""

    name: str
    inputs: list
    outputs: list
    options: tuple[str, dict] | None = None
    custom: str | None = None


@dataclass
class Model:
    tensors: list
    ops: list
    inputs: list
    outputs: list
    version: int = 3
    extra_codes: list = field(default_factory=list)


def _module(name: str):
    return importlib.import_module(f"tflite.{name}")


def _vector(b, fn_start, values, kind: str):
    fn_start(b, len(values))
    for v in reversed(values):
        getattr(b, f"Prepend{kind}")(v)
    return b.EndVector()


def _tensor(b, t: T, buffer: int):
    name = b.CreateString(t.name)
    m = _module("Tensor")
    shape = _vector(b, m.TensorStartShapeVector, [int(d) for d in t.shape], "Int32")
    sig = None
    if t.signature is not None:
        sig = _vector(b, m.TensorStartShapeSignatureVector, [int(d) for d in t.signature],
                      "Int32")
    quant = None
    if t.scale is not None:
        q = _module("QuantizationParameters")
        scale = _vector(b, q.QuantizationParametersStartScaleVector, [float(s) for s in t.scale],
                        "Float32")
        zps = _vector(b, q.QuantizationParametersStartZeroPointVector,
                      [int(z) for z in (t.zp or [0] * len(t.scale))], "Int64")
        q.QuantizationParametersStart(b)
        q.QuantizationParametersAddScale(b, scale)
        q.QuantizationParametersAddZeroPoint(b, zps)
        q.QuantizationParametersAddQuantizedDimension(b, t.qdim)
        quant = q.QuantizationParametersEnd(b)
    m.TensorStart(b)
    m.TensorAddShape(b, shape)
    m.TensorAddType(b, TYPES[t.dtype])
    m.TensorAddBuffer(b, buffer)
    m.TensorAddName(b, name)
    if sig is not None:
        m.TensorAddShapeSignature(b, sig)
    if quant is not None:
        m.TensorAddQuantization(b, quant)
    return m.TensorEnd(b)


def _options(b, cls: str, values: dict):
    m = _module(cls)
    vectors = {k: _vector(b, getattr(m, f"{cls}Start{k}Vector"), list(v), "Int32")
               for k, v in values.items() if isinstance(v, (list, tuple))}
    getattr(m, f"{cls}Start")(b)
    for k, v in values.items():
        getattr(m, f"{cls}Add{k}")(b, vectors.get(k, v))
    return getattr(m, f"{cls}End")(b)


def _operator(b, op: Op, opcode: int):
    m = _module("Operator")
    ins = _vector(b, m.OperatorStartInputsVector, op.inputs, "Int32")
    outs = _vector(b, m.OperatorStartOutputsVector, op.outputs, "Int32")
    opts = _options(b, *op.options) if op.options else None
    m.OperatorStart(b)
    m.OperatorAddOpcodeIndex(b, opcode)
    m.OperatorAddInputs(b, ins)
    m.OperatorAddOutputs(b, outs)
    if opts is not None:
        m.OperatorAddBuiltinOptionsType(b, getattr(tflite.BuiltinOptions, op.options[0]))
        m.OperatorAddBuiltinOptions(b, opts)
    return m.OperatorEnd(b)


def build(model: Model) -> bytes:
    """Serialize ``model`` as a TFLite flatbuffer (schema version 3, identifier TFL3)."""
    b = flatbuffers.Builder(1024)
    buffers, buffer_of = _buffers(b, model.tensors)
    tensors = [_tensor(b, t, buffer_of[i]) for i, t in enumerate(model.tensors)]
    names = []
    for op in model.ops:
        if op.name not in names:
            names.append(op.name)
    opcodes = {n: i for i, n in enumerate(names)}
    ops = [_operator(b, op, opcodes[op.name]) for op in model.ops]
    codes = [_opcode(b, n) for n in names + model.extra_codes]
    sg = _module("SubGraph")
    t_vec = _offsets(b, sg.SubGraphStartTensorsVector, tensors)
    o_vec = _offsets(b, sg.SubGraphStartOperatorsVector, ops)
    i_vec = _vector(b, sg.SubGraphStartInputsVector, model.inputs, "Int32")
    out_vec = _vector(b, sg.SubGraphStartOutputsVector, model.outputs, "Int32")
    sg.SubGraphStart(b)
    sg.SubGraphAddTensors(b, t_vec)
    sg.SubGraphAddOperators(b, o_vec)
    sg.SubGraphAddInputs(b, i_vec)
    sg.SubGraphAddOutputs(b, out_vec)
    subgraph = sg.SubGraphEnd(b)
    mm = _module("Model")
    c_vec = _offsets(b, mm.ModelStartOperatorCodesVector, codes)
    s_vec = _offsets(b, mm.ModelStartSubgraphsVector, [subgraph])
    b_vec = _offsets(b, mm.ModelStartBuffersVector, buffers)
    mm.ModelStart(b)
    mm.ModelAddVersion(b, model.version)
    mm.ModelAddOperatorCodes(b, c_vec)
    mm.ModelAddSubgraphs(b, s_vec)
    mm.ModelAddBuffers(b, b_vec)
    b.Finish(mm.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _buffers(b, tensors: list[T]):
    """Buffer 0 is empty; each constant tensor gets its own buffer. Returns (buffer offsets,
    buffer index per tensor)."""
    bm = _module("Buffer")
    raws = [t.raw if t.raw is not None else
            (np.ascontiguousarray(t.data, t.dtype).tobytes() if t.data is not None else None)
            for t in tensors]
    buffers, buffer_of, datas = [], [], [b""]
    for r in raws:
        buffer_of.append(0 if r is None else len(datas))
        if r is not None:
            datas.append(r)
    for d in datas:
        vec = b.CreateByteVector(d) if d else None
        bm.BufferStart(b)
        if vec is not None:
            bm.BufferAddData(b, vec)
        buffers.append(bm.BufferEnd(b))
    return buffers, buffer_of


def _opcode(b, name: str):
    m = _module("OperatorCode")
    custom = b.CreateString(name[7:-1]) if name.startswith("CUSTOM(") else None
    code = CODES["CUSTOM"] if custom is not None else CODES[name]
    m.OperatorCodeStart(b)
    m.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
    m.OperatorCodeAddBuiltinCode(b, code)
    if custom is not None:
        m.OperatorCodeAddCustomCode(b, custom)
    m.OperatorCodeAddVersion(b, 1)
    return m.OperatorCodeEnd(b)


def _offsets(b, fn_start, offsets):
    fn_start(b, len(offsets))
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()
