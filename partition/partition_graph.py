"""PartitionGraph: lift each accelerator region into a global function; the host keeps the rest.

    %2 = fn (%npu_0_i0, Compiler="npu") {           def @npu_main_0(%npu_0_i0, Compiler="npu",
           npu.conv2d composite(%npu_0_i0) }(%x)  ->      global_symbol="npu_main_0", Primitive=1) {
                                                         npu.conv2d composite(%npu_0_i0) }
                                                    ... %2 = @npu_main_0(%x)

A region with several outputs returns a tuple that main indexes. Constants stay inside the
partition that uses them (a constant two partitions use is in both). Host units become plain
nodes of main again; a composite that stayed on the host but belongs to another target is
inlined back into its ops. The reason each host op stays there is kept on the module for
``placement_report``.
"""

from __future__ import annotations

import re

from partita.backends.registry import DEFAULT_HOST

from partita.ir.gc_pause import gc_paused
from partita.ir.module import IRModule
from partita.ir.nodes import Call, Expr, Function
from partita.passes.infra import Pass

from .annotations import begin_numbers
from .deferred import DeferredModule
from .record import Placement, with_record
from .regions import (
    Region,
    RegionBuilder,
    built_by_regions,
    copy_node,
    ensure_typed,
    flatten_ordered,
    has_inner_functions,
    inline_body,
    is_composite_call,
    is_partition_function,
    map_inner_functions,
)


class _Lifter(RegionBuilder):
    def __init__(self, region_of, taken: set, counters: dict, placement: Placement, prefix=""):
        super().__init__(region_of)
        self.taken, self.counters, self.placement = taken, counters, placement
        self.prefix = prefix

    def mode(self, region: Region) -> str:
        return "plain" if region.host else "global"

    def function_attrs(self, region, outputs, symbol) -> dict:
        attrs = {"Compiler": region.target, "global_symbol": symbol, "Primitive": 1}
        if self.prefix:  # TVM's naming: TVM also marks the function Inline
            attrs["Inline"] = 1
        return attrs

    def symbol(self, region: Region) -> str:
        target = re.sub(r"\W", "_", region.target)  # a hand-annotated target may be any string
        if self.prefix and region.number is not None:  # TVM's name: the region's own number
            name = f"{self.prefix}{target}_main_{region.number}"
            if name not in self.taken:
                self.taken.add(name)
                return name
        while True:
            n = self.counters.get(region.target, 0)
            self.counters[region.target] = n + 1
            name = f"{self.prefix}{target}_main_{n}"
            if name not in self.taken:
                self.taken.add(name)
                return name

    def emit_plain(self, node: Expr, new_kids: list, region: Region | None) -> Expr:
        reason = region.reason if region is not None else None

        def note(_old, new):
            if reason and type(new) is Call:
                self.placement.reasons[id(new)] = (new, reason)

        if (
            region is not None
            and is_composite_call(node)
            and not str(node.op.attrs["Composite"]).startswith(region.target + ".")
        ):
            return inline_body(node.op, new_kids, [node.op.body], note)[0]
        new = copy_node(node, new_kids)
        note(node, new)
        return new


class PartitionGraph(Pass):
    """Lift every accelerator region into ``@<target>_main_<n>`` with ``Compiler``,
    ``global_symbol`` and ``Primitive=1``; host units return to plain ops (module docstring)."""

    name = "PartitionGraph"

    def __init__(
        self, host: str = DEFAULT_HOST, mod_name: str | None = None, bind_constants: bool = True
    ):
        """``mod_name``: TVM's names, ``@tvmgen_<mod_name>_<target>_main_<n>`` (sanitised).
        ``bind_constants=False`` (TVM's option): constants become parameters of the partition,
        passed by main, instead of staying inside it (a backend then sees its weights only as
        inputs; partita's own backends want them bound)."""
        self.host, self.bind_constants = host, bind_constants
        self.prefix = "" if mod_name is None else "tvmgen_" + re.sub(r"\W", "_", mod_name) + "_"

    @gc_paused
    def transform(self, mod: IRModule, ctx) -> IRModule:
        placement = Placement(self.host)
        deferred = type(mod) is DeferredModule
        names = mod.names() if deferred else list(mod.functions)
        taken, counters = set(names), {}
        lifted: dict[str, Function] = {}
        bodies: dict[str, Function] = {}
        for gname in names:
            pending = mod.pending(gname) if deferred else None
            fn = pending.fn if pending is not None else mod[gname]
            if pending is None and is_partition_function(fn):
                bodies[gname] = fn
                continue
            if pending is None:
                ensure_typed(fn, mod)
            # Relay numbers regions across the whole function (a region pass's output has none)
            numbers = {} if pending is not None or built_by_regions(fn.body) else begin_numbers(fn)

            def lift(body, numbers=numbers, pending=pending):  # let-bound functions' too
                if pending is not None:  # the previous region pass's labelled graph
                    flat, region_of, order = pending.labels()
                else:
                    flat, region_of, order = flatten_ordered(body, numbers)
                # (a pending graph holds none: deferred.can_defer)
                if pending is None and has_inner_functions(order):
                    inner = map_inner_functions(body, lift)
                    flat, region_of, order = flatten_ordered(inner, numbers)
                lifter = _Lifter(region_of, taken, counters, placement, self.prefix)
                if pending is not None and flat is pending.flat:
                    lifter.memo = pending.regions  # RegionPolicies' regions of this graph
                lifter.bind_constants = self.bind_constants
                lifter.flatten_calls = not self.prefix  # TVM's PartitionGraph returns them whole
                out = lifter.build(flat, order)
                lifted.update(lifter.functions)
                return out

            bodies[gname] = fn.with_body(lift(fn.body))
        out = IRModule({**bodies, **dict(sorted(lifted.items(), key=_symbol_order))}, mod.attrs)
        return with_record(out, placement=placement)


def _symbol_order(item) -> tuple:
    target, _, n = item[0].rpartition("_main_")
    return (target, int(n) if n.isdigit() else 0, item[0])
