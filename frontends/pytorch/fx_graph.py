"""torch.export ExportedProgram -> IRModule: one converter per node (table.py), in graph order.

Parameters, buffers and lifted constants become Constants; user inputs become Vars named after
their placeholders, with static shapes from the program (or from ``example_inputs``). Every node
carries Span(index=node position, op_type=target, tensor=FX node name).
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

from .context import NodeContext, Unsupported
from .inputs import InputSpec, to_numpy
from .table import CONVERTERS


def target_name(target) -> str:
    """``aten.conv2d.default`` for an OpOverload, ``getitem`` for operator.getitem."""
    if isinstance(target, str):
        return target
    name = str(target)
    return getattr(target, "__name__", name) if name.startswith("<") else name


def packet_name(target) -> str:
    """The table key: the overload packet (``aten.conv2d``) or the function's name."""
    packet = getattr(target, "overloadpacket", None)
    return str(packet) if packet is not None else target_name(target)


class FxGraph:
    """FX node -> value (an Expr, a Python value, or a list for multi-output nodes)."""

    def __init__(self, ep, inputs: list[InputSpec] | None, options: dict | None = None):
        self.ep = ep
        self.options = options or {}
        self.values: dict[str, object] = {}
        self.poisoned: set[str] = set()
        self.unsupported: list[tuple[int, str, str, str]] = []
        self.params: list[Var] = []
        self.example = inputs

    def convert(self) -> IRModule:
        nodes = list(self.ep.graph.nodes)
        self._placeholders([n for n in nodes if n.op == "placeholder"])
        outputs = None
        for index, node in enumerate(nodes):
            if node.op == "call_function":
                self._convert_node(index, node)
            elif node.op == "output":
                outputs = node.args[0]
            elif node.op != "placeholder":
                self._unsupported(index, node, f"FX {node.op} nodes are not supported")
        if self.unsupported:
            raise UnsupportedOperatorError(self.unsupported)
        return self._module(outputs)

    # ---- inputs -----------------------------------------------------------------------------

    def _placeholders(self, placeholders) -> None:
        specs = {
            s.arg.name: s for s in self.ep.graph_signature.input_specs if hasattr(s.arg, "name")
        }
        user = [p for p in placeholders if _kind(specs.get(p.name)) == "USER_INPUT"]
        if self.example is not None and len(self.example) != len(user):
            raise PyTorchConversionError(
                f"example_inputs has {len(self.example)} tensors but the program takes "
                f"{len(user)} inputs ({', '.join(p.name for p in user)})"
            )
        for p in placeholders:
            spec = specs.get(p.name)
            kind = _kind(spec)
            if kind == "USER_INPUT":
                self.values[p.name] = self._user_input(p, len(self.params))
            elif kind in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR"):
                self.values[p.name] = self._constant(p, spec)
            else:
                raise PyTorchFormatError(
                    f"placeholder {p.name!r} is a {kind} input, which partita cannot feed"
                )

    def _user_input(self, p, position: int) -> Var:
        val = p.meta.get("val")
        if val is None or not hasattr(val, "shape"):
            raise PyTorchFormatError(f"input {p.name!r} is not a tensor (it is {val!r})")
        shape = tuple(val.shape)
        dtype = str(val.dtype).replace("torch.", "")
        if self.example is not None:
            ex = self.example[position]
            static = [(a, b) for a, b in zip(ex.shape, shape) if isinstance(b, int) and a != b]
            if len(ex.shape) != len(shape) or static:
                raise PyTorchConversionError(
                    f"example_inputs[{position}] has shape {list(ex.shape)}, but input "
                    f"{p.name!r} is {[str(d) for d in shape]}"
                )
            shape, dtype = ex.shape, ex.dtype
        if not all(isinstance(d, int) for d in shape):
            raise PyTorchConversionError(
                f"input {p.name!r} has dynamic shape {[str(d) for d in shape]}; pass "
                f"example_inputs to fix it"
            )
        v = Var(
            p.name,
            TensorType(tuple(int(d) for d in shape), _partita_dtype(dtype, p.name)),
            span=Span(index=0, op_type="placeholder", tensor=p.name),
        )
        self.params.append(v)
        return v

    def _constant(self, p, spec) -> Constant:
        target = spec.target
        tensor = self.ep.state_dict.get(target)
        if tensor is None:
            tensor = self.ep.constants.get(target)
        if tensor is None:
            raise PyTorchFormatError(
                f"placeholder {p.name!r} reads {target!r}, which is "
                f"missing from the program's state_dict and constants"
            )
        data = to_numpy(tensor, f"weight {target!r}")
        return Constant(data, span=Span(op_type="placeholder", tensor=target))

    # ---- nodes ------------------------------------------------------------------------------

    def _convert_node(self, index: int, node) -> None:
        names = [a.name for a in node.all_input_nodes]
        if any(n in self.poisoned for n in names):
            self.poisoned.add(node.name)  # downstream of an unsupported node
            return
        fn = CONVERTERS.get(packet_name(node.target))
        if fn is None:
            return self._unsupported(index, node, "no converter for this op")
        args = [self._value(a) for a in node.args]
        kwargs = {k: self._value(v) for k, v in node.kwargs.items()}
        ctx = NodeContext(
            index, node.name, target_name(node.target), args, kwargs, None, self.options
        )
        try:
            result = fn(ctx)
        except Unsupported as e:
            return self._unsupported(index, node, str(e))
        except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError) as e:
            ctx.fail(f"{type(e).__name__}: {e}")
        self.values[node.name] = result

    def _value(self, a):
        """An FX argument with nodes replaced by their values (lists and tuples recursively)."""
        if isinstance(a, (list, tuple)):
            return type(a)(self._value(x) for x in a)
        if hasattr(a, "op") and hasattr(a, "name") and hasattr(a, "all_input_nodes"):
            if a.name not in self.values:
                raise PyTorchFormatError(f"node {a.name!r} is used before it is computed")
            return self.values[a.name]
        return a

    def _unsupported(self, index: int, node, reason: str) -> None:
        self.unsupported.append((index, node.name, target_name(node.target), reason))
        self.poisoned.add(node.name)

    def _module(self, outputs) -> IRModule:
        specs = self.ep.graph_signature.output_specs
        outs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
        user = [o for o, s in zip(outs, specs) if _kind(s) == "USER_OUTPUT"] or list(outs)
        exprs = []
        for o in user:
            v = self._value(o)
            if not isinstance(v, Expr):
                raise PyTorchConversionError(
                    f"output {getattr(o, 'name', o)!r} is not a tensor (it is {type(v).__name__})"
                )
            exprs.append(v)
        body = exprs[0] if len(exprs) == 1 else Tuple(exprs)
        attrs = {
            "input_names": tuple(p.name_hint for p in self.params),
            "output_names": tuple(getattr(o, "name", str(o)) for o in user),
        }
        return IRModule({"main": Function(self.params, body)}, attrs=attrs)


def _kind(spec) -> str:
    return spec.kind.name if spec is not None else "USER_INPUT"


def _partita_dtype(dtype: str, name: str) -> str:
    if dtype not in ("float32", "float16", "int8", "uint8", "int16", "int32", "int64", "bool"):
        raise PyTorchConversionError(
            f"input {name!r} has dtype {dtype}, which partita does not take"
        )
    return dtype
