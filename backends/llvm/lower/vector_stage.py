"""The vector kernels' output-stage constants (vector_plan's VCONV / VDW plans): TFLite's
per-channel multiplier, shift, rounding and zero points as int32 vectors padded to the kernel's
channel count, and the shortcuts these constants allow (``stage_flags``: the zero point folded
into the rounding constant, the unsigned high multiply, accumulators started ACC_OFFSET higher),
each exact (docs/performance.md; emit/int8/vector_output_stage.py reads them)."""

from __future__ import annotations

import numpy as np

from partita.ops.emulation.tflite_fixedpoint import wrap_int32

# the TFLite output stage's unsigned high multiply on accumulators offset by ACC_OFFSET where
# every sum's bound is below it (offset_accumulators), so its sign term is one comparison
STAGE_OFFSET = True
ACC_OFFSET = 1 << 30


def output_constants(arrays: dict, params: dict, colsum: np.ndarray, zx: int, ocp: int) -> dict:
    """Per-channel int32 constants of the epilogue, padded to ``ocp`` channels."""
    shift = arrays["shift"].astype(np.int64)
    e = np.maximum(-shift, 0)
    consts = {
        "corr": wrap_int32(arrays["bias"].astype(np.int64) - zx * colsum),
        "mult": arrays["multiplier"].astype(np.int64),
        "lshift": np.maximum(shift, 0),
        "rshift": e,
        "rnd": (np.int64(1) << e) >> 1,
        "rmask": np.where(e > 0, -1, 0),
        "ozp": np.full(shift.size, params["out_zp"]),
        "lo": np.full(shift.size, params["lo"]),
        "hi": np.full(shift.size, params["hi"]),
    }
    out = {}
    for name, v in consts.items():
        padded = np.zeros(ocp, np.int32)
        padded[: v.size] = v
        out[name] = padded
    for name in ("lo", "hi"):  # the clamp bounds as the output's bytes (vnarrow)
        out[name + "8"] = (out[name] & 0xFF).astype(np.uint8).view(np.int8)
    out["multo"] = np.zeros(ocp, np.int32)  # each odd channel's multiplier at the even lane
    out["multo"][0::2] = out["mult"][1::2]
    out["izp"] = np.array([params["in_zp"]], np.int32)  # the padding value
    for name in ("fscale", "fzp", "finv"):  # the float32 stages' per-channel values
        value = np.zeros(ocp, np.float32)
        if name in arrays:
            value[: arrays[name].size] = arrays[name]
        out[name] = value
    if params["rounding"] == "tflite_builtin":
        out.update(upward_constants(shift, ocp))
    if params["rounding"] == "tflite_double":  # the real scale, float64 (reference FC)
        dscale = np.zeros(ocp, np.float64)
        dscale[: arrays["scale"].size] = arrays["scale"]
        out["dscale"] = dscale
    return out


def upward_constants(shift: np.ndarray, ocp: int) -> dict:
    """The "tflite_builtin" stage's constants (TFLite's optimized kernels round ties upward
    twice, int_kernels.mbqm_upward): with r = max(-shift, 1), the result is
    ((x << (shift + r)) * M + 2^30 + 2^(30 + r)) >> (31 + r), i.e. the high 32 bits of that
    64-bit sum shifted right by r - 1. ``bls`` = shift + r, ``bsh`` = r - 1, ``bhe`` / ``bho``
    the 64-bit addends of the even / odd channels (vector_output_stage.vrequant_upward)."""
    s = np.zeros(ocp, np.int64)
    s[: shift.size] = shift
    r = np.maximum(-s, 1)
    addend = (np.int64(1) << 30) + (np.int64(1) << (30 + r))
    return {"bls": (s + r).astype(np.int32), "bsh": (r - 1).astype(np.int32),
            "bhe": addend[0::2].copy(), "bho": addend[1::2].copy()}


def stage_flags(params: dict, consts: dict, wabs: np.ndarray) -> dict:
    """Shortcuts the TFLite output stage's code may take for these constants (they change the
    code, so they are code parameters):

    - ``fold_zp``: the output zero point rides in the rounding constant, ``rnd + (zp << e)``:
      adding a multiple of 2^e before the arithmetic shift right by e adds zp after it, exactly,
      when no int32 sum can wrap (checked with the accumulator's bound |corr| + 255 * sum|w|);
    - ``round_all``: every channel shifts right (e > 0), so the sign term needs no mask;
    - ``saturate``: the clamp is the output type's whole range, so the clamp bounds are code
      constants and the narrowing a saturating one."""
    flags = {"fold_zp": False, "round_all": False, "saturate": False, "umul": False,
             "offset": 0}
    if params["rounding"] == "tflite_builtin":  # its own stage (vrequant_upward)
        flags["saturate"] = _saturate(params)
        flags["fold_zp"] = _fold_upward_zp(params, consts, wabs.size)
        return flags
    if params["rounding"] != "tflite":
        return flags
    n = wabs.size
    e = consts["rshift"][:n].astype(np.int64)
    flags["round_all"] = bool((e > 0).all())
    flags["saturate"] = _saturate(params)
    if not params["rq_zp"] and not params["left"]:
        bound = np.abs(consts["corr"][:n].astype(np.int64)) + 255 * wabs + 1
        rnd = consts["rnd"][:n].astype(np.int64) + (np.int64(params["out_zp"]) << e)
        if (bound + np.abs(rnd) < (1 << 31) - 1).all():
            consts["rnd"][:n] = rnd
            consts["ozp"][:] = 0
            flags["fold_zp"] = True
    if not params["rq_zp"]:
        unsigned_high_mul(consts)
        flags["umul"] = True
        bound = np.abs(consts["corr"][:n].astype(np.int64)) + 255 * wabs + 1
        if STAGE_OFFSET and flags["round_all"] and not params["left"] \
                and (bound < ACC_OFFSET).all():
            offset_accumulators(consts)
            flags["offset"] = ACC_OFFSET  # the code compares the sums with it
    return flags


