"""Relay's text format: print and parse."""

from partita.ir.nodes import TEXT_FORMAT

from .parser import parse
from .printer import astext, print_expr, print_module
from .serialize import DeserializeError, deserialize, serialize

TEXT_FORMAT.update(expr=print_expr, module=print_module)  # str() of nodes and modules

__all__ = [
    "DeserializeError",
    "astext",
    "deserialize",
    "parse",
    "print_expr",
    "print_module",
    "serialize",
]
