"""Regions in the IR between AnnotateTarget and PartitionGraph, and the two operations on them.

An annotated unit, or a merged region, is a call of an inline function that carries its target;
units left on the host say why:

    %1 = fn (%npu_0_i0, Compiler="npu") { npu.conv2d composite(%npu_0_i0) }(%x);
    %2 = fn (%llvm_1_i0, Compiler="llvm", Host=True, Reason="no pattern matched ...") {
           nn.softmax(%llvm_1_i0) }(%1);

A region with several outputs returns a tuple (``Outputs=2``) that its users index (``%3.0``).
``flatten`` inlines every region into a plain dataflow graph and remembers each node's Region;
``RegionBuilder`` (builder.py) turns a labelled graph back into region calls, or lifts them to
global functions.
Every stage is a valid module: it types, prints and interprets to the same bits.
"""

from __future__ import annotations

from collections.abc import Callable

from partita.ir.graph import dataflow_order, map_functions, map_inner_functions
from partita.ir.module import IRModule
from partita.ir.nodes import Call, Constant, Expr, Function, Tuple, TupleGetItem, Var
from partita.ops.registry import Op
from partita.passes.infer_type import infer_type

from .annotations import BEGIN, END, has_annotations, strip_annotations
from .builder import BUILT_FROM, RegionBuilder
from .units import (
    UNIT_TYPES,
    Region,
    RegionError,
    copy_node,
    is_composite_call,
    is_region_call,
    typed_copy,
    value_children,
)


def inline_body(fn: Function, args: list, roots: list, on_copy=None) -> list:
    """Copies of ``roots`` (nodes of ``fn``'s body) with ``fn``'s params replaced by ``args``;
    ``on_copy(old, new)`` sees every copied unit."""
    memo: dict[int, Expr] = {id(p): a for p, a in zip(fn.params, args)}
    for root in roots:
        stack = [root]
        while stack:  # region bodies are small: a plain stack walk, kids before parents
            node = stack[-1]
            if id(node) in memo:
                stack.pop()
                continue
            if type(node) in UNIT_TYPES:
                kids = value_children(node)
                pending = [k for k in kids if id(k) not in memo]
                if pending:
                    stack.extend(pending)
                    continue
                new = copy_node(node, [memo[id(k)] for k in kids])
                if on_copy is not None:
                    on_copy(node, new)
            else:
                new = node
            memo[id(node)] = new
            stack.pop()
    return [memo[id(r)] for r in roots]


def ensure_typed(fn: Function, mod) -> None:
    """Type ``fn`` unless its body already has a type (InferType types bottom-up, and the
    partition passes give every node they build its type)."""
    if fn.body.type_or_none is None:
        infer_type(fn, mod)


def is_partition_function(fn: Function) -> bool:
    """A function already lifted for a backend (PartitionGraph's output): passes leave it."""
    return "Compiler" in fn.attrs


def map_open_functions(mod: IRModule, rewrite: Callable[[str, Function], Function]) -> IRModule:
    """``map_functions`` over the functions not yet lifted for a backend, each typed first: the
    loop every partition pass runs."""

    def one(name: str, fn: Function) -> Function:
        ensure_typed(fn, mod)
        return rewrite(name, fn)

    return map_functions(mod, one, skip=is_partition_function)


def flatten(body: Expr, numbers: dict | None = None) -> tuple[Expr, dict[int, Region]]:
    """Inline every region call of ``body``; returns the plain graph and id(unit) -> Region.
    Units outside any region (an unannotated graph) have no entry. Relay's
    compiler_begin/compiler_end annotations are read too (partition/annotations.py; ``numbers``:
    the begins' numbers in the enclosing function)."""
    flat, region_of, _order = flatten_ordered(body, numbers)
    return flat, region_of


_ANNOTATION_OPS = (BEGIN, END)


