"""TFLite's int16 (16x8) SOFTMAX: two 513-entry interpolated lookup tables built at prepare
time (LUTPopulate in double), an int16 table lookup with linear interpolation, and the
reciprocal of the row's sum through the second table (reference_ops::SoftmaxInt16); and int16
LOGISTIC and TANH (an interpolated sigmoid table, measured from TFLite's interpreter)."""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import numpy as np

from .tflite_fixedpoint import multiply_by_quantized_multiplier, quantize_multiplier

RANGE = 65535  # int16 max - min
NB_STEPS = 512


def lut_populate_int16(input_scale, input_zp, output_scale, output_zp, fn) -> np.ndarray:
    """LUTPopulate<int16_t> with double arithmetic: 512 samples of fn over the input range,
    each biased by half the interpolation error at its interval's midpoint, plus the end."""
    input_min = input_scale * (-32768 - input_zp)
    input_max = input_scale * (32767 - input_zp)
    output_min = output_scale * (-32768 - output_zp)
    output_max = output_scale * (32767 - output_zp)
    step = (input_max - input_min) / NB_STEPS
    half = step / 2
    inv = 65536.0 / (output_max - output_min)
    lut = np.empty(NB_STEPS + 1, np.int64)
    for i in range(NB_STEPS):
        val = fn(input_min + i * step)
        mid = fn(input_min + i * step + half)
        nxt = fn(input_min + (i + 1) * step)
        sample = _round(val * inv)
        interp = _round((nxt * inv + _round(val * inv)) / 2)
        err = interp - _round(mid * inv)
        lut[i] = min(max(sample - _round(err / 2), -32768.0), 32767.0)
    lut[NB_STEPS] = min(max(_round(fn(input_max) * inv), -32768.0), 32767.0)
    return lut


def _round(v: float) -> float:
    """std::round: half away from zero."""
    return float(np.sign(v) * np.floor(abs(v) + 0.5))


