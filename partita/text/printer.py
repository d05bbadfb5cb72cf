"""Relay's text format, printed.

    #[version = "0.0.5"]
    def @main(%x: Tensor[(1, 8, 8, 4), int8]) -> Tensor[(1, 8, 8, 4), int8] {
      %0 = qnn.dequantize(%x, 0.05f, -3) /* ty=Tensor[(1, 8, 8, 4), float32] */;
      %1 = nn.relu(%0) /* ty=Tensor[(1, 8, 8, 4), float32] */ /* span=RELU:1:relu_out */;
      qnn.quantize(%1, 0.1f, 2) /* ty=Tensor[(1, 8, 8, 4), int8] */
    }

Every Call, Tuple, TupleGetItem, If and inner Function gets one ``%n`` binding (an If's branches are
values bound before it: ``if (%3) { %1 } else { %2 }``); a Let prints as ``let %v = value;`` where
its variable is first needed, then its body's bindings; scalar constants are
written inline (bound like a node when one constant object is shared), other constants are
``meta[relay.Constant][i]``. Types come from the InferType cache; the printer never infers.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from partita.errors import PartitaError
from partita.ir.gc_pause import gc_paused
from partita.ir.module import IRModule
from partita.ir.nodes import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Tuple,
    TupleGetItem,
)
from partita.ir.refs import REF_NODES, RefCreate, RefRead, ref_inputs
from partita.ir.types import RefType, TensorType, TupleType, Type
from partita.ir.visitor import children, free_vars, post_order
from partita.ops.registry import Op

from .lexer import IDENTIFIER, encode_span, quote

HEADER = '#[version = "0.0.5"]'
_INT_SUFFIX = {"int8": "i8", "int16": "i16", "int32": "", "int64": "i64", "uint8": "u8"}
_FLOAT_SUFFIX = {"float16": "f16", "float32": "f", "float64": "f64"}
_TYPED = (Call, Tuple, TupleGetItem, *REF_NODES)  # those with a /* ty=... */ comment, as Relay
_REF_WORDS = {RefCreate: "ref", RefRead: "ref_read"}  # and ref_write
_REQUIRED = object()
_SCHEMAS: dict[type, tuple] = {}


def print_module(mod: IRModule, show_spans: bool = False) -> str:
    """The module in Relay's text format (meta constants numbered, but not returned)."""
    return astext(mod, show_spans)[0]


def print_expr(expr: Expr, show_spans: bool = False) -> str:
    """An expression in Relay's text format: bindings then the result (``fn ...`` for functions)."""
    return astext(expr, show_spans)[0]


@gc_paused
def astext(obj, show_spans: bool = False) -> tuple[str, list[Constant]]:
    """``(text, constants)``: ``meta[relay.Constant][i]`` in the text is ``constants[i]``. Spans
    (``/* span=OP:index:tensor */``) are printed only with ``show_spans``: they repeat the source
    op after every argument of an imported model."""
    printer = _Printer(show_spans)
    if isinstance(obj, IRModule):
        return printer.module(obj), printer.constants
    if isinstance(obj, Expr):
        return printer.expr(obj), printer.constants
    raise PartitaError(f"astext expects an IRModule or an expression, got {type(obj).__name__}")


