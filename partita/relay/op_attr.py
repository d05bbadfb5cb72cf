"""``register_op_attr(op, "target.<name>")``: TVM's way of declaring that a BYOC target supports
an op, onto partita's backend registry.

    @register_op_attr("nn.relu", "target.acc")
    def relu(expr):               # a bool, or a partita Verdict with a reason
        return True

registers (or extends) backend ``acc`` with that single-op check, so ``AnnotateTarget(["acc"])``
finds it.
"""

from __future__ import annotations

from partita.backends import Backend, register_backend
from partita.backends.registry import find_backend
from partita.errors import PartitaError
from partita.ops import get_op


def register_op_attr(op_name: str, attr_key: str, value=None, level: int = 10):
    """Register ``value`` (a check ``fn(call) -> bool | Verdict``, or True) as ``attr_key``'s
    support check for ``op_name``; used as a decorator when ``value`` is omitted."""
    if value is None:
        return lambda fn: register_op_attr(op_name, attr_key, fn, level) or fn
    if not attr_key.startswith("target."):
        raise PartitaError(
            f"register_op_attr: only 'target.<name>' keys are supported, got {attr_key!r}"
        )
    get_op(op_name)  # an unknown op fails here, not by never matching
    target = attr_key[len("target.") :]
    backend = find_backend(target)
    if backend is None:
        backend = Backend(target, ops={})
        register_backend(backend)
    ops = backend.op_checks()
    ops[op_name] = value
    backend._ops = ops
    return None