def _saturate(params: dict):
    """The clamp's type when it is the output type's whole range (a saturating narrowing)."""
    return {(-128, 127): "int8", (0, 255): "uint8"}.get((params["lo"], params["hi"]), False)


def _fold_upward_zp(params: dict, consts: dict, n: int) -> bool:
    """"tflite_builtin": the output zero point rides in the 64-bit addends, + zp * 2^(32 +
    bsh) (vector_output_stage.vrequant_upward shifts the sum right by 32, then by bsh: a
    multiple of 2^(32 + bsh) added before adds zp after, exactly) where no sum can leave int64:
    |(x << bls) * M| <= 2^62 (x << bls an int32, |M| < 2^31), plus the addend and zp's term."""
    zp = int(params["out_zp"])
    if zp == 0:
        return False
    bsh = [int(v) for v in consts["bsh"]]
    addends = [int(v) for pair in zip(consts["bhe"], consts["bho"]) for v in pair]
    if any((1 << 62) + abs(a) + abs(zp) * (1 << (32 + e)) >= (1 << 63) - 1
           for a, e in zip(addends[:n], bsh[:n])):
        return False
    for name, lanes in (("bhe", slice(0, None, 2)), ("bho", slice(1, None, 2))):
        terms = [zp * (1 << (32 + e)) for e in bsh[lanes]]
        consts[name] = (consts[name].astype(np.int64) + np.array(terms, np.int64))
    consts["ozp"][:] = 0
    return True


def offset_accumulators(consts: dict) -> None:
    """The unsigned stage's constants for accumulators started at corr + ACC_OFFSET (every
    sum then in [0, 2^31): its unsigned reading is its value): the 64-bit addends lose
    ACC_OFFSET * 2M, so high32(x' * 2M + addend) = SRDHM(x, M) + rnd as before, and where the
    sum is negative (x' < ACC_OFFSET) only RDBPOT's sign term -1 is added (no masked -2M:
    vector_output_stage.vrequant adds x' >> 30, 0 or 1, to addends 1 lower)."""
    consts["corr"] = (consts["corr"].astype(np.int64) + ACC_OFFSET).astype(np.int32)
    two_m = (2 * consts["mult"].astype(np.int64)) & 0xFFFFFFFF
    # < 2^63; and 2^32 (1 off the high half): the code adds (x' >> 30) for the sign term,
    # i.e. 1 - [x' < ACC_OFFSET]
    less = two_m * ACC_OFFSET + (np.int64(1) << 32)
    for name, lanes in (("heven", slice(0, None, 2)), ("hodd", slice(1, None, 2))):
        consts[name] = (consts[name].astype(np.int64) - less[lanes]).astype(np.int64)


def unsigned_high_mul(consts: dict) -> None:
    """Constants of the output stage's unsigned form (vector.vsrdhm_unsigned): with x_u the
    int32 accumulator read as unsigned, high32(x_u * 2M + 2^31 + rnd * 2^32) equals
    SRDHM(x, M) + rnd + 2M [x < 0] (mod 2^32), since x_u = x + 2^32 for negative x; the masked
    add of ``negc`` = -2M - [e > 0] removes the 2M and subtracts RDBPOT's sign term (taken from
    x: where x < 0 but SRDHM(x, M) = 0, both give (rnd - 1) >> e = rnd >> e for e > 0).
    ``mult2`` / ``mult2o``: 2M mod 2^32 of the even / odd channels in the even lanes;
    ``heven`` / ``hodd``: the 64-bit addends 2^31 + rnd * 2^32 of the even / odd channels."""
    m = consts["mult"].astype(np.int64)
    two_m = (2 * m) & 0xFFFFFFFF
    consts["mult2"] = two_m.astype(np.uint32).view(np.int32)
    odd = np.zeros_like(consts["mult2"])
    odd[0::2] = consts["mult2"][1::2]
    consts["mult2o"] = odd
    h = (np.int64(1) << 31) + (consts["rnd"].astype(np.int64) << 32)
    consts["heven"], consts["hodd"] = h[0::2].copy(), h[1::2].copy()
    e = consts["rshift"].astype(np.int64)
    negc = (-2 * m - (e > 0)) & 0xFFFFFFFF
    consts["negc"] = negc.astype(np.uint32).view(np.int32)
