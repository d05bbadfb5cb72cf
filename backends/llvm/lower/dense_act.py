"""An elementwise tail fused into a vector FDENSE's epilogue (params "act"): BERT's GELU as torch
exports it, x * (erf(x / sqrt 2) + 1) * 0.5, after the FFN's first product and its bias. The
tail's nodes are float32 ops of emit/float/ewise_vec.py's OPS of the product's shape, whose
operands are the product, other nodes of the tail, or float32 scalar constants; every node
but the last is read only inside the tail. gemm.py applies the tree (ewise_vec.epilogue_value)
to each output vector after the bias, the same float32 steps as the EWISE kernel it replaces,
so the same bits, and the 128 x 3072 activations are not written and read back once more.

    ["in"]                    the product (after its bias, residual and relu)
    ["const", v]              a float32 scalar
    ["op", name, [kids]]      one float32 step
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.emit.float.ewise_vec import OPS

from partita.ir import Call, Constant

if TYPE_CHECKING:
    from .context import LowerContext

MAX_NODES = 12  # a larger tail stays an EWISE kernel of its own
# the steps worth fusing: without erf (a bare scale or add) the EWISE kernel is kept
NEEDS = {"erf"}


def _scalar(expr) -> float | None:
    if not isinstance(expr, Constant):
        return None
    data = np.asarray(expr.data)
    if data.dtype != np.float32 or data.size != 1:
        return None
    return float(data.reshape(-1)[0])


def _step(node, shape: tuple) -> bool:
    """Whether ``node`` may be a step of a tail over ``shape``."""
    return (isinstance(node, Call) and getattr(node.op, "name", "") in OPS
            and node.op.name not in ("cast", "copy")
            and getattr(node.checked_type, "dtype", "") == "float32"
            and tuple(node.checked_type.shape) == shape)


def act_tail(low: LowerContext, last, shape: tuple):
    """(tree, the tail's last node, its nodes) for the elementwise tail reading ``last``, or
    None. Nodes join in an order where each one's operands are in already (or scalars); a
    reader that never can is outside the tail."""
    if any(last is o for o in low.outputs):
        return None
    inside = {id(last)}
    nodes: list = []
    waiting = list(low.users_of(last))
    stalls = 0
    while waiting and stalls <= len(waiting):
        node = waiting.pop(0)
        if id(node) in inside or not _step(node, shape):
            continue
        if any(id(a) not in inside and _scalar(a) is None for a in node.args):
            waiting.append(node)  # an operand not in the tail yet (or never: then outside)
            stalls += 1
            continue
        stalls = 0
        inside.add(id(node))
        nodes.append(node)
        if len(nodes) > MAX_NODES:
            return None
        waiting.extend(low.users_of(node))
    if not nodes or not NEEDS & {n.op.name for n in nodes}:
        return None
    if any(id(u) not in inside for u in low.users_of(last)):
        return None  # the product itself is read elsewhere
    ends = [n for n in nodes if any(n is o for o in low.outputs)
            or any(id(u) not in inside for u in low.users_of(n)) or not low.users_of(n)]
    if len(ends) != 1:
        return None
    root = ends[0]

    def tree(expr):
        if expr is last:
            return ["in"]
        value = _scalar(expr)
        if value is not None:
            return ["const", value]
        return ["op", expr.op.name, [tree(a) for a in expr.args]]

    used: list = []

    def reach(expr):
        if isinstance(expr, Call) and expr is not last and all(expr is not u for u in used):
            used.append(expr)
            for a in expr.args:
                reach(a)

    reach(root)
    if len(used) != len(nodes):  # a node the root does not read (its value would be lost)
        return None
    return tree(root), root, nodes
