"""AnnotateTarget: mark every composite and every op with the target that runs it.

    %1 = npu.conv2d composite(%x);        %1 = fn (%npu_0_i0, Compiler="npu") {...}(%x);
    %2 = nn.softmax(%1)              ->   %2 = fn (%llvm_1_i0, Compiler="llvm", Host=True,
                                               Reason="no pattern matched: ...") {
                                            nn.softmax(%llvm_1_i0) }(%1)

A composite named ``<target>.<name>`` belongs to ``<target>`` (so a bare pattern table works with no
backend registered); a single op goes to the first target whose check for it accepts; everything
else goes to the host with the reason why. A tuple item goes with the op (or tuple) that produced
its tuple; a tuple goes with its consumers when they all run on one accelerator, and a tuple
that only tuple items read (or a function's result) with its fields' common accelerator.
"""

from __future__ import annotations

from partita.backends.registry import DEFAULT_HOST, Backend, find_backend, get_backend
from partita.backends.verdict import run_check

from partita.errors import PartitaError
from partita.ir.gc_pause import gc_paused
from partita.ir.graph import Graph, dataflow_order
from partita.ir.module import IRModule
from partita.ir.nodes import Call, Function, Tuple, TupleGetItem
from partita.ir.refs import REF_NODES
from partita.ops.registry import Op
from partita.passes.infra import Pass

from .deferred import DeferredModule, Pending, pending_or_built
from .reasons import Explainer
from .record import record_of, with_record
from .regions import (
    UNIT_TYPES,
    Region,
    RegionBuilder,
    ensure_typed,
    flatten_ordered,
    has_inner_functions,
    is_partition_function,
    map_inner_functions,
)


class _Target:
    """A target as AnnotateTarget uses it: its single-op checks and its pattern table."""

    __slots__ = ("name", "checks", "entries")

    def __init__(self, target):
        backend, options = None, {}
        if isinstance(target, Backend):
            backend = target
        elif hasattr(target, "name") and hasattr(target, "options"):  # a TargetSpec
            backend, options = get_backend(target.name), target.options
        elif isinstance(target, str):
            backend = find_backend(target)
        else:
            raise PartitaError(
                f"a target is a backend name, a TargetSpec or a Backend, got {target!r}"
            )
        self.name = backend.name if backend is not None else target
        if backend is not None and backend.host:
            raise PartitaError(
                f"{self.name} is a host; AnnotateTarget takes the accelerator "
                f"targets (the host gets whatever they leave)"
            )
        self.checks = backend.op_checks(options) if backend is not None else {}
        self.entries = backend.pattern_table(options) if backend is not None else []


_REF_REASON = "references (ref, ref_read, ref_write) stay on the host"


