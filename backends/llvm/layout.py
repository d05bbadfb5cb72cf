"""The LLVM kernels work in NHWC. Graphs with NCHW quantized convolutions (ONNX, PyTorch, Relay
imports) are converted before partitioning, as for the NPU: transposes are left only where the
layout really changes (usually the graph's input and output)."""

from __future__ import annotations

from partita.ir import IRModule, iter_calls
from partita.passes import ConvertLayout, InferType, Sequential, SimplifyExpr
from partita.passes.infra import module_pass

DESIRED = {"qnn.conv2d": ("NHWC", "HWIO")}


@module_pass("LLVMConvertLayout", opt_level=0)
def LLVMConvertLayout(mod: IRModule, ctx) -> IRModule:
    """ConvertLayout to NHWC (then SimplifyExpr cancels the transpose pairs) when the module has
    an NCHW quantized convolution; otherwise ``mod`` itself."""
    nchw = any(
        getattr(call.op, "name", None) == "qnn.conv2d" and call.attrs.data_layout != "NHWC"
        for fn in mod.functions.values()
        for call in iter_calls(fn.body)
    )
    if not nchw:
        return mod
    steps = [ConvertLayout(desired_layouts=DESIRED), SimplifyExpr(), InferType()]
    return Sequential(steps, name="llvm_convert_layout")(mod)
