"""Cut a partitioned ``main`` into a static schedule: steps and the slots between them.

    main(x) { %0 = @npu_main_0(x); %1 = qnn.mean(%0); %2 = @npu_main_1(%1); reshape(%2) }
      -> steps: npu_main_0 [x -> s1] · host_0 [s1 -> s2] · npu_main_1 [s2 -> s3] · host_1 [s3 -> s4]

Accelerator partitions (calls of global functions with a ``Compiler`` attribute) are steps of
their own; the host ops are grouped into as few host functions as the dependencies allow: every
host op goes into the latest host segment before its first reader (``delay_host_ops``: segments
are then only where a partition needs host results, and at the end; host segments take even
stages, partitions odd ones). Values crossing a step boundary get a numbered slot; a
slot is released after its last reader, so a run holds only live arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from partita.backends.compiled import flat_types
from partita.errors import PartitaError
from partita.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    IRModule,
    Tuple,
    TupleGetItem,
    Var,
    children,
    post_order,
    substitute,
)
from partita.passes.infer_type import infer_new_types, infer_type


class ScheduleError(PartitaError):
    """A partitioned module that cannot be cut into steps."""


@dataclass
class StepPlan:
    """One step before compilation: a function for ``target`` (a partition's ``symbol`` or a
    host segment), the slots it reads and the slots it writes."""

    target: str
    symbol: str
    function: Function
    inputs: list[int]
    outputs: list[int]
    host: bool = False


@dataclass
class SchedulePlan:
    """Slots (input, constant or produced by a step) and the steps in order."""

    input_slots: list[int]
    output_slots: list[int]
    constants: dict[int, np.ndarray] = field(default_factory=dict)
    steps: list[StepPlan] = field(default_factory=list)
    n_slots: int = 0


def _is_partition_call(node, mod: IRModule) -> bool:
    if not (isinstance(node, Call) and isinstance(node.op, GlobalVar)):
        return False
    fn = mod[node.op.name_hint]
    return bool(fn.attrs and fn.attrs.get("Compiler"))


class _Planner:
    def __init__(self, mod: IRModule, host: str):
        self.mod, self.host = mod, host
        self.main = mod["main"]
        self.plan = SchedulePlan([], [])
        self.slot: dict[int, list[int]] = {}  # id(node) -> slots of its flattened value
        self.stage: dict[int, int] = {}
        self.users: dict[int, list[int]] = {}  # id(node) -> ids of the nodes reading it
        self.result_ids: set[int] = set()

    def new_slots(self, node: Expr, count: int = 1) -> list[int]:
        slots = list(range(self.plan.n_slots, self.plan.n_slots + count))
        self.plan.n_slots += count
        self.slot[id(node)] = slots
        return slots

    def run(self) -> SchedulePlan:
        for p in self.main.params:
            self.plan.input_slots += self.new_slots(p)
            self.stage[id(p)] = 0
        body = self.main.body
        order = [
            n
            for n in post_order(body)
            if not isinstance(n, (Var, Function)) and not (n is body and isinstance(n, Tuple))
        ]
        for node in order:
            self.stage[id(node)] = self.stage_of(node)
            for c in children(node):
                self.users.setdefault(id(c), []).append(id(node))
        outs = self.main.body.fields if isinstance(self.main.body, Tuple) else ()
        self.result_ids = {id(self.main.body), *(id(f) for f in outs)}
        self.delay_host_ops(order)
        self.emit(order)
        self.plan.output_slots = self.value_slots(self.main.body)
        return self.plan

    def delay_host_ops(self, order: list[Expr]) -> None:
        """Move every host op to the last host segment before its first reader: segments are
        then only where a partition needs host results, and at the end."""
        last = max(self.stage.values(), default=0)
        final = last + last % 2
        for node in reversed(order):
            if isinstance(node, Constant) or self.stage[id(node)] % 2:
                continue
            latest = final
            for user in self.users.get(id(node), ()):
                s = self.stage[user]
                latest = min(latest, s - 1 if s % 2 else s)
            self.stage[id(node)] = latest

    def stage_of(self, node: Expr) -> int:
        if isinstance(node, Constant):
            return 0
        deps = [self.stage[id(c)] for c in children(node) if id(c) in self.stage]
        top = max(deps, default=0)
        if _is_partition_call(node, self.mod):
            return top if top % 2 else top + 1
        if isinstance(node, TupleGetItem) and _is_partition_call(node.tuple_value, self.mod):
            return self.stage[id(node.tuple_value)]  # an alias of one of the call's slots
        if isinstance(node, GlobalVar):
            return 0
        if isinstance(node, Call) and isinstance(node.op, GlobalVar):
            raise ScheduleError(
                f"main calls the global function @{node.op.name_hint}, which is not a partition; "
                f"inline it before building"
            )
        return top + (top % 2)

    def value_slots(self, node: Expr) -> list[int]:
        """The slots holding ``node``'s flattened value (a tuple of step outputs allowed)."""
        if id(node) in self.slot:
            return self.slot[id(node)]
        if isinstance(node, Constant):
            slots = self.new_slots(node)
            self.plan.constants[slots[0]] = node.data
            return slots
        if isinstance(node, Tuple):
            return [s for f in node.fields for s in self.value_slots(f)]
        if isinstance(node, TupleGetItem) and id(node.tuple_value) in self.slot:
            return [self._field_slots(node)]
        raise ScheduleError(f"no step computes {node.short()}")

    def _field_slots(self, node: TupleGetItem) -> int:
        slots = self.slot[id(node.tuple_value)]
        if node.index >= len(slots):
            raise ScheduleError(f"tuple index {node.index} out of range in {node.short()}")
        return slots[node.index]

    def emit(self, order: list[Expr]) -> None:
        stages = sorted({self.stage[id(n)] for n in order if not isinstance(n, Constant)})
        for stage in stages:
            members = [n for n in order if self.stage[id(n)] == stage]
            if stage % 2:
                for node in members:
                    if isinstance(node, TupleGetItem):
                        self.slot[id(node)] = [self._field_slots(node)]
                    else:
                        self.partition_step(node)
            else:
                self.host_step(members, stage, order)

    def partition_step(self, call: Call) -> None:
        fn = self.mod[call.op.name_hint]
        inputs = [s for a in call.args for s in self.value_slots(a)]
        outputs = self.new_slots(call, len(flat_types(call.checked_type)))
        target = str(fn.attrs["Compiler"])
        symbol = str(fn.attrs.get("global_symbol", call.op.name_hint))
        self.plan.steps.append(StepPlan(target, symbol, fn, inputs, outputs))

    def host_step(self, members: list[Expr], stage: int, order: list[Expr]) -> None:
        members = [n for n in members if not isinstance(n, Constant)]
        if not members:
            return
        inside = {id(n) for n in members}
        consts_inside = {id(n) for n in order if isinstance(n, Constant)}
        # Boundary values: read by a member, computed outside it.
        params, mapping, inputs = [], {}, []
        for node in members:
            for c in children(node):
                if id(c) in inside or id(c) in consts_inside or id(c) in mapping:
                    continue
                if isinstance(c, GlobalVar):
                    continue
                slots = self.value_slots(c)
                if len(slots) != 1:
                    raise ScheduleError(f"host op {node.short()} takes a tuple across a step")
                v = Var(f"h{stage // 2}_i{len(params)}", c.checked_type)
                params.append(v)
                mapping[id(c)] = (c, v)
                inputs += slots
        outs = [n for n in members if self._used_later(n, inside)]
        body = outs[0] if len(outs) == 1 else Tuple(outs)
        body = substitute(body, {c: v for c, v in mapping.values()})
        symbol = f"host_{stage // 2}"
        fn = Function(params, body, attrs={"global_symbol": symbol})
        infer_type(fn)
        outputs = []
        for n in outs:
            outputs += self.new_slots(n, len(flat_types(n.checked_type)))
        self.plan.steps.append(StepPlan(self.host, symbol, fn, inputs, outputs, host=True))

    def _used_later(self, node: Expr, inside: set[int]) -> bool:
        if id(node) in self.result_ids:
            return True
        return any(u not in inside for u in self.users.get(id(node), ()))


def plan_schedule(mod: IRModule, host: str) -> SchedulePlan:
    """The static schedule of a partitioned module (see the module docstring)."""
    infer_new_types(mod["main"], mod)  # build passes a typed module: nothing to walk
    return _Planner(mod, host).run()


def release_points(plan: SchedulePlan) -> list[list[int]]:
    """For each step, the slots no later step reads and that are not outputs."""
    last: dict[int, int] = {}
    for i, step in enumerate(plan.steps):
        for s in step.inputs:
            last[s] = i
    keep = set(plan.output_slots)
    out: list[list[int]] = [[] for _ in plan.steps]
    for s, i in last.items():
        if s not in keep:
            out[i].append(s)
    return out
