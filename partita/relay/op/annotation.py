"""``tvm.relay.op.annotation``: Relay's region annotations (``relay.annotation.*``).

``compiler_begin(x, "npu")`` / ``compiler_end(y, "npu")`` mark a region by hand; the target name
is kept as TVM writes it (``"ethos-n"``: a partition's ``Compiler`` says it, its symbol is
sanitised), ``"default"`` is the host. partita's MergeCompilerRegions and PartitionGraph read
them (partition/annotations.py).
"""

from __future__ import annotations

from partita.ir import Call, Expr
from partita.ops import get_op


def _mark(op: str, data: Expr, compiler: str) -> Call:
    return Call(get_op(op), [data], {"compiler": compiler})


def compiler_begin(data: Expr, compiler: str) -> Call:
    """``data`` enters a region of target ``compiler``."""
    return _mark("annotation.compiler_begin", data, compiler)


def compiler_end(data: Expr, compiler: str) -> Call:
    """``data`` leaves a region of target ``compiler``."""
    return _mark("annotation.compiler_end", data, compiler)


__all__ = ["compiler_begin", "compiler_end"]
