"""Targets declared TVM's way for the relay_compat tests, forgotten afterwards so other tests
see a clean backend registry."""

from __future__ import annotations

import pytest
from partita.backends import unregister_backend

from partita import relay


@pytest.fixture
def targets():
    """``targets(name, ops, check=None)``: ``register_op_attr(op, "target.<name>")`` for each
    op, with ``check`` (default: accept every call)."""
    names = []

    def declare(name, ops, check=None):
        for op in ops:
            relay.register_op_attr(op, f"target.{name}", check or (lambda expr: True))
        names.append(name)

    yield declare
    for n in names:
        unregister_backend(relay.target_name(n))
