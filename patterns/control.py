"""Patterns for Relay's control nodes: ``is_if(cond, true_branch, false_branch)`` and
``is_let(var, value, body)`` (TVM's IfPattern and LetPattern)."""

from __future__ import annotations

from .pattern import Pattern, _as_pattern


class IfPattern(Pattern):
    """An If whose condition and branches match the three patterns."""

    __slots__ = ("cond", "true_branch", "false_branch")

    def __init__(self, cond, true_branch, false_branch):
        self._init()
        object.__setattr__(self, "cond", _as_pattern(cond, "if condition"))
        object.__setattr__(self, "true_branch", _as_pattern(true_branch, "true branch"))
        object.__setattr__(self, "false_branch", _as_pattern(false_branch, "false branch"))

    def children(self):
        return (self.cond, self.true_branch, self.false_branch)

    def root_keys(self):
        return frozenset(("If",))


class LetPattern(Pattern):
    """A Let whose variable, value and body match the three patterns (a pattern bound to the
    variable binds the same Var where the body uses it)."""

    __slots__ = ("var", "value", "body")

    def __init__(self, var, value, body):
        self._init()
        object.__setattr__(self, "var", _as_pattern(var, "let variable"))
        object.__setattr__(self, "value", _as_pattern(value, "let value"))
        object.__setattr__(self, "body", _as_pattern(body, "let body"))

    def children(self):
        return (self.var, self.value, self.body)

    def root_keys(self):
        return frozenset(("Let",))


def is_if(cond, true_branch, false_branch) -> IfPattern:
    """``if (cond) { true_branch } else { false_branch }``."""
    return IfPattern(cond, true_branch, false_branch)


def is_let(var, value, body) -> LetPattern:
    """``let var = value; body``."""
    return LetPattern(var, value, body)


__all__ = ["IfPattern", "LetPattern", "is_if", "is_let"]
