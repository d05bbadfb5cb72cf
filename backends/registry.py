"""The backend interface and registry.

A backend declares a name, a pattern table of ``(name, pattern, check)`` entries, single-op support
checks and a compile hook. It lives in ``backends/<name>/`` (imported on first use) or in any
installed package that declares it in the entry-point group ``partita.backends``:

    [project.entry-points."partita.backends"]
    toy = "partita_toy:backend"

    backend = Backend("toy", patterns=[("conv2d", conv_pattern(), conv_check)],
                      ops={"qnn.add": True, "nn.max_pool2d": pool_check})

Composite names are prefixed with the backend's name (``toy.conv2d``), which is how AnnotateTarget
knows whose a composite is. The host ("llvm" unless a real backend replaces it) takes whatever
no other target accepts.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import pkgutil
import sys
from collections.abc import Callable
from typing import NamedTuple

from partita.errors import PartitaError

from .verdict import CheckError, Verdict, as_verdict

log = logging.getLogger("partita.backends")

ENTRY_POINT_GROUP = "partita.backends"
DEFAULT_HOST = "llvm"


class BackendError(PartitaError):
    """An unknown backend, a backend that fails to load, or a bad backend declaration."""


class Option(NamedTuple):
    """A declared backend option: its default, the values it accepts (None: any), a help line.
    ``options={"depthwise": Option("yes", ("yes", "no"))}`` refuses ``-depthwise=maybe``."""

    default: object = None
    choices: tuple | None = None
    help: str = ""


class PatternEntry(NamedTuple):
    """One row of a pattern table: composite ``name``, its ``pattern`` and an optional ``check``
    that receives the matched expression and returns a Verdict."""

    name: str
    pattern: object
    check: Callable | None = None


def normalize_table(entries, prefix: str | None = None) -> list[PatternEntry]:
    """Pattern-table rows as PatternEntry: ``(name, pattern)`` or ``(name, pattern, check)``;
    with ``prefix``, names without it become ``prefix.name``."""
    from partita.patterns import Pattern

    if entries is None:
        return []
    if isinstance(entries, (str, bytes)) or not hasattr(entries, "__iter__"):
        raise BackendError(
            f"a pattern table is a list of (name, pattern[, check]), got {entries!r}"
        )
    out = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, tuple) or len(entry) not in (2, 3):
            raise BackendError(
                f"pattern table entry {i} must be (name, pattern) or "
                f"(name, pattern, check), got {entry!r}"
            )
        name, pattern, check = (tuple(entry) + (None,))[:3]
        if not isinstance(name, str) or not name:
            raise BackendError(
                f"pattern table entry {i}: the name must be a non-empty string, got {name!r}"
            )
        if not isinstance(pattern, Pattern):
            raise BackendError(f"pattern table entry {i} ({name}): {pattern!r} is not a pattern")
        if check is not None and not callable(check):
            raise BackendError(
                f"pattern table entry {i} ({name}): the check {check!r} is not callable"
            )
        if prefix and not name.startswith(prefix + "."):
            name = f"{prefix}.{name}"
        out.append(PatternEntry(name, pattern, check))
    return out


def _call_with_options(fn, options: dict):
    """Call a table/checks provider with the target options if it takes an argument."""
    try:
        takes = len(inspect.signature(fn).parameters) > 0
    except (TypeError, ValueError):
        takes = False
    return fn(options) if takes else fn()


class Backend:
    """A target that runs partitions. Pass the parts to the constructor, or subclass and override
    ``pattern_table``, ``op_checks``, ``check_region``, ``compile``, ``passes``."""

    def __init__(
        self,
        name: str,
        patterns=(),
        ops=None,
        compile: Callable | None = None,
        load: Callable | None = None,
        cost: Callable | None = None,
        options: dict | None = None,
        host: bool = False,
        passes=None,
        description: str = "",
    ):
        if not isinstance(name, str) or not name.isidentifier():
            raise BackendError(f"a backend name must be an identifier, got {name!r}")
        self.name, self.host, self.description = name, bool(host), description
        self._patterns, self._ops, self._compile, self._load = patterns, ops, compile, load
        self._cost, self._passes = cost, passes
        self.options = dict(options) if options is not None else None

    def __repr__(self):
        return f"<Backend {self.name}{' (host)' if self.host else ''}>"

    def resolve_options(self, options: dict | None = None) -> dict:
        """The declared defaults updated with ``options``; unknown keys and values outside an
        Option's choices are a BackendError."""
        options = dict(options or {})
        if self.options is None:
            return options
        unknown = [k for k in options if k not in self.options]
        if unknown:
            allowed = ", ".join(f"-{k}" for k in self.options) or "none"
            raise BackendError(
                f"backend {self.name} has no option -{unknown[0]} (its options: {allowed})"
            )
        for key, value in options.items():
            spec = self.options[key]
            if isinstance(spec, Option) and spec.choices is not None:
                if str(value) not in {str(c) for c in spec.choices}:
                    raise BackendError(
                        f"backend {self.name}: -{key}={value} is not one of "
                        f"{', '.join(map(str, spec.choices))}"
                    )
        defaults = {k: v.default if isinstance(v, Option) else v for k, v in self.options.items()}
        return {**defaults, **options}

    def describe_options(self) -> dict:
        """Option name -> default (with its choices, when declared) for listings."""
        out = {}
        for key, spec in (self.options or {}).items():
            if isinstance(spec, Option):
                out[key] = (
                    spec.default
                    if spec.choices is None
                    else (f"{spec.default} (one of {'|'.join(map(str, spec.choices))})")
                )
            else:
                out[key] = spec
        return out

    def pattern_table(self, options: dict | None = None) -> list[PatternEntry]:
        """The composite patterns, first match wins, names prefixed ``<name>.``."""
        table = self._patterns
        if callable(table):
            table = _call_with_options(table, self.resolve_options(options))
        return normalize_table(table, self.name)

    def op_checks(self, options: dict | None = None) -> dict[str, Callable]:
        """Single-op support checks by op name (``True`` means always supported)."""
        ops = self._ops
        if callable(ops):
            ops = _call_with_options(ops, self.resolve_options(options))
        if ops is None:
            return {}
        if isinstance(ops, (list, tuple, set, frozenset)):
            ops = {name: True for name in ops}
        if not isinstance(ops, dict):
            raise BackendError(
                f"backend {self.name}: ops must map op names to checks, got {type(ops).__name__}"
            )
        return dict(ops)

    def check_region(self, stats, options: dict | None = None) -> Verdict:
        """The cost hook: may refuse a region that costs more than it saves."""
        if self._cost is None:
            return Verdict(True)
        return as_verdict(self._cost(stats), self._cost)

    def passes(self, options: dict | None = None) -> list:
        """Extra passes the partition pipeline runs before MergeComposite (none by default)."""
        if self._passes is None:
            return []
        passes = self._passes
        return list(
            _call_with_options(passes, self.resolve_options(options))
            if callable(passes)
            else passes
        )

    @property
    def can_compile(self) -> bool:
        """Whether this backend has a compile hook (the placeholder host does not)."""
        return self._compile is not None or type(self).compile is not Backend.compile

    def compile(self, function, options: dict | None = None):
        """Compile one region (a partitioned function, or the host part of ``main``) to a
        CompiledRegion (see partita.backends.compiled)."""
        from partita.backends.compiled import CompiledRegion

        if self._compile is None:
            raise BackendError(
                f"backend {self.name} cannot compile yet (it has no compile hook); "
                f"use the host 'ref' to run this part on the reference interpreter"
            )
        region = self._compile(function, self.resolve_options(options))
        if not isinstance(region, CompiledRegion):
            raise BackendError(
                f"backend {self.name}'s compile hook returned {type(region).__name__}, "
                f"not a CompiledRegion (see docs/backends.md)"
            )
        if not region.backend:
            region.backend = self.name
        return region

    def load(self, data: bytes):
        """A CompiledRegion back from ``to_bytes()`` data, without compiling again."""
        if self._load is None:
            raise BackendError(f"backend {self.name} cannot load compiled regions (no load hook)")
        return self._load(data)