class AnnotateTarget(Pass):
    """Mark each composite and each op with the first target that accepts it, the rest with the
    ``host`` and the reason (module docstring)."""

    name = "AnnotateTarget"

    def __init__(self, targets=(), host: str = DEFAULT_HOST, overrides=None):
        if isinstance(targets, str):
            targets = [targets]
        self.targets = [_Target(t) for t in targets]
        self.host, self.overrides = host, overrides

    @gc_paused
    def transform(self, mod: IRModule, ctx) -> IRModule:
        record = record_of(mod)
        entries = record.pattern_table
        if entries is None:
            entries = [e for t in self.targets for e in t.entries]
        names = [t.name for t in self.targets]

        def annotate(body):
            order = dataflow_order(body)
            if has_inner_functions(order):
                body, order = map_inner_functions(body, annotate), None
            flat, earlier, order = flatten_ordered(body, order=order)
            graph = Graph(flat, order)
            explainer = Explainer(graph, entries, names, record.refusals)
            region_of = self._annotate(graph, explainer, earlier)
            return RegionBuilder(region_of).build(flat, graph.order)

        def one(fn: Function):
            order = dataflow_order(fn.body)
            if has_inner_functions(order):
                return fn.with_body(annotate(fn.body))
            flat, earlier, order = flatten_ordered(fn.body, order=order)
            graph = Graph(flat, order)
            explainer = Explainer(graph, entries, names, record.refusals)
            region_of = self._annotate(graph, explainer, earlier)
            if flat is fn.body and graph.order is order and type(flat) in UNIT_TYPES:
                # nothing inlined, and no inner functions (above): it may stay pending
                # (deferred.can_defer, without walking the order again)
                out = Pending(fn, flat, region_of, order)
            else:
                out = pending_or_built(fn, flat, region_of, graph.order)  # built when read
            if type(out) is Pending:
                out.singles = True  # every unit got a Region of its own
            return out

        items = {}
        for name, fn in mod.items():
            if not is_partition_function(fn):
                ensure_typed(fn, mod)
                fn = one(fn)
            items[name] = fn
        return with_record(DeferredModule(items, mod.attrs), pattern_table=None, refusals={})

    def _annotate(self, graph: Graph, explainer: Explainer, earlier: dict) -> dict:
        """``earlier``: an earlier run's accelerator placements, kept (TVM: running (A) then (B)
        equals running ([A, B]))."""
        region_of: dict[int, Region] = {}
        tuples, items = [], []  # decided after every call (in graph order, as before)
        # an op whose every target's check is a constant (True/False/absent) and that no
        # override forces decides the same target for every call: looked up once per op
        fixed: dict = {}
        overrides, call_region = self.overrides, self._call_region
        get_earlier = earlier.get if earlier else None
        get_fixed = fixed.get if not overrides else None
        for node in graph.order:
            t = type(node)
            if t is Call:
                if get_earlier is not None:
                    kept = get_earlier(id(node))
                    if kept is not None and not kept.host:
                        region_of[id(node)] = Region(kept.target)
                        continue
                op = node.op
                if get_fixed is not None and type(op) is Op:
                    target = get_fixed(op)
                    if target is None:
                        target = fixed[op] = self._constant_target(op)
                    if target is not False:
                        region_of[id(node)] = Region(target)
                        continue
                region_of[id(node)] = call_region(node, explainer)
            elif t is TupleGetItem:
                if type(node.tuple_value) is not Tuple:
                    region_of[id(node)] = self._item_region(node, region_of)
                else:
                    items.append(node)
            elif t is Tuple:
                tuples.append(node)
            elif t in REF_NODES:
                region_of[id(node)] = self._host(_REF_REASON)
        for node in tuples:
            region_of[id(node)] = self._tuple_region(node, graph, region_of)
        for node in items:
            region_of[id(node)] = self._item_region(node, region_of)
        return region_of

    def _constant_target(self, op: Op):
        """The target every call of ``op`` goes to when no target's check for it needs the
        call (each is True, False or absent): that target's name, or False (decided per call:
        a check that reads the call, or the host, whose reason names the call)."""
        for target in self.targets:
            check = target.checks.get(op.name)
            if check is None or check is False:
                continue
            return target.name if check is True else False
        return False

    def _item_region(self, node: TupleGetItem, region_of: dict) -> Region:
        """A tuple item goes with the accelerator that made its tuple."""
        producer = region_of.get(id(node.tuple_value))
        on_acc = type(node.tuple_value) in (Call, Tuple) and producer is not None
        return Region(producer.target) if on_acc and not producer.host else self._host("")

    def _tuple_region(self, node: Tuple, graph: Graph, region_of: dict) -> Region:
        """A tuple goes with its consumers when they all run on one accelerator; a tuple that
        only tuple items (or nothing: a function's result) read goes with its fields' common
        accelerator (TVM's rule)."""
        users = graph.users.get(id(node), ())
        readers = [u for u in users if type(u) is not TupleGetItem]
        deciders = readers if readers else node.fields
        regions = [region_of.get(id(u)) for u in deciders]
        names = {r.target for r in regions if r is not None and not r.host}
        single = deciders and len(names) == 1 and all(r is not None and not r.host for r in regions)
        return Region(names.pop()) if single else self._host("")

    def _host(self, reason: str) -> Region:
        return Region(self.host, True, reason)

    def _call_region(self, node: Call, explainer: Explainer) -> Region:
        forced = self.overrides.forced(node) if self.overrides else None
        if forced:
            return self._host(forced)
        if type(node.op) is Function and "Composite" in node.op.attrs:
            return self._composite_region(node.op.attrs["Composite"])
        if not isinstance(node.op, Op):
            return self._host(f"{node.op_name} is a call to a function, not an op")
        refusals = []
        for target in self.targets:
            check = target.checks.get(node.op.name)
            if check is None or check is False:
                continue
            verdict = True if check is True else run_check(check, node)
            if verdict:
                return Region(target.name)
            refusals.append((target.name, verdict.reason or "refused"))
        return self._host(explainer.reason(node, refusals))

    def _composite_region(self, name: str) -> Region:
        owner = name.split(".", 1)[0] if "." in name else None
        for target in self.targets:
            if target.name == owner or any(e.name == name for e in target.entries):
                return Region(target.name)
        names = ", ".join(t.name for t in self.targets) or "none"
        if owner is None:
            return self._host(f"composite {name} names no target (call it <target>.{name})")
        return self._host(
            f"composite {name} belongs to {owner}, which is not a target here (targets: {names})"
        )
