"""RegionBuilder: a flat graph labelled with Regions back into region calls (inline
functions), lifted global functions, or plain nodes — the one writer every region pass shares.

``build`` remembers, for its inline output, the labelled flat graph it came from
(``BUILT_FROM``): flattening that output gives the same graph back, so the next region pass
(regions.flatten_ordered) takes it from there instead of inlining every region again.
"""

from __future__ import annotations

import functools
import weakref
from operator import is_

from partita.ir.graph import dataflow_order
from partita.ir.nodes import Call, Constant, Expr, Function, GlobalVar, Tuple, TupleGetItem, Var
from partita.ir.types import TupleType

from .units import (
    UNIT_TYPES,
    Region,
    RegionError,
    copy_mapped,
    copy_node,
    typed_copy,
    value_children,
)

# the slots of a Call, written directly (as units.copy_node does)
_new = object.__new__
_SPAN, _TYPE = Expr.span.__set__, Expr._type.__set__
_OP, _ARGS, _ATTRS = Call.op.__set__, Call.args.__set__, Call.attrs.__set__

# RegionBuilder.build's inline output -> the labelled flat graph it was built from. Flattening
# that output gives the same graph and grouping back (every stage round-trips), so the next
# region pass takes it from here instead of inlining every region again: at 100k units, half
# of a pass. Weak keys: an entry lives as long as the built graph does.
BUILT_FROM: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class RegionsMemo:
    """``RegionBuilder.regions`` of one labelled graph with every region grouped, kept for a
    later builder of the same graph (RegionPolicies computes it, PartitionGraph reads it): a
    region's members, inputs and outputs depend only on which units it holds."""

    __slots__ = ("labels", "bind", "members", "inputs", "outputs", "regions")

    def __init__(self, region_of: dict, bind: bool, members, inputs, outputs, gone=()):
        """``region_of``: the labels now (a copy is kept); ``gone``: the keys of regions whose
        units were relabelled since ``regions`` ran (they are dropped)."""
        # the labels dict itself: the passes never change a labels dict once a pass has
        # handed it on (RegionPolicies copies before it relabels), and PartitionGraph, given
        # the same dict, then skips comparing 100k entries
        self.labels, self.bind = region_of, bind
        keep = [k for k in members if k not in gone]
        self.members = {k: members[k] for k in keep}
        self.inputs = {k: inputs[k] for k in keep}
        self.outputs = {k: outputs[k] for k in keep}
        # the Regions themselves, so that no id of a kept key is reused by another Region
        self.regions = [region_of[id(members[k][0])] for k in keep]

    def regions_for(self, builder: RegionBuilder):
        """``builder.regions`` from the memo, or None when it does not apply (other labels,
        other constant binding, or a grouped region the memo does not hold)."""
        if builder.bind_constants != self.bind or (
            builder.region_of is not self.labels and builder.region_of != self.labels
        ):
            return None
        members = self.members
        grouped = builder._grouped_ids()
        if not grouped <= members.keys():
            return None
        keep = [k for k in members if k in grouped]
        return (
            {k: members[k] for k in keep},
            {k: self.inputs[k] for k in keep},
            {k: self.outputs[k] for k in keep},
        )


