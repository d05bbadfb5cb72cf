"""The 16x8 in-graph and one-op models' operations charged as Vela 5.2 runs them, pinned
against its debug database (`vela --enable-debug-db` from /work/tfvenv: perf's op_cycles,
perf_debug's memories, formats and est_op_cycles_without_buffering, perf_debug_main's blocks;
tests/models/tflite/int16, session 21): maps between two operations in NHCWB16 bricks, the
scheduler's estimate of an elementwise operation as the next weight DMA's slack, the depth
multiplier's 16-bit transposes and its ReLU after them, regor's ElementwiseSanitizer, and the
U65's one-op MEAN."""

from __future__ import annotations

from pathlib import Path

import pytest
from partita.backends.npu.config import get_config
from partita.backends.npu.vela_decompose import _scaling_issue
from partita.backends.npu.vela_depthmult import transpose_views
from partita.backends.npu.vela_layout import bricked_map, evicted_maps, hardware_transpose_cycles
from partita.frontends import from_tflite

import partita as P

MODELS = Path(__file__).resolve().parents[2] / "models" / "tflite" / "int16"


def _region(name: str, preset: str):
    exe = P.build(from_tflite(MODELS / f"{name}.tflite"), f"npu -config={preset}, llvm")
    (step,) = exe.steps
    return step.region


def _cycles(name: str, preset: str) -> list[int]:
    return [c["cycles"] for c in _region(name, preset).cycles]


# Vela's op cycles per operation: the 3x3 convolution writing its 8x8x8 int16 map in bricks
# (write efficiency 1.0), the ABS or LEAKY_RELU, the 1x1 convolution reading the bricks
# (read efficiency 1.0) into the region's NHWC output. On the U65 the last convolution waits
# for its weights: 1,773 + 516 - 357 (the elementwise operation's estimate, its maps in DRAM)
VELA_IN_GRAPH = {
    ("abs_in_graph", "u55-256"): (960, 512, 704),
    ("leaky_relu_in_graph", "u55-256"): (960, 1792, 704),
    ("abs_in_graph", "u65-256"): (1790, 256, 1932),
    ("leaky_relu_in_graph", "u65-256"): (1790, 1152, 1932),
}


@pytest.mark.parametrize("name, preset", sorted(VELA_IN_GRAPH))
def test_in_graph_operations_cost_velas(name, preset):
    ours = _cycles(name, preset)
    for got, want in zip(ours, VELA_IN_GRAPH[name, preset]):
        assert abs(got - want) <= 3, (ours, VELA_IN_GRAPH[name, preset])


def test_maps_between_operations_are_bricked_unless_a_transpose_touches_them():
    """The depth multiplier's pieces write NHWC slices for the transposes (Vela's debug
    database: ofm 2x8x8x8 NHWC); the first convolution's map, between two MAC operations, is
    NHCWB16; a region's input and output are NHWC."""
    program = _region("dwconv_m2_in_graph", "u55-256").program
    kinds = {op.output: op.kind for op in program.ops}
    first = program.ops[0].output
    assert bricked_map(program, first)
    pieces = [t for t, k in kinds.items() if k == "DWCONV"]
    assert len(pieces) == 2 and not any(bricked_map(program, t) for t in pieces)
    assert not bricked_map(program, program.inputs[0])
    assert not bricked_map(program, program.outputs[0])


# the seven 16-bit transposes' op cycles on u55-256 (each from SRAM to SRAM) and the ReLU Vela
# runs once after them, on (H, W, C x M): 604 / 1,556 on u55-256, 1,040 / 1,412 on u65-256
VELA_TRANSPOSES16 = {
    (2, 6, 6, 4): (144, 144, 432, 288, 144, 288, 432),
    (2, 8, 8, 8): (512, 512, 1024, 1024, 768, 512, 1024),
}


@pytest.mark.parametrize("shape", sorted(VELA_TRANSPOSES16))
def test_16_bit_transposes_read_regor_16_bit_input_blocks(shape):
    config = get_config("u55-256")
    ours = [
        hardware_transpose_cycles(config, view, out, ("sram", "sram"), 2)
        for view, out, _ in transpose_views(shape)
    ]
    assert [int(c) for c in ours] == list(VELA_TRANSPOSES16[shape])


# Vela's op cycles of the pieces (each depthwise convolution, without the ReLU)
VELA_PIECES16 = {
    ("dwconv_m2", "u55-256"): 447,
    ("dwconv_m2_in_graph", "u55-256"): 1024,
    ("dwconv_m2", "u65-256"): 886,
    ("dwconv_m2_in_graph", "u65-256"): 832,
}


