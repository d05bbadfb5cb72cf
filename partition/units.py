"""The units of the region passes (calls, tuples, tuple items) and the Region that labels them.

Shared by regions.py (inline region functions) and annotations.py (Relay's compiler_begin /
compiler_end), which both read and write Regions.
"""

from __future__ import annotations

from operator import is_

from partita.errors import PartitaError
from partita.ir.graph import with_inputs
from partita.ir.nodes import Call, Expr, Function, If, Let, Tuple, TupleGetItem
from partita.ir.refs import REF_NODES, ref_inputs

# If and Let are units too: no target claims them (they stay in main), but the graph under them
# is partitioned like any other (partita's graphs are dataflow: both branches are values).
# References (ref, ref_read, ref_write) are units that always stay on the host.
UNIT_TYPES = (Call, Tuple, TupleGetItem, If, Let, *REF_NODES)


class RegionError(PartitaError):
    """Regions that cannot be built (a cycle between regions, a malformed region call)."""


class Region:
    """A set of units that runs on one target; host units carry the reason they stay there."""

    __slots__ = ("target", "host", "reason", "number")

    def __init__(self, target: str, host: bool = False, reason: str = "", number=None):
        self.target, self.host, self.reason = target, bool(host), reason
        # Relay's AnnotatedRegion id when the region was read from compiler_begin/compiler_end:
        # the index of the begin that opened it (TVM's partition names count them)
        self.number = number

    @staticmethod
    def from_attrs(attrs) -> Region:
        """The Region an inline region function's attributes describe."""
        return Region(
            str(attrs["Compiler"]), bool(attrs.get("Host", False)), str(attrs.get("Reason", ""))
        )

    def attrs(self, outputs: int) -> dict:
        """The inline function attributes that mark this region."""
        out: dict = {"Compiler": self.target}
        if self.host:
            out["Host"] = True
            if self.reason:
                out["Reason"] = self.reason
        if outputs > 1:
            out["Outputs"] = outputs
        return out

    def __repr__(self):
        return f"<Region {self.target}{' (host)' if self.host else ''}>"


def is_region_call(node) -> bool:
    """A call of an inline function marked with ``Compiler`` (an annotated unit or region)."""
    return type(node) is Call and type(node.op) is Function and "Compiler" in node.op.attrs


def is_composite_call(node) -> bool:
    """A call of a composite function (MergeComposite's output)."""
    return type(node) is Call and type(node.op) is Function and "Composite" in node.op.attrs


def value_children(node: Expr) -> tuple:
    """The data inputs of a unit (a called function is not one)."""
    t = type(node)
    if t is Call:
        return node.args
    if t is Tuple:
        return node.fields
    if t is TupleGetItem:
        return (node.tuple_value,)
    if t is If:
        return (node.cond, node.true_branch, node.false_branch)
    if t is Let:
        return (node.value, node.body)
    if t in REF_NODES:
        return ref_inputs(node)
    return ()


def typed_copy(node: Expr, ty) -> Expr:
    if node.type_or_none is None and ty is not None:
        node.with_type(ty)  # the write-once type cache; a copy has its original's type
    return node


# the slots of a Call, written directly: copy_node skips Call's checks (below)
_new = object.__new__
_SPAN, _TYPE = Expr.span.__set__, Expr._type.__set__
_OP, _ARGS, _ATTRS = Call.op.__set__, Call.args.__set__, Call.attrs.__set__


def copy_node(node: Expr, new_kids: list) -> Expr:
    """``node`` with new data inputs (itself when none changed), keeping span and type."""
    if type(node) is Call and not isinstance(node.op, Expr):
        args = node.args
        if len(new_kids) == len(args) and all(map(is_, new_kids, args)):
            return node
        # an op call with as many inputs: its op, attributes (validated when it was built),
        # span and type carry over unchanged, so the copy skips Call's checks (the region
        # passes copy every node of a 100k-node graph)
        new = _new(Call)
        _SPAN(new, node.span)
        _TYPE(new, node._type)
        _OP(new, node.op)
        _ARGS(new, tuple(new_kids))
        _ATTRS(new, node.attrs)
        return new
    callee = [node.op] if type(node) is Call and type(node.op) is Function else []
    new = with_inputs(node, callee + list(new_kids))
    return new if new is node else typed_copy(new, node.type_or_none)


def copy_mapped(node: Expr, get) -> Expr:
    """``copy_node(node, [get(id(k), k) for k in value_children(node)])``: ``get`` is a memo's
    ``dict.get`` from id(old input) to its copy (an input not in it stays). The region passes'
    per-node step, with an op call's inputs mapped at C speed."""
    if type(node) is Call and not isinstance(node.op, Expr):
        args = node.args
        kids = tuple(map(get, map(id, args), args))
        if all(map(is_, kids, args)):
            return node
        new = _new(Call)
        _SPAN(new, node.span)
        _TYPE(new, node._type)
        _OP(new, node.op)
        _ARGS(new, kids)
        _ATTRS(new, node.attrs)
        return new
    return copy_node(node, [get(id(k), k) for k in value_children(node)])
