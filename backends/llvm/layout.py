"""The LLVM kernels work in NHWC. Graphs with NCHW quantized convolutions (ONNX, PyTorch, Relay
imports) are converted before partitioning, as for the NPU: transposes are left only where the
layout really changes (usually the graph's input and output)."""

from __future__ import annotations

from partita.ir import IRModule
from partita.passes.convert_layout import quantized_convs_to_nhwc
from partita.passes.infra import module_pass


@module_pass("LLVMConvertLayout", opt_level=0)
def LLVMConvertLayout(mod: IRModule, ctx) -> IRModule:
    """Quantized convolutions to NHWC (``quantized_convs_to_nhwc``); NHWC graphs unchanged."""
    return quantized_convs_to_nhwc(mod, "llvm_convert_layout")
