"""IR nodes: Var, Constant, Call, Tuple, TupleGetItem, If, Let, Function, GlobalVar.

Nodes are immutable: passes build new nodes. The one exception is the type annotation that
InferType writes once into ``_type`` (a node's type depends only on the sub-graph below it, so
caching it on a shared node is sound, as Relay's ``checked_type_`` is).
"""

from __future__ import annotations

import dataclasses
import typing

import numpy as np

from partita.errors import ArityError, AttrError, PartitaError

from .attrs import Attrs, coerce
from .span import Span
from .types import TensorType, Type, check_dtype, interned_tensor_type

# How str() prints nodes and modules: the Relay text printer installs itself here when
# partita.text is imported (``import partita`` does), so the IR never imports the text format.
TEXT_FORMAT: dict = {}


class Expr:
    """Base class of expressions. Identity is object identity; use structural_equal to compare."""

    __slots__ = ("span", "_type", "__weakref__")

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable; build a new node instead")

    def _init(self, span):
        if span is not None and not isinstance(span, Span):
            raise PartitaError(f"span must be a Span, got {span!r}")
        object.__setattr__(self, "span", span)
        object.__setattr__(self, "_type", None)

    @property
    def checked_type(self) -> Type:
        """The type InferType gave this node (raises if InferType has not run)."""
        if self._type is None:
            raise PartitaError(f"{self.short()} has no type yet: run InferType first")
        return self._type

    @property
    def type_or_none(self) -> Type | None:
        return self._type

    def with_type(self, ty: Type) -> Expr:
        """Record the type of this node (the one InferType infers) and return the node.

        Types are a cache written once per node, not part of its identity: a pass that builds a
        node whose type it knows (a copy of a typed node, a rewrite of the same shape) records it
        here instead of re-running InferType over the graph."""
        object.__setattr__(self, "_type", ty)
        return self

    def short(self) -> str:
        """A one-line description for error messages."""
        text = type(self).__name__
        return f"{text} ({self.span})" if self.span is not None else text

    def __str__(self):
        printer = TEXT_FORMAT.get("expr")
        return printer(self) if printer is not None else repr(self)

    def __repr__(self):
        return f"<{self.short()}>"

    def __call__(self, *args):
        """``f(x, y)`` -> ``Call(f, [x, y])`` for a Function, GlobalVar or let-bound Var (as
        Relay's expressions are called)."""
        return Call(self, args)

    # Arithmetic sugar for building float graphs in tests: x + y -> add(x, y).
    def __add__(self, other):
        return _binary("add", self, other)

    def __sub__(self, other):
        return _binary("subtract", self, other)

    def __mul__(self, other):
        return _binary("multiply", self, other)

    def __truediv__(self, other):
        return _binary("divide", self, other)

    # Relay's ExprWithOp: comparisons build ``less`` / ``greater`` calls (identity stays ``is``;
    # ``==`` is not overloaded, as in Relay), and a Python number on the left works too.
    def __lt__(self, other):
        return _binary("less", self, other)

    def __gt__(self, other):
        return _binary("greater", self, other)

    def __neg__(self):
        return Call(Op.table["negative"], [self])

    def __radd__(self, other):
        return _binary("add", self, other)

    def __rmul__(self, other):
        return _binary("multiply", self, other)


