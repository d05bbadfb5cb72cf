"""The integer LSTM's recurrence on the NPU (TFLite's UNIDIRECTIONAL_SEQUENCE_LSTM, 8x8->16).

The frontend unrolls the LSTM into plain integer ops (frontends/tflite/ops_lstm.py): one fully
connected layer for the input side of every gate and step, then per step the recurrent fully
connected layer, a saturating add per gate, gemmlowp's int16 sigmoid/tanh as tables, the cell
update and the hidden state. These rows recognise each step's chains and run them the way Vela
5.2 lowers the LSTM (ethosu/vela/lstm.py: per step FCs to 16-bit, an ADD with the gate's
activation, two MULs and an ADD for the cell, a TANH and a MUL for the hidden state):

    npu.lstm_dense     qnn.dense -> qnn.requantize to int32 (the recurrent FC: int8 x int8, the
                       gates' scales; kept in 32 bits where Vela writes 16, so the saturating add
                       below is TFLite's bit for bit)
    npu.lstm_add       cast -> clip(add(a, b)) (a gate's pre-activation; the new cell state)
    npu.lstm_table     take(65536-entry table, int16 + 32768) (gemmlowp's int16 sigmoid/tanh:
                       a 16-bit LUT operation)
    npu.lstm_mul       RoundingDivideByPOT(a * b, n) [-> clip -> cast] (the cell's two MULs)
    npu.lstm_mul_requantize  qnn.requantize(a * b) (the hidden state: a MUL to int8)
    npu.slice16        strided_slice of int16 data, unit strides (the step's and gate's slices:
                       Vela reads them at an offset)

Each composite becomes one operation of the NPU program: FC on the MAC array, LUT, or a UNIT
operation running one op of partita/ops/qnn_lstm.py, which computes the same plain ops as the
frontend's chain, so the NPU's bits are the interpreter's (and TFLite's).
"""

from __future__ import annotations

import numpy as np
from partita.backends.registry import BackendError
from partita.backends.verdict import Verdict, all_of, constraint
from partita.patterns import constants, is_constant, is_op, wildcard

from partita.ir import Call, Constant

from . import constraints as C

INT16 = (-32768, 32767)
INT32 = (-(2**31), 2**31 - 1)
RANGES = {"int8": (-128, 127), "int16": INT16, "int32": INT32}
TABLE_SIZE = 65536
SHIFT_RANGE = (1, 31)


def _widened(p):
    """``p`` or a cast of it (the frontend's int16 -> int32 widenings before an int32 op)."""
    return is_op("cast")(p) | p


def _saturated(p):
    return is_op("cast")(is_op("clip")(p))


def dense_pattern():
    fc = is_op("qnn.dense")(wildcard(), is_constant(), *constants(4))
    return is_op("qnn.requantize")(fc, *constants(4))


def add_pattern():
    return _saturated(is_op("add")(_widened(wildcard()), _widened(wildcard())))


def table_pattern():
    index = is_op("add")(is_op("cast")(wildcard()), is_constant())
    return is_op("take")(is_constant(), index)


def mul_pattern():
    m = is_op("multiply")(_widened(wildcard()), _widened(wildcard()))
    offset = is_op("where")(is_op("less")(m, is_constant()), is_constant(), is_constant())
    r = is_op("divide")(is_op("add")(m, offset), is_constant())
    return _saturated(r) | r


def mul_requantize_pattern():
    m = is_op("multiply")(_widened(wildcard()), _widened(wildcard()))
    return is_op("qnn.requantize")(m, *constants(4))


def _name(expr) -> str:
    return getattr(getattr(expr, "op", None), "name", "") if isinstance(expr, Call) else ""


def _value(expr) -> np.ndarray | None:
    return np.asarray(expr.data) if isinstance(expr, Constant) else None


def _core(root) -> Call:
    """The op under a [clip -> cast] tail (the chain's own op: add, divide)."""
    if _name(root) == "cast" and _name(root.args[0]) == "clip":
        return root.args[0].args[0]
    return root


def _widening_ok(call: Call) -> bool:
    """The operands' casts widen losslessly to int32 (int8/int16 -> int32)."""
    for a in call.args[:2]:
        if _name(a) == "cast":
            if a.args[0].checked_type.dtype not in ("int8", "int16", "int32"):
                return False
            if a.checked_type.dtype != "int32":
                return False
    return True


