"""EWISE's innermost axis in vectors of ``LANES`` float32 elements (generic vector IR: 8 lanes
of float, one ymm on avx2, SSE pairs on -isa=plain; the param ``lanes`` 16 on the AVX-512
tiers, one zmm), for trees of float32 arithmetic and erf (BERT's GELU as torch exports it),
relu, maximum and minimum (ResNet's batch norm + relu), and casts of int32 to float32 (the
dequantization after a dynamic-int8 product). Each step is one float32 operation: the
scalar kernel computes it in double and rounds to float32, which for +, -, *, / of float32
operands is the same correctly rounded float32 result (double has more than 2 * 24 + 2 bits),
and relu, maximum and minimum pick one operand (NaNs as the scalar kernel's rules), so the bits
are the scalar kernel's. erf: math32.erf32, the reference's float32 algorithm. The remainder of
the axis runs the scalar body."""

from __future__ import annotations

from llvmlite import ir
from partita.backends.llvm.emit.base import F32, c64, for_range

from . import math32

LANES = 8
OPS = {"add", "subtract", "multiply", "divide", "negative", "copy", "erf", "nn.relu", "maximum",
       "minimum", "cast"}


def eligible(p: dict, out_dtype: str, restrict) -> bool:
    """Float32 steps of OPS only, on float32 leaves (int32 ones only as a cast's operand: the
    int32 to float32 conversion is one correct rounding, as the scalar kernel's exact double
    rounded to float32), innermost axis of stride 0 or 1 for every operand, at least LANES
    (``lanes``) long and not the thread split's axis."""
    shape = p["out_shape"]
    if not shape or shape[-1] < p.get("lanes", LANES) or out_dtype != "float32":
        return False
    if restrict is not None and restrict[0] == len(shape) - 1:
        return False
    if any(s[-1] not in (0, 1) for s in p["strides"]):
        return False

    def dtype_of(node) -> str:
        return p["dtypes"][node[1]] if node[0] == "leaf" else node[4]

    def ok(node, allowed=("float32",)) -> bool:
        if node[0] == "leaf":
            return dtype_of(node) in allowed
        _, op, kids, _extra, dtype = node
        if op not in OPS or dtype != "float32" or dtype_of(node) not in allowed:
            return False
        kid_types = ("float32", "int32") if op == "cast" else ("float32",)
        return all(ok(c, kid_types) for c in kids)

    return ok(p["tree"])


def ewise_rows(fam, k, b, ptrs, y, scalar_body, restrict) -> None:
    """The EWISE loops: outer axes as ``fam.nest`` runs them, the innermost in vectors of
    LANES (``lanes``) then ``scalar_body(index, offsets)`` on the remainder."""
    p = k.params
    shape, strides = p["out_shape"], p["strides"]
    n, lanes = shape[-1], p.get("lanes", LANES)
    vf32 = ir.VectorType(F32, lanes)
    full = n // lanes * lanes

    def row(index, offsets):
        row0 = b.mul(index, c64(n))
        with for_range(b, full // lanes, "v") as t:
            j0 = b.mul(t, c64(lanes))
            loaded: dict = {}

            def value(node):
                if node[0] == "leaf":
                    j = node[1]
                    if j not in loaded:
                        et = F32 if p["dtypes"][j] == "float32" else ir.IntType(32)
                        vt = ir.VectorType(et, lanes)
                        if strides[j][-1] == 1:
                            at = b.gep(ptrs[j], [b.add(offsets[j], j0)], source_etype=et)
                            v = b.load(at, typ=vt, align=4)
                        else:
                            s = fam.load_at(b, ptrs[j], offsets[j], et)
                            v = b.shuffle_vector(
                                b.insert_element(ir.Constant(vt, ir.Undefined), s,
                                                 ir.Constant(ir.IntType(32), 0)),
                                ir.Constant(vt, ir.Undefined),
                                ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes))
                        loaded[j] = v
                    return loaded[j]
                _, op, kids, _extra, _dtype = node
                return apply(b, op, [value(c) for c in kids], vf32)

            out = value(p["tree"])
            at = b.gep(y, [b.add(row0, j0)], source_etype=F32)
            b.store(out, at, align=4)
        if full < n:
            with for_range(b, n - full, "t") as r:
                j = b.add(r, c64(full))
                scalar_body(b.add(row0, j), [b.add(o, b.mul(j, c64(s[-1])))
                                             for o, s in zip(offsets, strides)])

    bases = [c64(v) for v in p.get("bases", [0] * len(strides))]
    outer = [s[:-1] for s in strides]
    fam.nest(b, shape[:-1], outer, row, offsets=bases, restrict=restrict)


def apply(b, op, xs, vf32):
    """One float32 step of OPS on vectors ``xs`` of type ``vf32``."""
    lanes = vf32.count
    if op == "erf":
        return math32.erf32(b, xs[0])
    if op == "negative":
        return b.fneg(xs[0])
    if op == "copy":
        return xs[0]
    if op == "cast":  # to float32: int32 lanes converted, float32 ones kept
        return xs[0] if xs[0].type == vf32 else b.sitofp(xs[0], vf32)
    if op == "nn.relu":  # numpy's maximum(x, 0), as the scalar kernel: nan stays
        zero = ir.Constant(vf32, [0.0] * lanes)
        keep = b.or_(b.fcmp_ordered(">", xs[0], zero), b.fcmp_unordered("uno", xs[0], xs[0]))
        return b.select(keep, xs[0], zero)
    if op in ("maximum", "minimum"):  # numpy's: x's nan propagates, then y's
        pick = b.fcmp_ordered(">" if op == "maximum" else "<", xs[0], xs[1])
        nan = b.fcmp_unordered("uno", xs[0], xs[0])
        return b.select(b.or_(pick, nan), xs[0], xs[1])
    return {"add": b.fadd, "subtract": b.fsub, "multiply": b.fmul, "divide": b.fdiv}[op](*xs)


def epilogue_value(b, tree, x):
    """A product's fused elementwise epilogue (lower/float_ops.py dense_epilogue's ``act``:
    nodes ["op", name, kids], leaves ["in"], the product's vector ``x``, and ["const", v], a
    float32 scalar) on the vector ``x``: the same float32 steps as the EWISE kernel it
    replaces (apply), so the same bits."""
    if tree[0] == "in":
        return x
    if tree[0] == "const":
        return ir.Constant(x.type, [float(tree[1])] * x.type.count)
    return apply(b, tree[1], [epilogue_value(b, kid, x) for kid in tree[2]], x.type)


__all__ = ["LANES", "OPS", "apply", "eligible", "epilogue_value", "ewise_rows"]
