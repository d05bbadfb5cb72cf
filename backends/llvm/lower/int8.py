"""The 8-bit kernels besides the MAC: tables, quantize, max pooling, means.

    any int8/uint8 -> int8/uint8 (or float32) function of one value   LUT (256 entries, by the op)
    qnn.add/subtract/mul/squared_difference, two 8-bit tensors         LUT2 (256 x 256, by the op)
    qnn.quantize of float32                                            QUANT
    nn.max_pool2d of 8-bit or float32 NHWC data                        MAXPOOL
    qnn.mean over H, W ("tflite", "onnx", "tflite_legacy")             MEAN
    float32 mean over H, W of dequantized 8-bit data                   FMEAN

Tables are evaluated with the op's own reference implementation at compile time, so those
kernels are exact by construction.
"""

from __future__ import annotations

import numpy as np
from partita.backends.llvm.errors import LLVMError
from partita.backends.llvm.kinds import Kind

from partita.ir import Call, Constant

from .context import EIGHT_BIT, LowerContext, data_operands, where
from .float_ops import strides_for
from .qmean import mean_params
from .registry import CORE, lowers
from .tables import const_array, lut2_table, lut_table


@lowers("qnn.mean", priority=CORE + 4)
def lower_qmean(low: LowerContext, call: Call) -> bool:
    """qnn.mean with TFLite's, ONNX's or TFLite's legacy arithmetic: MEAN."""
    if call.attrs.semantics not in ("tflite", "onnx", "tflite_legacy"):
        return False
    emit_mean(low, call, where(call))
    return True


@lowers("mean", priority=CORE + 5)
def lower_fmean(low: LowerContext, call: Call) -> bool:
    """A float32 mean over H, W of dequantized 8-bit data (``_exact_float_mean``): FMEAN."""
    if not _exact_float_mean(call):
        return False
    low.emit(Kind.FMEAN, call, [low.src(call.args[0])])
    return True


@lowers("nn.max_pool2d", priority=CORE + 6)
def lower_maxpool(low: LowerContext, call: Call) -> bool:
    """nn.max_pool2d of 8-bit or float32 NHWC data: MAXPOOL."""
    data, dtypes, _ = data_operands(call)
    if not (data and dtypes[0] in (*EIGHT_BIT, "float32") and call.attrs.layout == "NHWC"):
        return False
    a = call.attrs
    params = {
        "pool": list(a.pool_size),
        "strides": list(a.strides),
        "padding": list(a.padding),
        "dilation": list(a.dilation),
        **split_elements(low, call, SPLIT_QUANT),  # output rows over two threads
    }
    low.emit(Kind.MAXPOOL, call, [low.src(data[0])], params)
    return True


@lowers(kinds=("elemwise", "broadcast"), priority=CORE + 7)
def lower_lut(low: LowerContext, call: Call) -> bool:
    """Any function of one 8-bit value (scalar constants aside) to 8 bits or float32: LUT, a
    256-entry table made with the op's own reference."""
    data, dtypes, out = data_operands(call)
    consts_scalar = all(const_array(a).ndim == 0 for a in call.args if isinstance(a, Constant))
    # 16x8 LOGISTIC / TANH: int16 -> int16 through a 65,536-entry table
    wide = (call.op.name in ("qnn.sigmoid", "qnn.tanh") and len(data) == 1
            and dtypes[0] == out == "int16")
    if not (
        len(data) == 1
        and call.op.kind in ("elemwise", "broadcast")  # a table maps each element alone
        and call.checked_type.shape == data[0].checked_type.shape
        and (dtypes[0] in EIGHT_BIT or wide)
        and (out in (*EIGHT_BIT, "float32") or wide)
        and consts_scalar
        and call.args[0] is data[0]
    ):
        return False
    params, arrays = split_elements(low, call, SPLIT_LUT), {"table": lut_table(call, dtypes[0],
                                                                                out)}
    if (call.op.name == "qnn.dequantize" and low.isa != "plain" and out == "float32"
            and dtypes[0] in EIGHT_BIT and abs(int(const_array(call.args[2]))) < 1 << 30):
        # arithmetic in vectors (emit/int8/quant_vectors.py; x - zp exact in int32)
        params["dequant"] = True
        arrays["dq_scale"] = np.float64(np.float32(const_array(call.args[1]))).reshape(1)
        arrays["dq_zp"] = np.asarray(const_array(call.args[2]), np.int64).reshape(1)
    low.emit(Kind.LUT, call, [low.src(data[0])], params, arrays)
    return True


# elements from which a QUANT (about 1.5 ns an element on one Zen 3 core) or a LUT (a table
# load, cheaper) goes over both threads under -threads=2
SPLIT_QUANT, SPLIT_LUT = 1 << 15, 1 << 16


def split_elements(low: LowerContext, call: Call, least: int) -> dict:
    """``{"threads": 2}`` for an element-by-element kernel (QUANT, LUT) of ``least`` elements
    or more under ``-threads=2``: chunks of its flat indices the worker shares
    (emit/int8/scalar.py ``elements``)."""
    size = int(np.prod([int(d) for d in call.checked_type.shape], dtype=np.int64))
    return {"threads": 2} if low.threads > 1 and size >= least else {}


