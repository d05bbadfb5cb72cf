"""partita's error classes: one base, ``PartitaError``, so callers can catch everything we raise."""

from __future__ import annotations


class PartitaError(Exception):
    """Base class of every error partita raises on purpose."""


class ModelFileError(PartitaError):
    """A model or executable file that cannot be read: missing, truncated, corrupt, or not in the
    format its name says (the CLI exits with status 3)."""


class UnsupportedModelError(PartitaError):
    """A readable model that uses what partita does not support: an operator, a dtype, an
    attribute value (the CLI exits with status 4)."""


class OpNotFoundError(PartitaError):
    """An op name that is not in the registry."""


class AttrError(PartitaError):
    """An attribute that is unknown, missing, of the wrong kind or out of range."""


class TypeInferenceError(PartitaError):
    """A type relation refused its arguments (names the op, its span, shapes and dtypes)."""


class ArityError(TypeInferenceError):
    """A call with the wrong number of arguments."""


class InterpreterError(PartitaError):
    """A failure while evaluating a graph (missing input, wrong input shape, ...)."""


class ParseError(PartitaError):
    """A syntax or name error in the text format, with line and column."""

    def __init__(self, message: str, line: int, column: int, source_line: str = ""):
        self.line, self.column, self.source_line = line, column, source_line
        where = f"line {line}, column {column}: {message}"
        if source_line:
            where += f"\n  {source_line}\n  {' ' * (column - 1)}^"
        super().__init__(where)


class UsageError(PartitaError):
    """An argument that cannot be used (the CLI's exit status 2)."""


class MissingPackageError(UsageError):
    """An optional package a command needs is not installed (names the pip extra)."""
