"""Generate docs/npu_supported_ops.md from the pattern table and the constraint texts.

python -m partita.backends.npu.docgen > docs/npu_supported_ops.md
"""

from __future__ import annotations

from partita.backends.verdict import requirements_of

from .config import PRESETS
from .patterns import pattern_table

HEADER = """# Operators the NPU runs

Generated from backends/npu/patterns.py and backends/npu/constraints.py by
`python -m partita.backends.npu.docgen`; a test fails when this file is stale. An op that
matches no row, or fails a requirement, stays on the CPU with the requirement's text as its
reason in the placement report.
"""


# Vela 5.2's U55/U65 TFLite operators (its `vela --supported-ops-report`, read as facts), each
# with partita's status: "same" (on the NPU under Vela's constraint), "wider"/"narrower" (on the
# NPU, with the difference), or "CPU" (not on partita's NPU yet, and why).
VELA = [
    (
        "ABS",
        "int8/uint8/int16",
        "same (`npu.lut_chain`: a table of the frontend's cast -> subtract -> abs -> requantize)",
    ),
    ("ADD", "generic", "same (`npu.add`)"),
    ("ARG_MAX", "along depth, depth <= 127", "same (`npu.argmax`, int32 indices)"),
    (
        "AVERAGE_POOL_2D",
        "VALID: window <= 256x256 elements, height <= 256; SAME: <= 8x8",
        "same (`npu.avg_pool`)",
    ),
    (
        "BATCH_MATMUL",
        "int8",
        "same (`npu.batch_matmul`, the int32 product, then `npu.requantize_wide`, its output "
        "stage; cycles: the MAC array at full use)",
    ),
    ("CONCATENATION", "generic", "same (`npu.concat`, requantizing too)"),
    (
        "CONV_2D",
        "stride > 3 only VALID without dilation; |weights| sum <= 8323072",
        "same weight-sum rule; strides 1-3 and dilation 1-2 (narrower); kernels up to 64x64 "
        "(Vela: no limit)",
    ),
    (
        "DEPTHWISE_CONV_2D",
        "stride 1-3; |weights| sum",
        "same as CONV_2D (`npu.conv2d`); a depth multiplier M > 1 as Vela runs it: M "
        "depthwise convolutions and a transpose (`npu.conv2d` x M, `npu.concat`, "
        "`npu.transpose`, `npu.reshape`: backends/npu/legalize_dwconv.py)",
    ),
    (
        "ELU",
        "int8",
        "same (`npu.lut`: the builtin kernel's table of x < 0 ? expf(x) - 1 : x; BUILTIN_REF has "
        "no ELU; test models: the converter's float ELU given its int8 tensors)",
    ),
    ("EXP", "int8/int16 LUT", "same for 8-bit (`npu.lut`: TFLite's table of expf)"),
    ("EXPAND_DIMS", "generic", "same (imported as a reshape: `npu.reshape`)"),
    ("FULLY_CONNECTED", "weights O,1,..,1,I; bias int32/64", "same (`npu.dense`), depth <= 65536"),
    ("GELU", "int8/uint8, shapes match", "same (`npu.lut`)"),
    ("HARD_SWISH", "int8/uint8", "same (`npu.lut`)"),
    ("LEAKY_RELU", "int8/uint8/int16", "same (`npu.lut`; int16: 0 <= alpha <= 1)"),
    ("LOG", "int8/int16", "same for 8-bit (`npu.lut`: TFLite's table of logf)"),
    ("LOGISTIC", "int8/uint8/int16", "same for 8-bit (`npu.lut`)"),
    (
        "MAXIMUM",
        "input and output quantization must match",
        "wider (`npu.maximum`): TFLite compares stored values, so any quantization is exact",
    ),
    ("MAX_POOL_2D", "window <= 256x256 elements, height <= 256", "same (`npu.max_pool`)"),
    (
        "MEAN",
        "batch 1; depth only if h, w or c == 1; <= 16777216 elements",
        "same (`npu.mean`: any of H, W and C of a map of rank <= 4, each reduced axis <= 4096; "
        "the element limits per type, 16777216 int8, 8388608 uint8, 65536 int16)",
    ),
    ("MINIMUM", "as MAXIMUM", "wider, as MAXIMUM (`npu.minimum`)"),
    (
        "MIRROR_PAD",
        "constant paddings",
        'REFLECT mode: same (`npu.pad`, nn.pad "reflect"); SYMMETRIC: not imported yet',
    ),
    ("MUL", "generic", "same (`npu.mul`)"),
    (
        "NEG",
        "generic",
        "int8 (`npu.lut`: TFLite negates the stored values, -128 stays -128, a table is exact; "
        "test models: the converter's float NEG given its int8 tensors); float NEG stays on "
        "the CPU",
    ),
    ("PACK", "generic", "same (imported as reshapes + concatenate: `npu.reshape`, `npu.concat`)"),
    ("PAD", "constant paddings", "same (`npu.pad`)"),
    ("PADV2", "constant paddings", "same (`npu.pad`)"),
    ("PRELU", "generic", "same for 8-bit (`npu.prelu`, per-tensor alpha quantization)"),
    ("QUANTIZE", "8/16-bit in and out", "same for 8-bit (`npu.lut`: qnn.requantize)"),
    ("REDUCE_MAX", "stride rules", "wider (`npu.reduce_max`: any axes of rank <= 4 maps)"),
    ("REDUCE_MIN", "stride rules", "wider (`npu.reduce_min`, as REDUCE_MAX)"),
    ("RELU", "generic", "same (a clip: `npu.lut`, or fused into the producer)"),
    ("RELU6", "generic", "same (as RELU)"),
    ("RELU_0_TO_1", "generic", "same (as RELU)"),
    ("RELU_N1_TO_1", "generic", "same (as RELU)"),
    ("RESHAPE", "generic", "same (`npu.reshape`)"),
    (
        "RESIZE_BILINEAR",
        "2x/4x/8x upscale or 1x1 input",
        "same for int8 (`npu.resize_bilinear`: the frontend's fixed-point taps as one unit "
        "operation; also 4x/8x with half-pixel centres, which Vela limits to 2x)",
    ),
    ("RESIZE_NEAREST_NEIGHBOR", "2x/4x/8x upscale or 1x1 input", "same (`npu.resize`)"),
    (
        "REVERSE_V2",
        "no axis (Ethos-U55/U65: 'Axis attribute is not supported')",
        "same constraint (`npu.reverse`): every REVERSE_V2 with an axis stays on the CPU, as "
        "Vela 5.2 leaves both test models ('Unsupported reverse mask'); one without an axis "
        "(Vela's copy) is refused by the frontend (it imports one axis)",
    ),
    (
        "RSQRT",
        "int8/int16",
        "same for 8-bit (`npu.lut`); inputs below the zero point, an error in TFLite, "
        "give the largest output on the NPU (a table cannot fail)",
    ),
    ("SLICE", "constant parameters", "same (imported as a strided slice: `npu.strided_slice`)"),
    (
        "SOFTMAX",
        "H x W < 65536",
        "wider (`npu.softmax`, TFLite's integer softmax on the "
        "elementwise unit; cycles are an estimate)",
    ),
    ("SPLIT", "num_splits = outputs", "same (imported as slices: `npu.strided_slice`)"),
    ("SPLIT_V", "num_splits = outputs", "same (as SPLIT)"),
    ("SQUARED_DIFFERENCE", "generic", "same (`npu.squared_difference`)"),
    ("SQUEEZE", "generic", "same (`npu.squeeze`)"),
    (
        "STRIDED_SLICE",
        "positive strides, other than 1 only over H and W",
        "same (`npu.strided_slice`)",
    ),
    ("SUB", "generic", "same (`npu.sub`)"),
    (
        "SUM",
        "stride rules",
        "int8 over any of H, W and the channels: an all-ones convolution with TFLite's "
        "builtin arithmetic (the frontend imports the builtin kernels' float32 rescale as a "
        "one-double-product requantize at a scale checked over every reachable sum; "
        "backends/npu/legalize.py, `npu.conv2d` + `npu.reshape`): a depthwise convolution over "
        "a window of H and/or W of at most 64 values, a convolution to one channel when the "
        "channels are summed (H and W windows up to 64 each), a larger H and/or W window "
        "transposed into the channels first (`npu.transpose`, as Vela transposes for its "
        "ReduceSum): bit-exact with the builtin kernels on every reachable sum. A sum over the "
        "batch (of more than one), over the channels with H or W above 64, and the scales (4% "
        "of random ones) for which no such requantize exists (the float32 formula, op by op), "
        "stay on the CPU; int16 SUM is not imported (docs/npu.md). "
        "BUILTIN_REF's int8 SUM in ai-edge-litert 2.3 is broken (a constant -1 on "
        "sum_hw, up to 177 LSB off), so the builtin kernels are the oracle",
    ),
    ("TANH", "int8/uint8/int16", "same for 8-bit (`npu.lut`)"),
    (
        "TILE",
        "generic",
        "same (`npu.tile`, DMA copies); no converter-made int8 test model: TFLite 2.21 writes "
        "TILE version 3, which ai-edge-litert 2.3 cannot run",
    ),
    (
        "TRANSPOSE",
        "rank <= 8, shape products <= 2^16",
        "same rank limit (`npu.transpose`); no shape-product limit (the simulator moves any shape)",
    ),
    (
        "TRANSPOSE_CONV",
        "strides 1x1/2x2, shape rules",
        "wider (Vela's lowering: `npu.dilate` inserts the zero point, `npu.conv2d` convolves "
        "with the flipped kernel; backends/npu/legalize.py); any stride the conv takes",
    ),
    (
        "UNIDIRECTIONAL_SEQUENCE_LSTM",
        "int8 / 16x8",
        "same for int8 (the integer LSTM, imported bit-exact as integer ops unrolled over its "
        "steps, frontends/tflite/ops_lstm.py): the input side of all gates and steps as one "
        "`npu.dense`, per step the recurrent FC (`npu.lstm_dense`, int32 out where Vela writes "
        "16 bits, so TFLite's unsaturated sum stays exact), the gate adds and the cell add "
        "(`npu.lstm_add`), gemmlowp's int16 sigmoid/tanh as 16-bit tables (`npu.lstm_table`), the "
        "cell's MULs (`npu.lstm_mul`), the hidden state's MUL (`npu.lstm_mul_requantize`), int16 "
        "slices (`npu.slice16`); CIFG, peephole, projection and layer norm are refused at import "
        "(Vela refuses them too); 16x8: TFLite 2.21's converter refuses it",
    ),
    (
        "UNPACK",
        "generic",
        "same (imported as slices + reshapes: `npu.strided_slice`, `npu.reshape`)",
    ),
]

