"""Region functions built on first use: what the region passes hand each other.

AnnotateTarget, MergeCompilerRegions and RegionPolicies each end with a labelled flat graph
(every unit and its Region) that ``RegionBuilder`` turns into region calls, and the next region
pass flattens that output back into the same labelled graph. In ``partition_for`` nobody looks
at the graphs in between, yet building them was most of the partitioning time at 100k nodes
(about 100k one-op functions after AnnotateTarget). So a region pass returns a
``DeferredModule``: a module whose region functions are built when something reads them
(printing, ``mod["main"]``, an instrument, a non-region pass), giving exactly the functions the
pass would have built, while the next region pass takes the labelled graph directly
(``pending_labels``) and builds nothing. PartitionGraph, the last, returns a plain module.
"""

from __future__ import annotations

from operator import attrgetter

from partita.ir.gc_pause import gc_paused
from partita.ir.module import IRModule
from partita.ir.nodes import Function

from .builder import RegionBuilder
from .units import UNIT_TYPES, Region


class Pending:
    """A function whose body is ``RegionBuilder(region_of).build(flat, order)``, not built yet."""

    __slots__ = ("fn", "flat", "region_of", "order", "regions", "singles", "_fresh")

    def __init__(self, fn: Function, flat, region_of: dict, order: list):
        self.fn, self.flat, self.region_of, self.order = fn, flat, region_of, order
        # RegionPolicies' RegionBuilder.regions of this graph, with the labels and constant
        # binding it was computed for: PartitionGraph takes its regions from it (builder.py)
        self.regions = None
        self.singles = False  # whether each Region labels one unit (AnnotateTarget's)
        self._fresh = None  # labels() once read (a pass that keeps the graph hands it on)

    def build(self) -> Function:
        return self.fn.with_body(RegionBuilder(self.region_of).build(self.flat, self.order))

    def labels(self) -> tuple:
        """What ``flatten_ordered`` gives for the built body: the flat graph, its order, and
        fresh Regions read back as the built functions' attributes say them. When no Region
        carries a Relay number the labels read the same, and ``region_of`` itself is returned
        (no copy of 100k entries): the region passes never change a labels dict they are
        given (RegionPolicies copies before it relabels)."""
        if self._fresh is None:  # read once: the labels never change (nor do Regions)
            self._fresh = fresh_regions(self.region_of)
        return self.flat, self._fresh, self.order


_NUMBER = attrgetter("number")


def fresh_regions(labels: dict) -> dict:
    """id(unit) -> a new Region per distinct Region of ``labels``, with the target, host flag
    and reason a region function's attributes carry (no Relay number): what flattening a
    built region call reads off it (Relay's numbers live only until the first build)."""
    if set(map(_NUMBER, labels.values())) <= {None}:
        # nothing to drop: the same grouping, and Regions are never changed after they are
        # made, so sharing them reads the same as copying (the dict too: callers do not
        # change it)
        return labels
    fresh: dict[int, Region] = {}
    return {
        k: fresh.get(id(r)) or fresh.setdefault(id(r), Region(r.target, r.host, r.reason))
        for k, r in labels.items()
    }


def can_defer(flat, order: list) -> bool:
    """Whether a labelled graph may stay pending: its root is a unit (so the built body
    flattens back to it) and it holds no let-bound functions (whose regions are built
    inside them)."""
    if type(flat) not in UNIT_TYPES:
        return False
    return not any(
        "Composite" not in n.attrs and "Compiler" not in n.attrs
        for n in [n for n in order if type(n) is Function]
    )


class DeferredModule(IRModule):
    """An IRModule whose pending functions are built the first time ``functions`` is read."""

    def __init__(self, items: dict, attrs: dict | None = None):
        self._items = dict(items)
        self._built = None
        self.attrs = dict(attrs or {})

    @property
    def functions(self) -> dict:
        if self._built is None:
            self._built = _build_all(self._items)
            self._items = None
        return self._built

    @functions.setter
    def functions(self, value: dict) -> None:
        self._built, self._items = value, None

    def pending(self, name: str) -> Pending | None:
        """The still pending function ``name``, or None (built, or never deferred)."""
        if self._built is not None:
            return None
        item = self._items.get(name)
        return item if type(item) is Pending else None

    def names(self) -> list:
        return list(self._items if self._built is None else self._built)

    def __repr__(self):
        return f"<IRModule {', '.join('@' + n for n in self.names())}>"


@gc_paused
def _build_all(items: dict) -> dict:
    return {name: (v.build() if type(v) is Pending else v) for name, v in items.items()}


def map_region_functions(mod: IRModule, rewrite) -> IRModule:
    """The region passes' loop over the functions not yet lifted for a backend:
    ``rewrite(name, fn, flat, region_of, order)`` gets each function's labelled flat graph (from
    the previous region pass's pending result when there is one, else by flattening its body)
    and returns a Function or a Pending; functions lifted for a backend are kept as they are."""
    from .regions import ensure_typed, flatten_ordered, is_partition_function

    items: dict = {}
    names = mod.names() if type(mod) is DeferredModule else list(mod.functions)
    for name in names:
        pending = mod.pending(name) if type(mod) is DeferredModule else None
        if pending is not None:
            items[name] = rewrite(name, pending, *pending.labels())
            continue
        fn = mod[name]
        if is_partition_function(fn):
            items[name] = fn
            continue
        ensure_typed(fn, mod)
        items[name] = rewrite(name, fn, *flatten_ordered(fn.body))
    return DeferredModule(items, mod.attrs)


def pending_or_built(fn, flat, region_of: dict, order: list):
    """``fn`` with the body built from the labelled graph, pending where it may be."""
    base = fn.fn if type(fn) is Pending else fn
    # a pending graph with the same root and order could be deferred already
    if (type(fn) is Pending and fn.flat is flat and fn.order is order) or can_defer(flat, order):
        return Pending(base, flat, region_of, order)
    return base.with_body(RegionBuilder(region_of).build(flat, order))
