"""Relay's fusion analysis: which nodes of a function fuse into one primitive function.

A port of Relay's IndexedForwardGraph, post-dominator tree and GraphPartitioner
(src/relay/analysis/graph_partitioner.cc): every node starts as its own group with its op's
pattern kind (TOpPattern); in three phases a node joins the group of its immediate
post-dominator when every path between them allows it — elementwise and broadcast ops into
injective, reduce or conv/dense consumers (phase 0: conv/dense take the elementwise ops after
them first), injective ops and tuples into injective consumers (phase 1), and ops into the
injective group a tuple already joined (phase 2). ``fusion_groups(fn, level)`` returns the
union-find groups; ``FuseOps`` (fuse_ops.py) builds the functions.
"""

from __future__ import annotations

from partita.ir.graph import dataflow_order
from partita.ir.nodes import Call, Constant, Function, If, Let, Op, Tuple, TupleGetItem
from partita.ir.op import op_pattern
from partita.ir.types import TensorType, TupleType

ELEMWISE, BROADCAST, INJECTIVE, REDUCE, OUT_EWISE, TUPLE, OPAQUE = 0, 1, 2, 3, 4, 7, 8
MAX_FUSED_OPS = 256  # Relay's kMaxFusedOps (relay.FuseOps.max_depth)
SIMPLE_CONSTANT_DTYPES = ("int32", "int64", "float32", "float64", "bool")


def is_computational(op: Op) -> bool:
    """Annotation ops mark regions; fusion leaves them where they are (Relay's
    TNonComputational)."""
    return not op.name.startswith("annotation.")


class _Node:
    __slots__ = ("expr", "index", "outputs", "extern", "pattern")

    def __init__(self, expr, index):
        self.expr, self.index = expr, index
        self.outputs: list[tuple[_Node, int]] = []  # (consumer, edge pattern)
        self.extern, self.pattern = False, OPAQUE


def forward_graph(fn: Function) -> list[_Node]:
    """The nodes of ``fn`` (params, then the body in post-order) with their consumers."""
    order = dataflow_order(fn)
    nodes = {id(e): _Node(e, i) for i, e in enumerate(order) if type(e) is not Function}
    graph = [nodes[id(e)] for e in order if id(e) in nodes]

    def edge(kid, node, pattern):
        target = nodes.get(id(kid))
        if target is None:
            return
        if node is None:
            target.extern = True
        else:
            target.outputs.append((node, pattern))

    for p in fn.params:
        edge(p, None, OPAQUE)
    edge(fn.body, None, OPAQUE)
    for n in graph:
        _link(n, edge)
    return graph


def _link(n: _Node, edge) -> None:
    e = n.expr
    t = type(e)
    if t is Call:
        op = e.op
        n.pattern = op_pattern(op) if isinstance(op, Op) else OPAQUE
        out_t = e.type_or_none
        for arg in e.args:
            p, arg_t = n.pattern, arg.type_or_none
            same = isinstance(arg_t, TensorType) and isinstance(out_t, TensorType)
            if p == BROADCAST and same and arg_t.shape == out_t.shape:
                p = ELEMWISE
            edge(arg, n, p)
    elif t is Tuple:
        n.pattern = TUPLE
        for f in e.fields:
            tensor = isinstance(f.type_or_none, TensorType)
            edge(f, n if tensor else None, INJECTIVE)
    elif t is TupleGetItem:
        tt = e.tuple_value.type_or_none
        if isinstance(tt, TupleType) and all(isinstance(f, TensorType) for f in tt.fields):
            n.pattern = INJECTIVE
            edge(e.tuple_value, n, INJECTIVE)
        else:
            edge(e.tuple_value, None, OPAQUE)
    elif t is Constant:
        ty = e.type_or_none
        simple = ty.shape == () and ty.dtype in SIMPLE_CONSTANT_DTYPES
        n.pattern = ELEMWISE if simple else OPAQUE
    elif t in (If, Let):  # no fusion through control flow
        for kid in (e.cond, e.true_branch, e.false_branch) if t is If else (e.var, e.value, e.body):
            edge(kid, None, OPAQUE)


class _DomNode:
    __slots__ = ("node", "parent", "depth", "pattern")

    def __init__(self, node, parent, depth, pattern):
        self.node, self.parent, self.depth, self.pattern = node, parent, depth, pattern


def post_dominators(graph: list[_Node]) -> list[_DomNode]:
    """Each node's immediate post-dominator (by index) and the strongest pattern on the way."""
    tree: list[_DomNode | None] = [None] * len(graph)
    for n in reversed(graph):
        if n.extern or not n.outputs:
            tree[n.index] = _DomNode(n, None, 1, OPAQUE)
            continue
        pattern = ELEMWISE
        parent = None
        for k, (out, edge_pattern) in enumerate(n.outputs):
            node = tree[out.index]
            if k == 0:
                parent = node
            else:
                parent, pattern = _lca(parent, node, pattern)
            pattern = max(pattern, edge_pattern)
        tree[n.index] = _DomNode(n, parent, parent.depth + 1 if parent else 1, pattern)
    return tree


