"""The pattern language: Pattern classes and their constructors (TVM's names).

    conv = is_op("qnn.conv2d")(wildcard("x"), is_constant(), *constants(4)).named("conv")
    out = is_op("qnn.requantize")(conv, *constants(4)).optional(lambda p: is_op("clip")(p))

Patterns are immutable DAGs: a sub-pattern used twice must match the same expression twice. Op
names are checked against the registry when the pattern is built, so a typo fails at once.
"""

from __future__ import annotations

from collections.abc import Callable

from partita.errors import PartitaError
from partita.ir.nodes import Expr
from partita.ir.types import Type, check_dtype
from partita.ops.registry import Op, get_op

from .attrs import check_attr_names, normalize_value
from .walk import capture_names, walk_pattern  # noqa: F401  (part of this module's API)

# Matching, partitioning and printing sit above the language: matcher.py, partition.py and
# explain.py import this module and install their entry points here, and partita.patterns imports
# all three; so ``pattern.match(expr)`` and ``repr(pattern)`` work without an import loop.
ENGINE: dict[str, Callable] = {}


class PatternError(PartitaError):
    """A pattern that cannot be built or used (bad arguments, unknown attribute, ...)."""


class Pattern:
    """Base class of patterns. Build them with the constructors below, not directly."""

    # CACHES: its compiled matcher (compiled.py) and claim program (programs.py), kept on it: they
    # refer back to it, so a WeakKeyDictionary keyed by the pattern kept every pattern matched alive
    __slots__ = ("name", "__weakref__", "_matcher", "_program")
    CACHES = ("_matcher", "_program")

    def __setattr__(self, key, value):
        raise AttributeError("patterns are immutable; methods return new patterns")

    def _init(self, name=None):
        if name is not None and (not isinstance(name, str) or not name):
            raise PatternError(f"a capture name must be a non-empty string, got {name!r}")
        object.__setattr__(self, "name", name)

    # ---- composition ----------------------------------------------------------------------
    def __call__(self, *args) -> CallPattern:
        """A call whose op matches this pattern: ``is_op("add")(x, y)``; ``p(None)`` is a call
        with any arguments (TVM's spelling)."""
        return CallPattern(self, None if args == (None,) else args)

    def __or__(self, other) -> AltPattern:
        """Alternation: matches if either side does (left first)."""
        return AltPattern(self, other)

    def __add__(self, other):
        return is_op("add")(self, other)

    def __sub__(self, other):
        return is_op("subtract")(self, other)

    def __mul__(self, other):
        return is_op("multiply")(self, other)

    def __truediv__(self, other):
        return is_op("divide")(self, other)

    def optional(self, option: Callable[[Pattern], Pattern]) -> AltPattern:
        """``self | option(self)``: e.g. ``conv.optional(lambda x: is_op("nn.relu")(x))``."""
        wrapped = option(self)
        if not isinstance(wrapped, Pattern):
            raise PatternError(f"optional(): the constructor returned {wrapped!r}, not a pattern")
        return AltPattern(self, wrapped)

    def has_attr(self, attrs: dict) -> AttrPattern:
        """Also require attribute values (of a call, a function or an op)."""
        return AttrPattern(self, attrs)

    def has_dtype(self, dtype) -> DataTypePattern:
        """Also require the tensor dtype (``"int8"``)."""
        return DataTypePattern(self, dtype)

    def has_shape(self, shape) -> ShapePattern:
        """Also require the tensor shape (``(1, 224, 224, 3)``)."""
        return ShapePattern(self, shape)

    def has_type(self, ty: Type) -> TypePattern:
        """Also require the exact type (``TensorType((1, 8), "int8")``)."""
        return TypePattern(self, ty)

    def where(self, predicate: Callable[[Expr], bool], doc: str | None = None) -> PredicatePattern:
        """Escape hatch: also require ``predicate(expr)`` (called after the rest matched)."""
        return PredicatePattern(self, predicate, doc)

    def named(self, name: str) -> Pattern:
        """This pattern with a capture name: the matched node is ``captures[name]``."""
        clone = object.__new__(type(self))
        for cls in type(self).__mro__:
            for slot in getattr(cls, "__slots__", ()):
                if slot != "__weakref__" and slot not in Pattern.CACHES and hasattr(self, slot):
                    object.__setattr__(clone, slot, getattr(self, slot))
        Pattern._init(clone, name)
        if hasattr(clone, "post"):  # the clone's deferred check must point at the clone
            object.__setattr__(clone, "post", _PostCheck(clone))
        return clone

    def dominates(self, parent: Pattern, path: Pattern | None = None) -> DominatorPattern:
        """``dominates(parent, path, self)`` (TVM's method form)."""
        return dominates(parent, path if path is not None else wildcard(), self)

    # ---- use ------------------------------------------------------------------------------
    def match(self, expr: Expr) -> bool:
        """True if this pattern matches with ``expr`` as its root."""
        return ENGINE["match"](self, expr) is not None

    def find(self, expr_or_mod) -> list:
        """Every node where this pattern matches (overlapping matches included), as Match."""
        return ENGINE["find"](self, expr_or_mod)

    def partition(self, expr_or_mod, attrs: dict | None = None, check=None):
        """Wrap each match in a function (Relay's ``partition``); see partita.patterns.partition."""
        return ENGINE["partition"](self, expr_or_mod, attrs, check)

    # ---- introspection ----------------------------------------------------------------------
    def children(self) -> tuple:
        return ()

    def root_keys(self) -> frozenset | None:
        """The op names (or node kinds) a root expression can have; None if it can be anything."""
        return None

    def __repr__(self):
        return ENGINE["pattern_text"](self)


