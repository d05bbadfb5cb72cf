"""MergeComposite: wrap each match of a pattern table in a composite function.

    %1 = qnn.conv2d(%x, meta[0], ...);        %1 = fn (%FunctionVar_0_0, Composite="npu.conv2d",
    %2 = qnn.requantize(%1, ...)         ->         PartitionedFromPattern="qnn.conv2d_...") {
                                                 qnn.requantize(qnn.conv2d(%FunctionVar_0_0, ...))
                                               }(%x)

The FIRST entry wins: as in Relay, each entry in table order claims all its matches before the
next entry is tried, so fused patterns go before their parts. An entry claims from the output
down (a pattern that can grow is taken whole), never overlapping an earlier claim and never with
an interior value used outside the match. A check receives the matched expression (the match's
root) and returns a Verdict; a refusal frees the nodes for later entries, and its reason is kept
for the placement report.
"""

from __future__ import annotations

from itertools import chain, compress
from operator import attrgetter

from partita.backends.registry import normalize_table
from partita.backends.verdict import run_check, takes_match
from partita.patterns.claims import (
    GENERIC,
    NEED_USES,
    Claim,
    Claimer,
    Match,
    claim_program,
    shared_values,
)

from partita.ir.gc_pause import gc_paused
from partita.ir.graph import Graph, use_counts
from partita.ir.module import IRModule
from partita.ir.nodes import Call, Expr, Function
from partita.passes.infer_type import infer_new_types
from partita.passes.infra import Pass

from .record import with_record
from .regions import UNIT_TYPES, ensure_typed, is_partition_function
from .units import copy_mapped

_UNIT_SET = frozenset(UNIT_TYPES)
PROGRAM_MIN = 32  # candidates of a rule from which it runs its pattern's claim program


class _Rule:
    __slots__ = ("pattern", "attrs", "check", "name", "wants_match")

    def __init__(self, entry):
        self.pattern, self.check, self.name = entry.pattern, entry.check, entry.name
        self.attrs = {"Composite": entry.name}
        self.wants_match = entry.check is not None and takes_match(entry.check)


class MergeComposite(Pass):
    """Wrap each match of ``pattern_table`` (rows ``(name, pattern)`` or ``(name, pattern,
    check)``) in a function with ``Composite=name``; the first entry wins (module docstring)."""

    name = "MergeComposite"

    def __init__(self, pattern_table=(), overrides=None):
        self.entries = normalize_table(pattern_table)
        self.overrides = overrides

    @gc_paused
    def transform(self, mod: IRModule, ctx) -> IRModule:
        out = IRModule({}, mod.attrs)
        refusals: dict = {}
        counter = [0]
        rules = [_Rule(e) for e in self.entries]
        for gname, fn in mod.items():
            if is_partition_function(fn) or not self.entries:
                out[gname] = fn
                continue
            ensure_typed(fn, mod)
            body = _merge_body(fn.body, rules, mod, counter, refusals, self.overrides)
            out[gname] = fn.with_body(body)
        return with_record(out, pattern_table=tuple(self.entries), refusals=refusals)


def _index(units: list) -> dict[str, list[int]]:
    """Positions in ``units`` filed under their op name (or node kind)."""
    by_key: dict[str, list[int]] = {}
    get = by_key.get
    for i, node in enumerate(units):
        t = type(node)
        key = node.op.name if t is Call and not isinstance(node.op, Expr) else t.__name__
        found = get(key)
        if found is None:
            by_key[key] = [i]
        else:
            found.append(i)
    return by_key


class _Claims:
    """What the rules claimed: the general path's Claims and the programs' fast matches
    (``(shape, found)``: the shape's helpers read the nodes in ``found``) by root id, and the
    ids of every claimed node."""

    def __init__(self):
        self.general: dict[int, Claim] = {}
        self.fast: dict[int, tuple] = {}
        self.claimed: set[int] = set()


_BINDINGS = attrgetter("bindings")


