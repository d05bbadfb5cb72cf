"""``tvm.relay.analysis``: the variable queries Relay passes and tests use.

``free_vars(e)`` (in order of first use), ``bound_vars(e)`` (function parameters and let
variables), ``all_vars(e)`` (both, in post-order of first appearance) and
``free_type_vars(e)`` (always empty: partita's types have no type variables).
"""

from __future__ import annotations

import sys

from partita.ir import Expr, Function, Let, Var
from partita.ir.visitor import free_vars as _free_vars
from partita.ir.visitor import post_order


def free_vars(expr: Expr) -> list[Var]:
    """Variables ``expr`` uses that no function or let inside it binds, in order of first use."""
    return _free_vars(expr)


def bound_vars(expr: Expr) -> list[Var]:
    """Variables bound inside ``expr``: function parameters and let variables, in post-order."""
    out: list[Var] = []
    seen: set[int] = set()
    for node in post_order(expr):
        binds = (
            node.params
            if isinstance(node, Function)
            else ([node.var] if isinstance(node, Let) else [])
        )
        for v in binds:
            if id(v) not in seen:
                seen.add(id(v))
                out.append(v)
    return out


def all_vars(expr: Expr) -> list[Var]:
    """Every variable in ``expr``, free or bound, each once, in post-order."""
    out: list[Var] = []
    seen: set[int] = set()
    for node in post_order(expr):
        if isinstance(node, Var) and id(node) not in seen:
            seen.add(id(node))
            out.append(node)
    for v in bound_vars(expr):  # a parameter the body never reads
        if id(v) not in seen:
            seen.add(id(v))
            out.append(v)
    return out


def free_type_vars(expr) -> list:
    """Relay's free type variables: none, since partita's types are concrete tensor types."""
    return []


# TVM's relay.analysis is a package whose functions live in relay.analysis.analysis
analysis = sys.modules[__name__]

__all__ = ["all_vars", "bound_vars", "free_type_vars", "free_vars"]