# ---- leaves ----------------------------------------------------------------------------------


class WildcardPattern(Pattern):
    """Matches any expression."""

    __slots__ = ()

    def __init__(self, name=None):
        self._init(name)


class OpPattern(Pattern):
    """Matches one registered op (the ``op`` of a call). Built by ``is_op``. ``checked=False``
    (TVM's behaviour, for partita.relay): a call pattern or has_attr that does not fit the op
    is built anyway and simply never matches."""

    __slots__ = ("op", "checked")

    def __init__(self, op: Op, checked: bool = True):
        self._init()
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "checked", checked)

    def root_keys(self):
        return frozenset((self.op.name,))


class VarPattern(Pattern):
    """Matches a Var, optionally with a given name hint."""

    __slots__ = ("var_name",)

    def __init__(self, var_name=None):
        self._init()
        object.__setattr__(self, "var_name", var_name or None)

    def root_keys(self):
        return frozenset(("Var",))


class ConstantPattern(Pattern):
    """Matches any Constant."""

    __slots__ = ()

    def __init__(self):
        self._init()

    def root_keys(self):
        return frozenset(("Constant",))


class ExprPattern(Pattern):
    """Matches expressions structurally equal to ``expr``."""

    __slots__ = ("expr",)

    def __init__(self, expr: Expr):
        self._init()
        if not isinstance(expr, Expr):
            raise PatternError(f"is_expr() takes an expression, got {expr!r}")
        object.__setattr__(self, "expr", expr)


# ---- structure -------------------------------------------------------------------------------


class CallPattern(Pattern):
    """A call: ``op`` (a pattern matched against the call's op) applied to argument patterns;
    ``args=None``: any arguments, any number of them."""

    __slots__ = ("op", "args")

    def __init__(self, op: Pattern, args):
        self._init()
        if args is not None:
            args = tuple(_as_pattern(a, f"argument {i}") for i, a in enumerate(args))
        object.__setattr__(self, "op", _as_pattern(op, "op"))
        object.__setattr__(self, "args", args)
        for op_obj in _ops_of(self.op, checked_only=True) if args is not None else ():
            if op_obj.num_inputs != len(args):
                raise PatternError(
                    f"{op_obj.name} takes {op_obj.num_inputs} arguments "
                    f"({', '.join(op_obj.inputs)}), the pattern gives {len(args)}"
                )

    def children(self):
        return (self.op, *(self.args or ()))

    def root_keys(self):
        return self.op.root_keys() if _ops_of(self.op) else None


class TuplePattern(Pattern):
    """A tuple with the given field patterns (``fields=None``: any tuple)."""

    __slots__ = ("fields",)

    def __init__(self, fields):
        self._init()
        if fields is not None:
            fields = tuple(_as_pattern(f, f"tuple field {i}") for i, f in enumerate(fields))
        object.__setattr__(self, "fields", fields)

    def children(self):
        return self.fields or ()

    def root_keys(self):
        return frozenset(("Tuple",))