def flatten_ordered(body: Expr, numbers: dict | None = None, order: list | None = None):
    """``flatten`` and the flat graph's ``dataflow_order`` (``order``: ``body``'s, when the
    caller has it)."""
    known = BUILT_FROM.get(body) if type(body) in UNIT_TYPES else None
    if known is not None:
        flat, labels, order = known
        fresh: dict[int, Region] = {}  # what flatten reads off the functions' attributes
        region_of = {
            k: fresh.get(id(r)) or fresh.setdefault(id(r), Region(r.target, r.host, r.reason))
            for k, r in labels.items()
        }
        return flat, region_of, order
    order = dataflow_order(body) if order is None else order
    # whether a call is a region call or an annotation depends on its callee only: each
    # distinct callee is asked once (a graph of 100k op calls has a few dozen ops; ops and
    # functions hash by identity, a GlobalVar by its name, which is all the test reads)
    callees = {n.op for n in order if type(n) is Call}
    if not any(
        (type(op) is Function and "Compiler" in op.attrs)
        or (isinstance(op, Op) and op.name in _ANNOTATION_OPS)
        for op in callees
    ):
        return body, {}, order  # nothing to inline: flattening would copy nothing
    flat, region_of = _flatten(body, numbers)
    return flat, region_of, dataflow_order(flat)


def has_inner_functions(order: list) -> bool:
    """Whether a graph (its ``dataflow_order``) holds let-bound functions, the ones
    ``map_inner_functions`` enters."""
    return any(
        "Composite" not in n.attrs and "Compiler" not in n.attrs
        for n in [n for n in order if type(n) is Function]
    )


def built_by_regions(body: Expr) -> bool:
    """Whether ``body`` is a RegionBuilder's output (so it holds no Relay annotations)."""
    return type(body) in UNIT_TYPES and body in BUILT_FROM


def _flatten(body: Expr, numbers: dict | None) -> tuple[Expr, dict[int, Region]]:
    memo: dict[int, object] = {}
    region_of: dict[int, Region] = {}
    if has_annotations(body):
        body, region_of = strip_annotations(body, numbers=numbers)

    def value(e):
        v = memo[id(e)]
        if type(v) is list:  # a multi-output region used as a whole: rebuild the tuple
            v = memo[id(e)] = typed_copy(Tuple(v), e.type_or_none)
        return v

    for node in dataflow_order(body):
        if is_region_call(node):
            memo[id(node)] = _inline_region(node, [value(a) for a in node.args], region_of)
        elif type(node) is TupleGetItem and type(memo[id(node.tuple_value)]) is list:
            memo[id(node)] = memo[id(node.tuple_value)][node.index]
        elif type(node) in UNIT_TYPES:
            new = memo[id(node)] = copy_node(node, [value(k) for k in value_children(node)])
            if new is not node and id(node) in region_of:
                region_of[id(new)] = region_of[id(node)]
        else:
            memo[id(node)] = node
    return value(body), region_of


def _inline_region(call: Call, args: list, region_of: dict):
    fn = call.op
    region = Region.from_attrs(fn.attrs)
    outputs = int(fn.attrs.get("Outputs", 1))

    def label(_old, new):
        region_of[id(new)] = region

    if outputs > 1:
        if type(fn.body) is not Tuple or len(fn.body.fields) != outputs:
            raise RegionError(
                f"region function with Outputs={outputs} must return a tuple of {outputs} fields"
            )
        return inline_body(fn, args, list(fn.body.fields), label)
    return inline_body(fn, args, [fn.body], label)[0]


def units(order: list) -> list:
    """The units of a flat graph (calls, tuples, tuple items) in post-order."""
    return [n for n in order if type(n) in UNIT_TYPES]


def unit_ops(node: Expr) -> list:
    """The op calls a unit stands for: itself, or the ops inside the composite it calls."""
    if type(node) is Call:
        if isinstance(node.op, Op):
            return [node]
        if type(node.op) is Function:
            return op_calls(node.op.body)
    return []


def op_calls(root: Expr) -> list:
    """Every call of a registered op reachable from ``root``, composite bodies included."""
    out = []
    stack = [root]
    seen = set()
    push = stack.extend
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if type(node) is Call:
            if isinstance(node.op, Op):
                out.append(node)
            elif type(node.op) is Function:
                stack.append(node.op.body)
        # leaves (constants, variables: most of a composite's inputs) hold no op call: not
        # pushed, which leaves the calls' order as it was
        push([k for k in value_children(node) if type(k) not in _LEAVES])
    return out


_LEAVES = (Constant, Var)


__all__ = [
    "map_inner_functions",
    "Region",
    "RegionBuilder",
    "RegionError",
    "copy_node",
    "ensure_typed",
    "flatten",
    "flatten_ordered",
    "has_inner_functions",
    "built_by_regions",
    "inline_body",
    "is_composite_call",
    "is_region_call",
    "op_calls",
    "unit_ops",
    "units",
    "value_children",
]
