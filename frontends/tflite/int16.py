"""TFLite's 16x8 mode: int16 activations, int8 weights, int64 biases.

The converter's ``EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8`` makes models whose
activations are int16 with zero point 0 (symmetric) and whose weights stay int8. TFLite's kernels
then accumulate weighted sums in int64 and requantize them with the int64
MultiplyByQuantizedMultiplier (a 16-bit multiplier, one round-half-up shift: qnn.requantize on
int64 data); ADD and SUB take a left shift of 15 instead of 20 (qnn.add's int16 form); MUL,
pooling, MEAN and QUANTIZE use their 8-bit formulas on int16 values.

``INT16_OPS`` lists the operators whose int16 form partita imports bit-exact with TFLite's
reference kernels (tests/frontends/tflite/test_tflite_16x8.py, models made by
tools/gen_tflite_16x8_models.py); any other quantized operator on int16 tensors is refused with
that reason.
"""

from __future__ import annotations

import numpy as np

from .context import OpContext, Unsupported
from .reader import Tensor

INT16_OPS = frozenset(
    {
        "ABS",
        "ADD",
        "AVERAGE_POOL_2D",
        "CONCATENATION",
        "CONV_2D",
        "DEPTHWISE_CONV_2D",
        "FULLY_CONNECTED",
        "LEAKY_RELU",
        "LOGISTIC",
        "MAXIMUM",
        "MEAN",
        "MINIMUM",
        "MUL",
        "QUANTIZE",
        "RESIZE_NEAREST_NEIGHBOR",
        "SOFTMAX",
        "STRIDED_SLICE",
        "SUB",
        "TANH",
        "TRANSPOSE",
    }
)
WEIGHTED = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


def is_16x8(tensors: tuple[Tensor, ...]) -> bool:
    return any(t.dtype == "int16" for t in tensors)


def check_16x8_io(ctx: OpContext, tensors: tuple[Tensor, ...]) -> None:
    """The operator may run in 16x8: partita models its int16 kernel, activations are int16
    with zero point 0 (TFLite's kernels require it) and weights are int8."""
    name = ctx.op.name
    if name not in INT16_OPS:
        raise Unsupported(
            f"{name} on int16 tensors (16x8): partita imports int16 "
            f"{', '.join(sorted(INT16_OPS))} bit-exact with TFLite, not this operator yet"
        )
    if name in ("ADD", "SUB") and ctx.options.get("PotScaleInt16", True):
        raise Unsupported(
            f"16x8 {name} with pot_scale_int16 (TFLite's power-of-two int16 path); partita "
            f"models the general-scale path the converter writes (pot_scale_int16 false)"
        )
    for k, t in enumerate(tensors):
        if not t.quantized:
            ctx.fail(f"{t.describe()} has no quantization parameters")
        weight = name in WEIGHTED and k == 1
        if weight:
            if t.dtype != "int8":
                raise Unsupported(f"16x8 {name} with {t.type_name} weights (TFLite takes int8)")
            continue
        if t.dtype != "int16":
            raise Unsupported(f"{name} mixing {t.type_name} tensor {t.name!r} with int16 tensors")
        if np.any(np.asarray(t.zero_point) != 0):
            ctx.fail(
                f"{t.describe()} has zero point {int(np.asarray(t.zero_point).ravel()[0])}; "
                f"TFLite's int16 kernels require zero point 0"
            )


def accumulator_dtype(x: Tensor) -> str:
    """The weighted ops' accumulator: int64 for int16 data (TFLite's 16x8 kernels), else int32."""
    return "int64" if x.dtype == "int16" else "int32"