class Op:
    """A registered operator. Call it to build a Call node: ``get_op("nn.relu")(x)``."""

    table: typing.ClassVar[dict[str, Op]] = {}  # name -> Op, filled by ir.op.register_op

    __slots__ = (
        "name",
        "inputs",
        "attrs_type",
        "type_rel",
        "impl",
        "commutative",
        "kind",
        "doc",
        "_hints",
    )

    def __init__(self, name, inputs, attrs_type, type_rel, impl, commutative, kind, doc):
        self.name, self.inputs, self.attrs_type = name, tuple(inputs), attrs_type
        self.type_rel, self.impl = type_rel, impl
        self.commutative, self.kind, self.doc = commutative, kind, doc
        self._hints = None

    def __repr__(self):
        return f"Op({self.name})"

    def __call__(self, *args, span=None, **attrs):
        args = [a if isinstance(a, Expr) else const(a) for a in args]
        return Call(self, args, attrs or None, span=span)

    @property
    def num_inputs(self) -> int:
        return len(self.inputs)

    def check_arity(self, n: int, span=None) -> None:
        if n != len(self.inputs):
            where = f" at {span}" if span is not None else ""
            raise ArityError(
                f"{self.name}{where} takes {len(self.inputs)} arguments "
                f"({', '.join(self.inputs)}), got {n}"
            )

    def make_attrs(self, attrs, span=None):
        """Validate and coerce ``attrs`` (None, a dict or a schema instance) into the schema."""
        if isinstance(attrs, self.attrs_type):
            return attrs
        if attrs is None:
            attrs = {}
        elif isinstance(attrs, Attrs):
            attrs = dataclasses.asdict(attrs)
        where = f"{self.name}" + (f" ({span})" if span is not None else "")
        if not isinstance(attrs, dict):
            raise AttrError(f"{where}: attributes must be a dict, got {type(attrs).__name__}")
        fields = {f.name: f for f in dataclasses.fields(self.attrs_type)}
        unknown = [k for k in attrs if k not in fields]
        if unknown:
            allowed = ", ".join(fields) or "none"
            raise AttrError(f"{where}: unknown attribute {unknown[0]!r} (allowed: {allowed})")
        hints = self._type_hints()
        values = {}
        for name, f in fields.items():
            if name not in attrs:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    raise AttrError(f"{where}: missing required attribute {name!r}")
                continue
            values[name] = coerce(attrs[name], hints[name], f, f"{where}: attribute {name!r}")
        try:
            result = self.attrs_type(**values)
            result.validate()
        except (ValueError, TypeError) as e:
            raise AttrError(f"{where}: {e}") from None
        return result

    def _type_hints(self):
        if self._hints is None:
            self._hints = typing.get_type_hints(self.attrs_type)
        return self._hints


def _binary(name, a, b):
    return Call(Op.table[name], [a, const(b) if not isinstance(b, Expr) else b])


class Var(Expr):
    """A function parameter or graph input: ``%name: Tensor[(1, 8), int8]``."""

    __slots__ = ("name_hint", "type_annotation")

    def __init__(
        self, name_hint: str, type_annotation: Type | None = None, span: Span | None = None
    ):
        self._init(span)
        if not isinstance(name_hint, str) or not name_hint:
            raise PartitaError(f"Var name must be a non-empty string, got {name_hint!r}")
        if type_annotation is not None and not isinstance(type_annotation, Type):
            raise PartitaError(
                f"Var %{name_hint}: type annotation {type_annotation!r} is not a type"
            )
        object.__setattr__(self, "name_hint", name_hint)
        object.__setattr__(self, "type_annotation", type_annotation)
        if type_annotation is not None:
            self.with_type(type_annotation)

    def short(self):
        return f"%{self.name_hint}"


def var(name: str, shape=None, dtype="float32", span: Span | None = None) -> Var:
    """Shorthand: ``var("x", (1, 8, 8, 4), "int8")``."""
    return Var(name, TensorType(shape, dtype) if shape is not None else None, span)


class TensorData(np.ndarray):
    """A Constant's array: numpy, plus TVM's NDArray spellings ``.numpy()`` / ``.asnumpy()``
    (Relay code reads ``const.data.numpy()``). Arithmetic on it gives plain numpy arrays."""

    def numpy(self) -> np.ndarray:
        return self.view(np.ndarray)

    asnumpy = numpy

    def __array_wrap__(self, obj, context=None, return_scalar=False):
        out = np.asarray(obj).view(np.ndarray) if isinstance(obj, np.ndarray) else obj
        return out[()] if return_scalar and isinstance(out, np.ndarray) else out