def _clamp(root) -> tuple[int, int, str]:
    """(lo, hi, out dtype) of a [clip -> cast] tail (the whole int32 range without one)."""
    if _name(root) == "cast" and _name(root.args[0]) == "clip":
        clip = root.args[0]
        return int(np.ceil(clip.attrs.a_min)), int(np.floor(clip.attrs.a_max)), root.attrs.dtype
    return (*INT32, root.checked_type.dtype)


def _saturation_ok(root) -> tuple[bool, str]:
    lo, hi, dtype = _clamp(root)
    if dtype not in RANGES:
        return False, f"output {dtype}"
    tlo, thi = RANGES[dtype]
    return tlo <= lo <= hi <= thi, f"clamp [{lo}, {hi}] to {dtype}"


def _product(root) -> Call:
    """The multiply of a lstm_mul chain (divide(add(m, where(less(m, 0), ..)), 2**n))."""
    return _core(root).args[0].args[0]


@constraint(
    "The LSTM's recurrent fully connected layer must multiply int8 data by constant int8 "
    "weights into an int32 output with TFLite's rounding"
)
def lstm_dense(root) -> Verdict:
    dense = C.down(root, "qnn.dense")
    a, w = dense.args[0].checked_type.dtype, dense.args[1].checked_type.dtype
    out = root.checked_type.dtype
    ok = a == "int8" and w == "int8" and out == "int32" and root.attrs.semantics == "tflite"
    return Verdict(ok, f"got {a} x {w} -> {out}, {root.attrs.semantics} rounding")


@constraint(
    "LSTM adds must add int8/int16/int32 operands in int32 and saturate to int8, int16 or int32"
)
def lstm_add(root) -> Verdict:
    add = _core(root)
    ok, what = _saturation_ok(root)
    ok = ok and add.checked_type.dtype == "int32" and _widening_ok(add)
    return Verdict(ok, f"got an {add.checked_type.dtype} add, {what}")


@constraint(
    "16-bit LSTM tables must map int16 to int16 through a {}-entry table indexed at +32768",
    TABLE_SIZE,
)
def lstm_table(root) -> Verdict:
    table, index = root.args[0], root.args[1]
    x = index.args[0].args[0].checked_type.dtype
    offset = _value(index.args[1])
    t = _value(table)
    ok = (
        x == "int16"
        and index.checked_type.dtype == "int32"  # the index widened before the +32768
        and t is not None
        and t.dtype == np.int16
        and t.shape == (TABLE_SIZE,)
        and offset is not None
        and offset.size == 1
        and int(offset.reshape(())) == 32768
        and root.attrs.axis == 0
    )
    got = f"{x} input, table {None if t is None else (t.dtype.name, t.shape)}"
    return Verdict(ok, f"got {got}, offset {None if offset is None else offset.ravel()[:1]}")


def _shift_of(root) -> int | None:
    """n of the RoundingDivideByPOT(x, n) in the chain (its divisor 2**n and +-2**(n-1) halves),
    or None when the constants are not those."""
    divide = _core(root)
    where = divide.args[0].args[1]
    less = where.args[0]
    d = _value(divide.args[1])
    neg, pos, zero = _value(where.args[1]), _value(where.args[2]), _value(less.args[1])
    if any(v is None or v.size != 1 for v in (d, neg, pos, zero)):
        return None
    d = int(d.reshape(()))
    if d <= 1 or d & (d - 1):
        return None
    n = d.bit_length() - 1
    half = 1 << (n - 1)
    ok = int(neg.reshape(())) == -half and int(pos.reshape(())) == half and not zero.any()
    return n if ok else None


@constraint(
    "LSTM multiplies must multiply int8/int16 operands into int32 and round by a power of two "
    "2**n, n in [{}, {}] (the cell's MULs), saturating to int8/int16/int32",
    *SHIFT_RANGE,
)
def lstm_mul(root) -> Verdict:
    m = _product(root)
    dtypes = sorted(_operand_dtypes(m))
    ok_sat, what = _saturation_ok(root)
    shift = _shift_of(root)
    ok = (
        ok_sat
        and shift is not None
        and SHIFT_RANGE[0] <= shift <= SHIFT_RANGE[1]
        and m.checked_type.dtype == "int32"
        and _operand_dtypes(m) <= {"int8", "int16"}
        and _widening_ok(m)
    )
    return Verdict(ok, f"got {dtypes} operands, shift {shift}, {what}")


def _operand_dtypes(m: Call) -> set:
    """The multiply's operand types before the frontend's widening casts."""
    out = set()
    for a in m.args:
        if _name(a) == "cast":
            a = a.args[0]
        out.add(a.checked_type.dtype)
    return out