class FunctionPattern(Pattern):
    """A function (TVM's FunctionPattern): ``params`` patterns for its parameters (None: any
    number of any parameters) and a ``body`` pattern. A pattern bound to a parameter binds the
    same Var where the body uses it."""

    __slots__ = ("params", "body")

    def __init__(self, params, body):
        self._init()
        if params is not None:
            params = tuple(_as_pattern(p, f"function parameter {i}") for i, p in enumerate(params))
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "body", _as_pattern(body, "function body"))

    def children(self):
        return (*(self.params or ()), self.body)

    def root_keys(self):
        return frozenset(("Function",))


class TupleGetItemPattern(Pattern):
    """``tuple.index`` (``index=None``: any index)."""

    __slots__ = ("tuple", "index")

    def __init__(self, tuple_pattern: Pattern, index: int | None = None):
        self._init()
        if index is not None and (not isinstance(index, int) or index < 0):
            raise PatternError(
                f"is_tuple_get_item(): index must be None or an int >= 0, got {index!r}"
            )
        object.__setattr__(self, "tuple", _as_pattern(tuple_pattern, "tuple"))
        object.__setattr__(self, "index", index)

    def children(self):
        return (self.tuple,)

    def root_keys(self):
        return frozenset(("TupleGetItem",))


class AltPattern(Pattern):
    """``left | right``: the left alternative is tried first."""

    __slots__ = ("left", "right")

    def __init__(self, left, right):
        self._init()
        object.__setattr__(self, "left", _as_pattern(left, "left of |"))
        object.__setattr__(self, "right", _as_pattern(right, "right of |"))

    def children(self):
        return (self.left, self.right)

    def root_keys(self):
        a, b = self.left.root_keys(), self.right.root_keys()
        return None if a is None or b is None else a | b


class _Wrapper(Pattern):
    """A pattern that adds a condition to an inner pattern."""

    __slots__ = ("pattern",)

    def _wrap(self, inner):
        self._init()
        object.__setattr__(self, "pattern", _as_pattern(inner, "pattern"))

    def children(self):
        return (self.pattern,)

    def root_keys(self):
        return self.pattern.root_keys()


class AttrPattern(_Wrapper):
    """The inner pattern, with attribute values (lists compare as tuples)."""

    __slots__ = ("attrs",)

    def __init__(self, inner, attrs: dict):
        self._wrap(inner)
        if not isinstance(attrs, dict) or not attrs:
            raise PatternError(f"has_attr() takes a non-empty dict, got {attrs!r}")
        for key in attrs:
            if not isinstance(key, str):
                raise PatternError(f"has_attr(): attribute names are strings, got {key!r}")
        _check_attr_names(self.pattern, attrs)
        object.__setattr__(self, "attrs", {k: normalize_value(v) for k, v in attrs.items()})


class DataTypePattern(_Wrapper):
    """The inner pattern, with a tensor dtype."""

    __slots__ = ("dtype",)

    def __init__(self, inner, dtype):
        self._wrap(inner)
        object.__setattr__(self, "dtype", check_dtype(dtype))


class ShapePattern(_Wrapper):
    """The inner pattern, with a tensor shape."""

    __slots__ = ("shape",)

    def __init__(self, inner, shape):
        self._wrap(inner)
        try:
            shape = tuple(int(d) for d in shape)
        except (TypeError, ValueError):
            raise PatternError(f"has_shape() takes a tuple of ints, got {shape!r}") from None
        object.__setattr__(self, "shape", shape)


class TypePattern(_Wrapper):
    """The inner pattern, with an exact type."""

    __slots__ = ("type",)

    def __init__(self, inner, ty: Type):
        self._wrap(inner)
        if not isinstance(ty, Type):
            raise PatternError(
                f"has_type() takes a type such as TensorType(shape, dtype), got {ty!r}"
            )
        object.__setattr__(self, "type", ty)


