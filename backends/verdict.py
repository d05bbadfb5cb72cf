"""Verdicts and constraints: a support check says yes or no, and why not.

    STRIDE_RANGE = (1, 3)

    @constraint("Stride height and width must be in the range [{}, {}]", *STRIDE_RANGE)
    def stride_range(call) -> Verdict:
        sh, sw = call.attrs.strides
        ok = in_range(sh, *STRIDE_RANGE) and in_range(sw, *STRIDE_RANGE)
        return Verdict(ok, f"got {sh}x{sw}")

    stride_range(call)  ->  Verdict(False, "Stride height and width must be in the range [1, 3]
                                             (got 4x4)")

The requirement text lives in one place: it is the refusal message, the placement report's reason
and the line of a generated list of supported ops.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass

from partita.errors import PartitaError


class CheckError(PartitaError):
    """A support check that raised or returned something other than a Verdict or a bool."""


@dataclass(frozen=True)
class Verdict:
    """A check's answer: ``ok`` and, when it refuses, the ``reason`` in words."""

    ok: bool
    reason: str = ""

    def __post_init__(self):
        object.__setattr__(self, "ok", bool(self.ok))
        if not isinstance(self.reason, str):
            raise CheckError(f"a Verdict's reason must be a string, got {self.reason!r}")

    def __bool__(self) -> bool:
        return self.ok

    @staticmethod
    def accept(reason: str = "") -> Verdict:
        """A yes."""
        return Verdict(True, reason)

    @staticmethod
    def refuse(reason: str) -> Verdict:
        """A no, and why."""
        return Verdict(False, reason)


def in_range(value, lo, hi) -> bool:
    """``lo <= value <= hi``."""
    return lo <= value <= hi


def check_name(check) -> str:
    """A readable name for a check (a Constraint's name, a function's ``__name__``)."""
    return getattr(check, "name", None) or getattr(check, "__name__", None) or repr(check)


def as_verdict(result, check=None) -> Verdict:
    """A check's result as a Verdict: a Verdict is kept, a bool becomes one (``False`` gets a
    reason naming the check); anything else is a CheckError."""
    if isinstance(result, Verdict):
        return result
    if isinstance(result, bool) or type(result).__name__ == "bool_":
        ok = bool(result)
        return Verdict(ok, "" if ok else f"{check_name(check)} returned False")
    raise CheckError(
        f"check {check_name(check)} returned {result!r}; a check returns a Verdict or a bool"
    )


def takes_match(check) -> bool:
    """Whether ``check`` wants the match too: ``check(root, match)`` (a second positional
    parameter, or one named ``match``) rather than ``check(root)``."""
    if isinstance(check, (Constraint, AllOf)):
        return True
    try:
        return _takes_match_cached(check)
    except TypeError:  # an unhashable callable: ask each time
        return _takes_match(check)


@functools.lru_cache(maxsize=1024)
def _takes_match_cached(check) -> bool:
    # inspect.signature costs tens of microseconds; MergeComposite asks once per match
    return _takes_match(check)


def _takes_match(check) -> bool:
    try:
        params = list(inspect.signature(check).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.name == "match" for p in positional[1:2]):
        return True
    return len(positional) >= 2 and positional[1].default is inspect.Parameter.empty


def run_check(check, expr, match=None) -> Verdict:
    """Call ``check(expr)`` — or ``check(expr, match)`` when the check takes the match (its
    named captures: ``match["weights"]``) and one is given — and return its Verdict; a check that
    raises becomes a CheckError naming the check and the node."""
    try:
        result = check(expr, match) if match is not None and takes_match(check) else check(expr)
    except PartitaError:
        raise
    except Exception as exc:  # a backend's check: say which one failed and where
        raise CheckError(
            f"check {check_name(check)} raised on {expr.short()}: {type(exc).__name__}: {exc}"
        ) from exc
    return as_verdict(result, check)


class Constraint:
    """A requirement with its text: calling it returns a Verdict whose refusal reason is the
    requirement followed by the detail the function gave (``... [1, 3] (got 4x4)``)."""

    def __init__(self, requirement: str, fn: Callable):
        self.requirement, self.fn = requirement, fn
        self.name = getattr(fn, "__name__", "constraint")
        self.__doc__ = fn.__doc__ or requirement

    def __call__(self, expr, match=None) -> Verdict:
        verdict = run_check(self.fn, expr, match)
        if verdict.ok:
            return Verdict(True)
        detail = verdict.reason if verdict.reason != f"{self.name} returned False" else ""
        return Verdict(False, f"{self.requirement} ({detail})" if detail else self.requirement)

    @property
    def requirements(self) -> list[str]:
        """The requirement text, as a list (see ``requirements_of``)."""
        return [self.requirement]

    def __repr__(self):
        return f"<Constraint {self.name}: {self.requirement}>"


def constraint(requirement: str, *args) -> Callable[[Callable], Constraint]:
    """Decorator: ``@constraint("Stride must be at most {}", 3)`` on ``fn(expr) -> Verdict``."""
    text = requirement.format(*args) if args else requirement

    def wrap(fn: Callable) -> Constraint:
        return Constraint(text, fn)

    return wrap


class AllOf:
    """Several checks that must all accept; the first refusal is the verdict."""

    def __init__(self, checks, name: str | None = None):
        self.checks = tuple(checks)
        for c in self.checks:
            if not callable(c):
                raise CheckError(f"all_of() takes checks (callables), got {c!r}")
        self.name = name or " and ".join(check_name(c) for c in self.checks) or "all_of()"

    def __call__(self, expr, match=None) -> Verdict:
        for c in self.checks:
            verdict = run_check(c, expr, match)
            if not verdict.ok:
                return verdict
        return Verdict(True)

    @property
    def requirements(self) -> list[str]:
        """Every requirement the checks state, in order."""
        out = []
        for c in self.checks:
            out.extend(getattr(c, "requirements", None) or [check_name(c)])
        return out

    def __repr__(self):
        return f"<all_of {self.name}>"


def all_of(*checks, name: str | None = None) -> AllOf:
    """A check that runs ``checks`` in order and returns the first refusal (or a yes)."""
    return AllOf(checks, name)


def requirements_of(check) -> list[str]:
    """The requirement texts a check states (for the generated list of supported ops)."""
    if check is None or check is True:
        return []
    return list(getattr(check, "requirements", None) or [check_name(check)])