class _Printer:
    def __init__(self, show_spans: bool = False):
        self.show_spans = show_spans
        self.constants: list[Constant] = []
        self._meta: dict[int, int] = {}
        self._types: dict[Type, str] = {}

    def _span(self, node) -> str:
        if not self.show_spans or node.span is None:
            return ""
        return f" /* span={encode_span(node.span)} */"

    def module(self, mod: IRModule) -> str:
        defs = [self._def(name, fn) for name, fn in mod.items()]
        return "\n".join([HEADER, *(["\n\n".join(defs)] if defs else [])])

    def expr(self, expr: Expr) -> str:
        if isinstance(expr, Function):
            return self._function(expr, 0, self._reset(expr, expr))
        hoisted = self._reset(None, expr)
        lines: list[str] = []
        for v in free_vars(expr):  # declared first, as Relay does, so that their types show
            name = self.names[id(v)] = self._var_name(v.name_hint)
            if v.type_annotation is not None:
                name = f"{name}: {self._type(v.type_annotation)}"
            lines.append(f"free_var {name}{self._span(v)};")
        self._block(None, expr, 0, lines, hoisted)
        return "\n".join(lines)

    def _def(self, name: str, fn: Function) -> str:
        hoisted = self._reset(fn, fn.body)
        lines = [f"def {_global(name)}({self._params(fn)}){self._ret(fn)} {{"]
        self._block(fn, fn.body, 1, lines, hoisted)
        lines.append("}" + self._span(fn))
        return "\n".join(lines)

    # Per-definition state: names of printed nodes, var names in scope, the %n counter.
    def _reset(self, owner, body) -> list[Constant]:
        self.names: dict[int, str] = {}
        self.taken: set[str] = set()
        self.counter = 0
        return self._analyse(owner, body)

    def _analyse(self, owner, body) -> list[Constant]:
        """Walk every function scope once: record each scope's node order, and which scalar
        constants are shared (bound once; hoisted to the top when shared across scopes)."""
        self.orders: dict[int, list[Expr]] = {}
        self.let_values: dict[int, Expr] = {}
        self.let_functions: dict[int, Expr] = {}  # id(function) -> the let variable naming it
        uses: dict[int, int] = {}
        scope_of: dict[int, int | None] = {}
        first: dict[int, Constant] = {}
        work, seen = [(owner, body)], set()
        while work:
            fn, root = work.pop()
            order = [root] if isinstance(root, Function) else post_order(root, False)
            self.orders[id(fn)] = order
            lets = [n for n in order if type(n) is Let]
            self.let_values.update((id(n.var), n.value) for n in lets)
            self.let_functions.update(
                (id(n.value), n.var) for n in lets if type(n.value) is Function
            )
            scope = id(fn)
            for kid in _uses(order, root):
                if type(kid) is Function:
                    if id(kid) not in seen:
                        seen.add(id(kid))
                        work.append((kid, kid.body))
                    continue
                if type(kid) is not Constant or kid.data.ndim:
                    continue
                k = id(kid)
                if k in uses:
                    uses[k] += 1
                    if scope_of[k] != scope:
                        scope_of[k] = None
                else:
                    uses[k], scope_of[k], first[k] = 1, scope, kid
        self.bound_constants = {k for k, n in uses.items() if n > 1}
        return [c for k, c in first.items() if uses[k] > 1 and scope_of[k] is None]

    def _block(self, owner, body, indent: int, lines: list[str], hoisted=()) -> None:
        """Bindings and the final expression of one function body."""
        pad = "  " * indent
        for c in hoisted:
            self._bind(c, self._constant(c), pad, lines)
        lines.append(pad + self._scope(body, self.orders[id(owner)], pad, lines, indent))

    def _scope(self, root, order, pad: str, lines: list[str], indent: int) -> str:
        names = self.names
        for node in order:
            key = id(node)
            if key in names:
                continue
            kind = type(node)
            if kind is Call:
                text = self._call(node)
            elif kind is Tuple:
                fields = [names[id(f)] for f in node.fields]
                text = "(" + ", ".join(fields) + ("," if len(fields) == 1 else "") + ")"
            elif kind is TupleGetItem:
                value = names[id(node.tuple_value)]
                text = f"{value if value[0] in '%@' else '(' + value + ')'}.{node.index}"
            elif kind is Function and key in self.let_functions:  # named before its body,
                var = self.let_functions[key]  # which may call it (recursion)
                names[id(var)] = self._var_name(var.name_hint)
                lines.append(f"{pad}let {self._let_head(var)} = {self._function(node, indent)};")
                names[key] = names[id(var)]
                continue
            elif kind is Function:
                text = self._function(node, indent)
            elif kind is Constant:
                text = self._constant(node)
                if key not in self.bound_constants or node is root:
                    names[key] = text + self._span(node)
                    continue
            elif kind is GlobalVar:
                names[key] = _global(node.name_hint)
                continue
            elif kind in REF_NODES:
                inputs = ", ".join(names[id(k)] for k in ref_inputs(node))
                text = f"{_REF_WORDS.get(kind, 'ref_write')}({inputs})"
            elif kind is If:
                cond, t, f = (names[id(c)] for c in children(node))
                text = f"if ({cond}) {{ {t} }} else {{ {f} }}"
            elif kind is Let:  # its binding was printed at its variable; it is its body
                names[key] = names[id(node.body)]
                if node is root:
                    return names[key]
                continue
            elif key in self.let_values:  # a let variable: ``let %v = value;`` here
                names[key] = self._var_name(node.name_hint)
                value = names[id(self.let_values[key])]
                lines.append(f"{pad}let {self._let_head(node)} = {value};")
                continue
            else:  # a free Var inside a function: ill-formed, but printable
                names[key] = self._var_name(node.name_hint)
                continue
            if node is root:
                return text + self._comments(node)
            self._bind(node, text, pad, lines)
        return names[id(root)]

    def _let_head(self, var) -> str:
        ann, name = var.type_annotation, self.names[id(var)]
        return f"{name}: {self._type(ann)}" if ann is not None else name

    def _bind(self, node, text: str, pad: str, lines: list[str]) -> None:
        ref = f"%{self.counter}"
        self.counter += 1
        lines.append(f"{pad}{ref} = {text}{self._comments(node)};")
        self.names[id(node)] = ref

    def _comments(self, node) -> str:
        text = ""
        if node.type_or_none is not None and type(node) in _TYPED:
            text = f" /* ty={self._type(node.type_or_none)} */"
        return text + self._span(node) if node.span is not None else text

    def _function(self, fn: Function, indent: int, hoisted=()) -> str:
        """An inner function; its params and bindings are visible only inside it."""
        mark, taken = len(self.names), set(self.taken)
        pad = "  " * indent
        lines = [f"fn ({self._params(fn)}){self._ret(fn)} {{"]
        self._block(fn, fn.body, indent + 1, lines, hoisted)
        lines.append(pad + "}")
        for _ in range(len(self.names) - mark):
            self.names.popitem()
        self.taken = taken
        return "\n".join(lines)

    def _params(self, fn: Function) -> str:
        parts = []
        for p in fn.params:
            name = self._var_name(p.name_hint)
            self.names[id(p)] = name
            if p.type_annotation is not None:
                name = f"{name}: {self._type(p.type_annotation)}"
            parts.append(name + self._span(p))
        for key, value in fn.attrs.items():
            key = key if IDENTIFIER.fullmatch(key) else quote(key)
            parts.append(f"{key}={_attr_value(value)}")
        return ", ".join(parts)

    def _var_name(self, hint: str) -> str:
        """A name unique in the visible scopes: ``%x``, else ``%x_1``; odd names are quoted."""
        name, k = hint, 0
        while name in self.taken:
            k += 1
            name = f"{hint}_{k}"
        self.taken.add(name)
        return "%" + (name if IDENTIFIER.fullmatch(name) else quote(name))

    def _ret(self, fn: Function) -> str:
        ret = fn.ret_type if fn.ret_type is not None else fn.type_or_none
        return f" -> {self._type(ret)}" if ret is not None else ""

    def _call(self, call: Call) -> str:
        names, op = self.names, call.op
        args = [names[id(a)] for a in call.args]
        if isinstance(op, Op):
            head = op.name
            if call.attrs is not None:
                args.extend(_attrs(call.attrs))
        elif isinstance(op, GlobalVar):
            head = _global(op.name_hint)
        else:
            head = names[id(op)]
        return f"{head}({', '.join(args)})"

    def _constant(self, c: Constant) -> str:
        if c.data.ndim == 0:
            literal = scalar_literal(c.data)
            if literal is not None:
                return literal
        index = self._meta.get(id(c))
        if index is None:
            index = self._meta[id(c)] = len(self.constants)
            self.constants.append(c)
        return f"meta[relay.Constant][{index}]"

    def _type(self, ty: Type) -> str:
        text = self._types.get(ty)
        if text is None:
            text = self._types[ty] = type_text(ty)
        return text