# TFLite's 16x8 mode (int16 feature maps, int8 weights) on partita's NPU: bit-exact with TFLite's
# reference kernels on tests/models/tflite/int16 (tests/backends/npu/test_npu_16x8.py).
INT16 = {
    "ADD": "same (left shift 15)",
    "AVERAGE_POOL_2D": "same",
    "CONCATENATION": "same",
    "CONV_2D": "same (int64 accumulator, TFLite's int64 rescale)",
    "DEPTHWISE_CONV_2D": "same (as CONV_2D; a depth multiplier as for 8-bit)",
    "FULLY_CONNECTED": "same (TFLite's double-rounded int16 output stage)",
    "MAX_POOL_2D": "same",
    "MEAN": "as for 8-bit (at most 65536 reduced elements)",
    "MUL": "same",
    "PAD": "same",
    "PADV2": "same",
    "QUANTIZE": "int16 -> int16 (`npu.requantize16`, the elementwise unit)",
    "RESHAPE": "same",
    "SUB": "same (left shift 15)",
    "LOGISTIC": "same (`npu.lut`, a 65,536-entry table of TFLite's interpolated kernel, its "
    "sigmoid table measured by tools/gen_int16_sigmoid_table.py; Vela's hardware table has 512 "
    "interpolated entries)",
    "TANH": "same (as LOGISTIC)",
    "SOFTMAX": "same (`npu.softmax`: TFLite's int16 softmax, two interpolated tables)",
    "MAXIMUM": "same",
    "MINIMUM": "same",
    "RESIZE_NEAREST_NEIGHBOR": "same",
    "STRIDED_SLICE": "same",
    "TRANSPOSE": "same",
    "ABS": "same (`npu.lut_chain`: the simulator's 65,536-entry table of TFLite's int16 ABS; "
    "cycles as Vela's elementwise Abs, never fused into a convolution)",
    "LEAKY_RELU": "0 <= alpha <= 1 (`npu.lut`: a 65,536-entry table of TFLite's two "
    "multipliers; cycles as Vela's LeakyRelu, or MUL, MUL and MAXIMUM where it rescales; "
    "other alphas stay on the CPU)",
}

