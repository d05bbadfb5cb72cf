"""Which function lowers which op: one table, filled by ``@lowers`` beside each lowering.

    @lowers("qnn.add", "qnn.subtract", "qnn.mul", priority=EDGE)
    def lower_qbinary(low, call) -> bool: ...      # True: emitted; False: declined

An op may have several candidates (a per-channel add is QBIN's, a per-tensor one LUT2's); they
are tried in ascending ``priority`` and the first that returns True lowers the call. Two
candidates of one op never share a priority, so the order is written down, not an accident of
import order. The bands, lowest first:

    EDGE   lowerings of what the general ones below refuse (int16 data, per-channel binary ops,
           wide accumulators, run-time pad values); each declines everything else
    OP     op-specific lowerings ahead of the generic kernels (float convolutions, gathers,
           batch matmuls, softmaxes, ...)
    CORE   the 8-bit kernels: MAC (conv / dense with their output stage), LUT, LUT2, MEAN,
           MAXPOOL, QUANT and the views (COPY, TRANSPOSE, strided slices)
    FLOAT  the float and integer kernels: EWISE, reductions, products, pools, resizes

A candidate registered for op kinds (``kinds=("elemwise",)``: LUT maps any one-input 8-bit
function through a table) applies to every op of those kinds, registered now or later.
``lowering_for(name)`` answers "which functions lower op X, in what order"; lower/context.py's
LowerContext.lower walks that list (after its three cross-cutting steps: folded weights,
fusion into a deferred EWISE kernel, float16 widening).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

EDGE, OP, CORE, FLOAT = 100, 200, 300, 400


@dataclass(frozen=True)
class Candidate:
    """One registered lowering: ``fn(low, call) -> bool`` tried at ``priority``."""

    priority: int
    fn: Callable

    @property
    def name(self) -> str:
        return f"{self.fn.__module__.rsplit('.', 1)[-1]}.{self.fn.__name__}"


_BY_OP: dict[str, list[Candidate]] = {}
_BY_KIND: dict[str, list[Candidate]] = {}


def _add(table: dict, key: str, cand: Candidate) -> None:
    row = table.setdefault(key, [])
    clash = [c for c in row if c.priority == cand.priority and c.fn is not cand.fn]
    if clash:
        raise ValueError(
            f"llvm lowering registry: {cand.name} and {clash[0].name} both claim {key!r} at "
            f"priority {cand.priority}; give one of them another priority"
        )
    if all(c.fn is not cand.fn for c in row):
        row.append(cand)
        row.sort(key=lambda c: c.priority)


def lowers(*ops: str, priority: int, kinds: tuple[str, ...] = ()) -> Callable:
    """Register the decorated ``fn(low, call) -> bool`` as a lowering of ``ops`` (and of every
    op whose kind is in ``kinds``) at ``priority``."""

    def register(fn: Callable) -> Callable:
        cand = Candidate(priority, fn)
        for op in ops:
            _add(_BY_OP, op, cand)
        for kind in kinds:
            _add(_BY_KIND, kind, cand)
        return fn

    return register


def candidates(op_name: str) -> tuple[Candidate, ...]:
    """The registered lowerings of ``op_name`` (by name and by its op kind), in the order they
    are tried."""
    from partita.ir.op import get_op, has_op

    found = list(_BY_OP.get(op_name, ()))
    if has_op(op_name):
        for cand in _BY_KIND.get(get_op(op_name).kind, ()):
            if all(c.fn is not cand.fn for c in found):
                found.append(cand)
    prios = [c.priority for c in found]
    if len(set(prios)) != len(prios):
        raise ValueError(f"llvm lowering registry: two lowerings of {op_name!r} share a priority")
    return tuple(sorted(found, key=lambda c: c.priority))


def lowering_for(op_name: str, below: int | None = None, at_least: int = 0) -> tuple:
    """The functions that lower ``op_name``, in the order they are tried (priorities in
    [``at_least``, ``below``) when given); empty: the backend refuses the op."""
    return tuple(
        c.fn for c in candidates(op_name)
        if c.priority >= at_least and (below is None or c.priority < below)
    )


def registered_ops() -> dict[str, tuple[str, ...]]:
    """Every op with a lowering (registered by its name or its kind), with its candidates'
    names in the order they are tried."""
    from partita.ir.op import list_ops

    names = set(_BY_OP) | {op.name for op in list_ops() if op.kind in _BY_KIND}
    return {op: tuple(c.name for c in candidates(op)) for op in sorted(names)}


__all__ = ["CORE", "EDGE", "FLOAT", "OP", "Candidate", "candidates", "lowering_for", "lowers",
           "registered_ops"]
