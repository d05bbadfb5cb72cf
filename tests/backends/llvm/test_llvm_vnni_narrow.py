"""The AVX-512 tiles' packed narrowing (OutputStage.vnarrow): a pixel's 2 or 4 whole channel
vectors narrowed together by saturating packs, one VPERMD, the clamp on the bytes; AVX-VNNI's
two pixels at a time (vnarrow_pair); and the sign term of the offset accumulators as a shift
(vector_stage.offset_accumulators). On the vnni and avxvnni tiers, every form
(int8 and uint8 output, a clamp inside the type's range or the whole range, TFLite's two
roundings, a requantize input zero point, 2 and 4 vectors and a tail of 3) equals the
interpreter, one and two threads."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_checks import assert_equals_interpreter
from partita.backends.llvm import generate_parts
from partita.backends.llvm.emit.int8 import tile_epilogue
from partita.backends.llvm.lower import lower

import partita as P


def _pointwise(cin, cout, hw, in_dtype="int8", out_dtype="int8", clip=None,
               semantics="tflite", rq_zp=0, seed=0):
    """1 x 1 qnn.conv2d -> bias -> requantize -> [clip], per-channel scales."""
    rng = np.random.default_rng(seed)
    op = P.get_op
    info = np.iinfo(in_dtype)
    x = P.var("x", (1, *hw, cin), in_dtype)
    w = rng.integers(-127, 128, (cout, 1, 1, cin), dtype=np.int8)
    w_scale = rng.uniform(0.002, 0.05, cout).astype(np.float32)
    in_scale = np.float32(0.04)
    y = op("qnn.conv2d")(
        x, P.const(w), P.const(np.int32(int(rng.integers(info.min, info.max)))),
        P.const(np.zeros(cout, np.int32)), P.const(in_scale), P.const(w_scale),
        strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1,
        data_layout="NHWC", kernel_layout="OHWI")
    y = op("nn.bias_add")(y, P.const(rng.integers(-3000, 3000, cout, dtype=np.int32)), axis=-1)
    out_zp = 100 if out_dtype == "uint8" else int(rng.integers(-20, 20))
    y = op("qnn.requantize")(y, P.const((in_scale * w_scale).astype(np.float32)),
                             P.const(np.int32(rq_zp)), P.const(np.float32(0.08)),
                             P.const(np.int32(out_zp)), axis=-1, out_dtype=out_dtype,
                             semantics=semantics)
    if clip is not None:
        y = op("clip")(y, a_min=float(clip[0]), a_max=float(clip[1]))
    return P.IRModule.from_expr(P.Function([x], y))


CASES = {
    # (cin, cout, pixels, in dtype, out dtype, clip, semantics, requantize input zero point)
    "int8_clamped_4": (64, 128, (5, 5), "int8", "int8", (-128, 60), "tflite", 0),
    "int8_whole_4": (96, 64, (2, 7), "int8", "int8", None, "tflite", 0),
    "int8_clamped_2": (160, 32, (7, 7), "int8", "int8", (-50, 90), "tflite", 0),
    "uint8_clamped_4": (64, 64, (5, 5), "uint8", "uint8", (10, 200), "tflite", 0),
    "uint8_whole_2": (64, 32, (3, 5), "uint8", "uint8", None, "tflite", 0),
    "builtin_4": (64, 128, (5, 5), "int8", "int8", (-128, 60), "tflite_builtin", 0),
    "rq_zp_4": (64, 64, (5, 5), "int8", "int8", (-100, 100), "tflite", 7),
    "tail_of_3": (64, 112, (5, 5), "int8", "int8", (-128, 60), "tflite", 0),
}


def _vconv(mod, isa):
    (conv,) = [k for k in lower(P.InferType()(mod)["main"], isa).kernels
               if k.kind == "VCONV"]
    return conv


@pytest.mark.parametrize("isa", ["vnni", "avxvnni"])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("threads", ["", " -threads=2"])
def test_packed_narrowing_equals_the_interpreter(isa, case, threads):
    cin, cout, hw, din, dout, clip, sem, rq_zp = CASES[case]
    mod = _pointwise(cin, cout, hw, din, dout, clip, sem, rq_zp, seed=len(case))
    params = _vconv(mod, isa).params
    taken = tile_epilogue._packs if isa == "vnni" else tile_epilogue._pixel_pairs
    assert taken(params, params["V"])
    assert_equals_interpreter(mod, isa, seed=2, threads=threads)


def test_packed_narrowing_is_emitted_where_it_applies():
    """The packs replace the per-vector narrowing on the vnni tier's and AVX-VNNI's TFLite
    stages only."""
    def packs(mod, isa):
        plan = lower(P.InferType()(mod)["main"], isa)
        text = "".join(part() for part in generate_parts(plan))
        return {name for name in ("avx512.packssdw", "avx2.packssdw") if name in text}

    mod = _pointwise(64, 128, (5, 5), clip=(-128, 60))
    assert packs(mod, "vnni") == {"avx512.packssdw"}
    assert packs(mod, "avxvnni") == {"avx2.packssdw"}
    assert not packs(_pointwise(64, 128, (5, 5), semantics="tflite_double"), "vnni")


@pytest.mark.parametrize("isa", ["plain", "avx2", "avxvnni", "vnni", "amx"])
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_the_builtin_stage_takes_the_saturating_clamp_and_the_folded_zero_point(isa, dtype):
    """TFLite's optimized kernels' stage ("tflite_builtin", vrequant_upward) with the clamp on
    the type's whole range and a nonzero output zero point: the saturating narrowing and the
    zero point folded into the 64-bit addends (vector_stage._fold_upward_zp), as the default
    stage has them; the bits of the interpreter, one and two threads, on every tier (AMX and
    the VNNI tiers emulated where this CPU lacks them)."""
    mod = _pointwise(64, 128, (4, 8), dtype, dtype, None, "tflite_builtin", seed=5)
    params = _vconv(mod, isa).params
    assert params["saturate"] == dtype and params["fold_zp"]
    for threads in ("", " -threads=2"):
        assert_equals_interpreter(mod, isa, seed=3, threads=threads)


def test_the_builtin_zero_point_stays_out_of_addends_it_could_overflow():
    """_fold_upward_zp leaves the zero point to its own add where zp * 2^(32 + bsh) could take
    a 64-bit sum past int64 (a shift of 28 bits), and where it is 0."""
    from partita.backends.llvm.lower import vector_stage

    def consts(bsh):
        bsh = np.array(bsh, np.int64)
        addend = (np.int64(1) << 30) + (np.int64(1) << (31 + bsh))
        return {"bsh": bsh.astype(np.int32), "bhe": addend[0::2].copy(),
                "bho": addend[1::2].copy(), "ozp": np.full(bsh.size, 9, np.int32)}

    c = consts([3, 4, 28, 2])
    assert not vector_stage._fold_upward_zp({"out_zp": 9}, c, 4) and c["ozp"][0] == 9
    c = consts([3, 4, 5, 2])
    assert not vector_stage._fold_upward_zp({"out_zp": 0}, c, 4)
    before = c["bho"].copy()
    assert vector_stage._fold_upward_zp({"out_zp": -7}, c, 4) and not c["ozp"].any()
    assert (c["bho"] - before == [-7 << 36, -7 << 34]).all()