class PredicatePattern(_Wrapper):
    """The inner pattern, with ``predicate(expr)`` true (checked after the inner pattern)."""

    __slots__ = ("predicate", "doc", "post")

    def __init__(self, inner, predicate, doc=None):
        self._wrap(inner)
        if not callable(predicate):
            raise PatternError(f"where() takes a callable, got {predicate!r}")
        object.__setattr__(self, "predicate", predicate)
        object.__setattr__(self, "doc", doc or getattr(predicate, "__name__", "predicate"))
        object.__setattr__(self, "post", _PostCheck(self))


class _PostCheck:
    """A goal that runs a predicate after its inner pattern matched (internal to the matcher)."""

    __slots__ = ("owner",)

    def __init__(self, owner):
        self.owner = owner


class DominatorPattern(Pattern):
    """``child`` whose inputs reach ``parent`` only through nodes matching ``path``."""

    __slots__ = ("parent", "path", "child", "post")

    def __init__(self, parent, path, child):
        self._init()
        object.__setattr__(self, "parent", _as_pattern(parent, "parent"))
        object.__setattr__(self, "path", _as_pattern(path, "path"))
        object.__setattr__(self, "child", _as_pattern(child, "child"))
        object.__setattr__(self, "post", _PostCheck(self))

    def children(self):
        return (self.parent, self.path, self.child)

    def root_keys(self):
        return self.child.root_keys()


# ---- constructors ----------------------------------------------------------------------------


def wildcard(name: str | None = None) -> WildcardPattern:
    """Matches anything; ``wildcard("x")`` also captures it as ``x``."""
    return WildcardPattern(name)


def is_op(op) -> OpPattern:
    """An op, checked against the registry now: ``is_op("qnn.conv2d")(data, weight, ...)``."""
    if isinstance(op, Op):
        return OpPattern(op)
    if not isinstance(op, str):
        raise PatternError(f"is_op() takes an op name, got {op!r}")
    return OpPattern(get_op(op))


def is_constant() -> ConstantPattern:
    """Matches any Constant (weights, scales, zero points)."""
    return ConstantPattern()


def constants(n: int) -> list[ConstantPattern]:
    """``n`` independent ``is_constant()`` patterns (for quantization parameters)."""
    return [ConstantPattern() for _ in range(n)]


def is_var(name: str | None = None) -> VarPattern:
    """Matches a Var (an input), optionally only the one named ``name``."""
    return VarPattern(name)


def is_expr(expr: Expr) -> ExprPattern:
    """Matches expressions structurally equal to ``expr``."""
    return ExprPattern(expr)


def is_tuple(fields=None) -> TuplePattern:
    """A tuple of the given field patterns (None: any tuple)."""
    return TuplePattern(fields)


def is_tuple_get_item(tuple_pattern, index: int | None = None) -> TupleGetItemPattern:
    """``tuple.index``; ``index=None`` matches any index."""
    return TupleGetItemPattern(tuple_pattern, index)


def dominates(parent: Pattern, path: Pattern, child: Pattern) -> DominatorPattern:
    """``child`` whose every input path back to ``parent`` goes through ``path`` nodes, and
    whose result is the only way ``parent``'s value leaves the region (a diamond)."""
    return DominatorPattern(parent, path, child)


# ---- helpers ---------------------------------------------------------------------------------


def _as_pattern(p, what: str) -> Pattern:
    if isinstance(p, Pattern):
        return p
    if isinstance(p, Expr):
        return ExprPattern(p)
    raise PatternError(f"{what} must be a pattern, got {p!r}")


def _ops_of(p: Pattern, checked_only: bool = False) -> list[Op]:
    """The ops an op pattern can match, if it is an is_op or an alternation of them
    (``checked_only``: leaving out those built with ``checked=False``)."""
    if isinstance(p, OpPattern):
        return [p.op] if p.checked or not checked_only else []
    if isinstance(p, AltPattern):
        left, right = _ops_of(p.left, checked_only), _ops_of(p.right, checked_only)
        return left + right if left and right else []
    return []


def _check_attr_names(inner: Pattern, attrs: dict) -> None:
    """For ``is_op(...)(...).has_attr`` fail now on an attribute the op does not have."""
    if isinstance(inner, CallPattern):
        check_attr_names(_ops_of(inner.op, checked_only=True), attrs, op_level=False)
    elif isinstance(inner, (OpPattern, AltPattern)):
        check_attr_names(_ops_of(inner, checked_only=True), attrs, op_level=True)
