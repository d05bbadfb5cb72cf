"""The building blocks of the QDQ -> QNN rules (frontends/qdq.py): the dequantize/quantize
patterns, parameter checks, constant quantization and the activation clip after a qnn op."""

from __future__ import annotations

import dataclasses

import numpy as np
from partita.patterns import is_constant, is_op, wildcard

from partita.ir import Call, Constant, Expr
from partita.ops import get_op

QTYPES = ("int8", "uint8")


def _dq(name: str):
    """qnn.dequantize(<name>, <name>_s, <name>_z), the call captured as <name>_dq."""
    return is_op("qnn.dequantize")(
        wildcard(name), is_constant().named(name + "_s"), is_constant().named(name + "_z")
    ).named(name + "_dq")


def _quantized(inner, semantics: str):
    return (
        is_op("qnn.quantize")(inner, is_constant().named("ys"), is_constant().named("yz"))
        .has_attr({"semantics": semantics})
        .named("q")
    )


def _call(name: str, args, span, **attrs) -> Call:
    return Call(get_op(name), args, attrs or None, span)


def _scalar(*consts) -> bool:
    return all(isinstance(c, Constant) and c.data.size == 1 for c in consts)


def _qtype(*exprs) -> bool:
    return all(e.checked_type.dtype in QTYPES for e in exprs)


def _s(c: Constant) -> Constant:
    """A per-tensor parameter as a scalar constant (shape () rather than (1,))."""
    return Constant(c.data.reshape(()), c.span) if c.data.shape != () else c


def _has_semantics(op_name: str, semantics: str) -> bool:
    f = {f.name: f for f in dataclasses.fields(get_op(op_name).attrs_type)}.get("semantics")
    return f is not None and semantics in f.metadata.get("choices", ())


def _attrs(call: Call, drop=("out_dtype", "accumulate", "threads")) -> dict:
    # accumulate / threads choose a float op's summation order; the integer op has none
    return {k: v for k, v in dataclasses.asdict(call.attrs).items() if k not in drop}


def quantize_value(value: float, scale: Constant, zp: Constant, dtype: str) -> int:
    """round_half_even(float32(value) / scale) + zp, saturated (QuantizeLinear of a scalar)."""
    v = float(np.rint(np.float32(value) / np.float32(scale.data.reshape(-1)[0])))
    info = np.iinfo(dtype)
    return int(np.clip(v + int(zp.data.reshape(-1)[0]), info.min, info.max))


def _activation(out: Expr, act, ys, yz, dtype: str, span) -> Expr | None:
    """A relu / clip that ran in float before the quantize, as a clip on the quantized output
    (exact: quantization is monotonic)."""
    if act is None:
        return out
    if act.op.name == "nn.relu":
        lo, hi = 0.0, np.inf
    else:
        lo, hi = act.attrs.a_min, act.attrs.a_max
    info = np.iinfo(dtype)
    qlo = info.min if lo == -np.inf else quantize_value(lo, ys, yz, dtype)
    qhi = info.max if hi == np.inf else quantize_value(hi, ys, yz, dtype)
    if qlo <= info.min and qhi >= info.max:
        return out
    return _call("clip", [out], span, a_min=float(qlo), a_max=float(qhi))


def _act(p):
    return p.optional(lambda c: (is_op("nn.relu")(c) | is_op("clip")(c)).named("act"))


def _unary_ok(q, x, x_s, x_z, ys, yz) -> bool:
    return _scalar(x_s, x_z, ys, yz) and _qtype(x) and x.checked_type.dtype == q.attrs.out_dtype


def _params(x_s, x_z, ys, yz) -> list:
    return [_s(x_s), _s(x_z), _s(ys), _s(yz)]