@pytest.mark.parametrize(
    "name, preset, relu, tol",
    [
        ("dwconv_m2", "u55-256", 604, 0.03),
        ("dwconv_m2_in_graph", "u55-256", 1556, 0.03),
        ("dwconv_m2", "u65-256", 1040, 0.11),  # ours 929: its DRAM write
        ("dwconv_m2_in_graph", "u65-256", 1412, 0.03),
    ],
)
def test_16_bit_multiplier_relu_runs_once_after_the_transposes(name, preset, relu, tol):
    region = _region(name, preset)
    ops, config = region.program.ops, get_config(preset)
    (transpose,) = [op for op in ops if op.params.get("op") == "transpose"]
    steps = sum(
        hardware_transpose_cycles(config, view, out, ("sram", "sram"), 2)
        for view, out, _ in transpose_views(region.program.tensors[transpose.inputs[0]].shape)
    )
    charged = region.cycles[ops.index(transpose)]["cycles"]
    assert abs((charged - steps) / relu - 1) <= tol, (charged, steps)
    pieces = [c["cycles"] for op, c in zip(ops, region.cycles) if op.kind == "DWCONV"]
    vela = VELA_PIECES16[name, preset]
    assert len(pieces) == 2 and all(abs(p / vela - 1) <= 0.03 for p in pieces), pieces


def test_elementwise_sanitizer_moves_the_quantized_input_off_chip_on_the_u65():
    """maximum: QUANTIZE, then MAXIMUM of its map and the region's other input; on the U65
    the region's input is in DRAM, so Vela moves the QUANTIZE's map there too (its debug
    database: ofm / ifm Dram NHCWB16); on the U55 everything is in SRAM."""
    for preset, moved in (("u55-256", False), ("u65-256", True)):
        region = _region("maximum", preset)
        quantized = region.program.ops[0].output
        assert evicted_maps(region.program, region.config) == ({quantized} if moved else set())


# regor's EstimateElementwiseCycles for the MEAN's multiplication, cmd cycles in Vela's debug
# database on u65-256 (the int32 scalar read from DRAM, 500 cycles' latency): mean_axis2's
# 2x1x16 flat sums writing DRAM (72), mean_axis2_in_graph's 8x1x8 bricked sums (162), int8
# mean_hw's 1x1x4 sums writing its NHWC output (17)
@pytest.mark.parametrize(
    "sums, bits, reshaped, dst, brick, vela",
    [
        ((8, 1, 4), 16, True, "dram", False, 72),
        ((8, 1, 8), 16, False, "sram", True, 162),
        ((1, 1, 4), 8, False, "dram", False, 17),
    ],
)
def test_mean_multiplication_waits_for_its_scalar(sums, bits, reshaped, dst, brick, vela):
    ours = _scaling_issue(get_config("u65-256"), sums, bits, reshaped, dst, brick)
    assert abs(ours - vela) <= 1, ours


@pytest.mark.parametrize(
    "name, preset, vela",
    [("mean_axis2", "u65-256", 796), ("mean_axis2", "u65-512", 759), ("mean", "u65-256", 1414)],
)
def test_u65_one_op_mean_costs_velas(name, preset, vela):
    """The one-op MEAN's convolution reads its kernel, scales and biases from DRAM (Vela's
    debug database: DramScales_read; 78 of its 142 MAC and output cycles on u65-256)."""
    ours = sum(_cycles(name, preset))
    assert abs(ours / vela - 1) <= 0.01, ours


def test_bricked_maps_move_their_depth_rounded_to_16():
    """int8 sum_in_graph on u55-256: the SUM's 1x1 convolution reads the 8x8x8 map and writes
    its 8x8x1 sums in bricks, 1,024 SRAM bytes each way (Vela's debug database:
    SramFeatureMap_read / _write 1,024, 262 op cycles, bound by the SRAM access); its three
    operations 576, 262 and 328."""
    path = MODELS.parent / "ops" / "sum_in_graph.tflite"
    exe = P.build(from_tflite(path), "npu -config=u55-256, llvm")
    (step,) = exe.steps
    ours = [c["cycles"] for c in step.region.cycles]
    assert ours[0] == 576 and ours[2] == 328 and abs(ours[1] - 262) <= 6, ours


# Vela's op cycles of the one-op 16x8 LOGISTIC and TANH (4x4x8): its native int16 sigmoid /
# tanh, a 1x1 pool with 16-bit input (mac and ao cycles 160, cmd 40), no table loaded
VELA_SIGMOID16 = {"u55-128": 528, "u55-256": 360, "u65-256": 1258, "u65-512": 1174}


@pytest.mark.parametrize("preset", sorted(VELA_SIGMOID16))
@pytest.mark.parametrize("name", ["logistic", "tanh"])
def test_16x8_logistic_and_tanh_are_native_without_a_table(name, preset):
    region = _region(name, preset)
    ((_, cost),) = zip(region.program.ops, region.cycles)
    assert abs(cost["cycles"] / VELA_SIGMOID16[preset] - 1) <= 0.04, cost["cycles"]
    assert "flash" not in cost["bytes"] and sum(cost["bytes"].values()) == 2 * 4 * 4 * 8 * 2
