"""The float elementwise step after a dynamic-int8 product (ORT's MatMulInteger -> Cast -> Mul
by the scales -> Add of the bias, a residual's Add with it) is computed by the product as it
stores its outputs:

    DYNQ_DENSE (x -> s, int32) ; EWISE f(s, ...) (-> y)   =>   DYNQ_DENSE (x -> y, epilogue f)

The EWISE's tree is evaluated per vector of the product's outputs with the same float32 steps
(emit/float/ewise_vec.py ``apply``: cast, multiply, add, erf, ... each one rounding), so the
bits are the two kernels'. The int32 buffer's round trip and a kernel go (BERT: six per layer);
and a transpose to attention heads after it (``_heads``: Q, K and V's) goes too, the product
storing each output where the transpose would have put it;
over two threads each thread finishes the columns it computed, where the separate EWISE split
by rows read half of them from the other core. The fused kernel runs where the EWISE ran (its
other operands, the scales, are computed after the product).

Its leaves: the product's int32 sums (``prod``), and buffers or constants read per column (a
bias, the scales: outer strides 0, ``col``), as one value (``scalar``) or in the product's own
layout (a residual: ``full``). Other broadcasts, a product over batches and a tree the vector
EWISE would not take keep the two kernels.
"""

from __future__ import annotations

import numpy as np
from partita.backends.llvm.emit.float import ewise_vec
from partita.backends.llvm.kinds import Kind


def dynq_epilogues(plan) -> None:
    """Fold each EWISE that is the only reader of a DYNQ_DENSE's output into the product."""
    readers, producer = plan.links()
    dropped = []
    for e in plan.kernels:
        if e.kind != Kind.EWISE:
            continue
        fold = _foldable(plan, e, producer, readers)
        if fold is None:
            continue
        dense, leaves, inputs = fold
        dense.params["epi"] = {"tree": e.params["tree"], "leaves": leaves}
        dense.arrays.update({f"epi_{name}": a for name, a in e.arrays.items()})
        dense.inputs = [*dense.inputs, *inputs]
        dense.output = e.output
        dropped.append(dense)
        # the fused kernel runs in the EWISE's place
        plan.kernels[plan.kernels.index(e)] = dense
    for d in dropped:  # its old place: the first occurrence (the EWISE's place is later)
        plan.kernels.pop(next(i for i, k in enumerate(plan.kernels) if k is d))
    _heads(plan)


# a transpose of [1, M, heads, H] a folded product writes itself: "heads" [1, heads, M, H]
# (BERT's Q and V), "heads_t" [1, heads, H, M] (K, transposed for Q K^T)
PERMS = {(0, 2, 1, 3): "heads", (0, 2, 3, 1): "heads_t"}


def _heads(plan) -> None:
    """Fold each TRANSPOSE of PERMS that alone reads a folded product's [1, M, heads, H]
    output (H a multiple of 16: a vector of columns stays in one head) into the product:
    params "out_perm" = [kind, H], its stores land in the transpose's layout."""
    readers, producer = plan.links()
    dropped = []
    for t in plan.kernels:
        kind = PERMS.get(tuple(t.params.get("perm", ()))) if t.kind == Kind.TRANSPOSE else None
        if kind is None or len(t.inputs) != 1:
            continue
        (x,) = t.inputs
        d = producer.get(x)
        if (d is None or d.kind != Kind.DYNQ_DENSE or "epi" not in d.params
                or "out_perm" in d.params):
            continue
        shape, dtype = plan.buffers[x]
        q = d.params
        if (readers.get(x) != 1 or x in plan.outputs or dtype != "float32" or len(shape) != 4
                or shape[0] != 1 or shape[1] != q["M"] or shape[2] * shape[3] != q["N"]
                or shape[3] % 16):
            continue
        q["out_perm"] = [kind, int(shape[3])]
        d.output = t.output
        dropped.append(t)
    plan.kernels[:] = [k for k in plan.kernels if all(k is not t for t in dropped)]


def _foldable(plan, e, producer, readers):
    """(the product, the epilogue's leaves, its extra input buffers) or None."""
    p = e.params
    if plan.buffers[e.output][1] != "float32" or not ewise_vec.eligible(p, "float32", None):
        return None
    if any(p.get("bases", [0])):
        return None
    shape = list(p["out_shape"])
    # strides along the axes longer than 1 (an axis of one element is read at 0 whatever its
    # stride says)
    real = [i for i, d in enumerate(shape) if d > 1]
    dense_strides = [int(np.prod(shape[i + 1:], dtype=np.int64)) for i in real]
    strides_of = [[int(st[i]) for i in real] for st in p["strides"]]
    prods = [j for j, (kind, w) in enumerate(p["sources"]) if kind == "buf"
             and getattr(producer.get(e.inputs[w]), "kind", None) == Kind.DYNQ_DENSE]
    if len(prods) != 1:
        return None
    j = prods[0]
    buf = e.inputs[p["sources"][j][1]]
    dense = producer[buf]
    q = dense.params
    if (readers.get(buf) != 1 or buf in plan.outputs or "epi" in q or q.get("batch", 1) != 1
            or not shape or shape[-1] != q["N"] or int(np.prod(shape)) != q["M"] * q["N"]
            or strides_of[j] != dense_strides or shape[-1] == 1
            or sum(1 for kind, w in p["sources"] if kind == "buf" and e.inputs[w] == buf) != 1):
        return None
    leaves, inputs = [], []
    for i, ((kind, w), strides) in enumerate(zip(p["sources"], strides_of)):
        if i == j:
            leaves.append(["prod", p["dtypes"][i], None])
            continue
        if all(s == 0 for s in strides):
            how = "scalar"
        elif all(s == 0 for s in strides[:-1]) and strides[-1] == 1:
            how = "col"
        elif strides == dense_strides:
            how = "full"
        else:
            return None
        if kind == "buf":
            if e.inputs[w] == buf:
                return None
            inputs.append(e.inputs[w])
            leaves.append([how, p["dtypes"][i], ["buf", len(inputs) - 1]])
        else:
            leaves.append([how, p["dtypes"][i], ["const", f"epi_{w}"]])
    return dense, leaves, inputs


__all__ = ["dynq_epilogues"]