def host_backend(name: str = DEFAULT_HOST) -> Backend:
    """The default host: accepts whatever is left over; no code generation of its own. A real
    backend registered under its name replaces it."""
    backend = Backend(
        name,
        host=True,
        options=None,
        description="the host CPU: runs every op no other target takes",
    )
    backend.placeholder = True
    return backend


_REGISTRY: dict[str, Backend] = {}


def register_backend(backend=None, *, override: bool = False):
    """Register a Backend (or a Backend subclass or factory, when used as a decorator)."""
    if backend is None:
        return lambda b: register_backend(b, override=override)
    obj = _instantiate(backend, repr(backend))
    existing = _REGISTRY.get(obj.name)
    if (
        existing is not None
        and existing is not obj
        and not override
        and not getattr(existing, "placeholder", False)
    ):
        raise BackendError(
            f"a backend named {obj.name!r} is already registered (pass override=True to replace it)"
        )
    _REGISTRY[obj.name] = obj
    return backend


def unregister_backend(name: str) -> None:
    """Forget a registered backend (the next lookup discovers it again)."""
    _REGISTRY.pop(name, None)


def _instantiate(obj, where: str) -> Backend:
    if isinstance(obj, type) and issubclass(obj, Backend):
        obj = obj()
    elif not isinstance(obj, Backend) and callable(obj):
        obj = obj()
    if not isinstance(obj, Backend):
        raise BackendError(f"{where} is not a Backend (got {type(obj).__name__})")
    return obj


def register_pattern_table(name: str):
    """Decorator (TVM's form): ``fn(options) -> [(name, pattern, check)]`` becomes the pattern
    table of backend ``name`` (registering a bare backend if there is none)."""

    def wrap(fn):
        backend = _REGISTRY.get(name)
        if backend is None:
            _REGISTRY[name] = Backend(name, patterns=fn)
        else:
            backend._patterns = fn
        return fn

    return wrap