@constraint(
    "LSTM output multiplies must multiply int8/int16 operands into int32 and requantize the "
    "product per tensor to int8/int16 with TFLite's rounding"
)
def lstm_mul_requantize(root) -> Verdict:
    m = root.args[0]
    src = _operand_dtypes(m)
    out = root.checked_type.dtype
    scalar = all(_value(a) is not None and _value(a).size == 1 for a in root.args[1:])
    ok = (
        src <= {"int8", "int16"}
        and m.checked_type.dtype == "int32"  # an int16 product would wrap at 16 bits
        and out in ("int8", "int16")
        and scalar
        and root.attrs.semantics == "tflite"
        and _widening_ok(m)
    )
    got = f"got {sorted(src)} -> {m.checked_type.dtype} product -> {out}"
    return Verdict(ok, got + ("" if scalar else ", per channel"))


@constraint("16-bit slices must have unit strides")
def slice16(root) -> Verdict:
    strides = tuple(root.attrs.strides or ())
    dtype = root.checked_type.dtype
    ok = dtype == "int16" and all(s == 1 for s in strides)
    return Verdict(ok, f"got strides {strides}, {dtype}")


def rows():
    """(name, pattern, check) rows, appended to patterns._rows()."""
    return [
        ("lstm_dense", dense_pattern(), all_of(C.fc_depth, C.exact_sum, lstm_dense)),
        ("lstm_add", add_pattern(), lstm_add),
        ("lstm_table", table_pattern(), lstm_table),
        ("lstm_mul", mul_pattern(), lstm_mul),
        ("lstm_mul_requantize", mul_requantize_pattern(), lstm_mul_requantize),
        ("slice16", is_op("strided_slice")(wildcard()), slice16),
    ]


CONSTRAINTS = (lstm_dense, lstm_add, lstm_table, lstm_mul, lstm_mul_requantize, slice16)


# ---- lowering (compiler._lower) ----------------------------------------------------------------


def _through_cast(expr):
    if _name(expr) == "cast":
        return expr.args[0]
    return expr


def _refs(fn, call: Call) -> list[str]:
    """The composite parameters ``call``'s two operands read (through a widening cast)."""
    position = {id(p): i for i, p in enumerate(fn.params)}
    out = []
    for a in call.args[:2]:
        a = _through_cast(a)
        if id(a) not in position:
            raise BackendError(f"npu: {call.op.name} reads {a.short()}, not a partition input")
        out.append(f"t{position[id(a)]}")
    return out


def _unit(op: str, operands: list, attrs: dict, lo: int, hi: int, out_dtype: str, arrays=None):
    params = {
        "op": op,
        "attrs": attrs,
        "operands": operands,
        "act_min": lo,
        "act_max": hi,
        "out_dtype": out_dtype,
    }
    return "UNIT", params, dict(arrays or {})


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def lower(fn, out_dtype: str):
    """The composite ``fn`` (named npu.lstm_*; npu.lstm_dense is compiler._fc's) as one NPU
    operation."""
    name = str(fn.attrs.get("Composite", ""))
    root = fn.body
    if name == "npu.lstm_table":  # take(T, int16 + 32768) over every int16 input is T itself
        table = np.asarray(root.args[0].data).astype(out_dtype)
        return (
            "LUT",
            {"op": "lstm_table", "in_dtype": "int16", "out_dtype": out_dtype},
            {"table": table},
        )
    if name == "npu.lstm_add":
        lo, hi, dtype = _clamp(root)
        return _unit("lstm_add_sat", _refs(fn, _core(root)), {}, lo, hi, dtype)
    if name == "npu.lstm_mul":
        lo, hi, dtype = _clamp(root)
        shift = _shift_of(root)
        m = _product(root)
        return _unit("lstm_mul_shift", _refs(fn, m), {"shift": shift}, lo, hi, dtype)
    if name == "npu.lstm_mul_requantize":
        m = root.args[0]
        arrays = {f"c{i}": np.asarray(a.data) for i, a in enumerate(root.args[1:])}
        attrs = {k: _plain(getattr(root.attrs, k)) for k in ("axis", "out_dtype", "semantics")}
        lo, hi = RANGES[out_dtype]
        operands = _refs(fn, m) + list(arrays)
        return _unit("lstm_mul_requantize", operands, attrs, lo, hi, out_dtype, arrays)
    raise BackendError(f"npu: cannot compile composite {name!r}")
