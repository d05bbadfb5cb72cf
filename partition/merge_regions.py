"""MergeCompilerRegions: merge neighbouring regions of one target, never creating a cycle.

    %1 = fn (..., Compiler="npu") {conv}(%x);         %2 = fn (..., Compiler="npu") {
    %2 = fn (..., Compiler="npu") {add}(%1, %1)  ->         add(conv, conv) }(%x)

Two regions may merge only if no path leaves one and re-enters the other: a region must never
both feed and consume another through a path outside it. Two steps, both linear in practice:

1. Label every unit with the number of target changes on the longest path above it (the label
   grows by one across every edge between different targets). Neighbouring units of one target
   with equal labels merge: every edge between the groups then increases the label, so no cycle
   can form.
2. For each remaining edge between two regions of one target, contract it unless another path
   joins them. The check walks only the nodes between the two in a topological order that is
   kept valid after each contraction (Pearce and Kelly's dynamic topological sort).

Refused edges are tried again after a sweep that merged something (a merge can swallow the only
other path between two regions), so in the result no two neighbouring regions of one target can
merge.
"""

from __future__ import annotations

import heapq
from collections import Counter
from operator import attrgetter

from partita.ir.gc_pause import gc_paused
from partita.ir.module import IRModule
from partita.ir.nodes import Call
from partita.passes.infra import Pass

from .deferred import Pending, map_region_functions, pending_or_built
from .regions import UNIT_TYPES, Region, RegionError, value_children


class MergeCompilerRegions(Pass):
    """Merge neighbouring regions of the same target as far as possible without a cycle."""

    name = "MergeCompilerRegions"

    @gc_paused
    def transform(self, mod: IRModule, ctx) -> IRModule:
        def merge(_name: str, fn, flat, region_of: dict, order: list):
            # AnnotateTarget's graph: each Region labels one unit (no need to count them)
            singles = type(fn) is Pending and fn.singles
            merged, changed = _merge(order, region_of, singles=singles)
            if not changed and (type(fn) is Pending or fn.body is not flat):
                return fn  # nothing merged: building again would give the same graph
            return pending_or_built(fn, flat, merged, order)

        return map_region_functions(mod, merge)


_KEY, _HOST = attrgetter("target", "host"), attrgetter("host")


def _second(pair: tuple):
    return pair[1]


def _keys(regions: list, merge_host: bool) -> list:
    """Each item's merge key (target, host); None for items that never merge."""
    return [
        None if r is None or (r.host and not merge_host) else (r.target, r.host) for r in regions
    ]


def merge_regions(
    order: list, region_of: dict[int, Region], merge_host: bool = False
) -> dict[int, Region]:
    """id(unit) -> Region after merging. Unlabelled units are left alone, and so are host units
    (each keeps the reason it stays on the host) unless ``merge_host``: then host regions merge
    by the same rule, as TVM merges its ``"default"`` regions."""
    return _merge(order, region_of, merge_host)[0]


def _merge(
    order: list, region_of: dict, merge_host: bool = False, singles: bool = False
) -> tuple[dict, bool]:
    """``merge_regions`` and whether any two regions merged."""
    graph = _ItemGraph(order, region_of, merge_host, singles)
    graph.merge_equal_labels()
    graph.contract_edges()
    return graph.result(order), graph.changed


