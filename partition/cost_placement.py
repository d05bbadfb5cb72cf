"""CostPlacement: keep an accelerator partition only where it lowers the end-to-end latency.

    partition_for(mod, "npu, llvm", placement="cost", host_model="cortex-a55:1.8GHz")

After PartitionGraph every partition has two prices: on its accelerator (its estimator's time,
the invocation overhead, and moving each tensor that crosses to or from the host at the
preset's bandwidth) and on the host (the host model over its ops). A value costs a transfer
only where its producer and a reader sit on different sides, so the price of one partition
depends on its neighbours' places: the pass starts from everything on the accelerator and
moves partitions to the host, one at a time or two neighbours together (a pair that only pays
together: the tensor between them stays on one side), while the total estimate drops. It
never rises, so the result is never estimated slower than all-on-the-accelerator. A partition
sent back becomes plain host ops again, each with the reason and both prices:

    cost: on npu 0.031 ms (+0.020 ms call, 0.004 ms transfers) vs 0.006 ms on the host
"""

from __future__ import annotations

from partita.backends.cost import type_bytes

from partita.ir.graph import dataflow_order
from partita.ir.module import IRModule
from partita.ir.nodes import Call, Constant, Function, GlobalVar, Tuple, TupleGetItem
from partita.ir.types import TupleType
from partita.passes.infra import Pass

from .estimate import EstimateValues, estimate, host_model_of
from .record import Placement, record_of, with_record
from .regions import copy_node, inline_body, is_composite_call, value_children


class CostPlacement(Pass):
    """Send back to the host every accelerator partition whose host estimate beats its
    accelerator estimate with transfers (module docstring). ``pinned``: partition names or
    source ops (index or tensor name) that stay on the accelerator whatever the estimate."""

    name = "CostPlacement"

    def __init__(self, target="npu, llvm", host_model=None, pinned=(), cache=None):
        """``cache``: estimates by partition, shared with other runs (the split search)."""
        self.target, self.host_model = target, host_model
        self.pinned = {str(p) for p in pinned}
        self.cache = cache

    def transform(self, mod: IRModule, ctx) -> IRModule:
        host = host_model_of(self.host_model, self.target)
        est = estimate(mod, self.target, host, self.cache)
        steps = {s.name: s for s in est.steps if not s.name.startswith("%")}
        if not steps:
            return mod
        values = EstimateValues(mod["main"], mod)
        calls = {c.op.name_hint: c for c in values.graph.order if values.partition_of(c) is c}
        crossing = _crossings(values, calls)
        on_host = self._choose(steps, calls, crossing, mod)
        if not on_host:
            return mod
        reasons = {name: _reason(steps[name], host.name) for name in on_host}
        return _inline(mod, on_host, reasons)

    def _pinned(self, name: str, mod: IRModule) -> bool:
        if name in self.pinned:
            return True
        for call in dataflow_order(mod[name].body):
            span = getattr(call, "span", None)
            if span is not None and (str(span.index) in self.pinned or span.tensor in self.pinned):
                return True
        return False

    def _choose(self, steps: dict, calls: dict, crossing: list, mod: IRModule) -> set:
        movable = [n for n in calls if n in steps and steps[n].cycles and not self._pinned(n, mod)]
        side = dict.fromkeys(calls, "acc")
        total = _total(steps, side, crossing)
        neighbours = {n: set() for n in calls}
        for value_side, readers, _bytes in crossing:
            for a in [value_side, *readers]:
                for b in [value_side, *readers]:
                    if a in neighbours and b in neighbours and a != b:
                        neighbours[a].add(b)
        improved = True
        while improved:
            improved = False
            for name in movable:
                for group in [(name,)] + [(name, m) for m in sorted(neighbours[name])]:
                    if any(g not in movable for g in group):
                        continue
                    trial = dict(side)
                    for g in group:
                        trial[g] = "host" if side[g] == "acc" else "acc"
                    cost = _total(steps, trial, crossing)
                    if cost < total - 1e-12:
                        side, total, improved = trial, cost, True
        return {n for n, s in side.items() if s == "host"}


