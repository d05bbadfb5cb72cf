"""TVM's ``compiler_begin`` / ``compiler_end`` region annotations, read and written.

Relay marks a region by its boundary: each input passes through ``compiler_begin(x, "npu")``,
each value leaving through ``compiler_end(y, "npu")``; ``"default"`` is the host:

    %0 = annotation.compiler_begin(%x, compiler="npu");
    %1 = nn.relu(%0);                                       a region of npu: {nn.relu, abs}
    %2 = abs(%1);
    annotation.compiler_end(%2, compiler="npu")

``strip_annotations`` reads that form into a plain graph and its Regions (TVM's
AnnotatedRegionSet rule: a begin opens a region, a node joins the regions of the inputs it reads
without crossing an end; nodes no begin reaches stay unannotated), so hand-annotated graphs go
through MergeCompilerRegions and PartitionGraph. Begins are numbered in post-order and a merged
region keeps the number of its first input's region, as Relay numbers AnnotatedRegions (TVM's
partition names ``<target>_main_<n>`` show that number). ``annotate_regions`` writes Regions back in
that form, one end and one begin per edge that crosses a boundary, as TVM's AnnotateTarget and
MergeCompilerRegions print them (``partita.relay`` uses it).
"""

from __future__ import annotations

from partita.backends.registry import DEFAULT_HOST

from partita.ir.graph import dataflow_order
from partita.ir.nodes import Call, Expr, Var
from partita.ir.visitor import post_order
from partita.ops.registry import Op, get_op

from .units import UNIT_TYPES, Region, RegionError, copy_node, typed_copy, value_children

BEGIN, END = "annotation.compiler_begin", "annotation.compiler_end"
DEFAULT = "default"  # TVM's name for the host in annotations


def annotation_kind(node) -> str | None:
    """``BEGIN`` or ``END`` for an annotation call, else None."""
    if type(node) is Call and isinstance(node.op, Op) and node.op.name in (BEGIN, END):
        return node.op.name
    return None


def has_annotations(body: Expr) -> bool:
    """True when ``body`` holds any compiler_begin/compiler_end."""
    return any(annotation_kind(n) for n in dataflow_order(body))


def strip_annotations(
    body: Expr, host: str = DEFAULT_HOST, numbers: dict | None = None
) -> tuple[Expr, dict[int, Region]]:
    """The graph without annotations and id(unit) -> Region of its annotated units.
    ``numbers``: id(begin) -> its number in the enclosing function (``begin_numbers``), for a
    body inside a let-bound function; by default the begins of ``body`` count from 0."""
    memo: dict[int, Expr] = {}
    owner: dict[int, int] = {}  # id(original node) -> union-find index of its region
    parent: list[int] = []
    target: list[str] = []
    begins: list[Expr] = []
    labelled: list[tuple[Expr, int]] = []

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for node in dataflow_order(body):
        kind = annotation_kind(node)
        if kind is not None:
            arg = node.args[0]
            memo[id(node)] = memo[id(arg)]
            name = str(node.attrs.compiler)
            if kind == BEGIN:
                owner[id(node)] = len(parent)
                parent.append(len(parent))
                target.append(name)
                begins.append(node)
            elif owner.get(id(arg)) is None or target[find(owner[id(arg)])] != name:
                inside = target[find(owner[id(arg)])] if id(arg) in owner else None
                where = f"in a {inside!r} region" if inside else "in no region (no begin reads it)"
                raise RegionError(f"compiler_end({name!r}) closes {arg.short()}, which is {where}")
        elif type(node) in UNIT_TYPES:
            kids = value_children(node)
            joined = None
            for kid in kids:
                r = owner.get(id(kid))
                if r is None:
                    continue
                r = find(r)
                if joined is None:
                    joined = r
                elif r != joined:
                    if target[r] != target[joined]:
                        raise RegionError(
                            f"{node.short()} reads regions of two targets, {target[joined]!r} and "
                            f"{target[r]!r}, without a compiler_end between them"
                        )
                    parent[r] = joined
            new = copy_node(node, [memo[id(k)] for k in kids])
            memo[id(node)] = new
            if joined is not None:
                owner[id(node)] = joined
                labelled.append((new, joined))
        else:
            memo[id(node)] = node
    regions: dict[int, Region] = {}
    region_of: dict[int, Region] = {}
    for new, r in labelled:
        root = find(r)
        region = regions.get(root)
        if region is None:
            name = target[root]
            region = regions[root] = (
                Region(host, True, "annotated compiler_begin/compiler_end 'default'")
                if name == DEFAULT
                else Region(name, number=numbers[id(begins[root])] if numbers else root)
            )
        region_of[id(new)] = region
    return memo[id(body)], region_of


def begin_numbers(fn) -> dict[int, int]:
    """id(compiler_begin) -> its number in ``fn``: the order Relay's walk meets the begins,
    function bodies inside included (TVM numbers a partition by its region's first begin)."""
    begins = [n for n in post_order(fn) if annotation_kind(n) == BEGIN]
    return {id(n): k for k, n in enumerate(begins)}


def annotate_regions(
    body: Expr, region_of: dict[int, Region], include_non_call_ops: bool = True, names=None
) -> Expr:
    """``body`` (a plain graph) with its Regions written as compiler_begin/compiler_end; host
    regions are ``"default"``. Without ``include_non_call_ops`` tuples and tuple items are left
    bare, as TVM's AnnotateTarget(..., include_non_call_ops=False) leaves them (and calls of a
    let-bound function, which TVM counts with them); host units with
    no inputs (``zeros()``, ``()``) are always bare, as in TVM. ``names(target)`` is the name
    an annotation gives a target (default: the target itself)."""
    begin_op, end_op = get_op(BEGIN), get_op(END)

    def annotated(node) -> bool:
        region = region_of.get(id(node))
        return (
            type(node) in UNIT_TYPES
            and region is not None
            and (include_non_call_ops or (type(node) is Call and type(node.op) is not Var))
            and (not region.host or bool(value_children(node)))  # TVM: zeros(), () stay bare
        )

    def label(node) -> str:
        region = region_of[id(node)]
        return DEFAULT if region.host else names(region.target) if names else region.target

    def mark(op, value: Expr, name: str) -> Expr:
        return typed_copy(Call(op, [value], {"compiler": name}), value.type_or_none)

    memo: dict[int, Expr] = {}
    for node in dataflow_order(body):
        if type(node) not in UNIT_TYPES:
            memo[id(node)] = node
            continue
        kids = []
        for kid in value_children(node):
            value = memo[id(kid)]
            inner = annotated(node) and annotated(kid)
            if inner and region_of[id(kid)] is region_of[id(node)]:
                kids.append(value)
                continue
            if annotated(kid):
                value = mark(end_op, value, label(kid))
            if annotated(node):
                value = mark(begin_op, value, label(node))
            kids.append(value)
        memo[id(node)] = copy_node(node, kids)
    out = memo[id(body)]
    return mark(end_op, out, label(body)) if annotated(body) else out


__all__ = [
    "BEGIN",
    "DEFAULT",
    "END",
    "annotate_regions",
    "annotation_kind",
    "begin_numbers",
    "has_annotations",
    "strip_annotations",
]