class RegionBuilder:
    """Turns a flat graph labelled with Regions into region calls (``mode`` "inline"), global
    functions (``"global"``) or plain nodes (``"plain"``). Subclasses choose per region."""

    bind_constants = True  # constants stay inside the region (False: they become inputs)
    flatten_calls = True  # a lifted region returns a tuple-typed call (a split) as its fields

    def __init__(self, region_of: dict[int, Region]):
        self.region_of = region_of
        self.functions: dict[str, Function] = {}
        self._count = 0
        self.memo: RegionsMemo | None = None  # this graph's regions, when known already
        self._grouped: dict | None = None

    # ---- hooks -------------------------------------------------------------------------------
    def mode(self, region: Region) -> str:
        """ "inline" (a region call), "global" (a lifted function) or "plain" (no wrapper)."""
        return "inline"

    def function_attrs(self, region: Region, outputs: int, symbol: str | None) -> dict:
        """The attributes of the function built for ``region``."""
        return region.attrs(outputs)

    def symbol(self, region: Region) -> str:
        """The global name of a lifted region."""
        raise NotImplementedError

    def emit_plain(self, node: Expr, new_kids: list, region: Region | None) -> Expr:
        """The outer graph's version of a node that no region wraps."""
        return copy_node(node, new_kids)

    # ---- the walk ----------------------------------------------------------------------------
    def build(self, root: Expr, order: list | None = None) -> Expr:
        """The graph under ``root`` with every region built (lifted ones in ``functions``);
        ``order``: ``dataflow_order(root)`` when the caller has it."""
        order = dataflow_order(root) if order is None else order
        region_of = self.region_of
        inline_only = type(self).mode is RegionBuilder.mode
        if inline_only and len({id(r) for r in region_of.values()}) == len(region_of):
            out = self._build_units(root, order)  # every region one unit (AnnotateTarget's)
        else:
            out = self._build_regions(root, order)
        if inline_only and out is not root and type(out) in UNIT_TYPES:
            BUILT_FROM[out] = (root, region_of, order)
        return out

    def _build_units(self, root: Expr, order: list) -> Expr:
        """``build`` when no region holds two units: each labelled unit becomes a region call
        in dataflow order (the order the general walk emits them in: a depth-first walk over
        the same inputs), its inputs its distinct non-constant inputs."""
        outer: dict[int, Expr] = {}
        get = self.region_of.get
        bind = self.bind_constants
        for node in order:
            region = get(id(node)) if type(node) in UNIT_TYPES else None
            if region is not None:
                ins = {
                    id(k): k for k in value_children(node) if not bind or type(k) is not Constant
                }
                self._emit_region(region, [node], list(ins.values()), {id(node): node}, outer)
            elif type(node) in UNIT_TYPES:
                kids = [outer[id(k)] for k in value_children(node)]
                outer[id(node)] = self.emit_plain(node, kids, None)
            else:
                outer[id(node)] = node
        return outer[id(root)]

    def _build_regions(self, root: Expr, order: list) -> Expr:
        members, inputs, outputs = self.regions(order, root)
        outer: dict[int, Expr] = {}
        region_of = self.region_of
        for item in self._emission_order(root, inputs):
            if type(item) is Region:
                key = id(item)
                self._emit_region(item, members[key], inputs[key], outputs[key], outer)
            elif type(item) in UNIT_TYPES:
                kids = [outer[id(k)] for k in value_children(item)]
                outer[id(item)] = self.emit_plain(item, kids, region_of.get(id(item)))
            else:
                outer[id(item)] = item
        return outer[id(root)]

    def _grouping(self) -> dict[int, Region]:
        """id(unit) -> its Region, for the units whose region is built (not "plain")."""
        if type(self).mode is RegionBuilder.mode:  # every region inline
            return self.region_of
        if self._grouped is not None:
            return self._grouped
        modes: dict[int, bool] = {}
        out = {}
        for key, region in self.region_of.items():
            grouped = modes.get(id(region))
            if grouped is None:
                grouped = modes[id(region)] = self.mode(region) != "plain"
            if grouped:
                out[key] = region
        self._grouped = out  # the labels do not change during a build
        return out

    def _grouped_ids(self) -> set:
        """The ids of the Regions that are built (not "plain"), from the distinct Regions."""
        return {id(r) for r in set(self.region_of.values()) if self.mode(r) != "plain"}

    def _lookup(self):
        """``_grouping().get`` without the dict of every unit, for the few lookups of a build
        whose regions are known (the memo's)."""
        if type(self).mode is RegionBuilder.mode:
            return self.region_of.get
        if self._grouped is not None:
            return self._grouped.get
        get, kept = self.region_of.get, self._grouped_ids()

        def grouped(key: int):
            region = get(key)
            return region if region is not None and id(region) in kept else None

        return grouped

    def regions(self, order: list, root: Expr):
        """Per grouped region (by id): its members in order, its inputs and its outputs. Inputs
        and outputs are numbered in the order a depth-first walk from ``root`` completes the
        edges that cross the region's boundary (where Relay's walk meets compiler_begin and
        compiler_end), so partitions take and return values in TVM's order."""
        known = self.memo.regions_for(self) if self.memo is not None else None
        if known is not None:
            return known
        return _region_walk(root, self._grouping().get, self.bind_constants)

    def _emission_order(self, root: Expr, inputs) -> list:
        """Items (regions and plain nodes) after their inputs; a cycle is a RegionError."""
        grouped = self._lookup()

        def deps(item):
            kids = inputs[id(item)] if type(item) is Region else value_children(item)
            return iter([grouped(id(k)) or k for k in kids])

        order, state = [], {}
        start = grouped(id(root)) or root
        stack = [(start, deps(start))]
        state[id(start)] = 1
        while stack:
            item, pending = stack[-1]
            for dep in pending:
                s = state.get(id(dep))
                if s is None:
                    state[id(dep)] = 1
                    stack.append((dep, deps(dep)))
                    break
                if s == 1:
                    raise RegionError(f"regions form a cycle through {_describe(dep)}")
            else:
                stack.pop()
                state[id(item)] = 2
                order.append(item)
        return order

    def _emit_region(self, region, members, ins, outs, outer) -> None:
        number, self._count = self._count, self._count + 1
        number = region.number if region.number is not None else number
        inner: dict[int, Expr] = {}
        params = []
        prefix = f"{_identifier(region.target)}_{number}_i"
        for k, node in enumerate(ins):
            param = Var(f"{prefix}{k}", node.type_or_none)
            params.append(param)
            inner[id(node)] = param
        get = inner.get
        for node in members:
            if type(node) is Call and not isinstance(node.op, Expr):
                # copy_mapped's op call, inline (the one step PartitionGraph takes per node);
                # one and two inputs without building maps (most calls: a third of the time)
                args = node.args
                if len(args) == 1:
                    a = args[0]
                    k = get(id(a), a)
                    if k is a:
                        inner[id(node)] = node
                        continue
                    kids = (k,)
                elif len(args) == 2:
                    a, b = args
                    k, j = get(id(a), a), get(id(b), b)
                    if k is a and j is b:
                        inner[id(node)] = node
                        continue
                    kids = (k, j)
                else:
                    kids = tuple(map(get, map(id, args), args))
                    if all(map(is_, kids, args)):
                        inner[id(node)] = node
                        continue
                new = _new(Call)
                _SPAN(new, node.span)
                _TYPE(new, node._type)
                _OP(new, node.op)
                _ARGS(new, kids)
                _ATTRS(new, node.attrs)
                inner[id(node)] = new
            else:
                inner[id(node)] = copy_mapped(node, get)
        results = [inner[k] for k in outs]
        mode = self.mode(region)
        if mode != "global" and len(results) == 1:  # the common case: one value, no split
            body = results[0]
            fn = typed_copy(
                Function(params, body, None, self.function_attrs(region, 1, None)),
                body.type_or_none,
            )
            call = typed_copy(Call(fn, [outer[id(n)] for n in ins]), body.type_or_none)
            outer[next(iter(outs))] = call
            return
        # a partition returns flat values: a tuple-valued output (a split) leaves as its fields
        # and the host rebuilds the tuple, as Relay's PartitionGraph does
        # (Relay splits only Tuple nodes; ``flatten_calls`` False keeps a tuple-typed call whole)
        widths = [
            _tuple_width(r) if mode == "global" and (self.flatten_calls or type(r) is Tuple) else 0
            for r in results
        ]
        flat = [
            f
            for r, w in zip(results, widths)
            for f in (
                [typed_copy(TupleGetItem(r, j), r.type_or_none.fields[j]) for j in range(w)]
                if w
                else [r]
            )
        ]
        single = len(flat) == 1 and not widths[0]
        body = flat[0] if single else typed_copy(
            Tuple(flat), TupleType([r.type_or_none for r in flat]))
        symbol = self.symbol(region) if mode == "global" else None
        fn = typed_copy(
            Function(params, body, None, self.function_attrs(region, len(flat), symbol)),
            body.type_or_none,
        )
        callee = fn
        if symbol is not None:
            self.functions[symbol] = fn
            callee = typed_copy(GlobalVar(symbol), body.type_or_none)
        call = typed_copy(Call(callee, [outer[id(n)] for n in ins]), body.type_or_none)
        if single:
            outer[next(iter(outs))] = call
            return
        start = 0
        for k, r, w in zip(outs, results, widths):
            if w:
                fields = [
                    typed_copy(TupleGetItem(call, start + j), r.type_or_none.fields[j])
                    for j in range(w)
                ]
                outer[k] = typed_copy(Tuple(fields), r.type_or_none)
            else:
                outer[k] = typed_copy(TupleGetItem(call, start), r.type_or_none)
            start += w or 1


