"""TFLite's int16 (16x8) SOFTMAX: two 513-entry interpolated lookup tables built at prepare
time (LUTPopulate in double), an int16 table lookup with linear interpolation, and the
reciprocal of the row's sum through the second table (reference_ops::SoftmaxInt16)."""

from __future__ import annotations

from functools import lru_cache

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