@lowers("qnn.quantize", priority=CORE + 8)
def lower_quantize(low: LowerContext, call: Call) -> bool:
    """qnn.quantize of float32 with constant parameters: QUANT."""
    data, dtypes, out = data_operands(call)
    if not (
        all(isinstance(a, Constant) for a in call.args[1:])
        and len(data) == 1  # a constant's quantize (a mutated model's) is not a kernel's
        and dtypes[0] == "float32"
        and out in (*EIGHT_BIT, "int16", "int32")
        and call.attrs.semantics in ("tflite", "onnx", "fbgemm")
    ):
        return False
    params, arrays = quant_params(call, out)
    params.update(split_elements(low, call, SPLIT_QUANT))
    if low.isa != "plain" and params["C"] == 1 and params["round"] == "onnx" \
            and out in (*EIGHT_BIT, "int16"):
        params["vector"] = True  # 16 elements a step (emit/int8/quant_vectors.py)
    low.emit(Kind.QUANT, call, [low.src(data[0])], params, arrays)
    return True


@lowers("qnn.add", "qnn.subtract", "qnn.mul", "qnn.squared_difference", priority=CORE + 9)
def lower_lut2(low: LowerContext, call: Call) -> bool:
    """A per-tensor binary op of two 8-bit tensors: LUT2, a 256 x 256 table made with the op's
    own reference (vector gathers when the ISA has them and no operand broadcasts)."""
    _, _, out = data_operands(call)
    pair = call.args[:2]
    if not (
        all(const_array(a).ndim == 0 for a in call.args[2:])
        and {a.checked_type.dtype for a in pair} <= set(EIGHT_BIT)
        and out in EIGHT_BIT
    ):
        return False
    data, dtypes = list(pair), [a.checked_type.dtype for a in pair]
    oshape = call.checked_type.shape
    strides = [strides_for(d.checked_type.shape, oshape) for d in data]
    params = {"out_shape": list(oshape), "strides": strides}
    table = lut2_table(call, dtypes, out)
    if all(d.checked_type.shape == oshape for d in data):
        # vector gathers of 32-bit words at byte offsets: 3 bytes of slack at the end (on
        # -isa=plain generic masked gathers, which LLVM selects for any target)
        params.update(gather="vnni" if low.isa == "amx" else low.isa, **(
            {"threads": 2} if low.threads > 1 and np.prod(oshape) >= 4096 else {}))
        table = np.concatenate([table.ravel(), np.zeros(4, table.dtype)])
    low.emit(Kind.LUT2, call, [low.src(d) for d in data], params, {"table": table})
    return True


def emit_mean(low: LowerContext, call: Call, where: str) -> None:
    x = call.args[0]
    shape = [int(d) for d in x.checked_type.shape]
    consts = [const_array(a).reshape(-1)[0] for a in call.args[1:]]
    a = call.attrs
    params = mean_params(shape, a.axis, a.semantics, a.exclude, consts,
                         call.checked_type.dtype, keepdims=bool(a.keepdims))
    if params is None:
        axes = tuple(sorted(i % len(shape) for i in a.axis))
        raise LLVMError(f"llvm: {where}: mean over axes {axes} of rank {len(shape)}")
    low.emit(Kind.MEAN, call, [low.src(x)], params)


def _exact_float_mean(call: Call) -> bool:
    """A float32 mean over H and W of NHWC data dequantized from 8 bits (per-tensor): its values
    span at most 8 binades of 24-bit mantissas, so their float64 sum is exact in any order and
    the kernel's sequential sum equals the reference's (numpy's pairwise one)."""
    x = call.args[0]
    shape = x.checked_type.shape
    axes = tuple(sorted(a % len(shape) for a in call.attrs.axis or ()))
    if call.checked_type.dtype != "float32" or len(shape) != 4 or axes != (1, 2):
        return False
    if call.attrs.exclude or not call.attrs.keepdims or shape[1] * shape[2] > 1 << 20:
        return False
    dequantize = isinstance(x, Call) and getattr(x.op, "name", "") == "qnn.dequantize"
    src = x.args[0] if dequantize else None
    return (
        src is not None
        and src.checked_type.dtype in EIGHT_BIT
        and all(isinstance(a, Constant) and const_array(a).size == 1 for a in x.args[1:])
    )


def quant_params(call: Call, out: str) -> tuple[dict, dict]:
    """QUANT's parameters and per-channel arrays (one entry per tensor when per-tensor): the
    channel of flat element e is (e // inner) % C along the op's axis."""
    shape = [int(d) for d in call.args[0].checked_type.shape]
    scale = np.asarray(const_array(call.args[1]), np.float32).reshape(-1)
    zp = np.asarray(const_array(call.args[2]), np.int64).reshape(-1)
    axis = call.attrs.axis % len(shape) if shape else 0
    channels = max(scale.size, zp.size)
    inner = int(np.prod(shape[axis + 1 :], dtype=np.int64)) if channels > 1 else 1
    params = {"C": channels, "inner": inner, "round": call.attrs.semantics, "out_dtype": out}
    arrays = {"scale": np.broadcast_to(scale, (channels,)).astype(np.float32),
              "zp": np.broadcast_to(zp, (channels,)).astype(np.int32)}
    return params, arrays