def lut_lookup_int16(value: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """TFLite's int16 LUTLookup: base lut[256 + (v >> 7)] plus the rounded slope share."""
    v = np.asarray(value, np.int64)
    index = 256 + (v >> 7)
    offset = v & 0x7F
    base = lut[index]
    slope = lut[index + 1] - base
    return ((base + ((slope * offset + 64) >> 7)) + 32768) % 65536 - 32768  # int16 wrap


@lru_cache(maxsize=4)
def _tables() -> tuple[np.ndarray, np.ndarray]:
    exp_lut = lut_populate_int16(10.0 / RANGE, 32767, 2.0 / RANGE, 0, np.exp)
    recip_lut = lut_populate_int16(1.0 / RANGE, -32768, 2.0 / RANGE, 0, lambda x: 1.0 / (1.0 + x))
    return exp_lut, recip_lut


def softmax_tables() -> tuple[np.ndarray, np.ndarray]:
    """The exp and 1/(1+x) tables (513 int16 values each, as int64)."""
    return _tables()


def softmax_multiplier(in_scale: float, beta: float) -> tuple[int, int]:
    """(multiplier, shift) taking x - max(row) to [-65535, 0] ~ [-10, 0]."""
    product = np.float32(in_scale) * np.float32(beta)  # float * float in the C++ Prepare
    return quantize_multiplier(float(product) / (10.0 / 65535.0))


def softmax_int16(x: np.ndarray, in_scale: float, beta: float) -> np.ndarray:
    """reference_ops::SoftmaxInt16 over the last axis (zero points 0, output scale 1/32768)."""
    exp_lut, recip_lut = _tables()
    mult, shift = softmax_multiplier(in_scale, beta)
    v = np.asarray(x, np.int64)
    diff = v - v.max(axis=-1, keepdims=True)
    scaled = multiply_by_quantized_multiplier(diff, mult, shift) + 32767
    exps = lut_lookup_int16(np.clip(scaled, -32768, 32767), exp_lut)
    total = exps.sum(axis=-1, keepdims=True)  # int32 in TFLite: at most depth * 32767
    headroom = 32 - np.floor(np.log2(np.maximum(total, 1))).astype(np.int64) - 1  # clz(total)
    headroom = np.where(total > 0, headroom, 32)
    shifted = ((total << (headroom - 1)) + (1 << 13)) >> 14
    sym = np.clip(shifted - ((1 << 15) + (1 << 16)), -32768, 32767)
    recip = lut_lookup_int16(sym, recip_lut)
    right = 31 - headroom
    out = (exps * recip + (np.int64(1) << (right - 1))) >> right
    return np.clip(out, 0, 32767).astype(np.int16)


# ---- LOGISTIC and TANH (16x8) ----------------------------------------------------------------
# Both kernels rescale the input to x = (q * M + r) >> s and interpolate linearly in one table
# of 256 unsigned 16-bit samples of the sigmoid (TANH through tanh(x) = 2 sigmoid(2x) - 1). The
# table's values were measured from TFLite's interpreter (tools/gen_int16_sigmoid_table.py,
# which also checks this emulation against it over every int16 input at several scales).

SIGMOID_TABLE = Path(__file__).resolve().parents[2] / "data" / "tflite_sigmoid_table16.npz"


@lru_cache(maxsize=1)
def sigmoid_table16() -> np.ndarray:
    with np.load(SIGMOID_TABLE) as z:
        table = z["table"].astype(np.int64)
    table.flags.writeable = False
    return table


def _checked_log2(scale: float) -> tuple[bool, int]:
    v = math.log2(scale)
    rounded = int(math.floor(abs(v) + 0.5)) * (1 if v >= 0 else -1)
    return abs(v - rounded) < 1e-3, rounded


def rescale16(scale: float, op: str) -> tuple[int, int]:
    """(M, s) of the kernels' input rescaling for an int16 input of scale ``scale`` (zero point
    0). A power-of-two scale the kernel treats as one (2**-12; TANH also 2**-11) gives M = 3 <<
    (12 + log2 scale), s = 0; any other scale gives scale * 3 * 4096 doubled s times until it
    exceeds 32767 / 2 (s <= 31), M its integer part."""
    pot, log2 = _checked_log2(scale)
    shift = 12 + log2
    if pot and (shift == 0 or (op == "tanh" and shift == 1)):
        return 3 << shift, 0
    m, s = float(scale) * 4096.0 * 3.0, 0
    while m <= 32767.0 / 2.0 and s <= 30:
        s, m = s + 1, m * 2.0
    return int(m), s


def _rescaled(q: np.ndarray, scale: float, op: str) -> np.ndarray:
    mult, shift = rescale16(scale, op)
    if mult * 32768 >= 2**31:
        raise ValueError(f"an int16 {op} input scale of {scale} overflows TFLite's int32 rescale")
    r = (1 << (shift - 1)) if shift > 0 else 0
    return (np.asarray(q, np.int64) * mult + r) >> shift


def _to_int16(v: np.ndarray) -> np.ndarray:
    return (((v & 0xFFFF) ^ 0x8000) - 0x8000).astype(np.int16)


def logistic16(q: np.ndarray, scale: float) -> np.ndarray:
    """TFLite's int16 LOGISTIC (output scale 2**-15, zero points 0): index |x| >> 9 and 9
    fraction bits, saturating from index 255; negative x mirrored as 1 - sigmoid(|x|)."""
    table = sigmoid_table16()
    x = _rescaled(q, scale, "sigmoid")
    a = np.abs(x)
    uh = np.minimum(a >> 9, 254)
    lo, hi = table[uh], table[uh + 1]
    res = np.where(a >> 9 >= 255, 0x7FFF << 10, (lo << 9) + (a & 0x1FF) * (hi - lo))
    res = np.where(x >= 0, res + (1 << 9), (1 << 25) - res + (1 << 9) - 1) & 0xFFFFFFFF
    return _to_int16(res >> 10)


def tanh16(q: np.ndarray, scale: float) -> np.ndarray:
    """TFLite's int16 TANH (output scale 2**-15, zero points 0): index |x| >> 8 and 8 fraction
    bits, saturating from index 255; 2 * sigmoid - 1 with the sign of x."""
    table = sigmoid_table16()
    x = _rescaled(q, scale, "tanh")
    a = np.abs(x)
    uh = np.minimum(a >> 8, 254)
    lo, hi = table[uh], table[uh + 1]
    res = np.where(a >> 8 >= 255, 0xFFFF << 8, (lo << 8) + (a & 0xFF) * (hi - lo))
    res = np.where(x >= 0, res - (1 << 23) + (1 << 7), -res + (1 << 23) + (1 << 7) - 1)
    return _to_int16(res >> 8)
