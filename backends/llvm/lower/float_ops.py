"""Lowering of the float (and small integer/bool) ops transformers need: one kernel per op.

    elementwise and broadcasting ops of float32/int32/int64/bool tensors   EWISE
      (zeros / ones and *_like fills of float64 too: only stored)
    nn.dense of float32 (weight constant or not)                            FDENSE
    nn.batch_matmul of float32                                              FBMM
    nn.softmax, nn.layer_norm of float32                                    FSOFTMAX, FLAYERNORM
    take (any dtype, int32/int64 indices)                                   TAKE

Each computes as the reference implementation does (float64 sums, libm's exp; float32 erf,
GELU and softmax by the reference's own float32 algorithms, partita/ops/float32_math.py), so
results equal the interpreter's except where a float64 sum is taken in another order or a
float32 math function (tanh, sigmoid's exp) rounds differently: a few ulps at most (tests check
1e-6 relative). Constant operands are passed as arrays in their own dtype. The EWISE
expression tree is lower/ewise_tree.py's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.errors import LLVMError
from partita.backends.llvm.kinds import Kind
from partita.backends.registry import BackendError

from partita.ir import Call, Constant, TupleGetItem
from partita.ir.types import TensorType

from .ewise_tree import FILLS, Tree, emit_ewise
from .ewise_tree import clip_bounds as clip_bounds  # their importers' old address
from .ewise_tree import strides_for as strides_for
from .float_products import plan_bmm, plan_dense
from .integer import READ, TYPES, requantize_ok
from .qmean import lower_qmean_builtin
from .registry import FLOAT, OP, lowers

if TYPE_CHECKING:
    from .context import LowerContext

# op -> the scalar function the kernel applies (see kernels.FloatKernels.scalar)
EWISE_OPS = {
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "power",
    "negative", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "floor",
    "round", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "where",
    "cast", "clip", "logical_not", "logical_and", "logical_or", "nn.relu", "nn.gelu",
    "nn.bias_add", "nn.leaky_relu", "nn.hardswish", "broadcast_to",
    "zeros", "ones", "zeros_like", "ones_like",
}  # fmt: skip
INTS = ("int8", "uint8", "int16", "int32", "int64")
DYNQ_THREADS = 1 << 15  # -threads=2: a DYNQ of this many elements or more in chunks


def _float_types(call) -> bool:
    """Whether the call's result and operands are all of the float kernels' dtypes (TYPES)."""
    out = getattr(call.checked_type, "dtype", None)
    types = [a.checked_type for a in call.args]
    return out in TYPES and all(getattr(t, "dtype", None) in TYPES for t in types)


@lowers("take", priority=FLOAT)
def lower_take(low: LowerContext, call) -> bool:
    """take of any data dtype (rows are copied as bytes): TAKE."""
    if getattr(call.checked_type, "dtype", None) is None:
        return False
    return _take(low, call)


@lowers(*EWISE_OPS, "qnn.dequantize", "qnn.requantize", priority=FLOAT + 1)
def lower_ewise(low: LowerContext, call) -> bool:
    """An elementwise op of ``ewise_ok``: a step of an EWISE kernel."""
    return ewise_ok(call) and _ewise(low, call, call.op.name)


@lowers("qnn.mean", priority=FLOAT + 4)
def lower_qmean_tflite_builtin(low: LowerContext, call) -> bool:
    """qnn.mean with TFLite's builtin kernel's arithmetic (qmean.lower_qmean_builtin)."""
    return call.attrs.semantics == "tflite_builtin" and lower_qmean_builtin(low, call)


@lowers("argmax", "max", "min", "sum", "mean", "nn.global_avg_pool2d", priority=FLOAT + 5)
def lower_reduce(low: LowerContext, call) -> bool:
    """Reductions (FREDUCE, ARGMAX): argmax, and max / min / sum of integers or bools, of any
    dtype; sum of int32 / int64; sum / mean / max / min and an exact global average pool of
    float32."""
    name, out = call.op.name, getattr(call.checked_type, "dtype", None)
    if name == "argmax" or (name in ("max", "min", "sum") and out in (*INTS, "bool")):
        return _reduce(low, call, name)  # an integer sum wraps to its dtype, as the reference
    if not _float_types(call):
        return False
    if name == "sum" and out in ("int32", "int64"):
        return _reduce(low, call, name)
    if out != "float32":
        return False
    if name in ("sum", "mean", "max", "min"):
        return _reduce(low, call, name)
    if name == "nn.global_avg_pool2d" and call.attrs.accumulate == "exact":
        axes = [1, 2] if call.attrs.layout == "NHWC" else [2, 3]
        return _reduce(low, call, "mean", axes)
    return False


@lowers("nn.dense", "nn.gemm", priority=FLOAT + 6)
def lower_fdense(low: LowerContext, call) -> bool:
    """nn.dense / nn.gemm of float32 data and weights: FDENSE."""
    types = [a.checked_type for a in call.args]
    if not _float_types(call) or call.checked_type.dtype != "float32":
        return False
    return types[0].dtype == types[1].dtype == "float32" and plan_dense(low, call)


@lowers("nn.batch_matmul", priority=FLOAT + 7)
def lower_fbmm(low: LowerContext, call) -> bool:
    """nn.batch_matmul of float32: FBMM."""
    types = [a.checked_type for a in call.args]
    if not _float_types(call) or call.checked_type.dtype != "float32":
        return False
    return types[0].dtype == types[1].dtype == "float32" and plan_bmm(low, call)


@lowers("nn.softmax", "nn.layer_norm", priority=FLOAT + 8)
def lower_normalize(low: LowerContext, call) -> bool:
    """nn.softmax, nn.layer_norm of float32: FSOFTMAX, FLAYERNORM."""
    if not _float_types(call) or call.checked_type.dtype != "float32":
        return False
    return _normalize(low, call, call.op.name)


def _operands(low: LowerContext, call):
    """(buffer inputs, arrays, per-operand source): ("buf", i) or ("const", name)."""
    inputs, arrays, sources = [], {}, []
    for k, a in enumerate(call.args):
        if isinstance(a, Constant):
            name = f"c{k}"
            arrays[name] = np.ascontiguousarray(np.asarray(a.data))
            sources.append(["const", name])
        else:
            inputs.append(low.src(a))
            sources.append(["buf", len(inputs) - 1])
    return inputs, arrays, sources


def ewise_ok(call) -> bool:
    """Whether ``call`` lowers to (a step of) an EWISE kernel."""
    name = getattr(call.op, "name", "")
    types = [getattr(a.checked_type, "dtype", None) for a in call.args]
    if name == "qnn.dequantize":
        return types[0] in ("int8", "uint8", "int16", "int32") and all(
            isinstance(a, Constant) for a in call.args[1:]
        )
    if name == "qnn.requantize":
        return requantize_ok(call)
    out = getattr(call.checked_type, "dtype", None)
    if name in FILLS:  # the data (of *_like) is not read; float64 is only stored
        return out in (*READ, "float64")
    return name in EWISE_OPS and out in READ and all(t in READ for t in types)


def _ewise(low: LowerContext, call, name: str) -> bool:
    """One EWISE kernel, or none yet: a producer whose only reader is an EWISE op of the same
    shape waits for it (``low.defer``) and is inlined into its kernel."""
    outs = low.outputs
    users = low.users_of(call)
    if (
        len(users) == 1
        and ewise_ok(users[0])
        and all(o is not call for o in outs)
        and tuple(users[0].checked_type.shape) == tuple(call.checked_type.shape)
    ):
        low.defer(call)
        return True
    out_shape = [int(d) for d in call.checked_type.shape]
    tree = Tree(low, out_shape)
    emit_ewise(low, call, tree, tree.node(call))
    return True


# what reads a reshape's buffer by params alone (the kernels never read the buffer's shape)
PRODUCTS = ("nn.batch_matmul", "nn.dense")


@lowers("reshape", priority=OP + 9)
def lower_reshape_view(low: LowerContext, call) -> bool:
    """A float32 reshape read only by float products (nn.batch_matmul, exact nn.dense) is its
    input's buffer (``low.alias``), not a COPY: the element order is the same and FBMM / FDENSE
    take their geometry from their params. Not for a segment's output (its buffer's shape is
    the output's) nor for any other reader (TRANSPOSE, EWISE, ... read the buffer's shape)."""
    data = call.args[0]
    users = low.users_of(call)
    if (
        call.checked_type.dtype != "float32"
        or not low.has_buffer(data)
        or any(o is call for o in low.outputs)
        or not users
        or any(getattr(u.op, "name", "") not in PRODUCTS
               or getattr(u.attrs, "accumulate", "exact") != "exact"
               or any(a.checked_type.dtype != "float32" for a in u.args)
               for u in users)
    ):
        return False
    low.alias(call, data)
    return True


SPLIT_SOFTMAX, SPLIT_LAYERNORM = 1 << 14, 1 << 16  # elements: the smallest split row kernels


def _normalize(low: LowerContext, call, name: str) -> bool:
    data = call.args[0]
    shape = [int(d) for d in data.checked_type.shape]
    axis = call.attrs.axis % len(shape)
    params = {
        "outer": int(np.prod(shape[:axis], dtype=np.int64)),
        "n": shape[axis],
        "inner": int(np.prod(shape[axis + 1 :], dtype=np.int64)),
    }
    # -threads=2: whole lines in chunks over both threads (rows.py row_split) once the lines
    # are worth a hand-off: softmax's exp per element from 2^14 elements, layer norm from 2^16
    size = int(np.prod(shape, dtype=np.int64))
    if low.threads > 1 and params["outer"] > 1 and size >= (
        SPLIT_SOFTMAX if name == "nn.softmax" else SPLIT_LAYERNORM
    ):
        params["threads"] = 2
    if name == "nn.softmax":
        if isinstance(data, Constant):
            return False
        low.emit(Kind.FSOFTMAX, call, [low.src(data)], params)
        return True
    a = call.attrs
    params.update(eps=float(np.float32(a.epsilon)), scale=bool(a.scale), center=bool(a.center))
    inputs, arrays, sources = _operands(low, call)
    if sources[0][0] != "buf":
        return False
    params["sources"] = sources
    low.emit(Kind.FLAYERNORM, call, inputs, params, arrays)
    return True


def _take(low: LowerContext, call) -> bool:
    data, indices = call.args
    shape = [int(d) for d in data.checked_type.shape]
    axis = call.attrs.axis % len(shape)
    params = {
        "outer": int(np.prod(shape[:axis], dtype=np.int64)),
        "size": shape[axis],
        "inner": int(np.prod(shape[axis + 1 :], dtype=np.int64)),
        "count": int(np.prod(indices.checked_type.shape, dtype=np.int64)),
        "mode": call.attrs.mode,
        "itemsize": int(np.dtype(call.checked_type.dtype).itemsize),
        "idx64": indices.checked_type.dtype == "int64",
    }
    inputs, arrays, sources = _operands(low, call)
    params["sources"] = sources
    low.emit(Kind.TAKE, call, inputs, params, arrays)
    return True


def _reduce(low: LowerContext, call, name: str, axes=None) -> bool:
    """sum / mean / max / min of float32 over axes (float64 sums, rounded once; ``axes`` given
    for nn.global_avg_pool2d); sum of int32 / int64 (wrapping in the dtype, as the reference's
    int64 sum cast back), max / min of integers or bools; argmax (ARGMAX) of float32, integers
    or bools."""
    from partita.ops.tensor_reduce import reduce_axes

    data = call.args[0]
    shape = [int(d) for d in data.checked_type.shape]
    axes = sorted(axes if axes is not None else reduce_axes(len(shape), call.attrs))
    kept = [i for i in range(len(shape)) if i not in axes]
    dense = [int(np.prod(shape[i + 1 :], dtype=np.int64)) for i in range(len(shape))]
    params = {
        "op": name,
        "kept": [shape[i] for i in kept],
        "kept_strides": [dense[i] for i in kept],
        "red": [shape[i] for i in axes],
        "red_strides": [dense[i] for i in axes],
    }
    if data.checked_type.dtype == "bool":  # bytes 0 / 1: as uint8, the same order and bits
        params["dtype"] = "uint8"
    if name == "argmax":
        params["last"] = bool(call.attrs.select_last_index)
        params.setdefault("dtype", data.checked_type.dtype)
        if params["dtype"] not in (*INTS, "float32"):
            return False
        low.emit(Kind.ARGMAX, call, [low.src(data)], params)
        return True
    low.emit(Kind.FREDUCE, call, [low.src(data)], params)
    return True


def lower_item(low: LowerContext, item) -> bool:
    """A field of a tuple-valued op read by TupleGetItem: a view of one input (``split``), one
    of ``qnn.dynamic_quantize``'s (data, scale, zero point) or of ``nn.batch_norm``'s; False
    for other tuples (the caller refuses them)."""
    producer = item.tuple_value
    name = getattr(getattr(producer, "op", None), "name", "")
    if name == "nn.batch_norm":
        return lower_batch_norm_item(low, item, producer)
    if name == "qnn.dynamic_quantize":  # the range scanned once, each field read from it
        src = producer.args[0]
        params = {}
        if low.isa in ("vnni", "amx"):
            params["lanes"] = 16  # the range scan's vectors: one zmm of floats
        if low.threads > 1 and int(np.prod(src.checked_type.shape)) >= DYNQ_THREADS:
            params["threads"] = 2  # the range scan (and the data) in chunks over two threads
        ranges = low.memo("dynq_range")  # the producer -> its (scale, zero point) buffer
        if id(producer) not in ranges:
            ranges[id(producer)] = low.scratch(Kind.DYNQ, [low.src(src)], (2,), "float32",
                                               {**params, "field": "range"})
        inputs = [low.src(src), ranges[id(producer)]]
        if item.index:  # the scale, the zero point: one value each, read from the range
            params, inputs = {}, inputs[1:]
        low.emit(Kind.DYNQ, item, inputs, {**params, "field": item.index})
        return True
    if name != "split":
        return False
    lower_view(low, item, producer, field=item.index)
    return True


def lower_batch_norm_item(low: LowerContext, item, call) -> bool:
    """``nn.batch_norm(...).0`` of float32 data: BNORM, the reference's float64 arithmetic per
    element ((x - mean) / sd * gamma + beta, sd = sqrt(var + eps), then one rounding), so the
    bits equal the interpreter's; each parameter a constant (float64 array) or a run-time
    float32 buffer. Fields 1 and 2 (the moving mean and variance, passed through) are copies."""
    data = call.args[0]
    if item.index in (1, 2):
        low.emit(Kind.COPY, item, [low.src(call.args[item.index + 2])], {})
        return True
    if data.checked_type.dtype != "float32":
        raise LLVMError(f"llvm cannot compile {call.op.name}: {data.checked_type.dtype} data "
                        "(BNORM computes float32)")
    inputs, arrays, sources = [low.src(data)], {}, {}
    for name, e in zip(("gamma", "beta", "mean", "var"), call.args[1:]):
        if isinstance(e, Constant):
            arrays[name] = np.asarray(e.data, np.float64).reshape(-1)
            sources[name] = ["const", name]
        else:
            inputs.append(low.src(e))
            sources[name] = ["buf", len(inputs) - 1]
    a = call.attrs
    shape = [int(d) for d in data.checked_type.shape]
    axis = a.axis % len(shape)
    params = {"outer": int(np.prod(shape[:axis], dtype=np.int64)), "C": shape[axis],
              "inner": int(np.prod(shape[axis + 1 :], dtype=np.int64)),
              "scale": bool(a.scale), "center": bool(a.center), "sources": sources,
              "eps": float(np.float32(a.epsilon))}
    low.emit(Kind.BNORM, item, inputs, params, arrays)
    return True


def lower_view(low: LowerContext, node, call, field: int | None = None) -> None:
    """``node`` (a strided_slice, or field ``field`` of a split) as a copy of its input read at
    an affine index map: the op's own reference run on the flat indices of the input says which
    element each output takes. Affine (always, for these ops): one EWISE copy with a base
    offset and per-axis strides; otherwise a gather through an index table."""
    from partita.interpreter import interpret
    from partita.ir import Function, IRModule, Var

    data = call.args[0]
    shape = tuple(int(d) for d in data.checked_type.shape)
    if int(np.prod(shape, dtype=np.int64)) > 1 << 24:  # the index map is built at compile time
        raise BackendError(f"llvm: {call.op.name} of {shape}: more than 2**24 elements to slice")
    src = Var("i", TensorType(shape, "int64"))
    expr = Call(call.op, [src, *call.args[1:]], call.attrs)
    if field is not None:
        expr = TupleGetItem(expr, field)
    flat = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    index = np.asarray(interpret(IRModule.from_expr(Function([src], expr)), [flat])[0])
    out_shape = [int(d) for d in index.shape]
    base = int(index.ravel()[0]) if index.size else 0
    strides = []
    for axis, n in enumerate(out_shape):
        unit = [0] * len(out_shape)
        if n > 1:
            unit[axis] = 1
            strides.append(int(index[tuple(unit)]) - base)
        else:
            strides.append(0)
    grid = np.indices(out_shape).reshape(len(out_shape), -1) if out_shape else np.zeros((0, 1))
    affine = base + (np.asarray(strides)[:, None] * grid).sum(axis=0) if out_shape else [base]
    if not np.array_equal(np.asarray(affine).ravel(), index.ravel()):
        raise AssertionError("a slice's index map is affine")
    params = {
        "tree": ["op", "copy", [["leaf", 0]], {}, node.checked_type.dtype],
        "out_shape": out_shape,
        "sources": [["buf", 0]],
        "dtypes": [data.checked_type.dtype],
        "strides": [strides],
        "bases": [base],
    }
    low.emit(Kind.EWISE, node, [low.src(data)], params)
