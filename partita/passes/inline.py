"""Inline: calls to global functions marked ``Inline=1`` replaced by the functions themselves.

    def @f(%a, Inline=1) { nn.relu(%a) }              def @main(%x) {
    def @main(%x) { @f(%x) }                     ->      nn.relu(%x)
                                                       }

A partition (``Compiler=...``) is not opened: the call to ``@tvmgen_..._main_0`` becomes a call
of the function itself, so it stays one region of its target. Relay's rules: a function is
inlined once every global it calls has been (callees first), never when it calls itself
(directly or through others), and the inlined functions leave the module (entries such as
``main`` stay even when marked). A global referenced other than as a callee stays where it is.
"""

from __future__ import annotations

from partita.ir.module import IRModule
from partita.ir.nodes import Call, Function, GlobalVar
from partita.ir.visitor import ExprMutator, post_order, substitute

from .infer_type import infer_type
from .infra import module_pass


@module_pass("Inline", opt_level=1)
def Inline(mod: IRModule, ctx) -> IRModule:
    """Inline every call to an ``Inline=1`` global function (module docstring)."""
    callees = {name: _callees(fn) for name, fn in mod.items()}
    referenced = set().union(*callees.values()) if callees else set()
    functions = dict(mod.items())
    inlined: set[str] = set()
    for name in _callees_first(callees):
        fn = functions[name]
        targets = {c for c in _callees(fn) if c in inlined}
        if targets:
            fn = functions[name] = _Inliner(functions, targets).visit(fn)
        if _can_inline(name, fn, callees):
            inlined.add(name)
    out = IRModule({}, mod.attrs)
    for name, fn in functions.items():
        still_used = any(name in _callees(f) for n, f in functions.items() if n != name)
        if name in inlined and name in referenced and not still_used:
            continue  # every call was replaced
        out[name] = fn
    for fn in out.functions.values():
        infer_type(fn, out)
    return out


def _callees(fn: Function) -> set[str]:
    """The names of the global functions ``fn`` mentions."""
    out = set()
    for n in post_order(fn):
        if type(n) is Call and type(n.op) is GlobalVar:  # a callee is not a child node
            out.add(n.op.name_hint)
        elif type(n) is GlobalVar:
            out.add(n.name_hint)
    return out


def _can_inline(name: str, fn: Function, callees: dict) -> bool:
    if not int(fn.attrs.get("Inline", 0)) or _recursive(name, callees):
        return False
    return not _callees(fn)  # a leaf once its own callees were inlined


def _recursive(name: str, callees: dict) -> bool:
    """True when ``name`` reaches itself through the call graph."""
    stack, seen = list(callees.get(name, ())), set()
    while stack:
        c = stack.pop()
        if c == name:
            return True
        if c not in seen:
            seen.add(c)
            stack.extend(callees.get(c, ()))
    return False


def _callees_first(callees: dict) -> list[str]:
    """The module's functions, each after the functions it calls (cycles broken anywhere)."""
    order: list[str] = []
    state: dict[str, int] = {}
    for root in callees:
        stack = [(root, iter(sorted(callees[root])))]
        state.setdefault(root, 1)
        while stack:
            name, it = stack[-1]
            nxt = next((c for c in it if c in callees and c not in state), None)
            if nxt is not None:
                state[nxt] = 1
                stack.append((nxt, iter(sorted(callees[nxt]))))
                continue
            stack.pop()
            if state[name] == 1:
                state[name] = 2
                order.append(name)
    return order


class _Inliner(ExprMutator):
    """Replaces calls to the globals in ``targets``: a partition by a call of the function
    itself, anything else by its body with the parameters bound to the arguments."""

    enter_functions = True

    def __init__(self, functions: dict, targets: set[str]):
        super().__init__()
        self.functions, self.targets = functions, targets
        self.literals: dict[str, Function] = {}

    def rewrite_call(self, call, op, args):
        if type(op) is not GlobalVar or op.name_hint not in self.targets:
            return super().rewrite_call(call, op, args)
        fn = self.functions[op.name_hint]
        if "Compiler" in fn.attrs or int(fn.attrs.get("Extern", 0)):
            literal = self.literals.get(op.name_hint)
            if literal is None:
                literal = self.literals[op.name_hint] = Function(
                    fn.params, fn.body, fn.ret_type, fn.attrs, fn.span
                )
            return Call(literal, args, None, call.span)
        return substitute(fn.body, dict(zip(fn.params, args)))