def _lca(a, b, pattern):
    while a is not b:
        if a is None or b is None:
            return None, pattern
        if a.depth < b.depth:
            pattern, b = max(pattern, b.pattern), b.parent
        elif b.depth < a.depth:
            pattern, a = max(pattern, a.pattern), a.parent
        else:
            pattern = max(pattern, a.pattern, b.pattern)
            a, b = a.parent, b.parent
    return a, pattern


class Group:
    """A union-find group; the root's ``root_ref`` is the node the fused function returns."""

    __slots__ = ("parent", "pattern", "root_ref", "anchor", "num_nodes")

    def __init__(self, node: _Node):
        self.parent, self.pattern, self.root_ref = None, node.pattern, node.expr
        self.anchor = node.pattern == OUT_EWISE
        self.num_nodes = 1

    def root(self) -> Group:
        g = self
        while g.parent is not None:
            g = g.parent
        return g


def fusion_groups(fn: Function, opt_level: int, max_depth: int = MAX_FUSED_OPS) -> dict:
    """id(node) -> its Group (call ``.root()``) for every node of ``fn``'s dataflow graph."""
    graph = forward_graph(fn)
    groups = [Group(n) for n in graph]
    if opt_level > 0:
        tree = post_dominators(graph)
        for phase in range(3):
            _Partitioner(graph, tree, groups, max_depth).run(phase)
    return {id(n.expr): g for n, g in zip(graph, groups)}


class _Partitioner:
    def __init__(self, graph, tree, groups, max_depth):
        self.graph, self.tree, self.groups, self.max_depth = graph, tree, groups, max_depth

    def run(self, phase: int) -> None:
        for n in self.graph:
            group, dom = self.groups[n.index], self.tree[n.index]
            if group.pattern == OPAQUE or dom.parent is None:
                continue
            sink = dom.parent.node
            if self._count_with(n, sink) > self.max_depth:
                continue
            if phase == 2:
                self._phase2(n, group, sink)
                continue
            sink_group = self.groups[sink.index]
            if group.root() is sink_group.root() or sink_group.pattern == TUPLE:
                continue
            self._try(n, group, dom, sink, phase)

    def _try(self, n, group, dom, sink, phase) -> None:
        if group.pattern == OUT_EWISE:
            if phase == 0 and dom.pattern == ELEMWISE:
                self._fuse_if(n, sink, lambda k, at_sink: k <= BROADCAST)
        elif group.pattern <= BROADCAST:
            if dom.pattern <= INJECTIVE or dom.pattern == REDUCE:
                self._fuse_if(n, sink, _into_anchor)
        elif group.pattern in (INJECTIVE, TUPLE) and phase == 1:
            self._fuse_if(n, sink, lambda k, at_sink: k <= INJECTIVE)

    def _phase2(self, n, group, sink) -> None:
        """Injective ops join an intermediate tuple already fused into injective consumers."""
        if group.pattern > INJECTIVE:
            return
        parent_group = self.groups[sink.index]
        root = parent_group.root()
        if root.pattern == TUPLE:
            return
        if parent_group.pattern == TUPLE and root.pattern <= INJECTIVE:
            self._fuse_if(n, sink, lambda k, at_sink: k <= INJECTIVE)

    def _fuse_if(self, src, sink, ok) -> None:
        if self._check_path(src, sink, ok):
            self._commit(src, sink)

    def _check_path(self, src, sink, ok) -> bool:
        seen: set[int] = set()
        stack = [out for out, _ in src.outputs]
        while stack:
            n = stack.pop()
            if n.index in seen:
                continue
            seen.add(n.index)
            if not ok(self.groups[n.index].root().pattern, n is sink):
                return False
            if n is not sink:
                stack.extend(out for out, _ in n.outputs)
        return True

    def _commit(self, src, sink) -> None:
        target = self.groups[sink.index]
        seen: set[int] = set()
        stack = [src]
        while stack:
            n = stack.pop()
            if n is sink or n.index in seen:
                continue
            seen.add(n.index)
            _merge(self.groups[n.index], target)
            stack.extend(out for out, _ in n.outputs)

    def _count_with(self, child, sink) -> int:
        """The size of the group ``child`` would make with ``sink``'s (Relay's
        CountFusedNodesWithNewChild)."""
        total = self.groups[sink.index].root().num_nodes
        seen: set[int] = set()
        stack = [child]
        while stack:
            n = stack.pop()
            if n is sink or n.index in seen:
                continue
            seen.add(n.index)
            total += self.groups[n.index].num_nodes
            stack.extend(out for out, _ in n.outputs)
        return total


def _into_anchor(kind: int, at_sink: bool) -> bool:
    """Elementwise/broadcast/injective ops on the way; the sink may be an anchor (conv)."""
    if not at_sink:
        return kind <= INJECTIVE
    return kind <= BROADCAST or kind in (REDUCE, INJECTIVE, OUT_EWISE)


def _merge(child: Group, parent: Group) -> None:
    child, parent = child.root(), parent.root()
    if child is parent:
        return
    parent.num_nodes += child.num_nodes
    child.parent = parent
    if child.anchor:
        parent.anchor = True
        parent.pattern = max(child.pattern, parent.pattern)