def _region_walk(root: Expr, grouped, bind: bool) -> tuple[dict, dict, dict]:
    """``RegionBuilder.regions`` of the graph under ``root`` (``grouped``: id(unit) -> its
    Region or None; ``bind``: constants stay inside the region). One depth-first walk, inputs
    left to right, that finishes the nodes in ``dataflow_order``'s order (so it lists each
    region's members in order) and meets every data edge whose two ends are in different
    regions in the order it completes them: when the input's walk finishes, or at once when
    the input was finished already. A region's inputs and outputs are numbered in that order.
    """
    members: dict[int, list] = {}
    ins_of: dict[int, dict] = {}  # id(region) -> {id(input): input}
    outs_of: dict[int, dict] = {}  # id(region) -> {id(output): output}
    done: set[int] = set()
    add = done.add
    last, into = None, None  # the region whose member finished last, and its members
    pushed, pushed_ins = None, None  # the region of the node pushed last, and its inputs

    def inputs_of(region) -> dict:
        found = ins_of.get(id(region))
        if found is None:
            found = ins_of[id(region)] = {}
        return found

    def cross(kid, region, owner, ins) -> None:
        """The edge from ``kid`` (in ``owner``) to a node of ``region`` (inputs ``ins``)."""
        if owner is not None:
            outs = outs_of.get(id(owner))
            if outs is None:
                outs = outs_of[id(owner)] = {}
            if id(kid) not in outs:
                outs[id(kid)] = kid
        if ins is not None and id(kid) not in ins and (not bind or type(kid) is not Constant):
            ins[id(kid)] = kid

    first = grouped(id(root))
    stack = [(root, iter(value_children(root)), first, None if first is None else inputs_of(first))]
    push, pop = stack.append, stack.pop
    while stack:
        node, kids, region, ins = stack[-1]
        for kid in kids:
            if id(kid) in done:
                owner = grouped(id(kid))
                if owner is not region:
                    # most often a leaf many nodes of a region read (a shared input)
                    if owner is not None or (ins is not None and id(kid) not in ins):
                        cross(kid, region, owner, ins)
                continue
            grand = kid.args if type(kid) is Call else value_children(kid)
            owner = grouped(id(kid))
            if not grand:  # a leaf finishes at once: the edge completes here
                add(id(kid))
                if owner is not None:
                    if owner is not last:
                        last, into = owner, members.setdefault(id(owner), [])
                    into.append(kid)
                if owner is not region:
                    cross(kid, region, owner, ins)
                continue
            if owner is None:
                push((kid, iter(grand), None, None))
            else:
                if owner is not pushed:
                    pushed, pushed_ins = owner, inputs_of(owner)
                push((kid, iter(grand), owner, pushed_ins))
            break
        else:
            pop()
            add(id(node))
            if region is not None:
                if region is not last:
                    last, into = region, members.setdefault(id(region), [])
                into.append(node)
            if stack:
                above, above_ins = stack[-1][2], stack[-1][3]
                if above is not region:
                    cross(node, above, region, above_ins)
    if first is not None:
        outs = outs_of.get(id(first))
        if outs is None:
            outs = outs_of[id(first)] = {}
        outs[id(root)] = root
    return (
        members,
        {k: list(ins_of[k].values()) if k in ins_of else [] for k in members},
        {k: outs_of.get(k, {}) for k in members},
    )


@functools.lru_cache(maxsize=256)
def _identifier(name: str) -> str:
    """``name`` with every non-word character as ``_`` (a hand-annotated target may be any
    string; parameter names print as identifiers)."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def _tuple_width(value: Expr) -> int:
    """The field count of a tuple-typed value, else 0."""
    t = value.type_or_none
    return len(t.fields) if isinstance(t, TupleType) else 0


def _describe(item) -> str:
    if type(item) is Region:
        return f"a {item.target} region"
    return item.short()
