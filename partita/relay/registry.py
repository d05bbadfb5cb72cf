"""``tvm.register_func`` / ``tvm.get_global_func``: named Python functions, as TVM's global
registry holds them. partita.relay's PartitionGraph calls ``relay.ext.<target>.optimize`` on
each partition of that target, as TVM does (tests/relay_compat/test_annotation_compat.py)."""

from __future__ import annotations

from partita.errors import PartitaError

_FUNCS: dict = {}


def register_func(name: str, f=None, override: bool = False):
    """Register ``f`` as ``name`` (a decorator when ``f`` is omitted)."""
    if f is None:
        return lambda fn: register_func(name, fn, override)
    if name in _FUNCS and not override:
        raise PartitaError(f"a function named {name!r} is registered already (override=True)")
    _FUNCS[name] = f
    return f


def get_global_func(name: str, allow_missing: bool = False):
    """The function registered as ``name``; None (``allow_missing``) or an error if none."""
    if name not in _FUNCS and not allow_missing:
        raise PartitaError(f"no function is registered as {name!r}")
    return _FUNCS.get(name)


def remove_global_func(name: str) -> None:
    _FUNCS.pop(name, None)


__all__ = ["get_global_func", "register_func", "remove_global_func"]
