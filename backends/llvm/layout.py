"""The LLVM kernels work in NHWC. Graphs with NCHW convolutions (ONNX, PyTorch, Relay imports)
are converted before partitioning, as for the NPU: transposes are left only where the layout
really changes (usually the graph's input and output). Quantized transposed convolutions become
nn.dilate + qnn.conv2d (passes/transpose_conv.py, as the NPU runs them), found in the same
walk."""

from __future__ import annotations

from partita.ir import IRModule, iter_calls
from partita.passes.convert_layout import ConvertLayout, quantized_convs_to_nhwc
from partita.passes.infer_type import infer_new_types
from partita.passes.infra import Sequential, module_pass
from partita.passes.simplify_expr import SimplifyExpr
from partita.passes.transpose_conv import LegalizeTransposeConv


@module_pass("LLVMConvertLayout", opt_level=0)
def LLVMConvertLayout(mod: IRModule, ctx) -> IRModule:
    """Quantized convolutions to NHWC (``quantized_convs_to_nhwc``), then float ones, whatever
    their ``accumulate``: each output's summation order (exact, MLAS's or PyTorch's) does not
    depend on the memory layout, so the NHWC kernels reproduce it; NHWC graphs unchanged.
    Then every qnn.conv2d_transpose that can be, as nn.dilate + qnn.conv2d (the same bits)."""
    convs = {
        name
        for fn in mod.functions.values()
        for call in iter_calls(fn.body)
        if (name := getattr(call.op, "name", None)) == "qnn.conv2d_transpose"
        or (name in ("qnn.conv2d", "nn.conv2d") and call.attrs.data_layout != "NHWC")
    }
    if "qnn.conv2d_transpose" in convs:
        convs.discard("qnn.conv2d_transpose")
        mod = LegalizeTransposeConv()(mod)
    if not convs:
        return mod  # one walk finds nothing to convert (NHWC graphs, as TFLite's)
    mod = quantized_convs_to_nhwc(mod, "llvm_convert_layout")
    if "nn.conv2d" not in convs:
        return mod
    steps = [ConvertLayout(desired_layouts={"nn.conv2d": ("NHWC", "HWIO")}), SimplifyExpr(),
             TypeRewritten()]
    return Sequential(steps, name="llvm_convert_layout_float")(mod)


@module_pass("TypeRewritten", opt_level=0)
def TypeRewritten(mod: IRModule, ctx) -> IRModule:
    """InferType for what the layout rewrite rebuilt only (the rest keeps its types): build
    infers the module's types once (partition_for's first pass)."""
    for fn in mod.functions.values():
        infer_new_types(fn, mod)
    return mod
