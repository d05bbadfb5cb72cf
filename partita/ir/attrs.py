"""Op attribute schemas: frozen dataclasses, validated and coerced when a Call is built."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any

from partita.errors import AttrError


@dataclass(frozen=True)
class Attrs:
    """Base class of attribute schemas. Subclasses are frozen dataclasses; override ``validate``
    for checks across fields (raise ValueError with the reason)."""

    def validate(self) -> None:
        pass

    # Relay reads attributes like a dict too: attrs["padding"], attrs.keys(), dict(attrs)
    def keys(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self)]

    def __getitem__(self, key: str):
        if key not in self.keys():
            raise KeyError(f"{type(self).__name__} has no attribute {key!r}")
        return getattr(self, key)

    def get(self, key: str, default=None):
        return getattr(self, key, default) if key in self.keys() else default


@dataclass(frozen=True)
class NoAttrs(Attrs):
    """The schema of ops without attributes."""


def choice(default, *options):
    """A string attribute restricted to ``options`` (``default`` must be one of them)."""
    assert default in options, (default, options)
    return field(default=default, metadata={"choices": options})


def coerce(value, hint, f, where):
    """Coerce an attribute value to its declared type (lists -> tuples, numpy scalars -> Python)."""
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, _UnionType) else ()
    if options:
        if value is None and type(None) in options:
            return None
        inner = [o for o in options if o is not type(None)]
        errors = []
        for o in inner:
            try:
                return coerce(value, o, f, where)
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
        return tuple(coerce(v, elem, f, where) for v in value)
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