def _crossings(values: EstimateValues, calls: dict) -> list:
    """(producer, readers, bytes) per value of main that a partition makes or reads: producer
    and readers are partition names, or None for the host."""
    out = []
    users = values.graph.users
    seen = set()

    def side_of(node):
        call = values.partition_of(node)
        return call.op.name_hint if call is not None else None

    for node in values.graph.order:
        if type(node) in (Tuple, Function, Constant) or id(node) in seen:
            continue
        if isinstance(node.type_or_none, TupleType):  # its items are the values that move
            continue
        readers = [r for r in users.get(id(node), ()) if type(r) is not TupleGetItem]
        reader_sides = [side_of(r) if type(r) is Call else None for r in readers]
        if node is values.result:
            reader_sides.append(None)
        producer = side_of(node) if type(node) in (Call, TupleGetItem) else None
        touches = producer is not None or any(s is not None for s in reader_sides)
        if not touches:
            continue
        seen.add(id(node))
        out.append((producer, reader_sides, type_bytes(node.type_or_none)))
    return out


def _total(steps: dict, side: dict, crossing: list) -> float:
    """The end-to-end estimate of one assignment (host ops in main are the same in every
    assignment, so they are left out); a crossing value moves at its partition's bandwidth."""
    total = 0.0
    for name, where in side.items():
        s = steps[name]
        total += s.seconds + s.call_overhead_s if where == "acc" else s.host_seconds
    for producer, readers, nbytes in crossing:
        p = "host" if producer is None else side[producer]
        sides = ["host" if r is None else side[r] for r in readers]
        if all(x == p for x in sides):
            continue
        # the accelerator end of the move: the producer, or the first reader on an accelerator
        acc = producer if p == "acc" else next(r for r, x in zip(readers, sides) if x == "acc")
        step = steps[acc]
        if step.bytes_per_s:
            total += nbytes / step.bytes_per_s + step.transfer_latency_s
    return total


def _reason(step, host_name: str) -> str:
    return (
        f"cost: on {step.target} {step.seconds * 1e3:.3f} ms (+{step.call_overhead_s * 1e3:.3f} "
        f"ms call, {step.transfer_s * 1e3:.3f} ms transfers) vs "
        f"{step.host_seconds * 1e3:.3f} ms on the host ({host_name})"
    )


def _inline(mod: IRModule, on_host: set, reasons: dict) -> IRModule:
    """``mod`` with the chosen partitions' bodies back in main as plain ops."""
    record = record_of(mod)
    old = record.placement
    placement = Placement(old.host if old is not None else "llvm")
    main = mod["main"]
    memo: dict[int, object] = {}
    for node in dataflow_order(main.body):
        if type(node) is Call and type(node.op) is GlobalVar and node.op.name_hint in on_host:
            name = node.op.name_hint
            memo[id(node)] = _expand(
                mod[name], [memo[id(a)] for a in node.args], placement, reasons[name]
            )
        elif type(node) is TupleGetItem and type(memo.get(id(node.tuple_value))) is list:
            memo[id(node)] = memo[id(node.tuple_value)][node.index]
        elif type(node) in (Call, Tuple, TupleGetItem):
            kids = [_value(memo, k) for k in value_children(node)]
            new = memo[id(node)] = copy_node(node, kids)
            if old is not None:
                why = old.reason(node)
                if why:
                    placement.reasons[id(new)] = (new, why)
        else:
            memo[id(node)] = node
    out = IRModule({}, mod.attrs)
    out["main"] = main.with_body(_value(memo, main.body))
    for name, fn in mod.items():
        if name != "main" and name not in on_host:
            out[name] = fn
    return with_record(out, placement=placement)


def _value(memo, node):
    v = memo[id(node)]
    if type(v) is list:
        v = Tuple(v)
        v.with_type(TupleType([f.type_or_none for f in v.fields]))
        memo[id(node)] = v
    return v


def _expand(fn: Function, args: list, placement: Placement, reason: str):
    """A partition's body on ``args``, its composites opened into their ops; a list of fields
    when it returns a tuple."""

    def note(_old, new):
        if type(new) is Call and not isinstance(new.op, (Function, GlobalVar)):
            placement.reasons[id(new)] = (new, reason)

    memo: dict[int, object] = {id(p): a for p, a in zip(fn.params, args)}
    for node in dataflow_order(fn.body):
        if id(node) in memo:
            continue
        if is_composite_call(node):
            kids = [memo[id(k)] for k in node.args]
            memo[id(node)] = inline_body(node.op, kids, [node.op.body], note)[0]
        elif type(node) in (Call, Tuple, TupleGetItem):
            new = copy_node(node, [memo[id(k)] for k in value_children(node)])
            note(node, new)
            memo[id(node)] = new
        else:
            memo[id(node)] = node
    body = fn.body
    if type(body) is Tuple:
        return [memo[id(f)] for f in body.fields]
    return memo[id(body)]
