"""The NPU runs a transposed convolution as Vela does: a zero insertion (nn.dilate) and an
ordinary convolution with the kernel flipped (partita.passes.transpose_conv, which the llvm host
uses too)."""

from __future__ import annotations

from partita.ir import IRModule
from partita.passes.infra import module_pass
from partita.passes.transpose_conv import LegalizeTransposeConv


@module_pass("NPULegalizeTransposeConv", opt_level=0)
def NPULegalizeTransposeConv(mod: IRModule, ctx) -> IRModule:
    """Every qnn.conv2d_transpose the NPU can run as nn.dilate + qnn.conv2d."""
    return LegalizeTransposeConv()(mod)
