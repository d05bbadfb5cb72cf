"""What the LLVM kernel tests share (test_llvm_kernels.py, test_llvm_stage_and_tables.py and the
files of one ISA tier or accumulation each): the ISA tiers and their targets (emulated where this
CPU lacks one), the fused int8 conv / dense / depthwise graphs, and the check of a build against
the interpreter on inputs over the whole 8-bit range."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import partita as P

ISAS = ["vnni", "avxvnni", "avx2", "plain"]


def isa_available(isa: str) -> bool:
    from partita.backends.llvm.runtime.jit import amx_permitted, runs_isa

    return amx_permitted() if isa == "amx" else runs_isa(isa)


def llvm_target(isa: str, rest: str = "") -> str:
    """``llvm -isa=ISA`` and ``rest``; where this CPU lacks the ISA, with ``-emulate=yes``
    (its instructions as exact stand-ins, backends/llvm/emit/emulate.py), so every kernel
    family is checked on every x86-64 machine."""
    return f"llvm -isa={isa}{rest}" + ("" if isa_available(isa) else " -emulate=yes")


@st.composite
def convs(draw):
    """A fused qnn.conv2d/dense -> bias -> requantize(tflite) -> clip with random parameters."""
    kind = draw(st.sampled_from(["conv", "depthwise", "dense"]))
    in_dtype = draw(st.sampled_from(["int8", "uint8"]))
    cin = draw(st.sampled_from([1, 3, 4, 8, 17, 32]))
    cout = cin if kind == "depthwise" else draw(st.sampled_from([1, 5, 16, 24, 40, 70]))
    if kind == "dense":
        rows = draw(st.integers(1, 9))
        geo = {"rows": rows}
    else:
        k = draw(st.sampled_from([1, 3, 5])), draw(st.sampled_from([1, 3]))
        h, w = draw(st.integers(k[0], 9)), draw(st.integers(k[1], 9))
        geo = {
            "hw": (h, w),
            "k": k,
            "strides": (draw(st.integers(1, 2)), draw(st.integers(1, 2))),
            "dilation": (draw(st.sampled_from([1, 1, 2])),) * 2,
            "padding": tuple(draw(st.integers(0, 2)) for _ in range(4)),
        }
        dh, dw = geo["dilation"]
        if h + geo["padding"][0] + geo["padding"][2] < dh * (k[0] - 1) + 1:
            geo["dilation"] = (1, 1)
        if w + geo["padding"][1] + geo["padding"][3] < dw * (k[1] - 1) + 1:
            geo["dilation"] = (1, 1)
    seed = draw(st.integers(0, 2**16))
    per_channel = draw(st.booleans())
    clip = draw(st.sampled_from([None, (0, 127), (-20, 60)]))
    semantics = draw(st.sampled_from(["tflite", "tflite_builtin", "onnx", "tflite_double"]))
    return kind, in_dtype, cin, cout, geo, seed, per_channel, clip, semantics


def build_graph(
    kind, in_dtype, cin, cout, geo, seed, per_channel, clip, semantics="tflite",
    accumulate="exact", pre_clip=False, wmax=127, wvalues=None,
):
    """The fused graph; ``pre_clip``: the convolution reads a clip of the input (a buffer of
    the segment's arena) instead of the input itself; ``wvalues``: the weights drawn from
    these values (else uniform over -wmax..wmax)."""
    rng = np.random.default_rng(seed)
    op = P.get_op
    info = np.iinfo(in_dtype)
    in_zp = int(rng.integers(info.min, info.max + 1))
    if kind == "dense":
        x = P.var("x", (geo["rows"], cin), in_dtype)
        wshape = (cout, cin)
    else:
        x = P.var("x", (geo.get("batch", 1), *geo["hw"], cin), in_dtype)
        wshape = (cout, *geo["k"], 1 if kind == "depthwise" else cin)
    data = op("clip")(x, a_min=float(info.min + 1), a_max=float(info.max)) if pre_clip else x
    w = rng.integers(-wmax, wmax + 1, wshape, dtype=np.int8)
    if wvalues is not None:
        w = rng.choice(np.asarray(wvalues, np.int8), wshape)
    n = cout if per_channel else 1
    w_scale = (rng.uniform(0.002, 0.05, n)).astype(np.float32)
    in_scale = np.float32(rng.uniform(0.01, 0.1))
    args = [
        data,
        P.const(w),
        P.const(np.int32(in_zp)),
        P.const(np.zeros(n, np.int32) if n > 1 else np.int32(0)),
    ]
    args += [P.const(in_scale), P.const(w_scale if n > 1 else w_scale[0])]
    if kind == "dense":
        y = op("qnn.dense")(*args, accumulate=accumulate)
    else:
        y = op("qnn.conv2d")(
            *args,
            strides=geo["strides"],
            padding=geo["padding"],
            dilation=geo["dilation"],
            groups=cin if kind == "depthwise" else 1,
            data_layout="NHWC",
            kernel_layout="OHWI",
            accumulate=accumulate,
        )
    y = op("nn.bias_add")(y, P.const(rng.integers(-3000, 3000, cout, dtype=np.int32)), axis=-1)
    # now and then a multiplier above 1 (TFLite's left shift before the high multiply)
    out_scale = np.float32(rng.uniform(0.02, 0.3) if rng.random() < 0.7 else 1e-4)
    rq_scale = (in_scale * w_scale).astype(np.float32)
    y = op("qnn.requantize")(
        y,
        P.const(rq_scale if n > 1 else rq_scale[0]),
        P.const(np.int32(0)),
        P.const(out_scale),
        P.const(np.int32(rng.integers(-20, 20))),
        axis=-1,
        out_dtype="int8",
        semantics=semantics,
    )
    if clip is not None:
        y = op("clip")(y, a_min=float(clip[0]), a_max=float(clip[1]))
    return P.IRModule.from_expr(P.Function([x], y)), x


def assert_equals_interpreter(mod, isa: str, seed: int, threads: str = "") -> None:
    """The ``isa`` build of ``mod`` on inputs over the whole 8-bit range."""
    exe = P.build(mod, llvm_target(isa, threads))
    ty = exe.input_types[0]
    info = np.iinfo(ty.dtype)
    data = np.random.default_rng(seed).integers(
        info.min, info.max, ty.shape, dtype=ty.dtype, endpoint=True
    )
    assert np.array_equal(exe.run(data)[0], P.interpret(mod, [data])[0])


def depthwise_graph(rng, hw, k, stride, dilation, wmin=-128):
    """A 32-channel int8 depthwise qnn.conv2d with "same" padding, per-channel requantize to
    int8, weights from [wmin, 127]; and an input over the whole int8 range."""
    c = 32
    pad = (k[0] // 2 * dilation, k[1] // 2 * dilation) * 2
    x = P.var("x", (1, *hw, c), "int8")
    y = P.get_op("qnn.conv2d")(
        x, P.const(rng.integers(wmin, 128, (c, *k, 1), dtype=np.int8)),
        P.const(np.int32(rng.integers(-128, 128))), P.const(np.int32(0)),
        P.const(np.float32(0.05)), P.const(rng.uniform(0.002, 0.05, c).astype(np.float32)),
        strides=(stride, stride), padding=pad, dilation=(dilation, dilation), groups=c,
        data_layout="NHWC", kernel_layout="OHWI",
    )
    y = P.get_op("qnn.requantize")(
        y, P.const(rng.uniform(1e-4, 2e-3, c).astype(np.float32)), P.const(np.int32(0)),
        P.const(np.float32(0.1)), P.const(np.int32(3)), axis=-1, out_dtype="int8",
    )
    mod = P.IRModule.from_expr(P.Function([x], y))
    return mod, rng.integers(-128, 128, (1, *hw, c), dtype=np.int8)


def pool_data(rng, shape, dtype, nan_step: int = 97, zero_step: int = 13) -> np.ndarray:
    """A max pool's input over its type's whole range; float32: normal values with nan every
    ``nan_step`` elements and -0.0 / +0.0 pairs every ``zero_step`` (numpy's max: nan wins, of
    equal taps the later, so a zero's sign says which tap won)."""
    if dtype == "float32":
        data = rng.standard_normal(shape).astype(np.float32)
        data.flat[::nan_step] = np.nan
        data.flat[1::zero_step] = np.float32(-0.0)
        data.flat[2::zero_step] = np.float32(0.0)
        return data
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape, dtype=dtype)
