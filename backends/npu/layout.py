"""The NPU works in NHWC. Graphs with NCHW quantized convolutions (ONNX, Relay-style imports) are
converted before partitioning, so their convolutions and everything between them can run on the
NPU, with transposes left only where the layout really changes (usually the graph's input and
output, which then stay on the host):

    qnn.conv2d(%x, W /* OIHW */, data_layout="NCHW")
->  transpose(qnn.conv2d(transpose(%x, [0, 2, 3, 1]), W' /* HWIO */, data_layout="NHWC"),
              [0, 3, 1, 2])

NHWC graphs (TFLite) are returned unchanged.
"""

from __future__ import annotations

from partita.ir import IRModule, iter_calls
from partita.passes import ConvertLayout, InferType, Sequential, SimplifyExpr
from partita.passes.infra import module_pass

DESIRED = {"qnn.conv2d": ("NHWC", "HWIO")}


def _has_nchw_conv(mod: IRModule) -> bool:
    return any(
        getattr(call.op, "name", None) == "qnn.conv2d" and call.attrs.data_layout != "NHWC"
        for fn in mod.functions.values()
        for call in iter_calls(fn.body)
    )


@module_pass("NPUConvertLayout", opt_level=0)
def NPUConvertLayout(mod: IRModule, ctx) -> IRModule:
    """ConvertLayout to NHWC (then SimplifyExpr cancels the transpose pairs) when the module has
    an NCHW quantized convolution; otherwise ``mod`` itself."""
    if not _has_nchw_conv(mod):
        return mod
    steps = [ConvertLayout(desired_layouts=DESIRED), SimplifyExpr(), InferType()]
    return Sequential(steps, name="npu_convert_layout")(mod)
