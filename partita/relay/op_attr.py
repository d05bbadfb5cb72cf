"""``register_op_attr(op, "target.<name>")``: TVM's way of declaring that a BYOC target supports
an op, onto partita's backend registry.

    @register_op_attr("nn.relu", "target.acc")
    def relu(expr):               # a bool, or a partita Verdict with a reason
        return True

registers (or extends) backend ``acc`` with that single-op check, so ``AnnotateTarget(["acc"])``
finds it.
"""

from __future__ import annotations

import logging
import re

from partita.backends import Backend, register_backend
from partita.backends import get_pattern_table as _get_pattern_table
from partita.backends import register_pattern_table as _register_pattern_table
from partita.backends.registry import find_backend
from partita.errors import PartitaError
from partita.ops import has_op

log = logging.getLogger(__name__)

_TVM_NAMES: dict[str, str] = {}  # backend name -> the TVM target name it was declared as


def target_name(name: str) -> str:
    """partita's backend name for a TVM target name: ``"ethos-n"`` -> ``"ethos_n"``,
    ``"double.A"`` -> ``"double_A"`` (backend names are identifiers; see the migration guide)."""
    out = re.sub(r"\W", "_", name)
    out = out if out.isidentifier() else f"_{out}"
    if out != name:
        _TVM_NAMES[out] = name
    return out


def tvm_name(backend: str) -> str:
    """The TVM target name backend ``backend`` was declared under (``"ethos_n"`` ->
    ``"ethos-n"``): what TVM writes in annotations and a partition's ``Compiler``."""
    return _TVM_NAMES.get(backend, backend)


def register_pattern_table(name: str, table=None):
    """TVM's ``@register_pattern_table("ethos-n")``: ``fn() -> [(name, pattern, check), ...]``
    becomes the pattern table of backend ``target_name(name)``."""
    if table is None:
        return lambda fn: register_pattern_table(name, fn)
    _TABLES[target_name(name)] = table
    _register_pattern_table(target_name(name))(lambda: sanitise_table(table()))
    return table


_TABLES: dict = {}  # backend name -> the table function registered under TVM's name


def get_pattern_table(name: str):
    """TVM's ``get_pattern_table("cmsis-nn")``: the table registered for that target as its
    function returns it (TVM's composite names), partita's own for a partita backend, or None
    (TVM's answer for a target without a table)."""
    backend = target_name(name)
    if backend in _TABLES:
        return _TABLES[backend]()
    try:
        return _get_pattern_table(backend)
    except PartitaError:
        return None


def sanitise_table(table) -> list:
    """Rows ``("ethos-n.conv", pattern[, check])`` -> ``("ethos_n.conv", ...)``: a composite
    name's target prefix is the sanitised target name, so AnnotateTarget finds its owner."""
    out = []
    for row in table:
        head, dot, tail = row[0].partition(".")
        out.append((target_name(head) + dot + tail, *row[1:]) if dot else tuple(row))
    return out


def register_op_attr(op_name: str, attr_key: str, value=None, level: int = 10):
    """Register ``value`` (a check ``fn(call) -> bool | Verdict``, or True) as ``attr_key``'s
    support check for ``op_name``; used as a decorator when ``value`` is omitted."""
    if value is None:
        return lambda fn: register_op_attr(op_name, attr_key, fn, level) or fn
    if not attr_key.startswith("target."):
        raise PartitaError(
            f"register_op_attr: only 'target.<name>' keys are supported, got {attr_key!r}"
        )
    if not has_op(op_name):  # TVM registers the attribute of any op name; none of partita's
        log.info("register_op_attr(%r): partita has no such op, nothing to place", op_name)
        return None
    target = target_name(attr_key[len("target.") :])
    backend = find_backend(target)
    if backend is None:
        backend = Backend(target, ops={})
        register_backend(backend)
    ops = backend.op_checks()
    ops[op_name] = value
    backend._ops = ops
    return None