class _ItemGraph:
    """Items (the input regions, and unlabelled units) and the edges between them."""

    def __init__(
        self, order: list, region_of: dict, merge_host: bool = False, singles: bool = False
    ):
        """``singles``: the caller knows that no Region labels two units."""
        self.region_of = region_of
        self.changed = False  # whether any two items merged
        self.rep: list | None = None  # each item's group after step 1, while step 2 keeps it
        self.item_of: dict[int, int] = {}
        self.regions: list = []
        units = [n for n in order if type(n) in UNIT_TYPES]
        self.units = units
        if singles or len(set(map(id, region_of.values()))) == len(region_of):
            self._init_units(units, merge_host)  # every region one unit (AnnotateTarget's)
            return
        by_region: dict[int, int] = {}
        item_of, regions, label_of = self.item_of, self.regions, region_of.get
        for node in units:
            region = label_of(id(node))
            item = by_region.get(id(region)) if region is not None else None
            if item is None:
                item = len(regions)
                regions.append(region)
                if region is not None:
                    by_region[id(region)] = item
            item_of[id(node)] = item
        n = len(self.regions)
        self.key = _keys(self.regions, merge_host)
        self.succ: list[set] = [set() for _ in range(n)]
        self.pred: list[set] = [set() for _ in range(n)]
        succ, pred, item = self.succ, self.pred, item_of.get
        for node in units:
            i = item_of[id(node)]
            for kid in value_children(node):
                j = item(id(kid))
                if j is not None and j != i:
                    succ[j].add(i)
                    pred[i].add(j)
        self.parent = list(range(n))
        self.topo = self._topological_order()
        self.edges = None

    def _init_units(self, units: list, merge_host: bool) -> None:
        """Every item one unit: the units' dataflow order is a topological order of the items
        (the one ``_topological_order`` gives), so step 1's labels and merges are made here, in
        the one loop that finds the edges (a unit's inputs come before it, so their labels are
        final when it is reached; the merges are the same, in the same order, as step 1's).
        Only the edges between items that did not merge are kept."""
        n = len(units)
        ids = self.ids = list(map(id, units))
        item_of = self.item_of = dict(zip(ids, range(n)))
        regions = self.regions = list(map(self.region_of.get, ids))
        if None in regions or (not merge_host and any(map(_HOST, regions))):
            key = self.key = _keys(regions, merge_host)
        else:  # every unit labelled, none on the host: the keys at C speed
            key = self.key = list(map(_KEY, regions))
        parent = self.parent = list(range(n))
        self.topo = range(n)
        label = self.label = [0] * n
        inputs, users, item, find = [], [], item_of.get, self.find
        changed = False
        for i, node in enumerate(units):
            kids = node.args if type(node) is Call else value_children(node)
            if len(kids) == 1:
                j = item(id(kids[0]))
                if j is None or j == i:
                    continue
            elif len(kids) == 2:  # the else branch's list, without building it
                j, b = item(id(kids[0])), item(id(kids[1]))
                if j is None or j == i:
                    if b is None or b == i:
                        continue
                    j = b
                elif b is not None and b != i:
                    changed = self._merge_inputs(i, [j, b], inputs, users) or changed
                    continue
            else:
                found = [j for j in map(item, map(id, kids)) if j is not None and j != i]
                if len(found) != 1:
                    if found:
                        changed = self._merge_inputs(i, found, inputs, users) or changed
                    continue
                j = found[0]
            # the common case: one input that is a unit
            ki, kj, lj = key[i], key[j], label[j]
            if kj == ki:
                label[i] = lj
                if ki is not None:
                    # nothing has merged into i yet: i is its own group's root
                    a = parent[j]
                    if parent[a] != a:
                        a = find(j)
                    parent[i] = a
                    changed = True
                    continue
            else:
                label[i] = lj + 1
            inputs.append(j)
            users.append(i)
        self.changed = changed
        self.edges = (inputs, users)

    def _merge_inputs(self, i: int, found: list, inputs: list, users: list) -> bool:
        """Step 1 at a unit with several unit inputs (``found``): its label, the merges with
        the inputs of its key and label, and the other edges kept; whether any merged."""
        key, label, parent, find = self.key, self.label, self.parent, self.find
        ki, li, changed = key[i], 0, False
        for j in found:
            step = label[j] + (key[j] != ki)
            if step > li:
                li = step
        label[i] = li
        for j in found:
            if ki is not None and key[j] == ki and label[j] == li:
                a, b = find(j), find(i)
                if a != b:
                    parent[b] = a
                    changed = True
            else:
                inputs.append(j)
                users.append(i)
        return changed

    def _topological_order(self) -> list[int]:
        """Kahn's order, the smallest ready item first (so the items' own order when that is
        topological, as for the units of a dataflow order)."""
        indegree = [len(p) for p in self.pred]
        ready = [i for i, d in enumerate(indegree) if d == 0]
        heapq.heapify(ready)
        topo = []
        while ready:
            i = heapq.heappop(ready)
            topo.append(i)
            for j in self.succ[i]:
                indegree[j] -= 1
                if indegree[j] == 0:
                    heapq.heappush(ready, j)
        if len(topo) != len(indegree):
            raise RegionError("the regions given to MergeCompilerRegions already form a cycle")
        return topo

    def find(self, i: int) -> int:
        parent = self.parent
        root = i
        while parent[root] != root:
            root = parent[root]
        while parent[i] != root:
            parent[i], i = root, parent[i]
        return root

    def _reps(self) -> list[int]:
        """Each item's group (an item whose parent is a root needs no ``find``)."""
        parent, find = self.parent, self.find
        return [p if parent[p] == p else find(i) for i, p in enumerate(parent)]

    # ---- step 1 ------------------------------------------------------------------------------
    def merge_equal_labels(self) -> None:
        if self.edges is not None:  # every item one unit: labelled and merged already
            self._group_edges(*self.edges, self.label)
            return
        inputs = [j for i in range(len(self.pred)) for j in self.pred[i]]
        users = [i for i in range(len(self.pred)) for _ in self.pred[i]]
        key, label, topo = self.key, [0] * len(self.key), self.topo
        # edges by their user's place in the topological order
        rank = [0] * len(topo)
        for r, i in enumerate(topo):
            rank[i] = r
        by_rank = sorted(range(len(users)), key=lambda e: rank[users[e]])
        inputs, users = [inputs[e] for e in by_rank], [users[e] for e in by_rank]
        for p, i in zip(inputs, users):  # users in topological order: inputs labelled first
            step = label[p] + (key[p] != key[i])
            if step > label[i]:
                label[i] = step
        find, parent = self.find, self.parent
        for p, i in zip(inputs, users):
            if key[i] is not None and key[p] == key[i] and label[p] == label[i]:
                a, b = find(p), find(i)
                if a != b:
                    parent[b] = a
                    self.changed = True
        self._group_edges(inputs, users, label)

    def _group_edges(self, inputs: list, users: list, label: list) -> None:
        """Step 1's groups: their places (by the label and topological rank of their first
        item) and the edges between them (``inputs``, ``users``: every edge that may join two
        groups)."""
        topo = self.topo
        rep = self.rep = self._reps()  # each item's group, found once
        if type(topo) is range:  # the items' own order: a group's first item is its smallest
            n = len(rep)
            first_at = dict(zip(rep[::-1], range(n - 1, -1, -1)))  # the last write wins
            first = {g: (label[r], r) for g, r in sorted(first_at.items(), key=_second)}
        else:
            first: dict[int, tuple] = {}
            for r, i in enumerate(topo):
                g = rep[i]
                if g not in first:
                    first[g] = (label[i], r)
        self.pos = dict(zip(sorted(first, key=first.__getitem__), range(len(first))))
        csucc = self.csucc = {g: set() for g in first}
        cpred = self.cpred = {g: set() for g in first}
        for p, i in zip(inputs, users):
            a, b = rep[p], rep[i]
            if a != b:
                csucc[a].add(b)
                cpred[b].add(a)

    # ---- step 2 ------------------------------------------------------------------------------
    def contract_edges(self) -> None:
        key, pos = self.key, self.pos
        pending = [
            (a, b)
            for a, succ in self.csucc.items()
            for b in succ
            if key[a] is not None and key[a] == key[b]
        ]
        pending.sort(key=lambda e: (pos[e[1]], pos[e[0]]))
        while pending:
            refused = [e for e in pending if not self._try_contract(*e)]
            if len(refused) == len(pending):
                return
            pending = refused  # a merge can take the only other path between two regions away

    def _try_contract(self, a0: int, b0: int) -> bool:
        """Contract the edge between the regions of ``a0`` and ``b0``; False if refused."""
        pos = self.pos
        a, b = self.find(a0), self.find(b0)
        if a == b or b not in self.csucc[a]:
            return True
        ahead = self._reach(a, b, self.csucc, lambda x, lim=pos[b]: pos[x] < lim)
        if ahead is None:
            return False  # another path from a to b: merging would make a cycle
        behind = self._reach(b, a, self.cpred, lambda x, lim=pos[a]: pos[x] > lim)
        self._reorder(
            sorted(behind | {b}, key=pos.__getitem__), sorted(ahead | {a}, key=pos.__getitem__)
        )
        self._contract(a, b)
        return True

    def _reach(self, start: int, avoid: int, edges: dict, within) -> set | None:
        """Nodes reachable from ``start`` (not through the edge to ``avoid``) inside the
        window; None if ``avoid`` is reachable another way."""
        seen: set = set()
        stack = [x for x in edges[start] if x != avoid and within(x)]
        while stack:
            x = stack.pop()
            if x in seen:
                continue
            seen.add(x)
            for y in edges[x]:
                if y == avoid:
                    return None
                if y not in seen and within(y):
                    stack.append(y)
        return seen

    def _reorder(self, before: list, after: list) -> None:
        """Pearce-Kelly: ``before`` (b and its ancestors in the window) then ``after`` (a and
        its descendants in the window), in the positions they occupied."""
        pos = self.pos
        pool = sorted(pos[x] for x in before + after)
        for x, p in zip(before + after, pool):
            pos[x] = p

    def _contract(self, a: int, b: int) -> None:
        keep, gone = (
            (a, b)
            if len(self.csucc[a]) + len(self.cpred[a]) >= len(self.csucc[b]) + len(self.cpred[b])
            else (b, a)
        )
        self.pos[keep] = self.pos[b]  # b now sits right before a: between all preds and succs
        self.parent[gone] = keep
        self.changed = True
        self.rep = None  # the groups step 1 found changed
        for x in self.csucc.pop(gone):
            self.cpred[x].discard(gone)
            if x != keep:
                self.cpred[x].add(keep)
                self.csucc[keep].add(x)
        for x in self.cpred.pop(gone):
            self.csucc[x].discard(gone)
            if x != keep:
                self.csucc[x].add(keep)
                self.cpred[keep].add(x)
        self.csucc[keep].discard(keep)
        self.cpred[keep].discard(keep)

    # ---- result ------------------------------------------------------------------------------
    def result(self, order: list) -> dict[int, Region]:
        reps = self.rep if self.rep is not None else self._reps()
        size = Counter(reps)
        if self.edges is not None:  # one unit per item, in order: a Region per group
            key, regions = self.key, self.regions
            merged = {
                g: regions[g] if count == 1 or key[g] is None else Region(*key[g])
                for g, count in size.items()
            }
            out = dict(zip(self.ids, map(merged.__getitem__, reps)))
            if None in merged.values():  # units no region labels stay unlabelled
                out = {k: r for k, r in out.items() if r is not None}
            return out
        merged: dict[int, Region] = {}
        out: dict[int, Region] = {}
        item_of, key, regions = self.item_of.get, self.key, self.regions
        for i, node in ((item_of(id(n)), n) for n in order):
            if i is None:
                continue
            if key[i] is None:
                if regions[i] is not None:
                    out[id(node)] = regions[i]
                continue
            rep = reps[i]
            region = merged.get(rep)
            if region is None:
                region = regions[i] if size[rep] == 1 else Region(*key[i])
                merged[rep] = region
            out[id(node)] = region
        return out