class Constant(Expr):
    """A constant tensor (weights, scales, zero points). The array is made read-only."""

    __slots__ = ("data",)

    def __init__(self, data, span: Span | None = None):
        self._init(span)
        arr = np.asarray(data)
        check_dtype(arr.dtype)
        if arr.flags.writeable:
            arr = arr.copy()
            arr.flags.writeable = False
        object.__setattr__(self, "data", arr.view(TensorData))
        self.with_type(interned_tensor_type(arr.shape, arr.dtype.name))

    def short(self):
        t = self._type
        return f"Constant {t}" + (f" ({self.span})" if self.span is not None else "")


def const(value, dtype: str | None = None, span: Span | None = None) -> Constant:
    """A Constant from a Python or numpy value. Python floats default to float32, ints to int32."""
    if isinstance(value, Constant):
        return value
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, float):
            dtype = "float32"
        elif isinstance(value, int):
            dtype = "int32"
    arr = np.asarray(value, dtype=dtype) if dtype is not None else np.asarray(value)
    if dtype is None and not isinstance(value, (np.ndarray, np.generic)):
        # Python floats and ints (and lists of them) default to float32 / int32, as in Relay.
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        elif arr.dtype == np.int64:
            arr = arr.astype(np.int32)
    return Constant(arr, span)


class Call(Expr):
    """``op(args, attrs)``. ``op`` is a registered Op, a Function (a composite), a GlobalVar or
    a Var bound to a function (``let %f = fn (...) {...}; %f(%x)``; %f may call itself)."""

    __slots__ = ("op", "args", "attrs")

    def __init__(self, op, args, attrs=None, span: Span | None = None, relay_span=None):
        if isinstance(span, (list, tuple)) and not span:
            # Relay's Call(op, args, attrs, type_args[, span]): type_args are always empty here
            span = relay_span
        self._init(span)
        args = tuple(args)
        for i, a in enumerate(args):
            if not isinstance(a, Expr):
                raise PartitaError(f"argument {i} of {_op_name(op)} is not an expression: {a!r}")
        if isinstance(op, Op):
            op.check_arity(len(args), span)
            attrs = op.make_attrs(attrs, span=span)
        elif isinstance(op, (Function, GlobalVar, Var)):
            if attrs is not None:
                raise PartitaError("a call to a function takes no attributes")
        else:
            raise PartitaError(
                f"cannot call {op!r}: expected an Op, a Function, a GlobalVar or a Var"
            )
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "attrs", attrs)

    @property
    def op_name(self) -> str:
        return _op_name(self.op)

    @property
    def type_args(self) -> tuple:
        """Relay's type arguments of a call: always none (partita's ops are not polymorphic)."""
        return ()

    def short(self):
        return f"{self.op_name}" + (f" ({self.span})" if self.span is not None else "")


def _op_name(op) -> str:
    if type(op) is Op:  # the common case first (a backend's check asks at every match)
        return op.name
    if isinstance(op, Function):
        return str(op.attrs.get("Composite", "fn"))
    if isinstance(op, GlobalVar):
        return f"@{op.name_hint}"
    if isinstance(op, Var):
        return f"%{op.name_hint}"
    return getattr(op, "name", repr(op))


class Tuple(Expr):
    """``(a, b, ...)``."""

    __slots__ = ("fields",)

    def __init__(self, fields, span: Span | None = None):
        self._init(span)
        fields = tuple(fields)
        for i, f in enumerate(fields):
            if not isinstance(f, (Expr, Op)):  # an Op is a value in Relay: (%x, add)
                raise PartitaError(f"tuple field {i} is not an expression: {f!r}")
        object.__setattr__(self, "fields", fields)

    def __len__(self):
        return len(self.fields)

    def __bool__(self):  # a node is always true, the empty tuple too
        return True

    def __getitem__(self, index):
        """``tup[i]``: the field itself (Relay's Tuple indexing; TupleGetItem is the node)."""
        return self.fields[index]


