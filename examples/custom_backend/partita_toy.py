"""A toy accelerator, declared outside partita: a pattern table, checks and a compile hook.

It runs quantized convolutions with stride 1 or 2 (depthwise ones unless ``-depthwise=no``),
quantized adds and max pooling. ``pip install examples/custom_backend`` makes it a target:
``partita inspect model.tflite --target "toy, llvm"``.
"""

from __future__ import annotations

from partita.backends import Backend, Option, Verdict, all_of, constraint
from partita.backends.ref import InterpretedRegion
from partita.patterns import constants, is_constant, is_op, wildcard

STRIDES = (1, 2)


def _conv_of(expr):
    """The qnn.conv2d under a matched conv2d composite root (clip -> requantize -> ...)."""
    while expr.op_name != "qnn.conv2d":
        expr = expr.args[0]
    return expr


@constraint("Stride must be {} or {} in both directions", *STRIDES)
def stride(root) -> Verdict:
    sh, sw = _conv_of(root).attrs.strides
    return Verdict(sh in STRIDES and sw in STRIDES, f"got {sh}x{sw}")


@constraint("Kernels must be at most 5x5")
def kernel_size(root) -> Verdict:
    conv = _conv_of(root)
    kernel = conv.args[1].checked_type.shape
    kh, kw = (kernel[conv.attrs.kernel_layout.index(c)] for c in "HW")
    return Verdict(kh <= 5 and kw <= 5, f"got {kh}x{kw}")


@constraint("Depthwise convolutions are disabled (-depthwise=no)")
def no_depthwise(root) -> Verdict:
    return Verdict(_conv_of(root).attrs.groups == 1, "")


def conv2d_pattern():
    """[nn.pad] -> qnn.conv2d -> [nn.bias_add] -> qnn.requantize -> [clip]"""
    data = is_op("nn.pad")(wildcard(), is_constant()) | wildcard()
    conv = is_op("qnn.conv2d")(data, is_constant(), *constants(4))
    conv = conv.optional(lambda c: is_op("nn.bias_add")(c, is_constant()))
    out = is_op("qnn.requantize")(conv, *constants(4))
    return out.optional(lambda r: is_op("clip")(r))


def pattern_table(options):
    """First match wins: the fused convolution before the lone add."""
    checks = [stride, kernel_size]
    if options["depthwise"] == "no":
        checks.append(no_depthwise)
    add = is_op("qnn.add")(wildcard(), wildcard(), *constants(6))
    add = add.optional(lambda a: is_op("clip")(a))
    return [("conv2d", conv2d_pattern(), all_of(*checks)), ("add", add)]


def compile_function(function, options):
    """The toy 'compiles' a partition by keeping it: the interpreter is its machine."""
    return InterpretedRegion(function, backend="toy")


backend = Backend(
    "toy",
    patterns=pattern_table,
    ops={"nn.max_pool2d": True},
    compile=compile_function,
    load=InterpretedRegion.loader("toy"),
    options={"depthwise": Option("yes", ("yes", "no"), "no: refuse depthwise convolutions")},
    description="a toy accelerator for the custom-backend example",
)
