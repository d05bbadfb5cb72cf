"""EliminateCommonSubexpr: compute each value once.

    %0 = nn.relu(%x)
    %1 = nn.relu(%x)
    add(%0, %1)
->
    %0 = nn.relu(%x)
    add(%0, %0)
"""

from __future__ import annotations

from partita.ir.module import IRModule
from partita.ir.nodes import Call, Constant, Expr, GlobalVar, Tuple, TupleGetItem
from partita.ops.registry import Op

from .infra import module_pass
from .rewrite_util import ScopedMutator, rewrite_module


@module_pass("EliminateCommonSubexpr", opt_level=2)
def EliminateCommonSubexpr(
    mod: IRModule, ctx, skip_ops: tuple = (), max_constant_elements: int = 1 << 16
) -> IRModule:
    """Merge structurally identical nodes: calls of one op with equal attributes on the same
    (already merged) arguments, Tuples, TupleGetItems, and Constants of at most
    ``max_constant_elements`` elements with the same dtype, shape and bytes. Calls to ops named in
    ``skip_ops`` are never merged. Each function is a scope of its own; the bodies of Composite and
    Compiler functions are left as the backend's patterns matched them.

        add(nn.relu(%x), nn.relu(%x))                 ->  %0 = nn.relu(%x); add(%0, %0)
    """
    skip = {skip_ops} if isinstance(skip_ops, str) else set(skip_ops)
    return rewrite_module(mod, lambda m: _Merger(skip, max_constant_elements))


class _Merger(ScopedMutator):
    def __init__(self, skip: set, max_constant_elements: int):
        super().__init__()
        self.skip, self.max_constant_elements = skip, max_constant_elements
        self.table: dict = {}

    def _rewrite(self, node: Expr) -> Expr:
        new = super()._rewrite(node)
        key = self._key(new)
        if key is None:
            return new
        return self.table.setdefault(key, new)

    def scope(self):
        return _Merger(self.skip, self.max_constant_elements)

    def _key(self, e: Expr):
        """A hashable key equal for interchangeable nodes (children compared by identity, since
        they are merged already), or None for nodes never merged."""
        if isinstance(e, Call):
            return self._call_key(e)
        if isinstance(e, Constant):
            data = e.data
            if data.size > self.max_constant_elements:
                return None
            return ("const", data.dtype.str, data.shape, data.tobytes())
        if isinstance(e, Tuple):
            return ("tuple", *map(id, e.fields))
        if isinstance(e, TupleGetItem):
            return ("getitem", id(e.tuple_value), e.index)
        return None  # Vars, Functions and GlobalVars are unique already

    def _call_key(self, call: Call):
        op = call.op
        if isinstance(op, Op):
            if op.name in self.skip:
                return None
            try:
                hash(call.attrs)
            except TypeError:
                return None
            return ("call", op, call.attrs, *map(id, call.args))
        callee = op if isinstance(op, GlobalVar) else id(op)
        return ("call", callee, None, *map(id, call.args))
