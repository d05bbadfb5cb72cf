"""UNIDIRECTIONAL_SEQUENCE_LSTM: TFLite's integer LSTM (lstm_eval's 8x8->16 path), unrolled over
its time steps into existing integer ops, bit for bit with TFLite's reference kernel.

What the converter makes of a Keras LSTM under full-integer quantization: int8 input and hidden
state, int8 weights (per tensor), int32 gate biases, an int16 cell state whose scale is a power
of two 2**cell_scale, gates in Q3.12 (the four gate intermediates unquantized: scale 2**-12) and
the hidden state quantized by the fifth intermediate. Per time step and gate g in (input, forget,
cell, output), TFLite computes

    g = sat16(sat16(MBQM(bias_g + sum (x - zp_x) * Wx_g, ex_g)) + MBQM(sum (h - zp_h) * Wh_g, eh_g))

with MBQM = MultiplyByQuantizedMultiplier of the effective scales ex_g = s_wx_g * s_x / s_gate
and eh_g = s_wh_g * s_h / s_gate (float32 arithmetic, then QuantizeMultiplier); then
i, f, o = sigmoid(Q3.12), c~ = tanh(Q3.12) (gemmlowp's int16 fixed-point functions),
c = clip(sat16(rdpot(f * c, 15) + rdpot(i * c~, 30 + cell_scale)), +-cell_clip) and
h = sat8(MBQM(o * tanh_Q(15 + cell_scale)(c), 2**-30 / s_hidden) + zp_hidden), which is also the
step's output. rdpot is gemmlowp's RoundingDivideByPOT.

The decomposition: one qnn.dense over all time steps for the input side (the four gates stacked,
each padded with zero rows to a multiple of 8 channels so that its int16 slice starts on a
16-byte boundary, per-gate scales as a per-channel qnn.requantize to int16), then per step a
qnn.dense of the hidden state, an int32 requantize, a saturating add, the activations as int16
lookup tables (`take` of gemmlowp16.table), the cell update in int32 arithmetic (rounding
divisions by powers of two), and a qnn.requantize of o * tanh(c) to the int8 hidden state. Every
op here runs on the interpreter and the llvm host; the NPU's pattern table
(backends/npu/lstm_ops.py) takes every one of these chains, so with an NPU the whole LSTM runs
there.

The state starts at zero (the hidden state at its zero point) on every run: TFLite's first
invoke, or any invoke after ``reset_all_variables()`` (TFLite keeps the variable state tensors
between invokes; partita's compiled functions are pure). Refused with the reason: float and
hybrid LSTMs, 16-bit activations, CIFG (no input gate), peephole, projection, layer norm,
activations other than TANH.
"""

from __future__ import annotations

import math

import numpy as np

from partita.ir import Expr
from partita.ops.emulation import gemmlowp16

from .context import OpContext, Unsupported

_GATES = ("input", "forget", "cell", "output")
_GATE_SCALE = np.float32(2.0**-12)  # an unquantized gate intermediate (lstm.cc's default)
GATE_ALIGN = 8  # int16 values per 16 bytes: each gate's slice of the gates' maps starts there


def _i32(ctx: OpContext, v) -> Expr:
    return ctx.const(np.asarray(v, np.int32))


def _sat16(ctx: OpContext, x: Expr) -> Expr:
    return ctx.call("cast", ctx.call("clip", x, a_min=-32768, a_max=32767), dtype="int16")


def _as32(ctx: OpContext, x: Expr) -> Expr:
    return ctx.call("cast", x, dtype="int32")


def _rounding_shift(ctx: OpContext, x: Expr, shift: int) -> Expr:
    """gemmlowp RoundingDivideByPOT(x, shift) of int32 x, ties away from zero: the C (truncating)
    division of x + sign(x) * 2**(shift-1) by 2**shift."""
    if shift == 0:
        return x
    half = 1 << (shift - 1)
    offset = ctx.call("where", ctx.call("less", x, _i32(ctx, 0)), _i32(ctx, -half), _i32(ctx, half))
    return ctx.call("divide", ctx.call("add", x, offset), _i32(ctx, 1 << shift))


def _table(ctx: OpContext, x16: Expr, fn: str, ibits: int) -> Expr:
    """gemmlowp's int16 ``fn`` of a Q``ibits`` int16 tensor, as a 65536-entry table lookup."""
    table = ctx.const(gemmlowp16.table(fn, ibits))
    index = ctx.call("add", _as32(ctx, x16), _i32(ctx, 32768))
    return ctx.call("take", table, index, axis=0, mode="fast")


