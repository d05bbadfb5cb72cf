"""qnn.conv2d / qnn.dense with the ops fused after it: one MAC kernel.

    qnn.conv2d -> [nn.bias_add] -> qnn.requantize -> [clip]   CONV, DWCONV or VCONV / VDW
    qnn.dense  -> [nn.bias_add] -> qnn.requantize -> [clip]   FC or VCONV

The output stage (TFLite's fixed-point multiplier and shift per channel, or a float scale) comes
from output_stage.py; vector_plan.vector_kernel turns the scalar kernel into the ISA's
vector one when it can. int16 data, int64 accumulators and pair saturation with weight zero
points are wide_mac.py's (registered ahead of this one).
"""

from __future__ import annotations

import numpy as np
from partita.backends.llvm.errors import LLVMError
from partita.backends.llvm.kinds import Kind

from partita.ir import Call, Constant

from .context import SPLIT_COPY, LowerContext, where
from .float_conv import ungrouped
from .output_stage import output_stage
from .registry import CORE, lowers
from .tables import const_array
from .vector_plan import FLOAT_STAGES, as_rows, im2col_as_1x1, split_worthwhile, vector_kernel


@lowers("qnn.conv2d", "qnn.dense", priority=CORE)
def lower_mac(low: LowerContext, call: Call) -> bool:
    """qnn.conv2d / qnn.dense with its bias, requantize and clip: CONV, DWCONV or FC."""
    emit_mac(low, call, where(call))
    return True


def emit_mac(low: LowerContext, call: Call, where: str) -> None:
    """qnn.conv2d / qnn.dense with its bias, requantize and clip: one CONV, DWCONV or FC
    kernel (a vector one when the ISA allows)."""
    chain = mac_chain(low, call, where)
    by = {("nn.bias_add" if c.op.name == "add" else c.op.name): c for c in chain}
    params, arrays = mac_stage(low, call, by, where)
    kind = mac_geometry(low, call, params, arrays, where)
    for c in chain[1:]:
        low.absorb(c)
    x = call.args[0]
    inputs, in_shape = [low.src(x)], x.checked_type.shape
    if (params["pairs"] and kind == Kind.CONV and in_shape[3] % 2
            and call.attrs.accumulate == "vpmaddubsw"):
        inputs, in_shape = im2col(low, call, params, arrays, inputs[0])
    out_shape = call.checked_type.shape
    if kind == Kind.FC:  # leading axes of a rank-3 (transformer) input are rows
        in_shape, out_shape = as_rows(in_shape), as_rows(out_shape)
    vector = vector_kernel(kind, params, arrays, in_shape, out_shape, low.isa,
                           overread=not low.is_input_buffer(inputs[0]))
    if vector is None and params["pairs"]:
        why = ("is x86's arithmetic: -isa=plain runs it only as the scalar WMAC kernel"
               if low.isa == "plain" else
               f"runs on the vector kernels, which do not take {params['rounding']!r} "
               "requantization")
        raise LLVMError(
            f"llvm: {where}: accumulate={call.attrs.accumulate!r} (int16 pair saturation) "
            f"{why}"
        )
    if vector is None and params["rounding"] in FLOAT_STAGES:
        raise LLVMError(
            f"llvm: {where}: {params['rounding']!r} requantization needs the vector kernels "
            f"and int8 weights"
        )
    if vector is None:
        del arrays["fscale"]
    else:
        kind, params, arrays, scratch = vector
        if low.threads > 1 and split_worthwhile(kind, params):
            params["threads"] = 2
        if scratch:
            inputs.append(low.workspace(scratch))
    batch = int(x.checked_type.shape[0]) if call.op.name == "qnn.conv2d" else 1
    if batch > 1:  # the kernel computes one image; kernel_function loops over them
        params = {**params, "batch": batch}
    low.emit(kind, chain[-1], inputs, params, arrays)  # the chain's last op names the result


def mac_chain(low: LowerContext, call: Call, where: str) -> list:
    """The accumulator and the ops fused after it: [bias add], requantize, [clip]; or
    [bias add] alone (an int32 accumulator read as such)."""
    chain, node = [call], call
    for op in ("nn.bias_add", "qnn.requantize", "clip"):
        nxt = low.only_user(node, op)
        if nxt is None and op == "nn.bias_add":
            nxt = bias_add(low, node)
        if nxt is not None:
            chain.append(nxt)
            node = nxt
        elif op == "qnn.requantize":  # the int32 accumulator itself (output_stage._raw_stage)
            break
    if call.op.name == "qnn.conv2d" and call.attrs.data_layout != "NHWC":
        raise LLVMError(f"llvm: {where}: {call.attrs.data_layout} convolutions")
    return chain

