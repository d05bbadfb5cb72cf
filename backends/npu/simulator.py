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

import math

import numpy as np

from partita.ops.emulation.tflite_fixedpoint import (
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_int64,
    multiply_by_quantized_multiplier_upward,
    scale_round_half_away_double,
    wrap_int32,
)
from partita.ops.qnn import round_half_even_to_int

from .compiler import unit_attrs
from .program import NPUOp, Program


def run_program(program: Program, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Run ``program`` on its input feature maps; return its outputs."""
    values: dict[int, np.ndarray] = dict(zip(program.inputs, inputs))
    for op in program.ops:
        values[op.output] = KERNELS[op.kind](op, op_inputs(op, values))
    return [values[t] for t in program.outputs]


def op_inputs(op: NPUOp, values) -> list[np.ndarray]:
    """The maps ``op`` reads: each input, or the box of it a view names (a slice read at an
    offset: compiler.read_slices_at_offsets)."""
    views = op.params.get("views") or [None] * len(op.inputs)
    return [
        values[t] if v is None else values[t][tuple(slice(b, e) for b, e in zip(*v))]
        for t, v in zip(op.inputs, views)
    ]


def output_stage(acc: np.ndarray, op: NPUOp, bound: float = 2.0**62) -> np.ndarray:
    """int64 accumulators (+ bias) -> requantized, offset, clamped out_dtype values.

    ``bound`` is a static bound on |acc|; below 2**31 the int32 wrap-arounds cannot trigger and
    are skipped (the arithmetic is otherwise TFLite's, step for step)."""
    p, a = op.params, op.arrays
    bias, rq_zp, exact, top = _stage_constants(op, bound)
    acc64 = p.get("acc_dtype") == "int64"  # 16x8: an int64 accumulator, never wrapped
    exact = exact or acc64
    if not exact:  # the accumulator register and the bias adder wrap at 32 bits
        acc = wrap_int32(acc)
    if bias is not None:
        acc += bias
        if not exact:
            acc = wrap_int32(acc)
    if rq_zp is not None:
        acc -= rq_zp
    if p["rounding"] == "tflite_double":
        y = scale_round_half_away_double(acc, a["scale"])
    elif p["rounding"] == "onnx":
        y = round_half_even_to_int(acc.astype(np.float32) * a["scale"])
    elif acc64:  # TFLite's int64 MultiplyByQuantizedMultiplier (the 16x8 kernels')
        y = multiply_by_quantized_multiplier_int64(acc, a["multiplier"], a["shift"])
    elif p["rounding"] == "tflite_builtin":
        y = multiply_by_quantized_multiplier_upward(wrap_int32(acc), a["multiplier"], a["shift"])
    else:
        y = _multiply_by_quantized_multiplier(acc, a["multiplier"], a["shift"], exact, top)
    y += a["out_zp"].astype(np.int64)
    return np.clip(y, p["act_min"], p["act_max"]).astype(p["out_dtype"])


def _stage_constants(op: NPUOp, bound: float):
    """(bias, rq_zp or None, whether no int32 wrap can occur, the bound on |acc + bias - rq_zp|),
    as int64 (the bound a float), cached on the op."""
    cache = op.__dict__.setdefault("_sim_stage", {})
    if bound not in cache:
        a = op.arrays
        bias = a["bias"].astype(np.int64) if "bias" in a else None
        rq_zp = a["rq_zp"].astype(np.int64)
        top = bound + (float(np.abs(bias).max(initial=0)) if bias is not None else 0.0)
        top += float(np.abs(rq_zp).max(initial=0))
        cache[bound] = (bias, rq_zp if rq_zp.any() else None, top < 2.0**31, top)
    return cache[bound]


def _multiply_by_quantized_multiplier(
    x, multiplier, shift, exact: bool, bound: float = math.inf
) -> np.ndarray:
    """emulation.tflite_fixedpoint.multiply_by_quantized_multiplier in fewer passes over the data:
    SRDHM(a, q) for q > 0 is (a*q + 2**30) >> 31 (its nudge and truncation toward zero fold into
    one floor), and RoundingDivideByPOT(v, e > 0) is (v + 2**(e-1) - (v < 0)) >> e. Equal bit
    for bit (tests/backends/npu/test_npu_ops.py checks it against the reference helper).
    When ``bound`` (on |x|) times the multiplier stays below 2**52 every step is an exact float64
    operation (products, power-of-two divisions, floors of integers below 2**53), which numpy
    vectorizes on any x86 CPU; int64 multiplies need AVX-512 for that."""
    shift = shift.astype(np.int64)
    q = multiplier.astype(np.int64)
    if (shift > 0).any() or not exact or (q <= 0).any():
        return multiply_by_quantized_multiplier(x, multiplier, shift)
    right = -shift
    if bound * float(q.max(initial=0)) < 2.0**52:
        f = np.floor((x.astype(np.float64) * q.astype(np.float64) + 2.0**30) * 2.0**-31)
        half = ((np.int64(1) << right) >> 1).astype(np.float64)
        f += half - ((f < 0) & (half > 0))
        f *= np.exp2(-right.astype(np.float64))
        return np.floor(f).astype(np.int64)
    v = x * q
    v += 1 << 30
    v >>= 31
    half = (np.int64(1) << right) >> 1
    v += half - ((v < 0) & (half > 0))  # no rounding when there is no shift
    v >>= right
    return v


def _padded(x: np.ndarray, op: NPUOp) -> np.ndarray:
    """Input minus its zero point (float32, exact), with the explicit pad and the conv's own
    padding."""
    p = op.params
    t, left, b, r = p["explicit_pad"]
    if t or left or b or r:
        x = np.pad(x, ((0, 0), (t, b), (left, r), (0, 0)), constant_values=p["pad_value"])
    xo = x.astype(np.float32)
    xo -= p["in_zp"]
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


def _input_range(dtype, op: NPUOp) -> int:
    """The largest |x - zero point| an input of ``dtype`` can produce."""
    info = np.iinfo(dtype)
    zp = int(op.params["in_zp"])
    return max(zp - int(info.min), int(info.max) - zp)


def _weight_matrix(op: NPUOp, x_range: int, shape: tuple) -> tuple[np.ndarray, float]:
    """(K, O) weights minus their zero points, as float32 when every partial sum of the GEMM
    stays below 2**24 in magnitude (then float32 is exact in any summation order), else float64;
    and the bound on |accumulator|. Cached on the op: it depends only on the stream."""
    cache = op.__dict__.setdefault("_sim_cache", {})
    if x_range not in cache:
        w = op.arrays["weights"]
        zp = op.arrays["w_zp"].reshape((-1,) + (1,) * (w.ndim - 1))
        wm = (w.astype(np.int64) - zp).reshape(w.shape[0], -1)
        bound = float(np.abs(wm).sum(axis=1).max(initial=0)) * x_range
        dtype = np.float32 if bound < 2.0**24 else np.float64
        cache[x_range] = (np.ascontiguousarray(wm.T.astype(dtype)).reshape(shape), bound)
    return cache[x_range]


CHUNK_ELEMENTS = 1 << 15  # output elements per chunk: the output stage's passes stay in cache


def _chunks(oh: int, stripes: int, row_elements: int):
    """Rows of each stripe in chunks of about CHUNK_ELEMENTS outputs (the stripes are the NPU's;
    the chunks are only how the simulator walks them)."""
    rows = max(1, CHUNK_ELEMENTS // max(1, row_elements))
    for r0, r1 in _stripes(oh, stripes):
        for c0 in range(r0, r1, rows):
            yield c0, min(r1, c0 + rows)


def _out_dtype(op: NPUOp):
    return op.arrays["table"].dtype if "table" in op.arrays else np.dtype(op.params["out_dtype"])


def _tap(xo, r0, r1, i, j, geometry):
    sh, sw, dh, dw, _, ow = geometry
    return xo[
        :,
        r0 * sh + i * dh : (r1 - 1) * sh + i * dh + 1 : sh,
        j * dw : j * dw + (ow - 1) * sw + 1 : sw,
        :,
    ]


def conv(op: NPUOp, args) -> np.ndarray:
    xo = _padded(args[0], op)
    o, kh, kw, c = op.arrays["weights"].shape
    wm, bound = _weight_matrix(op, _input_range(args[0].dtype, op), (kh * kw * c, o))
    xo = xo.astype(wm.dtype, copy=False)
    geometry = _geometry(xo, kh, kw, op)
    oh, ow = geometry[4:]
    out = np.empty((1, oh, ow, o), _out_dtype(op))
    for r0, r1 in _chunks(oh, op.stripes, ow * o):  # each stripe reads its rows plus the halo
        taps = [_tap(xo, r0, r1, i, j, geometry) for i in range(kh) for j in range(kw)]
        patches = taps[0] if len(taps) == 1 else np.concatenate(taps, axis=-1)
        acc = patches.reshape(-1, kh * kw * c) @ wm
        y = output_stage(acc.astype(np.int64), op, bound).reshape(r1 - r0, ow, o)
        out[0, r0:r1] = _activation(op, y)
    return out


def dwconv(op: NPUOp, args) -> np.ndarray:
    xo = _padded(args[0], op)
    c, kh, kw = op.arrays["weights"].shape
    wm, bound = _weight_matrix(op, _input_range(args[0].dtype, op), (kh, kw, c))
    xo = xo.astype(wm.dtype, copy=False)
    geometry = _geometry(xo, kh, kw, op)
    oh, ow = geometry[4:]
    out = np.empty((1, oh, ow, c), _out_dtype(op))
    for r0, r1 in _chunks(oh, op.stripes, ow * c):
        acc = np.multiply(_tap(xo, r0, r1, 0, 0, geometry), wm[0, 0])
        tmp = np.empty_like(acc)
        for i in range(kh):
            for j in range(kw):
                if i or j:
                    acc += np.multiply(_tap(xo, r0, r1, i, j, geometry), wm[i, j], out=tmp)
        out[:, r0:r1] = _activation(op, output_stage(acc.astype(np.int64), op, bound))
    return out


def fc(op: NPUOp, args) -> np.ndarray:
    shape = op.arrays["weights"].shape[::-1]
    wm, bound = _weight_matrix(op, _input_range(args[0].dtype, op), shape)
    x = args[0].astype(wm.dtype) - op.params["in_zp"]
    return _activation(op, output_stage((x @ wm).astype(np.int64), op, bound))


def lut(op: NPUOp, args) -> np.ndarray:
    x = args[0]
    offset = {np.dtype(np.int8): 128, np.dtype(np.int16): 32768}.get(x.dtype, 0)
    return op.arrays["table"][x.astype(np.int32) + offset]


def _activation(op: NPUOp, y: np.ndarray) -> np.ndarray:
    """A MAC op's fused activation table, if it has one (see compiler.fuse_activations)."""
    return lut(op, [y]) if "table" in op.arrays else y


def unit(op: NPUOp, args) -> np.ndarray:
    qnn_op, attrs = unit_attrs(op.params)
    operands = []
    for ref in op.params["operands"]:
        if isinstance(ref, list):
            operands.append(
                tuple(args[int(r[1:])] if r.startswith("t") else op.arrays[r] for r in ref)
            )
        elif ref.startswith("t"):
            operands.append(args[int(ref[1:])])
        else:
            operands.append(op.arrays[ref])
    out = np.asarray(qnn_op.impl(*operands, attrs))
    p = op.params
    return np.clip(out, p["act_min"], p["act_max"]).astype(p["out_dtype"])


KERNELS = {"CONV": conv, "DWCONV": dwconv, "FC": fc, "LUT": lut, "UNIT": unit}
