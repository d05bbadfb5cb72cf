"""The op registry: one registration holds an op's whole truth.

An op declares its name, input names, an attribute schema (a frozen dataclass, validated and
coerced here), a type relation and a numpy reference implementation. The interpreter is nothing but
those references walked over the graph.

    @register_op("nn.relu", inputs=("data",), type_rel=identity_rel, kind="elemwise")
    def relu(data, attrs):
        "max(data, 0)."
        return np.maximum(data, 0)
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from partita.errors import ArityError, AttrError, OpNotFoundError

_REGISTRY: dict[str, Op] = {}


@dataclass(frozen=True)
class Attrs:
    """Base class of attribute schemas. Subclasses are frozen dataclasses; override ``validate``
    for checks across fields (raise ValueError with the reason)."""

    def validate(self) -> None:
        pass


@dataclass(frozen=True)
class NoAttrs(Attrs):
    """The schema of ops without attributes."""


def choice(default, *options):
    """A string attribute restricted to ``options`` (``default`` must be one of them)."""
    assert default in options, (default, options)
    return field(default=default, metadata={"choices": options})


class Op:
    """A registered operator. Call it to build a Call node: ``get_op("nn.relu")(x)``."""

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
        from partita.ir.nodes import Call, Expr, const

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
            values[name] = _coerce(attrs[name], hints[name], f, f"{where}: attribute {name!r}")
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


def _coerce(value, hint, f, where):
    """Coerce an attribute value to its declared type (lists -> tuples, numpy scalars -> Python)."""
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, _UnionType) else ()
    if options:
        if value is None and type(None) in options:
            return None
        inner = [o for o in options if o is not type(None)]
        errors = []
        for o in inner:
            try:
                return _coerce(value, o, f, where)
            except AttrError as e:
                errors.append(str(e))
        raise AttrError(errors[0])
    origin = typing.get_origin(hint)
    if origin is tuple:
        args = typing.get_args(hint)
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            if args and args[-1] is Ellipsis and not isinstance(value, (str, bytes)):
                value = (value,)  # a scalar where a tuple is wanted: strides=2 -> (2,)
            else:
                raise AttrError(f"{where} must be a tuple, got {value!r}")
        elem = args[0] if args else Any
        return tuple(_coerce(v, elem, f, where) for v in value)
    if hint is bool:
        if isinstance(value, bool) or (hasattr(value, "dtype") and value.dtype == bool):
            return bool(value)
        if value in (0, 1) and not isinstance(value, float):
            return bool(value)
        raise AttrError(f"{where} must be a bool, got {value!r}")
    if hint is int:
        if isinstance(value, bool) or not _numeric(value) or not float(value).is_integer():
            raise AttrError(f"{where} must be an int, got {value!r}")
        return int(value)
    if hint is float:
        if not _numeric(value) or isinstance(value, bool):
            raise AttrError(f"{where} must be a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise AttrError(f"{where} must be a string, got {value!r}")
        options = f.metadata.get("choices")
        if options and value not in options:
            raise AttrError(
                f"{where} must be one of {', '.join(map(repr, options))}, got {value!r}"
            )
        return value
    return value


_UnionType = type(int | None)


def _numeric(value) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, str)


def register_op(
    name: str,
    inputs,
    attrs=NoAttrs,
    type_rel: Callable | None = None,
    commutative: bool = False,
    kind: str = "opaque",
):
    """Decorator registering a numpy reference implementation as op ``name``.

    ``kind`` tells fusion what the op is: "elemwise", "broadcast", "injective", "reduce",
    "out_elemwise_fusable" (conv, dense) or "opaque".
    """

    def wrap(impl):
        if name in _REGISTRY:
            raise ValueError(f"op {name} registered twice")
        if type_rel is None:
            raise ValueError(f"op {name} needs a type relation")
        doc = (impl.__doc__ or "").strip()
        _REGISTRY[name] = Op(name, inputs, attrs, type_rel, impl, commutative, kind, doc)
        return impl

    return wrap


def get_op(name: str) -> Op:
    """The registered op ``name``; an unknown name fails with the closest known names."""
    _ensure_loaded()
    try:
        return _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, _REGISTRY, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise OpNotFoundError(f"unknown op {name!r}{hint}") from None


def has_op(name: str) -> bool:
    _ensure_loaded()
    return name in _REGISTRY


def list_ops() -> list[Op]:
    """Every registered op, sorted by name."""
    _ensure_loaded()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def _ensure_loaded():
    # Importing the op modules registers their ops.
    from . import (  # noqa: F401
        nn,
        nn_conv,
        nn_image,
        nn_pool,
        qnn,
        qnn_elemwise,
        qnn_lut,
        qnn_pool,
        qnn_transformer,
        tensor,
        tensor_reduce,
        tensor_transform,
        transformer,
    )
