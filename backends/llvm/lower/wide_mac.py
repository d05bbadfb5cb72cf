"""qnn.conv2d / qnn.dense that the 8-bit MAC kernels (lower.mac, the scalar CONV / DWCONV / FC
and the vector VCONV / VDW ones) do not take, as one scalar WMAC kernel (wide_mac.py):

    int16 data (TFLite's 16x8 kernels: int8 weights, int64 accumulators), int16 weights,
    int64 accumulators of any data, outputs requantized to int16 / int32, per-channel
    requantize zero points

with the nn.bias_add, qnn.requantize and clip that follow it fused (each only when it is its
producer's single reader; a requantize per channel only along the output channels). As the
references compute them (partita/ops/qnn.py, nn.py, tensor.py): the sum of (x - zp_in) *
(w - zp_w) in int64 (numpy's wrapping int64 arithmetic, so any order gives its bits), wrapped to
the accumulator's dtype, plus the bias wrapped again, requantized per element as an EWISE
requantize step is (integer.requantize_node's parameters, integer.requantize_value: every
semantics; int64 data take TFLite's int64 MultiplyByQuantizedMultiplier), then clipped with the
bounds the clip op computes.

Pair-saturating accumulation (accumulate="vpmaddubsw" / "vpmaddubsw_tap") stays with the 8-bit
vector kernels where they take it; WMAC takes it with weight zero points (asymmetric int8
weights), int64 accumulators or wide outputs, and wherever lower.mac would refuse it for want of
a vector kernel (``_vector_kernels_refuse``: -isa=plain, an output stage they lack such as
"tflite_builtin" or a raw int32 accumulator, grouped convolutions that are not depthwise,
depthwise ones of int8 data): the exact sum plus, for each pair of products in the mode's order
(``pair_slots``), sat16(pair) - pair over raw uint8 data (int8 + 128) and raw int8 weights, as
qnn.conv2d / qnn.dense's references add x86_int8.pair_saturation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from partita.backends.llvm.errors import LLVMError
from partita.backends.llvm.kinds import Kind
from partita.backends.registry import BackendError

from partita.ir import Call, Constant

from . import mac
from .float_ops import clip_bounds
from .integer import requantize_node, requantize_ok
from .output_stage import output_stage
from .registry import EDGE, lowers
from .vector_plan import as_rows, im2col_as_1x1, vector_kernel

if TYPE_CHECKING:
    from .context import LowerContext

EIGHT_BIT = ("int8", "uint8")
TORCH = ("fbgemm", "onednn")  # requantize semantics whose input zero point may be per channel


def _where(call) -> str:
    return call.op.name + (f" ({call.span})" if call.span is not None else "")


def _chain(low: LowerContext, call) -> dict:
    """The nodes mac.mac_chain would fuse after ``call``: "nn.bias_add" (or ONNX's plain add of
    an int32 vector), "qnn.requantize", "clip" (only after a requantize)."""
    by, node = {}, call
    for op in ("nn.bias_add", "qnn.requantize", "clip"):
        nxt = low.only_user(node, op)
        if nxt is None and op == "nn.bias_add":
            nxt = mac.bias_add(low, node)
        if nxt is None and op == "qnn.requantize":
            break
        if nxt is not None:
            by[op], node = nxt, nxt
    return by


def _eight_bit_mac_takes(call, by: dict) -> bool:
    """Whether lower.mac's kernels take ``call`` (with its chain ``by``): 8-bit data and weights,
    int32 accumulators, 8-bit outputs, per-tensor requantize zero points, NHWC."""
    x, w = call.args[:2]
    if (
        x.checked_type.dtype not in EIGHT_BIT
        or w.checked_type.dtype not in EIGHT_BIT
        or call.checked_type.dtype != "int32"
    ):
        return False
    if call.op.name == "qnn.conv2d" and call.attrs.data_layout != "NHWC":
        return True  # the layout pass makes them NHWC; lower.mac names any that is left
    rq = by.get("qnn.requantize")
    if rq is None:
        return True
    sizes = [np.asarray(a.data).size if isinstance(a, Constant) else 1 for a in rq.args[1:]]
    per_channel_zp = sizes[3] > 1 or (sizes[1] > 1 and rq.attrs.semantics not in TORCH)
    return rq.checked_type.dtype in EIGHT_BIT and not per_channel_zp


def _vector_kernels_refuse(low: LowerContext, call, by: dict) -> bool:
    """Whether lower.mac refuses pair-saturating ``call`` (symmetric weights, 8-bit MAC
    dtypes) for want of a vector kernel, asked as LowerContext.mac asks, step by step:
    mac.mac_stage (quantized.output_stage, then mac.pairs, which refuses grouped
    convolutions other than depthwise "vpmaddubsw" ones), mac.mac_geometry, the IM2COL
    1x1 form of an odd channel count (mac.im2col's shapes, without its copy kernel), then
    vector_plan.vector_kernel itself: None there is mac's "int16 pair saturation" refusal. What mac
    refuses for another reason (a layout, an output stage, rank-1 dense data) stays its own
    refusal (False). ``by`` is mac's own chain: _chain fuses what mac_chain does."""
    a, where = call.attrs, _where(call)
    if a.accumulate == "exact" or (call.op.name == "qnn.conv2d" and a.data_layout != "NHWC"):
        return False  # mac_chain names a layout the layout pass left
    try:
        params, arrays = output_stage(call, by, where)
    except BackendError:
        return False
    try:
        mac.pairs(low, call, where)  # weight zero points never reach here (WMAC takes them)
    except LLVMError:
        return True
    params.update(pairs=True, accumulate=a.accumulate)
    x = call.args[0]
    try:
        kind = mac.mac_geometry(low, call, params, arrays, where)
        src = low.src(x)
    except BackendError:
        return False
    in_shape, out_shape = x.checked_type.shape, call.checked_type.shape
    overread = not low.is_input_buffer(src)
    if kind == Kind.CONV and in_shape[3] % 2 and a.accumulate == "vpmaddubsw":
        # mac.im2col: a 1x1 convolution over its IM2COL scratch
        in_shape, overread = im2col_as_1x1(out_shape, params, arrays), True
    if kind == Kind.FC:
        in_shape, out_shape = as_rows(in_shape), as_rows(out_shape)
    return vector_kernel(kind, params, arrays, in_shape, out_shape, low.isa, overread) is None


@lowers("qnn.conv2d", "qnn.dense", priority=EDGE)
def lower_wide_mac(low: LowerContext, call) -> bool:
    """qnn.conv2d / qnn.dense as WMAC, or False for what lower.mac takes (not pair-saturating
    accumulation with weight zero points or that the vector kernels refuse) or what has
    weights or zero points computed at run time (dynamic_int8's dynamic quantization, or
    refused)."""
    if not all(isinstance(a, Constant) for a in call.args[1:4]):
        return False
    by = _chain(low, call)
    a = call.attrs
    weight_zp = a.accumulate != "exact" and np.any(np.asarray(call.args[3].data))
    if (_eight_bit_mac_takes(call, by) and not weight_zp
            and not _vector_kernels_refuse(low, call, by)):
        return False
    where = _where(call)
    dtypes = f"{call.args[0].checked_type.dtype} data, {call.args[1].checked_type.dtype} weights"
    if call.op.name == "qnn.conv2d" and a.data_layout != "NHWC":
        raise LLVMError(
            f"llvm cannot compile {where} yet: {a.data_layout} convolutions of "
            f"{dtypes} (the layout pass makes them NHWC)"
        )
    params, arrays = _geometry(call)
    last = _fuse(low, call, by, params, arrays)
    low.emit(Kind.WMAC, last, [low.src(call.args[0])], params, arrays)
    return True


def _geometry(call) -> tuple[dict, dict]:
    """WMAC's shapes and weights: a convolution's OHWI weights (groups' input channels only),
    a dense's (units, depth) ones, as int32 with the per-channel weight zero points apart."""
    x, w, zx, zw = call.args[:4]
    weights = np.asarray(w.data)
    params = {
        "op": call.op.name,
        "x_dtype": x.checked_type.dtype,
        "zx": int(np.asarray(zx.data)),
        "acc": call.checked_type.dtype,
    }
    arrays = {}
    if call.op.name == "qnn.conv2d":
        a = call.attrs
        weights = np.transpose(weights, [a.kernel_layout.index(c) for c in "OHWI"])
        params.update(
            groups=int(a.groups),
            strides=[int(v) for v in a.strides],
            dilation=[int(v) for v in a.dilation],
            padding=[int(v) for v in a.padding[:2]],
        )
    if call.attrs.accumulate != "exact":
        params["pairs"] = call.attrs.accumulate
        arrays["slots"] = pair_slots(call.op.name, call.attrs.accumulate, weights.shape)
    n_out = weights.shape[0]
    zero_points = np.broadcast_to(np.asarray(zw.data, np.int64).reshape(-1), (n_out,))
    arrays.update(w=np.ascontiguousarray(weights.astype(np.int32)), zw=zero_points.astype(np.int32))
    return params, arrays


def pair_slots(op: str, accumulate: str, shape) -> np.ndarray:
    """(K2, 3) int32: the (ky, kx, input channel) of each product in VPMADDUBSW's order, so that
    slots 2j and 2j + 1 are pair j; (-1, 0, 0) is a zero product. A convolution's K runs in NHWC
    im2col order (ky, kx, c), odd K padded at the end; "vpmaddubsw_tap" pads each tap's odd
    channel count instead; a dense's K (shape (units, depth)) is (0, 0, d)."""
    if op == "qnn.dense":
        taps, cg = [(0, 0)], shape[1]
    else:
        taps, cg = [(ky, kx) for ky in range(shape[1]) for kx in range(shape[2])], shape[3]
    zero = [(-1, 0, 0)]
    per_tap = accumulate == "vpmaddubsw_tap" and op == "qnn.conv2d" and cg % 2
    rows = []
    for ky, kx in taps:
        rows += [(ky, kx, c) for c in range(cg)] + (zero if per_tap else [])
    rows += zero * (len(rows) % 2)
    return np.asarray(rows, np.int32).reshape(-1, 3)


def _fuse(low: LowerContext, call, by: dict, params: dict, arrays: dict):
    """Fuse what of ``by`` the kernel takes into ``params`` / ``arrays`` (marking it absorbed);
    the last node fused (``call`` itself when nothing is)."""
    n_out = int(call.checked_type.shape[-1])
    last_axis = call.checked_type.ndim - 1
    bias, last = by.get("nn.bias_add"), call
    if (
        bias is not None
        and isinstance(bias.args[1], Constant)
        and bias.args[0] is call
        and (bias.op.name == "add" or bias.attrs.axis % call.checked_type.ndim == last_axis)
    ):
        value = np.asarray(bias.args[1].data).astype(np.int64).reshape(-1)
        value = np.broadcast_to(value, (n_out,))  # int64 as two int32 halves (constants())
        arrays["bias_lo"] = (value & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
        arrays["bias_hi"] = (value >> 32).astype(np.int32)
        last = bias
    rq = by.get("qnn.requantize")
    if rq is None or rq.args[0] is not last or not _rq_fusable(rq, last_axis):
        return _absorb(low, call, last)
    params["rq"], rq_arrays = _requantize_stage(rq, n_out)
    arrays.update(rq_arrays)
    last = rq
    clip = by.get("clip")
    if clip is not None and clip.args[0] is rq:
        params["clip"] = clip_bounds(clip)["ibounds"]
        last = clip
    return _absorb(low, call, last)


def _rq_fusable(rq: Call, last_axis: int) -> bool:
    per_channel = any(np.asarray(p.data).size > 1 for p in rq.args[1:] if isinstance(p, Constant))
    return requantize_ok(rq) and (not per_channel or rq.attrs.axis % (last_axis + 1) == last_axis)


def _absorb(low: LowerContext, call, last):
    node = last
    while node is not call:
        low.absorb(node)
        node = node.args[0]
    return last


class _Leaves:
    """Collects requantize_node's per-channel parameters (for float_ops.Tree's leaves)."""

    def __init__(self):
        self.arrays: list[np.ndarray] = []

    def array_leaf(self, array, pshape) -> None:
        self.arrays.append(np.asarray(array).reshape(-1))


def _requantize_stage(rq: Call, n_out: int) -> tuple[dict, dict]:
    """The requantize's semantics and its parameters, one per output channel, exactly as the
    EWISE step computes them (integer.requantize_node): the stage ProductKernels._requantized
    applies (its ``axis`` 0: the kernel passes the output channel)."""
    leaves = _Leaves()
    node = requantize_node(leaves, rq, None)

    def per_channel(v, dtype):
        return np.ascontiguousarray(np.broadcast_to(v, (n_out,)).astype(dtype))

    q, shift, scale, zi, zo = leaves.arrays
    float_zp = zi.dtype.kind == "f"
    params = {
        **node[3],
        "out_dtype": rq.checked_type.dtype,
        "acc": rq.args[0].checked_type.dtype,
        "axis": 0,
        "float_zp": float_zp,
    }
    arrays = {
        "rq_q": per_channel(q, np.int32),
        "rq_shift": per_channel(shift, np.int32),
        "rq_scale": per_channel(scale, np.float64),
        "rq_zi": per_channel(zi, np.float64 if float_zp else np.int32),
        "rq_zo": per_channel(zo, np.int32),
    }
    return params, arrays


__all__ = ["lower_wide_mac", "pair_slots"]