SIDE_BY_SIDE = """
## Side by side with Vela 5.2 (Ethos-U55/U65)

Vela's operator list and constraints as its `--supported-ops-report` states them (summarised);
every row of Vela also needs 8- or 16-bit feature maps with per-tensor quantization outside the
MAC ops. The 16x8 column: TFLite's 16x8 models (int16 activations) on partita's NPU ("-": not
tested in 16x8; the frontend refuses int16 operators it does not model). On a design without
off-chip memory for feature maps (U55) every row also needs the op's maps to fit in SRAM
together; Vela instead cascades such ops (docs/npu.md, "SRAM").

| TFLite op | Vela 5.2 | partita's NPU | 16x8 |
|---|---|---|---|
"""


def render() -> str:
    lines = [HEADER, "| composite | requirements |", "|---|---|"]
    for name, _pattern, check in pattern_table():
        reqs = requirements_of(check) if check is not None else []
        text = "<br>".join(reqs) or "none"
        lines.append(f"| `npu.{name}` | {text} |")
    lines += ["", "Presets: " + ", ".join(f"`{p}`" for p in PRESETS) + " (docs/npu.md)."]
    lines.append(SIDE_BY_SIDE.rstrip("\n"))
    lines += [f"| {op} | {vela} | {ours} | {INT16.get(op, '-')} |" for op, vela, ours in VELA]
    same = sum(not ours.startswith("CPU") for _, _, ours in VELA)
    lines += ["", f"{same} of Vela's {len(VELA)} operator types run on partita's NPU.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(), end="")
