"""DeadCodeElimination: drop the module's functions that ``main`` never calls.

    def @main(%x) { @f(%x) }   def @f(%a) { ... }   def @unused(%b) { ... }
->
    def @main(%x) { @f(%x) }   def @f(%a) { ... }

A dataflow graph holds no dead nodes (a node exists only if something uses it), and parameters
are the function's interface, so functions are the only thing to remove.
"""

from __future__ import annotations

from partita.ir.module import IRModule
from partita.ir.nodes import Call, GlobalVar
from partita.ir.visitor import post_order

from .infra import module_pass


@module_pass("DeadCodeElimination", opt_level=1)
def DeadCodeElimination(mod: IRModule, ctx, entries: tuple = ("main",)) -> IRModule:
    """Keep the functions named in ``entries`` (default: main) and every function reachable
    from them through GlobalVar references; a module without any entry is returned unchanged.

        @main calls @f; nothing calls @g              ->  @main, @f
    """
    live = reachable_functions(mod, entries)
    if not live:
        return mod
    return IRModule({name: fn for name, fn in mod.items() if name in live}, mod.attrs)


def reachable_functions(mod: IRModule, entries=("main",)) -> set[str]:
    """Names of the functions reachable from ``entries`` (those present) through GlobalVars."""
    if isinstance(entries, str):
        entries = (entries,)
    live = {name for name in entries if name in mod}
    todo = list(live)
    while todo:
        for node in post_order(mod[todo.pop()]):
            if isinstance(node, Call):
                node = node.op  # post_order does not list a callee GlobalVar on its own
            if isinstance(node, GlobalVar) and node.name_hint not in live and node in mod:
                live.add(node.name_hint)
                todo.append(node.name_hint)
    return live
