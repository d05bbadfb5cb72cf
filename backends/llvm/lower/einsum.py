"""``einsum`` of float32 tensors (relay graphs): one EINSUM kernel of plain loops.

The equation is resolved at compile time as numpy reads it (implicit output, ``...`` broadcast
over the operands' unnamed leading axes, size-1 axes broadcast against a label's size): every
label gets a size, each operand a stride per label (0 where it broadcasts; a label repeated in
one operand, a diagonal, adds its strides). The kernel loops over the output labels, then the
summed ones, and adds the products of the operands' elements in float64, rounded once to
float32; numpy sums in float32 in its own order, so results agree within float32 rounding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.errors import LLVMError
from partita.backends.llvm.kinds import Kind

from .registry import OP, lowers

if TYPE_CHECKING:
    from .context import LowerContext

FRESH = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"  # labels for the ``...`` axes (subscripts are letters)


def einsum_plan(equation: str, shapes: list[tuple]) -> dict:
    """Sizes, output labels, summed labels and per-operand strides for ``equation``."""
    lhs, arrow, out = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    used = set(equation)
    fresh = [c for c in FRESH if c not in used]
    dots = max((len(s) - len(t.replace("...", "")) for t, s in zip(terms, shapes)
                if "..." in t), default=0)
    ell = "".join(fresh[:dots])
    expanded = []
    for t, s in zip(terms, shapes):
        if "..." in t:
            n = len(s) - len(t.replace("...", ""))
            t = t.replace("...", ell[dots - n :] if n else "")
        expanded.append(t)
    sizes: dict[str, int] = {}
    for t, s in zip(expanded, shapes):
        for label, d in zip(t, s):
            sizes[label] = max(sizes.get(label, 1), int(d))
    if arrow:
        out = out.replace("...", ell)
    else:
        counts: dict[str, int] = {}
        for t in expanded:
            for label in t:
                counts[label] = counts.get(label, 0) + 1
        named = "".join(sorted(k for k, c in counts.items() if c == 1 and k not in ell))
        out = ell + named
    summed = [label for label in sizes if label not in out]
    strides = []
    for t, s in zip(expanded, shapes):
        row = np.cumprod((1, *[int(d) for d in s[::-1]]))[::-1][1:]  # row-major element strides
        per: dict[str, int] = {}
        for label, d, st in zip(t, s, row):
            per[label] = per.get(label, 0) + (0 if int(d) == 1 and sizes[label] > 1 else int(st))
        strides.append(per)
    return {"sizes": sizes, "out": list(out), "summed": summed,
            "strides": [[per.get(label, 0) for label in [*out, *summed]] for per in strides]}


@lowers("einsum", priority=OP)
def lower_einsum(low: LowerContext, call) -> bool:
    """The EINSUM kernel for ``call`` (its data a Tuple of float32 tensors); float16 refused."""
    data = call.args[0]
    fields = getattr(data, "fields", None)
    if fields is None:
        return False
    if call.checked_type.dtype != "float32":
        raise LLVMError(f"llvm: einsum of {call.checked_type.dtype}: only float32 "
                        "(build with the 'ref' host for it)")
    shapes = [tuple(int(d) for d in f.checked_type.shape) for f in fields]
    plan = einsum_plan(call.attrs.equation, shapes)
    labels = [*plan["out"], *plan["summed"]]
    params = {"loops": [plan["sizes"][label] for label in labels], "n_out": len(plan["out"]),
              "strides": plan["strides"]}
    low.emit(Kind.EINSUM, call, [low.src(f) for f in fields], params)
    return True