def _check(ctx: OpContext):
    """The integer LSTM's tensors and parameters; Unsupported for every other variant."""
    if not ctx.quantized():
        raise Unsupported("a float (or hybrid) LSTM: only TFLite's integer LSTM is imported")
    x = ctx.tensor(0)
    if x.dtype != "int8":
        raise Unsupported(
            f"an LSTM with {x.dtype} input: only the 8x8->16 integer LSTM (int8 input and "
            f"hidden state, int16 cell state) is imported"
        )
    if not ctx.has_input(1) or not ctx.has_input(5):
        raise Unsupported("a CIFG LSTM (no input gate)")
    if any(ctx.has_input(i) for i in (9, 10, 11)):
        raise Unsupported("a peephole LSTM (cell-to-gate weights)")
    if ctx.has_input(16) or ctx.has_input(17):
        raise Unsupported("an LSTM with a projection")
    if any(ctx.has_input(i) for i in range(20, 24)):
        raise Unsupported("a layer-norm LSTM")
    act = ctx.options.get("FusedActivationFunction", 4)
    if act != 4:
        raise Unsupported(f"an LSTM with activation {act} (TFLite's integer LSTM uses TANH)")
    if ctx.options.get("ProjClip", 0.0):
        raise Unsupported("an LSTM with a projection clip")
    for i in list(range(1, 9)):
        w = ctx.tensor(i)
        if w.dtype != "int8" or not w.quantized or w.per_channel or w.data is None:
            raise Unsupported(
                f"{w.describe()}: the integer LSTM's weights must be constant per-tensor int8"
            )
    for i in range(12, 16):
        b = ctx.tensor(i)
        if b.dtype != "int32" or b.data is None:
            raise Unsupported(f"{b.describe()}: the integer LSTM's biases must be constant int32")
    h, c = ctx.tensor(18), ctx.tensor(19)
    if h.dtype != "int8" or not h.quantized:
        raise Unsupported(f"{h.describe()}: the hidden state must be quantized int8")
    if c.dtype != "int16" or not c.quantized:
        raise Unsupported(f"{c.describe()}: the cell state must be quantized int16")
    if h.data is not None or c.data is not None:
        raise Unsupported("an LSTM whose state tensors hold data (they must be variables)")
    cell_log2 = math.log2(float(c.scale[0]))
    if cell_log2 != round(cell_log2):
        ctx.fail(f"{c.describe()} has scale {float(c.scale[0])}; TFLite requires a power of two")
    cell_scale = int(round(cell_log2))
    if not 0 <= 15 + cell_scale <= 6:
        raise Unsupported(f"a cell state scale of 2**{cell_scale} (TFLite's tanh takes Q0-Q6)")
    inter = ctx.op.intermediates
    if len(inter) != 5 or inter[4] < 0:
        ctx.fail(f"has {len(inter)} intermediate tensors; the integer LSTM needs 5")
    tensors = ctx.graph.model.tensors
    gate_scales = []
    for k in range(4):
        t = tensors[inter[k]] if inter[k] >= 0 else None
        gate_scales.append(np.float32(t.scale[0]) if t is not None and t.quantized else _GATE_SCALE)
    hidden = tensors[inter[4]]
    if not hidden.quantized:
        ctx.fail(f"{hidden.describe()} (the hidden-state intermediate) has no quantization")
    return x, h, c, cell_scale, gate_scales, hidden


def _effective(w_scale, in_scale, gate_scale) -> np.float64:
    """lstm.cc's effective scale: weight scale * input scale / gate scale, in float32."""
    return np.float64(np.float32(np.float32(w_scale) * np.float32(in_scale)) / gate_scale)


