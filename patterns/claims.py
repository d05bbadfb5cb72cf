"""Claims: the interface partitioning builds on (partition/ imports this module, nothing deeper).

A *claim* is a match that a partitioner takes as one unit: the matched root, the bindings (named
captures among them), the *interior* (the nodes the unit replaces), its *inputs* (what leaf
patterns bound) and the constants that stay *embedded*. A match can be claimed when no interior
node already belongs to another claim and no interior value is used outside the match
(group.py's rules, shared with ``rewrite`` and ``pattern.partition``).

    claimer = Claimer(graph)
    found = claimer.claim(rule.pattern, node, claimed)       # None when it does not match
    if found and not found.problem and check(node, found.match):
        fn, inputs = found.to_function(number)               # the unit as a Function

A table pattern that is a tree also has a claim program (programs.py): ``claim_program(pattern)``
matches, checks the region and copies the composite with code generated for the pattern, and
hands anything unusual back to ``Claimer.claim`` (``GENERIC``).

``check(root, match)`` is how a backend's check sees the claim: the root and the ``Match`` with its
captures (``match["weights"]``); checks written for the root alone still work (backends.verdict).
"""

from __future__ import annotations

from collections import Counter
from itertools import chain

from partita.ir.graph import Graph
from partita.ir.nodes import Expr, Function
from partita.ir.order import value_inputs

from .compiled import Fallback, compiled, run_compiled
from .group import Group, region_of, region_problem
from .matcher import Match, Solver
from .partition import extract_function
from .programs import GENERIC, NEED_USES, Program, claim_program, shared_values

__all__ = [
    "GENERIC",
    "NEED_USES",
    "Claim",
    "Claimer",
    "Match",
    "Program",
    "claim_program",
    "shared_values",
]


class Claim(Group):
    """A match taken as one unit (see the module docstring)."""

    __slots__ = ("problem",)

    def __init__(self, rule, root, bindings, interior, inputs, embedded, problem):
        super().__init__(rule, root, bindings, interior, inputs, embedded, True)
        self.problem = problem  # why it cannot be taken (overlap, value used outside), or None

    @property
    def match(self) -> Match:
        """The match behind the claim: its root and its captures by name."""
        return Match(self.root, self.bindings)

    def to_function(self, number: int) -> tuple[Function, list[Expr]]:
        """The claim as a Function of its inputs (``FunctionVar_<number>_<k>`` params), and the
        inputs in parameter order."""
        return extract_function(self, number)


class Claimer:
    """Matches patterns at nodes of one graph and tells whether each match can be claimed.

    ``explain=True`` keeps, after a failed ``claim``, the deepest partial match in ``nearest``:
    ``(depth, failed sub-pattern, failed expression, why, bindings)``.
    """

    def __init__(self, graph: Graph, explain: bool = False, count_uses=None):
        """``count_uses``: a function returning ``graph.uses`` (the caller may count over the
        units only); called at the first match that has more than its root."""
        self.graph = graph
        self._solver = Solver(lambda: graph, record=explain)
        self._count_uses = count_uses
        self._uses: Counter | None = None

    def match(self, pattern, root: Expr) -> Match | None:
        """The match of ``pattern`` rooted at ``root``, or None."""
        if not self._solver.record:
            fast = compiled(pattern)
            if fast is not None:
                try:
                    binds = run_compiled(fast, root)
                    return None if binds is None else Match(root, binds)
                except Fallback:
                    pass
        if not self._solver.run(pattern, root):
            return None
        return Match(root, self._solver.binds)

    @property
    def nearest(self):
        return self._solver.best

    def claim(self, pattern, root: Expr, claimed: set, rule=None) -> Claim | None:
        """``pattern``'s match at ``root`` as a claim, or None when it does not match; the claim's
        ``problem`` says why it cannot be taken (an interior node in ``claimed``, or an interior
        value used outside the match), else it is None."""
        found = self.match(pattern, root)
        if found is None:
            return None
        interior, inputs, embedded = region_of(found.bindings, root)
        problem = (
            None
            if self._self_contained(root, interior, claimed)
            else region_problem(root, interior, self.graph, claimed)
        )
        return Claim(rule, root, found.bindings, interior, inputs, embedded, problem)

    def _self_contained(self, root: Expr, interior: dict, claimed: set) -> bool:
        """True when ``region_problem`` would find nothing: no interior node claimed, and
        every use of every interior value (but the root's) made by an interior node. Counts
        instead of the users map (which ``region_problem`` builds only to word a problem)."""
        if len(interior) == 1:
            return True  # the root alone
        uses = self._uses
        if uses is None:
            count = self._count_uses
            uses = self._uses = self.graph.uses if count is None else count()
        inside = list(map(id, chain.from_iterable(map(value_inputs, interior.values()))))
        for k, node in interior.items():
            if node is not root and (k in claimed or inside.count(k) != uses[k]):
                return False
        return True
