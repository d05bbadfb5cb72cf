"""from_onnx: an ONNX model to an IRModule, one converter per node (table.py)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np
import onnx

from ...errors import PartitaError
from ...ir import Constant, Expr, Function, IRModule, Span, TensorType, Tuple, Var
from ...passes.infer_type import infer_type
from .context import NodeContext, Unsupported
from .errors import ONNXConversionError, ONNXError, ONNXFormatError, UnsupportedOperatorError
from .reader import DTYPES, Model, input_type, load, read
from .table import CONVERTERS

# Ops never folded even when every input is constant: QDQ rewrites must still see the
# quantize/dequantize of a weight.
NO_FOLD = {"QuantizeLinear", "DequantizeLinear", "Constant"}
MAX_FOLD_ELEMENTS = 1 << 24


def from_onnx(path_or_model, input_shapes: Mapping[str, tuple] | None = None,
              qdq_to_qnn: bool = True) -> IRModule:
    """Convert an ONNX model (a path, the file's bytes or an onnx.ModelProto) into an IRModule
    whose ``main`` takes the graph inputs, named after them, and returns the graph outputs.

    Float ops become nn.* / tensor ops in ONNX's NCHW layout; QOperator nodes (QLinearConv, the
    com.microsoft QLinear* ops, ...) become qnn ops with ONNX Runtime's semantics
    (``semantics="onnx"``); QuantizeLinear / DequantizeLinear become qnn.quantize /
    qnn.dequantize, and the QDQ groups around float ops are then rewritten into qnn ops by
    ``partita.frontends.qdq.qdq_to_qnn``. ``input_shapes`` maps input names to static shapes for
    inputs with dynamic dimensions. Every node carries a Span (node index, op type, first output,
    node name); ``mod.attrs["input_names"]`` / ``["output_names"]`` give the graph's names.
    ``qdq_to_qnn=False`` keeps QDQ groups as dequantize -> float op -> quantize.
    """
    from .. import qdq

    model = read(load(path_or_model))
    mod = _Graph(model, dict(input_shapes or {})).convert()
    return qdq.qdq_to_qnn(mod, semantics="onnx") if qdq_to_qnn else mod


class _Graph:
    """Tensor name -> expression (or numpy value for constants) while nodes are converted."""

    def __init__(self, model: Model, input_shapes: dict):
        self.model = model
        self.values: dict[str, Expr | np.ndarray] = dict(model.initializers)
        self.consts: dict[str, Constant] = {}
        self.poisoned: set[str] = set()
        self.unsupported: list = []
        names = [vi.name for vi in model.inputs]
        unknown = set(input_shapes) - set(names)
        if unknown:
            raise ONNXError(f"input_shapes names {sorted(unknown)}, which are not inputs of the "
                            f"model (its inputs: {names})")
        self.params = [self._input(vi, input_shapes) for vi in model.inputs]

    def _input(self, vi, input_shapes) -> Var:
        if vi.name in self.values:
            raise ONNXFormatError(f"graph input {vi.name!r} is listed twice")
        shape, dtype = input_type(vi, input_shapes)
        v = Var(vi.name, TensorType(shape, dtype), span=Span(tensor=vi.name))
        self.values[vi.name] = v
        return v

    # ---- values ---------------------------------------------------------------------------------

    def lookup(self, name: str, ctx: NodeContext):
        try:
            return self.values[name]
        except KeyError:
            raise ONNXFormatError(
                f"node #{ctx.index} {ctx.op_type} {ctx.node.name!r} reads {name!r}, which is "
                f"neither a graph input, an initializer nor the output of an earlier node "
                f"(a missing initializer, or nodes out of topological order)") from None

    def expr(self, name: str, ctx: NodeContext) -> Expr:
        v = self.lookup(name, ctx)
        if not isinstance(v, np.ndarray):
            return v
        if name not in self.consts:
            if v.dtype.name not in DTYPES.values():
                ctx.fail(f"constant {name!r} has unsupported type {v.dtype.name}")
            self.consts[name] = Constant(v, span=Span(index=ctx.index, op_type=ctx.op_type,
                                                      tensor=name))
        return self.consts[name]

    # ---- conversion -----------------------------------------------------------------------------

    def convert(self) -> IRModule:
        for index, node in enumerate(self.model.graph.node):
            self._convert_node(index, node)
        if self.unsupported:
            raise UnsupportedOperatorError(self.unsupported)
        outputs = []
        for vi in self.model.graph.output:
            if vi.name not in self.values:
                raise ONNXFormatError(f"graph output {vi.name!r} is never computed")
            v = self.values[vi.name]
            outputs.append(Constant(v, span=Span(tensor=vi.name)) if isinstance(v, np.ndarray)
                           else v)
        if not outputs:
            raise ONNXFormatError("the graph has no outputs")
        body = outputs[0] if len(outputs) == 1 else Tuple(outputs)
        fn = Function(self.params, body)
        try:
            infer_type(fn)
        except PartitaError as e:
            raise ONNXConversionError(f"the converted graph does not type-check: {e}") from None
        attrs = {"input_names": tuple(p.name_hint for p in self.params),
                 "output_names": tuple(vi.name for vi in self.model.graph.output)}
        return IRModule({"main": fn}, attrs=attrs)

    def _convert_node(self, index: int, node: onnx.NodeProto) -> None:
        if any(i in self.poisoned for i in node.input):
            self.poisoned.update(node.output)  # downstream of an unsupported node
            return
        domain = "com.microsoft" if node.domain == "com.microsoft" else (
            "ai.onnx" if node.domain in ("", "ai.onnx") else node.domain)
        ctx = NodeContext(self, node, index)
        if domain not in self.model.opsets:
            return self._unsupported(ctx, f"domain {node.domain!r} is not imported by the model")
        if domain == "ai.onnx" and node.op_type not in NO_FOLD and self._fold(ctx):
            return
        entry = CONVERTERS.get((domain, node.op_type))
        if entry is None:
            reason = ("no converter for this operator" if domain in ("ai.onnx", "com.microsoft")
                      else f"unknown domain {node.domain!r}")
            return self._unsupported(ctx, reason)
        try:
            results = entry(ctx)
        except Unsupported as e:
            return self._unsupported(ctx, str(e))
        except (TypeError, ValueError, IndexError, KeyError, AttributeError, OverflowError,
                ZeroDivisionError) as e:
            # attributes or operands of the wrong kind (a malformed or corrupted model)
            ctx.fail(f"malformed node ({type(e).__name__}: {e})")
        results = results if isinstance(results, list) else [results]
        outputs = [o for o in node.output]
        if len(results) < len([o for o in outputs if o]):
            ctx.fail(f"has {len(outputs)} outputs; partita computes {len(results)}")
        for name, value in zip(outputs, results):
            if name:
                self._bind(ctx, name, value)

    def _fold(self, ctx: NodeContext) -> bool:
        """Evaluate a node whose inputs are all constants with onnx.reference (shape arithmetic
        that exporters emit); False if it cannot be folded here."""
        node = ctx.node
        ins = [self.values.get(n) if n else None for n in node.input]
        if not node.input or not all(v is None or isinstance(v, np.ndarray)
                                     for v in ins) or all(v is None for v in ins):
            return False
        if sum(v.size for v in ins if v is not None) > MAX_FOLD_ELEMENTS:
            return False
        try:
            from onnx.reference import ReferenceEvaluator

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                feeds = {n: v for n, v in zip(node.input, ins) if n}
                outs = ReferenceEvaluator(node).run(None, feeds)
        except Exception:  # noqa: BLE001 - fall back to converting the node
            return False
        for name, value in zip(node.output, outs):
            if name:
                arr = np.asarray(value)
                if arr.dtype.name not in DTYPES.values():
                    return False
                self.values[name] = arr
        return True

    def _bind(self, ctx: NodeContext, name: str, value) -> None:
        if name in self.values:
            ctx.fail(f"writes {name!r}, which already has a value")
        self.values[name] = value

    def _unsupported(self, ctx: NodeContext, reason: str) -> None:
        node = ctx.node
        op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        self.unsupported.append((ctx.index, op, node.name, reason))
        self.poisoned.update(node.output)
