"""Placement policies users asked for: overrides, a minimum region size, and backend cost hooks.

``Overrides`` forces op types (``"qnn.add"``, the source's ``"ADD"``, or a composite name) or
source ops (by index or tensor name) onto the CPU. ``RegionPolicies`` runs after
MergeCompilerRegions and sends back to the CPU every region that is smaller than the minimum size
(in source ops) or that its backend's cost hook refuses:

    %5 = fn (%npu_3_i0, Compiler="npu") { qnn.add(...) }(%4)    ->
    %5 = fn (%llvm_3_i0, Compiler="llvm", Host=True,
             Reason="the npu region of 1 op is smaller than the minimum region size 2") {...}(%4)
"""

from __future__ import annotations

from operator import attrgetter

from partita.backends.cost import MAC_OPS, RegionStats, count_macs, type_bytes
from partita.backends.registry import DEFAULT_HOST, find_backend

from partita.errors import PartitaError
from partita.ir.gc_pause import gc_paused
from partita.ir.module import IRModule
from partita.ir.nodes import Call, Constant, Function, Tuple, Var
from partita.ir.visitor import post_order, substitute
from partita.ops.registry import Op
from partita.passes.infra import Pass

from .builder import RegionsMemo
from .deferred import Pending, map_region_functions, pending_or_built
from .regions import Region, RegionBuilder, op_calls, unit_ops

_SPAN_OF = attrgetter("span")
_OP_OF = attrgetter("op")


class Overrides:
    """Op types and source ops that must stay on the CPU."""

    def __init__(self, op_types=(), nodes=()):
        if isinstance(op_types, str) or isinstance(nodes, (str, int)):
            raise PartitaError("Overrides takes lists: op_types=[...], nodes=[...]")
        self.op_types = frozenset(str(t) for t in op_types)
        self.indices: set[int] = set()
        self.names: set[str] = set()
        for n in nodes:
            if isinstance(n, int) or (isinstance(n, str) and n.isdigit()):
                self.indices.add(int(n))
            else:
                self.names.add(str(n))

    def __bool__(self):
        return bool(self.op_types or self.indices or self.names)

    def forced(self, node) -> str | None:
        """Why ``node`` (a call; a composite call counts its inner ops) must stay on the CPU."""
        if type(node) is not Call:
            return None
        if type(node.op) is Function:
            if node.op.attrs.get("Composite") in self.op_types:
                return f"forced onto the CPU (op type {node.op.attrs['Composite']})"
            return self.forced_any(op_calls(node.op.body))
        if node.op.name in self.op_types:
            return f"forced onto the CPU (op type {node.op.name})"
        span = node.span
        if span is None:
            return None
        if span.op_type in self.op_types:
            return f"forced onto the CPU (op type {span.op_type})"
        if span.index in self.indices:
            return f"forced onto the CPU (source op #{span.index})"
        if span.tensor in self.names:
            return f"forced onto the CPU (source op {span.tensor!r})"
        return None

    def forced_any(self, nodes) -> str | None:
        """The first reason any of ``nodes`` is forced onto the CPU, or None."""
        for node in nodes:
            why = self.forced(node)
            if why:
                return why
        return None

    def unmatched(self, mod: IRModule) -> list[str]:
        """The overrides that name no op of ``mod`` (most likely typos)."""
        seen_types, seen_index, seen_names = set(), set(), set()
        for fn in mod.functions.values():
            for node in post_order(fn.body):
                if type(node) is not Call:
                    continue
                seen_types.add(node.op_name)
                if node.span is not None:
                    seen_types.add(node.span.op_type)
                    seen_index.add(node.span.index)
                    seen_names.add(node.span.tensor)
        return (
            [t for t in sorted(self.op_types) if t not in seen_types]
            + [f"#{i}" for i in sorted(self.indices) if i not in seen_index]
            + [n for n in sorted(self.names) if n not in seen_names]
        )


def source_ops(calls) -> int:
    """How many source ops ``calls`` come from (one per span; a call without a span is one)."""
    spans = list(map(_SPAN_OF, calls))
    if spans.count(None) == len(spans):  # no spans (a graph built in Python): one op a call
        return len(set(map(id, calls)))
    keys = set()
    for call in calls:
        span = call.span
        keys.add(
            (span.index, span.op_type) if span is not None and span.index is not None else id(call)
        )
    return len(keys)


