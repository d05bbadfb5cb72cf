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

from partita.ir import IRModule
from partita.passes.convert_layout import quantized_convs_to_nhwc
from partita.passes.infra import module_pass


@module_pass("NPUConvertLayout", opt_level=0)
def NPUConvertLayout(mod: IRModule, ctx) -> IRModule:
    """Quantized convolutions to NHWC (``quantized_convs_to_nhwc``); NHWC graphs unchanged."""
    return quantized_convs_to_nhwc(mod, "npu_convert_layout")
