"""Patterns for Relay's control nodes: ``is_if(cond, true_branch, false_branch)`` and
``is_let(var, value, body)`` (TVM's IfPattern and LetPattern); and recursive patterns:
``wildcard().redirect_to(p)`` makes that wildcard match what ``p`` matches (``p`` may contain
the wildcard itself), TVM's pattern recursion."""

from __future__ import annotations

import weakref

from .pattern import Pattern, WildcardPattern, _as_pattern

# wildcard -> the pattern it stands for (patterns are immutable, so the redirect lives here)
REDIRECTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class Recursion:
    """A match's key for the nodes a redirected wildcard matched below it: (node, interior)."""

    __slots__ = ("owner",)

    def __init__(self, owner):
        self.owner = owner


def _redirect_to(self, pattern) -> WildcardPattern:
    """Make this wildcard match what ``pattern`` matches (which may contain this wildcard: a
    recursive pattern, e.g. any chain of casts ending in a dense). Returns the wildcard."""
    REDIRECTS[self] = _as_pattern(pattern, "redirect")
    return self


WildcardPattern.redirect_to = _redirect_to


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