def unidirectional_sequence_lstm(ctx: OpContext) -> Expr:
    x, h, c, cell_scale, gate_scales, hidden = _check(ctx)
    time_major = bool(ctx.options.get("TimeMajor", False))
    shape = ctx.shape(0)
    if len(shape) != 3:
        raise Unsupported(f"an LSTM input of rank {len(shape)} (3 is supported)")
    batch, steps, n_in = (shape[1], shape[0], shape[2]) if time_major else shape
    wx = [ctx.tensor(1 + g) for g in range(4)]
    wh = [ctx.tensor(5 + g) for g in range(4)]
    n_cell = wx[0].shape[0]
    n_out = wh[0].shape[1]
    if n_out != n_cell or any(w.shape != (n_cell, n_in) for w in wx):
        ctx.fail("the gate weights' shapes disagree with the input and the cell count")
    s_x, zp_x = float(x.scale[0]), int(x.zero_point[0])
    s_h, zp_h = float(h.scale[0]), int(h.zero_point[0])
    # each gate's rows padded with zero weights to a multiple of GATE_ALIGN, so that every
    # gate's int16 slice starts on a 16-byte boundary (an NPU reads it at that offset; the
    # padded outputs are 0 and never read)
    stride = -(-n_cell // GATE_ALIGN) * GATE_ALIGN
    pad = stride - n_cell
    ex = np.concatenate(
        [np.full(stride, _effective(w.scale[0], s_x, gs)) for w, gs in zip(wx, gate_scales)]
    )
    eh = np.concatenate(
        [np.full(stride, _effective(w.scale[0], s_h, gs)) for w, gs in zip(wh, gate_scales)]
    )
    wx_all = np.concatenate([np.pad(w.data, ((0, pad), (0, 0))) for w in wx]).astype(np.int8)
    wh_all = np.concatenate([np.pad(w.data, ((0, pad), (0, 0))) for w in wh]).astype(np.int8)
    bias = np.concatenate([np.pad(ctx.tensor(12 + g).data, (0, pad)) for g in range(4)]).astype(
        np.int32
    )
    one = ctx.const(np.float32(1.0))
    zero = _i32(ctx, 0)

    def dense(v: Expr, w: np.ndarray, zp: int, s: float) -> Expr:
        return ctx.call(
            "qnn.dense", v, ctx.const(w), _i32(ctx, zp), zero,
            ctx.const(np.float32(s)), one, units=int(w.shape[0]), out_dtype="int32",
        )  # fmt: skip

    def requant(v: Expr, scales: np.ndarray, dtype: str, zp_out: int = 0) -> Expr:
        scale = ctx.const(scales, "float64") if scales.ndim else ctx.const(scales, "float64")
        return ctx.call(
            "qnn.requantize", v, scale, zero, one, _i32(ctx, zp_out),
            axis=-1, out_dtype=dtype, semantics="tflite",
        )  # fmt: skip

    data = ctx.expr(0)
    if time_major:
        data = ctx.call("transpose", data, axes=(1, 0, 2))
    flat = ctx.call("reshape", data, newshape=(batch * steps, n_in))
    acc = ctx.call("nn.bias_add", dense(flat, wx_all, zp_x, s_x), ctx.const(bias), axis=1)
    gx = ctx.call("reshape", requant(acc, ex, "int16"), newshape=(batch, steps * 4 * stride))
    hidden_scale = np.float64(
        np.float32(np.float32(2.0**-15) / np.float32(hidden.scale[0])) * np.float32(2.0**-15)
    )
    hidden_zp = int(hidden.zero_point[0])
    clip = float(ctx.options.get("CellClip", 0.0))
    q_clip = 0
    if clip > 0:
        q_clip = int(min(max(np.float32(clip) / np.float32(c.scale[0]), -32768.0), 32767.0))
    h_t: Expr | None = None
    c_t: Expr | None = None
    outs = []
    for t in range(steps):
        width = 4 * stride
        g = ctx.call("strided_slice", gx, begin=(0, t * width), end=(batch, (t + 1) * width))
        if h_t is not None:  # the zero state contributes exactly nothing at the first step
            gh = requant(dense(h_t, wh_all, zp_h, s_h), eh, "int32")
            g = _sat16(ctx, ctx.call("add", _as32(ctx, g), gh))

        def gate(k: int, g=g) -> Expr:
            return ctx.call(
                "strided_slice", g, begin=(0, k * stride), end=(batch, k * stride + n_cell)
            )

        i_g = _as32(ctx, _table(ctx, gate(0), "logistic", 3))
        f_g = _as32(ctx, _table(ctx, gate(1), "logistic", 3))
        c_g = _as32(ctx, _table(ctx, gate(2), "tanh", 3))
        o_g = _as32(ctx, _table(ctx, gate(3), "logistic", 3))
        new_c = _rounding_shift(ctx, ctx.call("multiply", i_g, c_g), 30 + cell_scale)
        if c_t is not None:
            kept = _rounding_shift(ctx, ctx.call("multiply", f_g, _as32(ctx, c_t)), 15)
            new_c = ctx.call("add", kept, new_c)
        lo, hi = (-q_clip, q_clip) if q_clip > 0 else (-32768, 32767)
        c_t = ctx.call("cast", ctx.call("clip", new_c, a_min=lo, a_max=hi), dtype="int16")
        tc = _as32(ctx, _table(ctx, c_t, "tanh", 15 + cell_scale))
        h_t = requant(ctx.call("multiply", o_g, tc), np.float64(hidden_scale), "int8", hidden_zp)
        outs.append(h_t)
    # the steps side by side, then one reshape: (batch, steps * cells) -> (batch, steps, cells)
    y = ctx.call("concatenate", ctx.tuple(outs), axis=1) if steps > 1 else outs[0]
    y = ctx.call("reshape", y, newshape=(batch, steps, n_cell))
    if time_major:
        y = ctx.call("transpose", y, axes=(1, 0, 2))
    return y


CONVERTERS = {
    "UNIDIRECTIONAL_SEQUENCE_LSTM": (
        unidirectional_sequence_lstm,
        "UnidirectionalSequenceLSTMOptions",
    ),
}