class TupleGetItem(Expr):
    """``tuple.index``."""

    __slots__ = ("tuple_value", "index")

    def __init__(self, tuple_value: Expr, index: int, span: Span | None = None):
        self._init(span)
        if not isinstance(tuple_value, Expr) and hasattr(tuple_value, "astuple"):
            tuple_value = tuple_value.astuple()  # partita.relay's TupleWrapper: its call
        if not isinstance(tuple_value, Expr):
            raise PartitaError(f"TupleGetItem of a non-expression {tuple_value!r}")
        object.__setattr__(self, "tuple_value", tuple_value)
        object.__setattr__(self, "index", int(index))


class If(Expr):
    """``if (cond) { true_branch } else { false_branch }``: ``cond`` a scalar bool tensor.

    partita's graphs are dataflow: both branches are values of the graph (a pass may compute
    both; only ``cond`` decides which one the If returns), so an If costs what its branches cost
    and adds no scope."""

    __slots__ = ("cond", "true_branch", "false_branch")

    def __init__(self, cond: Expr, true_branch: Expr, false_branch: Expr, span=None):
        self._init(span)
        parts = {"cond": cond, "true_branch": true_branch, "false_branch": false_branch}
        for what, e in parts.items():
            if not isinstance(e, Expr):
                raise PartitaError(f"If {what} is not an expression: {e!r}")
        object.__setattr__(self, "cond", cond)
        object.__setattr__(self, "true_branch", true_branch)
        object.__setattr__(self, "false_branch", false_branch)


class Let(Expr):
    """``let %var = value; body``: ``var`` names ``value`` inside ``body``."""

    __slots__ = ("var", "value", "body")

    def __init__(self, var: Var, value: Expr, body: Expr, span=None):
        self._init(span)
        if not isinstance(var, Var):
            raise PartitaError(f"Let binds a Var, got {var!r}")
        if not isinstance(value, Expr) or not isinstance(body, Expr):
            raise PartitaError("Let value and body must be expressions")
        object.__setattr__(self, "var", var)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "body", body)


class Function(Expr):
    """``fn (params) -> ret_type { body }`` with attributes (Composite, Compiler, Primitive)."""

    __slots__ = ("params", "body", "ret_type", "attrs")

    def __init__(self, params, body: Expr, ret_type: Type | None = None, attrs=None, span=None):
        self._init(span)
        params = tuple(params)
        for p in params:
            if not isinstance(p, Var):
                raise PartitaError(f"function parameter {p!r} is not a Var")
        if not isinstance(body, Expr):
            raise PartitaError(f"function body {body!r} is not an expression")
        attrs = dict(attrs or {})
        for k, v in attrs.items():
            if not isinstance(k, str) or not isinstance(v, (str, int, float, bool)):
                raise PartitaError(f"function attribute {k}={v!r} must map a str to a scalar")
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "ret_type", ret_type)
        object.__setattr__(self, "attrs", _FrozenDict(attrs))

    def with_body(self, body: Expr) -> Function:
        """This function with ``body`` (itself when ``body`` is its body): same params, return
        type, attributes and span."""
        if body is self.body:
            return self
        return Function(self.params, body, self.ret_type, self.attrs, self.span)

    def with_attr(self, key: str, value) -> Function:
        """A copy of this function with one attribute added or replaced."""
        attrs = dict(self.attrs)
        attrs[key] = value
        return Function(self.params, self.body, self.ret_type, attrs, self.span)


class _FrozenDict(dict):
    """A dict that refuses mutation (function attributes)."""

    def _refuse(self, *args, **kwargs):
        raise TypeError("function attributes are immutable; use Function.with_attr")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse

    def __hash__(self):
        return hash(tuple(sorted(self.items())))


class GlobalVar(Expr):
    """A reference to a function of the module by name: ``@npu_main_0``."""

    __slots__ = ("name_hint",)

    def __init__(self, name_hint: str, span: Span | None = None):
        self._init(span)
        object.__setattr__(self, "name_hint", name_hint)

    def __eq__(self, other):
        return isinstance(other, GlobalVar) and other.name_hint == self.name_hint

    def __hash__(self):
        return hash(("GlobalVar", self.name_hint))

    def short(self):
        return f"@{self.name_hint}"
