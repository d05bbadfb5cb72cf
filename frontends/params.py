"""TVM's graph-executor style: the weights of an imported module as ``params``.

    mod, params = lift_params(from_onnx(model, shape_dict))
    exe = partita.build(mod, "llvm", params=params)

``lift_params`` turns the constants of ``main`` into parameters named after the source tensor
(appended after the graph inputs) and returns them as a dict of numpy arrays; ``partita.build``
binds them back before partitioning. Scalars (quantization parameters, scalar operands) stay
constants, so patterns that need them as constants still see them.
"""

from __future__ import annotations

import re

import numpy as np

from partita.ir import Constant, ExprMutator, Function, IRModule, TensorType, Var, post_order
from partita.passes.infer_type import infer_type


def lift_params(mod: IRModule, min_size: int = 2) -> tuple[IRModule, dict[str, np.ndarray]]:
    """``main``'s constants of ``min_size`` elements or more -> trailing parameters of ``main``
    plus ``{name: array}``; one constant used in several places becomes one parameter."""
    main = mod["main"]
    taken = {p.name_hint for p in main.params}
    lifted: dict[int, Var] = {}
    params: dict[str, np.ndarray] = {}
    for node in post_order(main.body, enter_functions=False):
        if isinstance(node, Constant) and node.data.size >= min_size and id(node) not in lifted:
            name = _unique(_name(node, len(params)), taken)
            params[name] = node.data
            lifted[id(node)] = Var(
                name, TensorType(node.data.shape, node.data.dtype.name), span=node.span
            )
    body = _Lift(lifted).visit(main.body)
    fn = Function(list(main.params) + list(lifted.values()), body, None, main.attrs, main.span)
    infer_type(fn)
    return mod.with_function("main", fn), params


def _name(node: Constant, i: int) -> str:
    tensor = node.span.tensor if node.span is not None else None
    return re.sub(r"[^0-9A-Za-z_.:/-]", "_", tensor) if tensor else f"param_{i}"


def _unique(name: str, taken: set[str]) -> str:
    out, n = name, 1
    while out in taken:
        out, n = f"{name}_{n}", n + 1
    taken.add(out)
    return out


class _Lift(ExprMutator):
    enter_functions = False

    def __init__(self, lifted: dict[int, Var]):
        super().__init__()
        self.lifted = lifted

    def rewrite_constant(self, node):
        return self.lifted.get(id(node), node)
