"""FuseOps: every op call into a primitive function, together with the ops it fuses with.

    %0 = @acc_main_0(%x, %y);                         %0 = @acc_main_0(%x, %y);
    %1 = log(%0);                                     %1 = fn (%p0, Primitive=1) {
    %2 = exp(%0);                               ->           concatenate((log(%p0), exp(%p0)))
    concatenate((%1, %2))                               };
                                                      %1(%0)

Relay's pass: the groups come from its post-dominator analysis (fusion_groups.py); each group
becomes ``fn (%p0, %p1, ...) { ... }`` with ``Primitive=1`` (and ``ReshapeOnly=1`` when it only
reshapes), called where the group's last node was. An input from outside the group is a
parameter (one per distinct value); scalar constants fuse into the group that reads them.
``fuse_opt_level`` 0 wraps each op alone; -1 takes the PassContext's opt level. Functions that
belong to a backend (``Compiler``) or are primitive already are left alone, as are calls of
functions and control flow (If, Let).
"""

from __future__ import annotations

from partita.ir.graph import dataflow_order, value_inputs, with_inputs
from partita.ir.module import IRModule
from partita.ir.nodes import Call, Expr, Function, Op, Tuple, TupleGetItem, Var
from partita.ir.visitor import post_order

from .fusion_groups import MAX_FUSED_OPS, Group, fusion_groups, is_computational
from .infer_type import infer_type
from .infra import module_pass

RESHAPE_OPS = ("reshape", "squeeze", "expand_dims")  # Relay's TReshapeOp


@module_pass("FuseOps", opt_level=0)
def FuseOps(mod: IRModule, ctx, fuse_opt_level: int = -1, max_depth: int = MAX_FUSED_OPS):
    """Fuse each function's ops into primitive functions (module docstring)."""
    level = ctx.opt_level if fuse_opt_level == -1 else fuse_opt_level
    out = IRModule({}, mod.attrs)
    for name, fn in mod.items():
        infer_type(fn, mod)
        skip = "Compiler" in fn.attrs or any(
            int(fn.attrs.get(k, 0)) for k in ("Primitive", "Extern", "SkipOptimization")
        )
        out[name] = fn if skip else _Fuser(fn, level, max_depth).run()
    for fn in out.functions.values():
        infer_type(fn, out)
    return out


class _Fuser:
    def __init__(self, fn: Function, level: int, max_depth: int):
        self.fn = fn
        self.groups = fusion_groups(fn, level, max_depth)
        self.memo: dict[int, Expr] = {}
        self.inputs: dict[int, tuple[list, list]] = {}  # id(group) -> (params, arguments)

    def run(self) -> Function:
        for node in dataflow_order(self.fn):
            if type(node) is not Function:
                self.memo[id(node)] = self._rewrite(node)
        return self.fn.with_body(self.memo[id(self.fn.body)])

    def _group(self, node) -> Group | None:
        g = self.groups.get(id(node))
        return g.root() if g is not None else None

    def _plain(self, node) -> Expr:
        """``node`` with its inputs rewritten (not part of a fused function)."""
        return with_inputs(node, [self.memo.get(id(k), k) for k in value_inputs(node)])

    def _rewrite(self, node) -> Expr:
        t = type(node)
        if t is Call and isinstance(node.op, Op) and is_computational(node.op):
            group = self._group(node)
            new = Call(node.op, self._args(node.args, group), node.attrs, node.span)
            return self._function(group, new) if group.root_ref is node else new
        if t is Tuple:
            group = self._group(node)
            if group.root_ref is node:
                return self._plain(node)
            return Tuple(self._args(node.fields, group), node.span)
        if t is TupleGetItem:
            group = self._group(node)
            (value,) = self._args([node.tuple_value], group)
            new = TupleGetItem(value, node.index, node.span)
            if group.root_ref is not node:
                return new
            if self._group(node.tuple_value) is not group:  # made by an opaque op: alone
                return self._plain(node)
            return self._function(group, new)
        return self._plain(node)

    def _args(self, args, group) -> list[Expr]:
        params, arguments = self.inputs.setdefault(id(group), ([], []))
        out = []
        for a in args:
            new = self.memo.get(id(a), a)
            if self._group(a) is group:
                out.append(new)
                continue
            for p, arg in zip(params, arguments):  # one parameter per distinct value
                if arg is new:
                    out.append(p)
                    break
            else:
                p = Var(f"p{len(params)}", a.type_or_none)
                params.append(p)
                arguments.append(new)
                out.append(p)
        return out

    def _function(self, group, body: Expr) -> Call:
        params, arguments = self.inputs.setdefault(id(group), ([], []))
        calls = [n for n in post_order(body) if type(n) is Call]
        attrs = {"Primitive": int(bool(calls))}
        if calls and all(isinstance(c.op, Op) and c.op.name in RESHAPE_OPS for c in calls):
            attrs["ReshapeOnly"] = 1
        return Call(Function(params, body, group.root_ref.type_or_none, attrs), arguments)