def mac_stage(low: LowerContext, call: Call, by: dict, where: str) -> tuple[dict, dict]:
    """The output stage's parameters and per-channel arrays (output_stage.output_stage)."""
    params, arrays = output_stage(call, by, where)
    params["pairs"] = pairs(low, call, where)
    if params["pairs"]:
        params["accumulate"] = call.attrs.accumulate
    return params, arrays

def mac_geometry(low: LowerContext, call: Call, params: dict, arrays: dict, where: str) -> str:
    """The kernel kind (FC, CONV, DWCONV); the weights (OHWI for convolutions) and the
    convolution's strides, dilation and padding go into ``arrays`` / ``params``."""
    x = call.args[0]
    if call.op.name == "qnn.dense":
        if x.checked_type.ndim < 2:
            raise LLVMError(f"llvm: {where}: dense on rank-{x.checked_type.ndim} data")
        arrays["weights"] = const_array(call.args[1])
        return Kind.FC
    a = call.attrs
    w = np.transpose(const_array(call.args[1]), [a.kernel_layout.index(c) for c in "OHWI"])
    cin, n_out = x.checked_type.shape[3], call.checked_type.shape[-1]
    if a.groups == 1:
        kind = Kind.CONV
    elif a.groups == cin == n_out and w.shape[3] == 1:
        kind = Kind.DWCONV
    else:  # grouped: one convolution whose weights are w_zp (an effective 0) off-group
        w = ungrouped(w, a.groups, cin, arrays["w_zp"])
        kind = Kind.CONV
    arrays["weights"] = w
    params.update(strides=list(a.strides), dilation=list(a.dilation), padding=list(a.padding))
    return kind

def bias_add(low: LowerContext, node):
    """A plain ``add`` of a constant int32 vector along the last axis (ONNX's QGemm C) read
    as the accumulator's bias, or None."""
    add = low.only_user(node, "add")
    if add is None or add.args[0] is not node or not isinstance(add.args[1], Constant):
        return None
    bias, n = const_array(add.args[1]), node.checked_type.shape[-1]
    if bias.dtype != np.int32 or bias.size != n or bias.shape[-1:] != (n,):
        return None
    if add.checked_type.shape != node.checked_type.shape:
        return None
    return add

def pairs(low: LowerContext, call: Call, where: str) -> bool:
    """Whether the MAC kernel saturates pairs of products to int16 (accumulate=
    "vpmaddubsw" / "vpmaddubsw_tap"): its dot products pair the channels within each tap
    (zero-padded to a multiple of 4: "vpmaddubsw_tap"), which is the im2col order's pairing
    when the channel count is even; an odd one goes through ``im2col``."""
    sums = call.attrs.accumulate
    if sums == "exact":
        return False
    if np.any(const_array(call.args[3])):
        raise LLVMError(f"llvm: {where}: accumulate={sums!r} with weight zero points")
    if call.op.name == "qnn.conv2d" and call.attrs.groups != 1:
        depthwise = call.attrs.groups == call.checked_type.shape[-1] == (
            call.args[0].checked_type.shape[-1])
        if not (depthwise and sums == "vpmaddubsw"):
            raise LLVMError(f"llvm: {where}: accumulate={sums!r} in a grouped convolution")
    return True

def im2col(low: LowerContext, call: Call, params: dict, arrays: dict, src: int):
    """An odd channel count pairs products across kernel taps (im2col order): copy the
    windows into an (OH, OW, KH*KW*C) buffer (IM2COL, padding = the input zero point) and
    run the convolution as a 1x1 one over it, whose pairs are the same."""
    n = call.checked_type.shape[0]
    kh, kw = arrays["weights"].shape[1:3]  # OHWI
    p = {k: params[k] for k in ("strides", "dilation", "padding", "in_zp")}
    if n > 1:
        p["batch"] = int(n)
    shape = im2col_as_1x1(call.checked_type.shape, params, arrays)
    if low.threads > 1 and int(np.prod(shape[1:])) >= SPLIT_COPY:
        p["threads"] = 2  # rows of windows in chunks the worker shares (scalar.py first_axis)
    out = low.scratch(Kind.IM2COL, [src], shape, call.args[0].checked_type.dtype,
                       {**p, "kernel": [kh, kw]})
    return [out], shape