def region_stats(
    region: Region, members: list, inputs: list, outputs, with_function: bool = False
) -> RegionStats:
    """What the cost hook sees of a region: source ops, MACs and the bytes crossing it (and,
    ``with_function``, the region as a function, for backends that plan over it)."""
    callees = set(map(_OP_OF, members)) if set(map(type, members)) == {Call} else None
    if callees is not None and all(isinstance(op, Op) for op in callees):
        calls = list(members)  # op calls only (the distinct callees tested, at C speed)
    else:
        calls = []
        for m in members:
            if type(m) is Call and isinstance(m.op, Op):
                calls.append(m)
            else:
                calls += unit_ops(m)
        callees = set(map(_OP_OF, calls))
    # only the ops count_macs counts (the others do none): no loop when the region has none
    macs = any(op.name in MAC_OPS for op in callees)
    return RegionStats(
        region.target,
        source_ops(calls),
        sum(count_macs(c) for c in calls if c.op.name in MAC_OPS) if macs else 0,
        sum(type_bytes(i.type_or_none) for i in inputs),
        sum(type_bytes(o.type_or_none) for o in outputs),
        _region_function(inputs, list(outputs)) if with_function else None,
    )


def _region_function(inputs: list, outputs: list) -> Function | None:
    """The region as a function of its inputs (what PartitionGraph will make of it), for cost
    hooks that need the whole region (the NPU plans its SRAM over it)."""
    if not outputs:
        return None
    params, mapping = [], {}
    for i, node in enumerate(inputs):
        if type(node) is Constant or node.type_or_none is None:
            continue
        params.append(Var(f"i{i}", node.type_or_none))
        mapping[node] = params[-1]
    body = outputs[0] if len(outputs) == 1 else Tuple(outputs)
    return Function(params, substitute(body, mapping))


class RegionPolicies(Pass):
    """Send back to the host every region below ``min_size`` source ops, every region without
    ops, and every region its backend's cost hook refuses (see the module docstring)."""

    name = "RegionPolicies"

    def __init__(self, min_size: int = 1, targets=(), host: str = DEFAULT_HOST):
        if not isinstance(min_size, int) or min_size < 1:
            raise PartitaError(f"min_size must be a positive integer, got {min_size!r}")
        self.min_size, self.host = min_size, host
        self.options = {getattr(t, "name", t): getattr(t, "options", {}) for t in targets}

    @gc_paused
    def transform(self, mod: IRModule, ctx) -> IRModule:
        return map_region_functions(mod, self._apply)

    def _apply(self, _name: str, fn, flat, region_of: dict, order: list):
        builder = RegionBuilder(region_of)
        members, inputs, outputs = builder.regions(order, flat)
        refused, gone = False, set()
        labels = region_of  # the labels given (shared with the previous pass: copied on write)
        for key, nodes in members.items():
            region = region_of[id(nodes[0])]
            backend = None if region.host else find_backend(region.target)
            whole = bool(getattr(backend, "wants_region_function", False))
            why = (
                None
                if region.host
                else self.refusal(
                    region,
                    region_stats(region, nodes, inputs[key], outputs[key].values(), whole),
                )
            )
            if why and region_of is labels:
                region_of = dict(labels)
            for node in nodes if why else ():
                region_of[id(node)] = Region(self.host, True, why)
            if why:
                gone.add(key)
            refused = refused or bool(why)
        memo = RegionsMemo(region_of, builder.bind_constants, members, inputs, outputs, gone)
        if not refused and (type(fn) is Pending or fn.body is not flat):
            out = fn  # every region kept: building again would give the same graph
        else:
            out = pending_or_built(fn, flat, region_of, order)
        if type(out) is Pending:
            out.regions = memo
        return out

    def refusal(self, region: Region, stats: RegionStats) -> str | None:
        """Why ``region`` goes back to the host, or None to keep it."""
        if stats.ops == 0:
            return f"the {region.target} region holds no ops"
        if stats.ops < self.min_size:
            return (
                f"the {region.target} region of {stats.ops} op{'s' * (stats.ops > 1)} is "
                f"smaller than the minimum region size {self.min_size}"
            )
        backend = find_backend(region.target)
        if backend is None:
            return None
        verdict = backend.check_region(stats, self.options.get(region.target))
        return None if verdict.ok else f"{region.target} refused the region: {verdict.reason}"
