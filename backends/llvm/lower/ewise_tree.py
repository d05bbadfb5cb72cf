"""An EWISE kernel's expression tree (lower/float_ops.py's elementwise ops): ``Tree`` collects
the leaves (buffers and constants, read with numpy broadcast strides) and the op nodes over
them, inlining producers whose only reader is the kernel; ``emit_ewise`` emits the kernel
(emit/float/kernels.py computes each node per element, each step rounded to its dtype)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.kinds import Kind

from partita.ir import Constant

from .integer import requantize_node

if TYPE_CHECKING:
    from .context import LowerContext

FILLS = {"zeros": 0, "ones": 1, "zeros_like": 0, "ones_like": 1}


# -threads=2: an EWISE of this many elements or more in chunks over both threads (BERT's
# 128 x 768 activations: a residual add, a GELU's glue, a dynamic-int8 dense's scale); the
# hand-off to a spinning worker costs about a microsecond, a 32 K-element add tens
EWISE_THREADS = 1 << 15

def strides_for(shape, out_shape) -> list[int]:
    """Element strides of an operand of ``shape`` read at each index of ``out_shape``
    (numpy broadcasting: 0 along broadcast axes)."""
    shape = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
    dense = [int(np.prod(shape[i + 1 :], dtype=np.int64)) for i in range(len(shape))]
    return [0 if d == 1 and o != 1 else s for d, o, s in zip(shape, out_shape, dense)]


class Tree:
    """An EWISE kernel's expression: its leaves (buffers or constants, read with broadcast
    strides) and the ops over them; producers used only here, of the same shape, are inlined
    (each step rounded to its own dtype, so the fused kernel computes what the separate ones
    would)."""

    def __init__(self, low, out_shape):
        self.low, self.out_shape = low, out_shape
        self.inputs, self.arrays, self.sources, self.dtypes, self.strides = [], {}, [], [], []
        self.leaf_of: dict = {}

    def leaf(self, expr, strides=None, array=None) -> list:
        key = (id(expr), tuple(strides) if strides else None)
        if key not in self.leaf_of:
            if isinstance(expr, Constant) or array is not None:
                name = f"c{len(self.arrays)}"
                data = np.asarray(expr.data) if array is None else array
                self.arrays[name] = np.ascontiguousarray(data)
                self.sources.append(["const", name])
                self.dtypes.append(str(self.arrays[name].dtype))
            else:
                self.inputs.append(self.low.src(expr))
                self.sources.append(["buf", len(self.inputs) - 1])
                self.dtypes.append(expr.checked_type.dtype)
            self.strides.append(
                strides or strides_for(expr.checked_type.shape, self.out_shape)
            )
            self.leaf_of[key] = ["leaf", len(self.sources) - 1]
        return self.leaf_of[key]

    def node(self, call) -> list:
        name = call.op.name
        extra = {}
        if name == "clip":
            extra["bounds"] = [float(call.attrs.a_min), float(call.attrs.a_max)]
            extra.update(clip_bounds(call))
        if name == "nn.gelu":
            extra["approximate"] = call.attrs.approximate
        if name == "nn.leaky_relu":  # one multiply by alpha in the data's dtype
            extra["alpha"] = float(np.dtype(call.checked_type.dtype).type(call.attrs.alpha))
        if name == "qnn.dequantize":
            return self.dequantize(call)
        if name == "qnn.requantize":
            return requantize_node(self, call, self.kid(call.args[0]))
        if name in FILLS:  # the data (of *_like) is not read
            return ["op", "fill", [], {"value": FILLS[name]}, call.checked_type.dtype]
        if name == "broadcast_to":  # its leaf reads the input with broadcast strides
            return ["op", "copy", [self.kid(call.args[0])], {}, call.checked_type.dtype]
        if name == "nn.bias_add":  # an add with the bias along ``axis``
            data, bias = call.args
            inline = self.low.deferred(data)
            shape = [1] * len(self.out_shape)
            shape[call.attrs.axis % len(shape)] = self.out_shape[call.attrs.axis % len(shape)]
            kids = [self.node(inline) if inline is not None else self.leaf(data),
                    self.leaf(bias, strides_for(shape, self.out_shape))]
            return ["op", "add", kids, {}, call.checked_type.dtype]
        kids = []
        for a in call.args:
            inline = self.low.deferred(a)
            kids.append(self.node(inline) if inline is not None else self.leaf(a))
        return ["op", name, kids, extra, call.checked_type.dtype]

    def kid(self, expr) -> list:
        """``expr`` inlined (a deferred EWISE producer) or read as a leaf."""
        inline = self.low.deferred(expr)
        return self.node(inline) if inline is not None else self.leaf(expr)

    def array_leaf(self, array, pshape) -> list:
        """A leaf of a compile-time array of ``pshape`` (never shared with another leaf)."""
        name = f"c{len(self.arrays)}"
        self.arrays[name] = np.ascontiguousarray(array)
        self.sources.append(["const", name])
        self.dtypes.append(str(self.arrays[name].dtype))
        self.strides.append(strides_for(pshape, self.out_shape))
        return ["leaf", len(self.sources) - 1]

    def dequantize(self, call) -> list:
        data, scale, zp = call.args
        shape = [int(d) for d in data.checked_type.shape]
        axis = call.attrs.axis % len(shape) if shape else 0
        pshape = [1] * len(shape)
        per_channel = np.asarray(scale.data).size > 1 or np.asarray(zp.data).size > 1
        if per_channel:
            pshape[axis] = shape[axis]
        size = int(np.prod(pshape))
        sc = np.broadcast_to(np.asarray(scale.data, np.float64).ravel(), (size,)).copy()
        z = np.broadcast_to(np.asarray(zp.data, np.int64).ravel(), (size,)).copy()
        inline = self.low.deferred(data)
        kids = [
            self.node(inline) if inline is not None else self.leaf(data),
            self.leaf(scale, strides_for(pshape, self.out_shape), sc),
            self.leaf(zp, strides_for(pshape, self.out_shape), z),
        ]
        return ["op", "dequantize", kids, {}, "float32"]


def clip_bounds(call) -> dict:
    """An integer clip's bounds as the op computes them (it clips its dtype's extremes)."""
    dtype = call.checked_type.dtype
    if dtype not in ("int8", "uint8", "int16", "int32", "int64"):
        return {}
    info = np.iinfo(dtype)
    ends = call.op.impl(np.array([info.min, info.max], dtype), call.attrs)
    return {"ibounds": [int(v) for v in ends]}


def emit_ewise(low: LowerContext, call, tree, root) -> None:
    """The EWISE kernel computing ``root`` (a node of ``tree``, over call's output shape)."""
    out_shape = tree.out_shape
    params = {
        "tree": root,
        "out_shape": out_shape,
        "sources": tree.sources,
        "dtypes": tree.dtypes,
        "strides": tree.strides,
    }
    if low.isa in ("vnni", "amx") and out_shape and out_shape[-1] >= 16:
        params["lanes"] = 16  # emit/float/ewise_vec.py: one zmm of floats per step
    if low.threads > 1 and int(np.prod(out_shape, dtype=np.int64)) >= EWISE_THREADS:
        params["threads"] = 2
    low.emit(Kind.EWISE, absorb_reshapes(low, call), tree.inputs, params, tree.arrays)


def absorb_reshapes(low: LowerContext, node):
    """The reshapes that alone read ``node`` (and each other), absorbed: a kernel that
    takes its geometry from its params (EWISE, FDENSE, FBMM) writes the last one's buffer, the same
    elements in the same order, and no COPY runs (BERT's heads: 4 of its reshapes per layer)."""
    while True:
        nxt = low.only_user(node, "reshape")
        if nxt is None:
            return node
        low.absorb(nxt)
        node = nxt


__all__ = ["FILLS", "Tree", "absorb_reshapes", "clip_bounds", "emit_ewise", "strides_for"]
