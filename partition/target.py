"""Composite targets, written as tvmc writes them: comma-separated backends with options.

    parse_target("npu -config=npu-256, llvm -mcpu=native")
        -> CompositeTarget(targets=(npu -config=npu-256,), host=llvm -mcpu=native)

The targets are tried in order (the first whose check accepts an op gets it); the last one is the
host, which takes everything left over. When the last backend named is not a host, the default
host (``llvm``) is appended: ``"npu"`` means ``"npu, llvm"``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from partita.backends.registry import DEFAULT_HOST, Backend, BackendError, get_backend


class TargetError(BackendError):
    """A target string that cannot be parsed or names unknown backends or options."""


@dataclass(frozen=True)
class TargetSpec:
    """One backend of a composite target and its options (``npu -config=npu-256``)."""

    name: str
    options: dict = field(default_factory=dict, compare=False)

    @property
    def backend(self) -> Backend:
        """The registered backend of this name."""
        return get_backend(self.name)

    def __str__(self):
        opts = " ".join(
            f"-{k}" if v is True else f"-{k}={shlex.quote(str(v))}" for k, v in self.options.items()
        )
        return f"{self.name} {opts}".strip()


@dataclass(frozen=True)
class CompositeTarget:
    """The accelerator targets in priority order, and the host; ``host_model``: the host core
    the placement estimates assume (``-host=cortex-a55:1.8GHz``), None for this machine."""

    targets: tuple
    host: TargetSpec
    host_model: str | None = field(default=None, compare=False)

    @property
    def names(self) -> list[str]:
        """The accelerator targets' names, in priority order."""
        return [t.name for t in self.targets]

    def __str__(self):
        text = ", ".join(str(t) for t in (*self.targets, self.host))
        return text + (f" -host={shlex.quote(self.host_model)}" if self.host_model else "")


HOST_OPTION = "host"  # -host=<core>[:<clock>[:<int8 MACs per cycle>]] (docs/placement.md)
MEASURED_HOSTS = ("measured", "this", "native")


def check_host_model(name: str, value) -> str:
    """``value`` of ``-host=`` after ``name`` if it names a host the estimates know (a declared
    core with a valid clock, or this machine), else a TargetError saying what is allowed."""
    from partita.backends.cost import parse_host

    if value is True or not str(value).strip():
        raise TargetError(f"target {name}: -host needs a value, e.g. -host=cortex-a55:1.8GHz")
    value = str(value).strip()
    if value.lower() in MEASURED_HOSTS:
        return value
    try:
        parse_host(value)
    except ValueError as e:
        raise TargetError(f"target {name}: -host={value}: {e}") from None
    return value


def _split_commas(text: str) -> list[str]:
    """Split at commas outside quotes."""
    parts, current, quote = [], [], None
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == ",":
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    if quote:
        raise TargetError(f"unterminated quote in target {text!r}")
    parts.append("".join(current))
    return parts


def _parse_one(part: str, text: str) -> TargetSpec:
    try:
        words = shlex.split(part)
    except ValueError as e:
        raise TargetError(f"cannot parse target {part.strip()!r}: {e}") from None
    if not words:
        raise TargetError(
            f"empty backend in target {text!r} (two commas in a row, or a trailing comma?)"
        )
    name, options = words[0], {}
    for word in words[1:]:
        if not word.startswith("-") or word.lstrip("-") == "":
            raise TargetError(f"target {name}: option {word!r} must look like -key=value")
        key, eq, value = word.lstrip("-").partition("=")
        if key in options:
            raise TargetError(f"target {name}: option -{key} given twice")
        options[key] = value if eq else True
    try:
        backend = get_backend(name)
        if HOST_OPTION in options and HOST_OPTION not in (backend.options or {}):
            host_model = check_host_model(name, options.pop(HOST_OPTION))
            options[_HOST_KEY] = host_model
        backend.resolve_options({k: v for k, v in options.items() if k != _HOST_KEY})
    except TargetError:
        raise
    except BackendError as e:
        raise TargetError(str(e)) from None
    return TargetSpec(name, options)


_HOST_KEY = "\0host"  # a -host= read off one backend's part, until parse_target takes it


def parse_target(target) -> CompositeTarget:
    """Parse a tvmc-style target string (or pass a CompositeTarget through)."""
    if isinstance(target, CompositeTarget):
        return target
    if isinstance(target, TargetSpec):
        target = str(target)
    if isinstance(target, (list, tuple)):
        target = ", ".join(str(t) for t in target)
    if not isinstance(target, str) or not target.strip():
        raise TargetError(f'a target is a non-empty string such as "npu, llvm", got {target!r}')
    specs = [_parse_one(part, target) for part in _split_commas(target)]
    declared = [(s.name, s.options.pop(_HOST_KEY)) for s in specs if _HOST_KEY in s.options]
    if len(declared) > 1:
        raise TargetError(
            f"target {target!r} declares the host twice (-host= after {declared[0][0]} and "
            f"after {declared[1][0]}); give -host= once"
        )
    names = [s.name for s in specs]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise TargetError(f"target {target!r} names {name} twice")
    hosts = [s for s in specs if get_backend(s.name).host]
    if len(hosts) > 1:
        raise TargetError(
            f"target {target!r} names two hosts ({hosts[0].name} and "
            f"{hosts[1].name}); the host comes last, once"
        )
    if hosts and hosts[0] is not specs[-1]:
        raise TargetError(f"the host {hosts[0].name} must come last in {target!r}")
    if not hosts:
        specs.append(TargetSpec(DEFAULT_HOST, {}))
    host_model = declared[0][1] if declared else None
    return CompositeTarget(tuple(specs[:-1]), specs[-1], host_model)
