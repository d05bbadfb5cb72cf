"""A float pointwise product writes straight into the zero-padded image the next 3 x 3
convolution reads (ResNet's bottleneck: 1 x 1 conv, bias, relu -> FPAD -> implicit 3 x 3):

    FDENSE (x -> t) ; FPAD (t -> padded)   =>   FDENSE (x -> padded's interior, its border zeroed)

The FPAD copy (one thread, memory-bound: 0.6 ms of ResNet-50 v2's 48 at one thread, session
19) goes; the product's stores land ``out_pad`` = [padded width, top, left, image width] into
the padded buffer (emit/float/gemm.py ``dense_rows``), and the kernel zeroes the border before
its rows (``zero_border``: the arena reuses the bytes, so every run). Same values stored, so
the bits are the copy's.
"""

from __future__ import annotations

from partita.backends.llvm.kinds import Kind


def float_into_pads(plan) -> None:
    """Fold each FPAD whose input only it reads, written by a vector FDENSE over one image with
    no residual, a per-column (or no) bias and as many channels as the padded image."""
    readers, producer = plan.links()
    dropped = []
    for k in plan.kernels:
        if k.kind != Kind.FPAD or len(k.inputs) != 1:
            continue
        (x,) = k.inputs
        dense = producer.get(x)
        if dense is None or not _foldable(plan, dense, k, x, readers):
            continue
        _, h, w, _ = plan.buffers[x][0]
        _, _, wp, _ = plan.buffers[k.output][0]
        top, left = k.params["padding"][:2]
        dense.params["out_pad"] = [wp, top, left, w]
        dense.output = k.output
        dropped.append(k)
    plan.kernels[:] = [k for k in plan.kernels if all(k is not d for d in dropped)]


def _foldable(plan, dense, pad, x: int, readers: dict) -> bool:
    p = dense.params
    shape, dtype = plan.buffers[x]
    out_shape = plan.buffers[pad.output][0]
    return (dense.kind == Kind.FDENSE and p.get("vec") and x not in plan.outputs
            and readers.get(x) == 1 and dtype == "float32" and len(shape) == 4
            and shape[0] == 1 and out_shape[0] == 1 and out_shape[3] == shape[3] == p["N"]
            and p["M"] == shape[1] * shape[2] and not p.get("residual")
            and p.get("bias", "none") in ("none", "n") and "quant" not in p
            and "out_pad" not in p)