def _claim(graph: Graph, rules: list, accept, refuse, forced: bool) -> tuple[_Claims, list]:
    """Each rule in table order claims its matches, from the output down, among the nodes no
    earlier rule claimed (so an earlier entry wins everywhere, as in Relay). Also returns the
    graph's units (calls, tuples, ...) in post-order: the only nodes the rebuild copies.
    ``forced``: whether overrides may force nodes onto the CPU (``accept`` is then asked).
    A rule whose pattern has a claim program (patterns/programs.py) runs it; what the program
    hands back (``GENERIC``) and the other rules go through ``Claimer.claim``."""
    # the units (calls, tuples, ...) filtered at C speed, then filed under their op name (or
    # node kind); a rule tries only the units its pattern's root can match (no pattern roots at
    # the constants and variables that make up most of a frontend's graph, and a match is only
    # taken at a unit). Positions are in ``units``, which keeps the graph's order.
    units = list(compress(graph.order, map(_UNIT_SET.__contains__, map(type, graph.order))))
    by_key = _index(units)
    out = _Claims()
    claimed = out.claimed
    shared = None  # ids of the values used more than once, found at the first match that asks
    claimer = Claimer(graph, count_uses=lambda: use_counts(units))
    for rule in rules:
        keys = rule.pattern.root_keys()
        if keys is None:
            candidates = units[::-1]
        else:
            lists = [by_key[k] for k in keys if k in by_key]
            if len(lists) == 1:
                candidates = [units[i] for i in reversed(lists[0])]
            else:
                candidates = [units[i] for i in sorted(chain(*lists), reverse=True)]
        if not candidates:
            continue
        # a program costs ~1-20 ms to generate (per table build): worth it for many candidates;
        # for a few, the closures (the same answers: tests/patterns/test_patterns_programs.py)
        program = claim_program(rule.pattern) if len(candidates) >= PROGRAM_MIN else None
        if program is not None:
            match, shapes = program.match, program.shapes
            builds = [s.build for s in shapes]
            attrs = [program.attrs(s, rule.attrs) for s in shapes]
        else:
            match = None
        # nothing to ask before taking a match: no override, no check
        plain = not forced and rule.check is None
        fast = out.fast
        for node in candidates:
            if id(node) in claimed:
                continue
            if match is not None:
                found = match(node, claimed, shared)
                if found is None:
                    continue
                if found is NEED_USES:
                    shared = shared_values(units)
                    found = match(node, claimed, shared)
                if found is not GENERIC:
                    interior = found[1]
                    why = None if plain else accept(rule, node, interior, shapes[found[0]].bindings,
                                                    found)
                    if why is None:
                        claimed.update(map(id, interior))
                        number = found[0]
                        fast[id(node)] = (builds[number], found, attrs[number])
                    else:
                        refuse(rule, interior, why)
                    continue
            found = claimer.claim(rule.pattern, node, claimed, rule)
            if found is None or found.problem:
                continue
            why = accept(rule, node, found.interior.values(), _BINDINGS, found)
            if why is None:
                claimed.update(found.interior)
                out.general[id(node)] = found
            else:
                refuse(rule, found.interior.values(), why)
    return out, units


def _merge_body(body: Expr, rules: list, mod, counter: list, refusals: dict, overrides) -> Expr:
    graph = Graph(body)
    refused: dict[int, tuple] = {}  # id(old node) -> (old node, reason), first refusal wins

    def accept(rule, root, interior, bindings_of, source) -> str | None:
        """None when ``rule`` may take the match, else why not (an override or the check);
        ``bindings_of(source)``: the match's bindings, built only for a check that takes them."""
        forced = overrides.forced_any(interior) if overrides else None
        if forced:
            return forced
        check = rule.check
        if check is None:
            return None
        match = Match(root, bindings_of(source)) if rule.wants_match else None
        verdict = run_check(check, root, match)
        return None if verdict else verdict.reason or f"the check of {rule.name} refused"

    def refuse(rule, interior, why: str) -> None:
        for node in interior:
            refused.setdefault(id(node), (node, f"{rule.name}: {why}"))

    claims, units = _claim(graph, rules, accept, refuse, bool(overrides))
    claimed = claims.claimed
    if not claimed:
        _keep_refusals(refused, {}, set(), refusals)
        return body
    general, fast = claims.general, claims.fast
    # only units are copied: a leaf (constant, variable, function) stands for itself
    memo: dict[int, Expr] = {}
    get = memo.get
    for node in units:
        key = id(node)
        if key not in claimed:
            memo[key] = copy_mapped(node, get)
            continue
        hit = fast.get(key)
        if hit is not None:
            build, found, attrs = hit
            call = build(found, counter[0], attrs, get)  # typed when the root is
            counter[0] += 1
        else:
            group = general.get(key)
            if group is None:
                continue  # inside a composite
            fn, inputs = group.to_function(counter[0])
            counter[0] += 1
            call = _call_function(fn, [get(id(x), x) for x in inputs], node.span)
            result = fn.body.type_or_none
            if result is not None:  # the body's copies kept their types: so do fn and call
                _TYPE(fn, result)
                _TYPE(call, result)
        if call._type is None:
            infer_new_types(call, mod)  # its inputs are typed; its consumers copy types
        memo[key] = call
    out = memo.get(id(body), body)
    _keep_refusals(refused, memo, claimed, refusals)
    return out


_new = object.__new__
_SPAN, _TYPE = Expr.span.__set__, Expr._type.__set__
_OP, _ARGS, _ATTRS = Call.op.__set__, Call.args.__set__, Call.attrs.__set__


def _call_function(fn: Function, args: list, span) -> Call:
    """``Call(fn, args, span=span)`` without the checks: ``fn`` is a Function and the args are
    nodes of the graph (the rebuild makes one call per composite)."""
    new = _new(Call)
    _SPAN(new, span)
    _TYPE(new, None)
    _OP(new, fn)
    _ARGS(new, tuple(args))
    _ATTRS(new, None)
    return new


def _keep_refusals(refused: dict, memo: dict, claimed: set, refusals: dict) -> None:
    """Record refusals for the nodes that stayed outside every composite, keyed by the node of
    the new graph (which the record holds, so the id cannot be reused)."""
    for key, (node, reason) in refused.items():
        if key in claimed:
            continue
        new = memo.get(key, node)
        if type(new) is Call and not isinstance(new.op, Function):
            refusals[id(new)] = (new, reason)