def _uses(order, root):
    """Every child reference made by the nodes of one scope (with repeats), then the root."""
    for node in order:
        if type(node) is not Function:
            yield from children(node)
    yield root


def type_text(ty: Type) -> str:
    """``Tensor[(1, 8), int8]``, ``float32`` for scalars (as Relay), ``(T1, T2)`` for tuples."""
    if isinstance(ty, TensorType):
        if not ty.shape:
            return ty.dtype
        return f"Tensor[({', '.join(map(str, ty.shape))}), {ty.dtype}]"
    if isinstance(ty, TupleType):
        inner = [type_text(f) for f in ty.fields]
        return "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"
    if isinstance(ty, RefType):
        return f"ref({type_text(ty.value)})"
    raise PartitaError(f"cannot print type {ty!r}")


def scalar_literal(data: np.ndarray) -> str | None:
    """Relay's literal of a 0-d array (``0.05f``, ``3i8``, ``True``); None for inf and nan."""
    dtype = data.dtype.name
    if dtype == "bool":
        return "True" if data else "False"
    if dtype in _INT_SUFFIX:
        return f"{int(data)}{_INT_SUFFIX[dtype]}"
    if not np.isfinite(data):
        return None
    # numpy prints the shortest digits that read back to the same bits of that precision.
    text = str(data[()]) if dtype != "float64" else repr(float(data))
    if text.endswith(".0"):
        text = text[:-2]
    return text + _FLOAT_SUFFIX[dtype]


def _attrs(attrs) -> list[str]:
    """``name=value`` for each attribute that differs from its schema default."""
    schema = _SCHEMAS.get(type(attrs))
    if schema is None:
        schema = _SCHEMAS[type(attrs)] = tuple(_defaults(type(attrs)))
    out = []
    for name, default in schema:
        value = getattr(attrs, name)
        if default is _REQUIRED or value != default:
            out.append(f"{name}={_attr_value(value)}")
    return out


def _defaults(attrs_type):
    for f in dataclasses.fields(attrs_type):
        if f.default is not dataclasses.MISSING:
            yield f.name, f.default
        elif f.default_factory is not dataclasses.MISSING:
            yield f.name, f.default_factory()
        else:
            yield f.name, _REQUIRED


def _attr_value(value) -> str:
    """Relay's spelling of an attribute: strings quoted, tuples as lists, True/False, None."""
    if value is None:
        return "None"
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))  # shortest text that reads back to the same double
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_attr_value(v) for v in value) + "]"
    raise PartitaError(f"cannot print attribute value {value!r} ({type(value).__name__})")


def _global(name: str) -> str:
    return "@" + (name if IDENTIFIER.fullmatch(name) else quote(name))
