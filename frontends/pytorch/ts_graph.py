"""TorchScript module -> IRModule: walk the inlined graph, one converter per node.

prim:: nodes (constants, attribute reads, lists, tuples) are evaluated here; quantized:: ops and
aten ops on quantized tensors go to ts_ops.QUANTIZED, aten ops on float tensors to the shared
table. Quantized tensors travel as QValue (integer expression, scale, zero point) because
TorchScript's quantized tensors carry their parameters. Spans: Span(index=node position,
op_type=node kind, tensor=output value name, source=the module path of the weights read).
"""

from __future__ import annotations

from partita.frontends.errors import (
    PyTorchConversionError,
    PyTorchFormatError,
)
from partita.frontends.errors import (
    PyTorchUnsupportedOperatorError as UnsupportedOperatorError,
)

from partita.ir import Constant, Expr, Function, IRModule, Span, TensorType, Tuple, Var

from .context import NodeContext, QValue, Unsupported
from .inputs import InputSpec, to_numpy
from .table import CONVERTERS
from .ts_ops import FLOAT_INPUT, QUANTIZED

PRIM = (
    "prim::Constant",
    "prim::GetAttr",
    "prim::ListConstruct",
    "prim::TupleConstruct",
    "prim::ListUnpack",
    "prim::TupleUnpack",
)


class TsGraph:
    """TorchScript value -> converted value while the nodes are walked in order."""

    def __init__(self, module, inputs: list[InputSpec], float_bias: bool = False):
        self.module, self.specs = module, inputs
        self.options = {"float_bias": float_bias}
        self.values: dict[str, object] = {}
        self.paths: dict[str, str] = {}  # value name -> module attribute path
        self.poisoned: set[str] = set()
        self.unsupported: list[tuple[int, str, str, str]] = []

    def convert(self) -> IRModule:
        try:
            graph = self.module.inlined_graph
        except RuntimeError as e:
            raise PyTorchFormatError(
                f"the TorchScript module has no graph to convert: {e}"
            ) from None
        params = self._inputs(list(graph.inputs()))
        for index, node in enumerate(graph.nodes()):
            self._convert_node(index, node)
        if self.unsupported:
            raise UnsupportedOperatorError(self.unsupported)
        outs = [self._output(v) for v in graph.outputs()]
        body = outs[0] if len(outs) == 1 else Tuple(outs)
        attrs = {
            "input_names": tuple(p.name_hint for p in params),
            "output_names": tuple(v.debugName() for v in graph.outputs()),
        }
        return IRModule({"main": Function(params, body)}, attrs=attrs)

    def _inputs(self, values) -> list[Var]:
        self_value, user = values[0], values[1:]
        self.values[self_value.debugName()] = self.module._c
        self.paths[self_value.debugName()] = ""
        if len(user) != len(self.specs):
            raise PyTorchConversionError(
                f"example_inputs has {len(self.specs)} entries but the model takes "
                f"{len(user)} inputs ({', '.join(v.debugName() for v in user)})"
            )
        params = []
        for v, spec in zip(user, self.specs):
            name = v.debugName().split(".")[0] or f"input{len(params)}"
            var = Var(name, TensorType(spec.shape, spec.dtype), span=Span(tensor=v.debugName()))
            self.values[v.debugName()] = var
            params.append(var)
        return params

    def _output(self, v):
        out = self.values.get(v.debugName())
        if isinstance(out, QValue):
            return out.expr
        if isinstance(out, (list, tuple)) and all(isinstance(o, (Expr, QValue)) for o in out):
            return Tuple([o.expr if isinstance(o, QValue) else o for o in out])
        if not isinstance(out, Expr):
            raise PyTorchConversionError(f"output {v.debugName()!r} is not a tensor")
        return out

    # ---- nodes ------------------------------------------------------------------------------

    def _convert_node(self, index: int, node) -> None:
        kind = node.kind()
        ins = [v.debugName() for v in node.inputs()]
        outs = [v.debugName() for v in node.outputs()]
        if any(i in self.poisoned for i in ins):
            self.poisoned.update(outs)
            return
        if kind in PRIM:
            return self._prim(index, node, kind, ins, outs)
        args = [self._arg(i) for i in ins]
        fn = self._converter(kind, args)
        if fn is None:
            return self._unsupported(index, kind, outs, "no converter for this op")
        source = next((self.paths[i] for i in ins if self.paths.get(i)), None)
        if source is not None:
            source = source.removesuffix("._packed_params._packed_params")
            source = source.removesuffix("._packed_params")
        ctx = NodeContext(index, outs[0] if outs else "-", kind, args, {}, source, self.options)
        try:
            result = fn(ctx)
        except Unsupported as e:
            return self._unsupported(index, kind, outs, str(e))
        except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError, RuntimeError) as e:
            ctx.fail(f"{type(e).__name__}: {e}")
        results = result if len(outs) > 1 else [result]
        for name, r in zip(outs, results):
            self.values[name] = r

    def _converter(self, kind: str, args: list):
        quantized = any(isinstance(a, QValue) for a in _flat(args))
        if kind.startswith("quantized::") or kind in FLOAT_INPUT or quantized:
            return QUANTIZED.get(kind)
        if kind.startswith("aten::"):
            return CONVERTERS.get("aten." + kind[len("aten::") :].rstrip("_"))
        return None

    def _arg(self, name: str):
        if name not in self.values:
            raise PyTorchFormatError(f"value {name!r} is used before it is computed")
        v = self.values[name]
        if _is_tensor(v):
            v = Constant(to_numpy(v, f"tensor {name!r}"), span=Span(tensor=name))
            self.values[name] = v
        return v

    def _prim(self, index: int, node, kind: str, ins: list[str], outs: list[str]) -> None:
        if kind == "prim::Constant":
            self.values[outs[0]] = node.output().toIValue()
        elif kind == "prim::GetAttr":
            parent, name = self.values[ins[0]], node.s("name")
            try:
                self.values[outs[0]] = (
                    parent.getattr(name) if hasattr(parent, "getattr") else getattr(parent, name)
                )
            except (AttributeError, RuntimeError):
                raise PyTorchFormatError(
                    f"attribute {name!r} of {self.paths.get(ins[0]) or 'the module'} is missing"
                ) from None
            self.paths[outs[0]] = f"{self.paths.get(ins[0], '')}.{name}".lstrip(".")
        elif kind in ("prim::ListConstruct", "prim::TupleConstruct"):
            self.values[outs[0]] = [self._arg(i) for i in ins]
        else:  # ListUnpack / TupleUnpack
            seq = self.values[ins[0]]
            if not isinstance(seq, (list, tuple)) or len(seq) != len(outs):
                return self._unsupported(index, kind, outs, "unpacks a value of unknown length")
            for name, v in zip(outs, seq):
                self.values[name] = v

    def _unsupported(self, index: int, kind: str, outs: list[str], reason: str) -> None:
        self.unsupported.append((index, outs[0] if outs else "-", kind, reason))
        self.poisoned.update(outs)


def _flat(args):
    for a in args:
        if isinstance(a, (list, tuple)):
            yield from a
        else:
            yield a


def _is_tensor(v) -> bool:
    return type(v).__name__ in ("Tensor", "Parameter") and hasattr(v, "detach")
