"""Relay's text format: print and parse."""

from .parser import parse
from .printer import astext, print_expr, print_module
from .serialize import DeserializeError, deserialize, serialize

__all__ = [
    "DeserializeError",
    "astext",
    "deserialize",
    "parse",
    "print_expr",
    "print_module",
    "serialize",
]