def get_pattern_table(name: str, options: dict | None = None) -> list[PatternEntry]:
    """The pattern table of backend ``name``."""
    return get_backend(name).pattern_table(options)


def _builtin_module(name: str) -> str | None:
    if not name.isidentifier():
        return None
    module = f"{__package__}.{name}"
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    # backends/<name>/ folders only: registry.py or cost.py are not backends
    return module if spec is not None and spec.submodule_search_locations else None


def _entry_points(name: str | None = None) -> list:
    eps = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    return [ep for ep in eps if name is None or ep.name == name]


def _load_entry_point(ep) -> Backend:
    dist = getattr(getattr(ep, "dist", None), "name", None) or "an installed package"
    where = f"entry point {ep.name} = {ep.value} ({dist})"
    try:
        obj = ep.load()
    except Exception as exc:  # a third-party package: name it
        raise BackendError(
            f"backend {ep.name!r} failed to load from {where}: {type(exc).__name__}: {exc}"
        ) from exc
    backend = _instantiate(obj, where)
    if backend.name != ep.name:
        raise BackendError(
            f"{where} declares a backend named {backend.name!r}; the entry point "
            f"name and the backend name must agree"
        )
    return backend


def find_backend(name: str) -> Backend | None:
    """The backend called ``name``: registered, in ``backends/<name>/``, declared by an installed
    package's entry point, or the default host; None if there is none."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    module = _builtin_module(name)
    if module is not None:
        importlib.import_module(module)  # a built-in backend registers itself on import
        if name not in _REGISTRY:
            raise BackendError(
                f"{module} was imported but registered no backend named "
                f"{name!r} (call register_backend in its __init__.py)"
            )
        return _REGISTRY[name]
    # The same package found twice on the path (installed, and again by a test) is one backend.
    eps = list({ep.value: ep for ep in _entry_points(name)}.values())
    if eps:
        if len(eps) > 1:
            values = ", ".join(ep.value for ep in eps)
            raise BackendError(f"several installed packages declare backend {name!r}: {values}")
        _REGISTRY[name] = _load_entry_point(eps[0])
        return _REGISTRY[name]
    if name == DEFAULT_HOST:
        _REGISTRY[name] = host_backend(name)
        return _REGISTRY[name]
    return None


def get_backend(name: str) -> Backend:
    """``find_backend``, raising a BackendError that lists the known backends."""
    if not isinstance(name, str):
        raise BackendError(f"a backend name is a string, got {name!r}")
    backend = find_backend(name)
    if backend is None:
        raise BackendError(
            f"unknown backend {name!r}; known backends: "
            f"{', '.join(list_backends())} (a package adds one through the "
            f"entry-point group {ENTRY_POINT_GROUP!r})"
        )
    return backend


def backend_origin(name: str) -> str:
    """Where backend ``name`` comes from: built in, an installed package, or this process."""
    if _builtin_module(name):
        return f"built-in (partita.backends.{name})"
    eps = _entry_points(name)
    if eps:
        dist = getattr(getattr(eps[0], "dist", None), "name", None) or "an installed package"
        return f"entry point {eps[0].value} ({dist})"
    backend = _REGISTRY.get(name)
    if backend is not None and getattr(backend, "placeholder", False):
        return "built-in placeholder (partitions only; no code generation yet)"
    return "registered in this process"


def describe_backends() -> list[dict]:
    """Name, role, description, options and origin of every backend (``partita backends``)."""
    rows = []
    for name in list_backends():
        row = {"name": name, "host": False, "description": "", "options": {}, "error": None}
        try:
            backend = get_backend(name)
            row.update(
                host=backend.host,
                description=backend.description,
                options=backend.describe_options(),
                can_compile=backend.can_compile,
            )
        except BackendError as exc:
            row["error"] = str(exc)
        row["origin"] = backend_origin(name)
        rows.append(row)
    return rows


def list_backends() -> list[str]:
    """The names of every backend that can be looked up (without loading them)."""
    here = sys.modules[__package__].__path__  # the package's folders (tests may add one)
    names = set(_REGISTRY) | {DEFAULT_HOST}
    names.update(m.name for m in pkgutil.iter_modules(here) if m.ispkg)
    try:
        names.update(ep.name for ep in _entry_points())
    except Exception as exc:  # a broken installation must not hide the other backends
        log.warning("could not list entry points of %s: %s", ENTRY_POINT_GROUP, exc)
    return sorted(names)


__all__ = [
    "Backend",
    "BackendError",
    "CheckError",
    "DEFAULT_HOST",
    "ENTRY_POINT_GROUP",
    "PatternEntry",
    "Option",
    "backend_origin",
    "describe_backends",
    "find_backend",
    "get_backend",
    "get_pattern_table",
    "host_backend",
    "list_backends",
    "normalize_table",
    "register_backend",
    "register_pattern_table",
    "unregister_backend",
]
