"""Relay's text format: print and parse."""

from .parser import parse
from .printer import astext, print_expr, print_module

__all__ = ["astext", "parse", "print_expr", "print_module"]
