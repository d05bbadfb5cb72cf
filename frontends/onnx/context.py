"""What a converter sees: one ONNX node, its inputs and attributes, and helpers that build typed
nodes carrying the node's span (index, op type, first output, node name)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper
from partita.frontends.builder import NodeBuilder
from partita.frontends.errors import ONNXConversionError

from partita.ir import Call, Constant, Expr, Span

QDTYPES = ("int8", "uint8", "int16")


class Unsupported(Exception):
    """Raised by a converter for a node it cannot convert; the reason joins the report."""


class NodeContext(NodeBuilder):
    """One node being converted (see the module docstring)."""

    def __init__(self, graph, node: onnx.NodeProto, index: int):
        self.graph, self.node, self.index = graph, node, index
        self.op_type = node.op_type
        out = node.output[0] if node.output else None
        self.span = Span(index=index, op_type=node.op_type, tensor=out, source=node.name or None)
        self.opset = graph.model.opsets["ai.onnx"]
        self._attrs = None

    # ---- attributes -----------------------------------------------------------------------------

    def attr(self, name: str, default=None):
        """Attribute ``name`` as a Python value (bytes decoded, tensors as numpy arrays)."""
        if self._attrs is None:
            self._attrs = {}
            for a in self.node.attribute:
                try:
                    v = helper.get_attribute_value(a)
                except Exception as e:  # noqa: BLE001 - malformed AttributeProto
                    self.fail(f"attribute {a.name!r} cannot be read: {e}")
                if isinstance(v, bytes):
                    v = v.decode("utf-8", "replace")
                self._attrs[a.name] = v
        return self._attrs.get(name, default)

    def ints(self, name: str, default=None) -> tuple[int, ...] | None:
        v = self.attr(name, default)
        return None if v is None else tuple(int(x) for x in v)

    # ---- inputs ---------------------------------------------------------------------------------

    def has_input(self, i: int) -> bool:
        return i < len(self.node.input) and self.node.input[i] != ""

    def name(self, i: int) -> str:
        if not self.has_input(i):
            self.fail(f"input {i} is missing")
        return self.node.input[i]

    def is_const(self, i: int) -> bool:
        return self.has_input(i) and isinstance(self.graph.lookup(self.name(i), self), np.ndarray)

    def value(self, i: int, what: str) -> np.ndarray:
        """Input ``i``'s constant value; a computed input is unsupported."""
        v = self.graph.lookup(self.name(i), self)
        if isinstance(v, np.ndarray):
            return v
        if isinstance(v, Call) and all(isinstance(a, Constant) for a in v.args):
            # e.g. a DequantizeLinear of a constant (QDQ models dequantize Pad's value)
            from partita.interpreter import interpret

            return interpret(v, {})[0]
        raise Unsupported(f"{what} ({self.name(i)!r}) must be a constant")

    def expr(self, i: int) -> Expr:
        """Input ``i`` as an expression (constants become Constant nodes, shared per tensor)."""
        return self.graph.expr(self.name(i), self)

    def shape(self, i: int) -> tuple[int, ...]:
        v = self.graph.lookup(self.name(i), self)
        return tuple(v.shape) if isinstance(v, np.ndarray) else v.checked_type.shape

    def dtype(self, i: int) -> str:
        v = self.graph.lookup(self.name(i), self)
        return v.dtype.name if isinstance(v, np.ndarray) else v.checked_type.dtype

    def mlas(self, threads: bool = True, packed: bool = False) -> dict:
        """The attributes that make a float op sum as MLAS does under match="ort_disable_all"
        (accumulate="mlas", or "mlas_packed" for a GEMM whose B ONNX Runtime prepacks [and
        threads]), or {} for exact float arithmetic."""
        t, only = self.graph.mlas_threads, self.graph.mlas_nodes
        if t is None or (only is not None and self.index not in only):
            return {}
        out = {"accumulate": "mlas_packed" if packed else "mlas"}
        return {**out, "threads": t} if threads else out

    # ---- building nodes -------------------------------------------------------------------------

    def fail(self, message: str):
        name = f" {self.node.name!r}" if self.node.name else ""
        raise ONNXConversionError(f"node #{self.index} {self.op_type}{name}: {message}")

    # ---- quantization parameters ----------------------------------------------------------------

    def scale(self, i: int, what: str, per_channel: bool = False) -> Constant:
        """A float32 scale constant (one per channel if allowed); must be positive and finite."""
        s = np.asarray(self.value(i, what), np.float32)
        if s.size != 1 and not per_channel:
            raise Unsupported(f"{what} has {s.size} values; one is needed")
        if not np.all(np.isfinite(s) & (s > 0)):
            self.fail(f"{what} must be positive and finite, got {s.reshape(-1)[:4].tolist()}")
        return self.const(s.reshape(()) if s.size == 1 else s.reshape(-1), "float32")

    def zero_point(self, i: int, what: str, per_channel: bool = False) -> Constant:
        """An int32 zero-point constant (0 if the optional input is absent)."""
        if not self.has_input(i):
            return self.const(0)
        z = self.value(i, what)
        if z.dtype.name not in QDTYPES + ("int32",):
            raise Unsupported(f"{what} has type {z.dtype.name}")
        if z.size != 1 and not per_channel:
            raise Unsupported(f"{what} has {z.size} values; one is needed")
        return self.const(z.reshape(()) if z.size == 1 else z.reshape(-1), "int32")

    def zp_dtype(self, i: int, default: str = "uint8") -> str:
        """The quantized type a zero-point input stands for (uint8 if absent, as ONNX says)."""
        if not self.has_input(i):
            return default
        dtype = self.dtype(i)
        if dtype not in QDTYPES:
            raise Unsupported(f"quantized type {dtype}")
        return dtype


def float_scale_product(a: Constant, b: Constant) -> Constant:
    """a * b in float32, as ONNX Runtime multiplies input and weight scales."""
    return Constant(
        (a.data.astype(np.float32) * b.data.astype(np.float32)).astype(np.float32), span=a.span
    )
