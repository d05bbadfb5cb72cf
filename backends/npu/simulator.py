"""Execute an NPU Program (decoded from its command stream) with integer numpy arithmetic.

The MAC array's operations are computed here: convolutions as one exact float64 GEMM over
im2col patches per stripe of output rows (every int8 x int8 sum of these sizes is exact below
2**53), depthwise convolutions tap by tap, then the output stage with the fixed-point multipliers
and shifts in the stream (TFLite's MultiplyByQuantizedMultiplier, or its double-rounding FC
variant), the output zero point and the activation clamp. LUT operations index their table. The
elementwise/pooling unit runs the QNN op's integer arithmetic from partita's op set (TFLite's
reference kernels) on the stream's parameters.
"""

from __future__ import annotations

import numpy as np

from partita.ops.fixedpoint import (
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_upward,
    scale_round_half_away_double,
    wrap_int32,
)

from .compiler import unit_attrs
from .program import NPUOp, Program


def run_program(program: Program, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Run ``program`` on its input feature maps; return its outputs."""
    values: dict[int, np.ndarray] = dict(zip(program.inputs, inputs))
    for op in program.ops:
        args = [values[t] for t in op.inputs]
        values[op.output] = KERNELS[op.kind](op, args)
    return [values[t] for t in program.outputs]


def output_stage(acc: np.ndarray, op: NPUOp) -> np.ndarray:
    """int32 accumulators (+ bias) -> requantized, offset, clamped out_dtype values."""
    p, a = op.params, op.arrays
    acc = acc.astype(np.int64).astype(np.int32)  # the accumulator register wraps at 32 bits
    if "bias" in a:
        acc = acc + a["bias"]  # int32 + int32 wraps like the hardware adder
    x = acc.astype(np.int64) - a["rq_zp"].astype(np.int64)
    if p["rounding"] == "tflite_double":
        y = scale_round_half_away_double(x, a["scale"])
    elif p["rounding"] == "tflite_builtin":
        y = multiply_by_quantized_multiplier_upward(wrap_int32(x), a["multiplier"], a["shift"])
    else:
        y = multiply_by_quantized_multiplier(x, a["multiplier"], a["shift"])
    y = y + a["out_zp"].astype(np.int64)
    return np.clip(y, p["act_min"], p["act_max"]).astype(p["out_dtype"])


def _padded(x: np.ndarray, op: NPUOp) -> np.ndarray:
    """Input minus its zero point (float64), with the explicit pad and the conv's own padding."""
    p = op.params
    t, left, b, r = p["explicit_pad"]
    if t or left or b or r:
        x = np.pad(x, ((0, 0), (t, b), (left, r), (0, 0)), constant_values=p["pad_value"])
    xo = x.astype(np.float64) - p["in_zp"]
    t, left, b, r = p["padding"]
    if t or left or b or r:
        xo = np.pad(xo, ((0, 0), (t, b), (left, r), (0, 0)))
    return xo


def _geometry(xo: np.ndarray, kh: int, kw: int, op: NPUOp):
    (sh, sw), (dh, dw) = op.params["strides"], op.params["dilation"]
    oh = (xo.shape[1] - (kh - 1) * dh - 1) // sh + 1
    ow = (xo.shape[2] - (kw - 1) * dw - 1) // sw + 1
    return sh, sw, dh, dw, oh, ow


def _stripes(oh: int, count: int):
    step = -(-oh // max(1, count))
    return [(r, min(oh, r + step)) for r in range(0, oh, step)]


def conv(op: NPUOp, args) -> np.ndarray:
    xo = _padded(args[0], op)
    w = op.arrays["weights"]
    o, kh, kw, c = w.shape
    sh, sw, dh, dw, oh, ow = _geometry(xo, kh, kw, op)
    wm = (w.astype(np.float64) - op.arrays["w_zp"].reshape(-1, 1, 1, 1)).reshape(o, -1)
    out = np.empty((1, oh, ow, o), np.float64)
    for r0, r1 in _stripes(oh, op.stripes):  # each stripe reads its rows plus the halo
        taps = [
            xo[
                :,
                r0 * sh + i * dh : (r1 - 1) * sh + i * dh + 1 : sh,
                j * dw : j * dw + (ow - 1) * sw + 1 : sw,
                :,
            ]
            for i in range(kh)
            for j in range(kw)
        ]
        patches = np.concatenate(taps, axis=-1).reshape(-1, kh * kw * c)
        out[:, r0:r1] = (patches @ wm.T).reshape(1, r1 - r0, ow, o)
    return output_stage(np.rint(out).astype(np.int64), op)


def dwconv(op: NPUOp, args) -> np.ndarray:
    xo = _padded(args[0], op)
    w = op.arrays["weights"]
    c, kh, kw = w.shape
    sh, sw, dh, dw, oh, ow = _geometry(xo, kh, kw, op)
    wm = w.astype(np.int64) - op.arrays["w_zp"].reshape(-1, 1, 1).astype(np.int64)
    xi = xo.astype(np.int64)
    acc = np.zeros((1, oh, ow, c), np.int64)
    for r0, r1 in _stripes(oh, op.stripes):
        for i in range(kh):
            for j in range(kw):
                acc[:, r0:r1] += (
                    xi[
                        :,
                        r0 * sh + i * dh : (r1 - 1) * sh + i * dh + 1 : sh,
                        j * dw : j * dw + (ow - 1) * sw + 1 : sw,
                        :,
                    ]
                    * wm[:, i, j]
                )
    return output_stage(acc, op)


def fc(op: NPUOp, args) -> np.ndarray:
    x = args[0].astype(np.float64) - op.params["in_zp"]
    w = op.arrays["weights"].astype(np.float64) - op.arrays["w_zp"].reshape(-1, 1)
    return output_stage(np.rint(x @ w.T).astype(np.int64), op)


def lut(op: NPUOp, args) -> np.ndarray:
    x = args[0]
    offset = 128 if x.dtype == np.int8 else 0
    return op.arrays["table"][x.astype(np.int16) + offset]


def unit(op: NPUOp, args) -> np.ndarray:
    qnn_op, attrs = unit_attrs(op.params)
    operands = []
    for ref in op.params["operands"]:
        if isinstance(ref, list):
            operands.append(tuple(args[int(r[1:])] for r in ref))
        elif ref.startswith("t"):
            operands.append(args[int(ref[1:])])
        else:
            operands.append(op.arrays[ref])
    out = np.asarray(qnn_op.impl(*operands, attrs))
    p = op.params
    return np.clip(out, p["act_min"], p["act_max"]).astype(p["out_dtype"])


KERNELS = {"CONV": conv, "DWCONV": dwconv, "FC": fc, "LUT": lut, "UNIT": unit}
