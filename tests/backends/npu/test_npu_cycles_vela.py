"""The cycle model against Vela 5.2's figures for every int8 and 16x8 test model on the four
presets: within 10% of Vela's total, except the rows listed with their reason. Vela's figures
are recorded in data/vela_cycles.json by ``python benchmarks/npu.py --record`` (each row keeps
the SHA-256 of the model file it was computed from; a changed model is recomputed there); when
Vela is importable, a test checks the record against a live run."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from partita.backends.npu.config import get_config
from partita.backends.npu.vela_cascade import cascaded_offchip
from partita.backends.npu.vela_decompose import (
    argmax_as_vela,
    mean_as_vela,
    ones_kernel_bytes,
    resize_bilinear_as_vela,
)
from partita.frontends import from_tflite

import partita as P

ROOT = Path(__file__).resolve().parents[3]
RECORD = Path(__file__).resolve().parent / "data" / "vela_cycles.json"
TFLITE = ROOT / "tests" / "models" / "tflite"
MODELS = {
    p.stem: p
    for p in [
        *sorted((TFLITE / "nets").glob("*.tflite")),
        ROOT / "partita" / "data" / "digits_mobilenetv2.tflite",
        *sorted((TFLITE / "large").glob("*.tflite")),
        *sorted((TFLITE / "int16").glob("mobilenet_like*.tflite")),
    ]
}
PRESETS = ("u55-128", "u55-256", "u65-256", "u65-512")
# rows outside 10%, with the band they are held to and why (docs/npu.md, "Calibration")
OUTSIDE: dict[tuple[str, str], float] = {}  # none since session 20 (n30k): Vela's U65
# cascades (vela_cascade.py) took mobilenet_v2_100_224 u65-512 from 0.86 to 0.99


def _record() -> dict:
    return json.loads(RECORD.read_text())


def _ours(path: Path, preset: str) -> int:
    exe = P.build(from_tflite(str(path)), f"npu -config={preset}, ref")
    return sum(c["cycles"] for s in exe.steps if s.target == "npu" for c in s.region.cycles)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("model", sorted(MODELS))
def test_total_cycles_are_within_ten_percent_of_velas(model, preset):
    path = MODELS[model]
    key = f"{path.relative_to(ROOT).with_suffix('').as_posix()}/{preset}"
    row = _record().get(key)
    assert row, f"no recorded Vela figure for {model} on {preset}: run benchmarks/npu.py --record"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    assert row["sha256"] == digest, f"{model} changed since Vela's figure was recorded"
    ratio = _ours(path, preset) / row["cycles"]
    low = OUTSIDE.get((model, preset), 0.90)
    assert low <= ratio <= 1.10, f"{model} on {preset}: {ratio:.3f} of Vela's cycles"


def test_the_record_matches_a_live_vela_run():
    pytest.importorskip("ethosu.vela")
    spec = importlib.util.spec_from_file_location("npu_bench", ROOT / "benchmarks" / "npu.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    record = _record()
    for model, preset in (("resnet_mini_64", "u55-256"), ("mobilenet_like", "u65-512")):
        live = bench.vela(MODELS[model], preset)
        key = f"{MODELS[model].relative_to(ROOT).with_suffix('').as_posix()}/{preset}"
        assert live["cycles"] == record[key]["cycles"]


def test_a_big_mean_runs_as_velas_six_depthwise_convolutions():
    """144 x 144 rows do not fit one 4,096-element kernel: Vela runs 28-row kernels (5 of them
    and one of 4 rows), each with its bias record and its all-ones kernel as Vela's weight
    encoder writes it (Vela's debug database: 8,080 and 1,168 bytes); a 7 x 7 map is one
    convolution."""
    config = get_config("u65-256")
    _, weights, sums = mean_as_vela(config, (1, 144, 144, 16), 8)
    assert weights == 5 * 8080 + 1168 + 6 * 10 * 16
    assert sums == 6 * 2 * 4 * 16
    _, weights, sums = mean_as_vela(config, (1, 7, 7, 576), 8)
    assert (weights, sums) == (ones_kernel_bytes(49, 576) + 10 * 576, 2 * 4 * 576)
    assert ones_kernel_bytes(36, 96) == 448 and ones_kernel_bytes(64, 4) == 80  # Vela's
    # a 96-row map whose area fits one kernel is flattened to one row: one convolution
    assert mean_as_vela(config, (1, 96, 4, 8), 8)[2] == 2 * 4 * 8
    # more rows or channels never cost fewer cycles
    small, big = (mean_as_vela(config, (1, h, 56, 64), 8)[0] for h in (56, 112))
    assert small < big


def test_a_mean_over_some_axes_runs_as_velas_convolution_over_those():
    """Over W alone: one 1 x W kernel per channel, an H x 1 map of 32-bit sums; over the
    channels of a map with H == 1: the channels moved into W (one 1 x C kernel, one channel);
    charged as Vela's single MAC operation, a MEAN's compute grows with the reduced axis."""
    config = get_config("u55-256")
    _, weights, sums = mean_as_vela(config, (1, 8, 8, 4), 8, (2,))
    assert (weights, sums) == (ones_kernel_bytes(8, 4) + 10 * 4, 2 * 4 * 8 * 4)
    _, weights, sums = mean_as_vela(config, (1, 1, 16, 64), 8, (3,))
    assert (weights, sums) == (ones_kernel_bytes(64, 1) + 10, 2 * 4 * 16)
    short, long = (mean_as_vela(config, (1, 8, w, 16), 8, (2,), "sram")[0] for w in (8, 64))
    assert short < long


def test_argmax_and_resize_cost_velas_extra_operations():
    config = get_config("u55-256")
    compute, weights, _ = argmax_as_vela(config, (1, 8, 8, 4))
    # Vela's four operations on u55-256 (its debug database, arg_max): 384 + 1,115 + 1,177
    # + 128 cycles, the table's flash load exposed beyond the max pool
    assert 0.95 <= compute / 2804 <= 1.05 and weights == 4 + 10 * 4, compute
    taps = np.zeros((16, 8), np.int64)
    taps[1, :2] = (3, 1)  # half-pixel: output row 1 is 3/4 of input row 0 and 1/4 of row 1
    half = resize_bilinear_as_vela(config, (1, 8, 8, 4), (1, 16, 16, 4), taps)
    taps[1, :2] = (1, 1)  # asymmetric: equal weights
    pooled = resize_bilinear_as_vela(config, (1, 8, 8, 4), (1, 16, 16, 4), taps)
    # half-pixel 2x: Vela's five copies and four 2x2 depthwise convolutions, 5,718 cycles on
    # u55-256 (its debug database, resize_bilinear_2x_half_pixel)
    assert 0.95 <= half / 5718 <= 1.05 and half > pooled, half
    # 4x: Vela's two upscaling average pools (its debug database, resize_bilinear_4x on
    # u55-256: a 1x1 pool to 16x16, 1,565 cycles, and a 4x4 pool to 32x32, 19,751)
    taps = np.zeros((32, 8), np.int64)
    taps[1, :2] = (1, 1)
    four = resize_bilinear_as_vela(config, (1, 8, 8, 4), (1, 32, 32, 4), taps)
    assert 0.95 <= four / (1565 + 19751) <= 1.05, four


def test_spilled_maps_between_streaming_ops_count_as_cascaded():
    """On the U65 big_map_288's 5.3 MB convolution output spills to DRAM; Vela cascades the
    convolution into the depthwise layer, so the map moves at SRAM speed in both."""
    exe = P.build(from_tflite(str(MODELS["big_map_288"])), "npu -config=u65-256, ref")
    (region,) = [s.region for s in exe.steps if s.target == "npu"]
    program, config = region.program, region.config
    cascaded = cascaded_offchip(program, config)
    first = program.ops[0].output
    assert program.tensors[first].memory == "dram" and first in cascaded
    moved = region.cycles[1]["bytes"]  # the depthwise layer reads it from SRAM: DRAM for weights
    assert moved["sram"] >= program.tensors[first].nbytes and moved["dram"] < 10_000
    assert cascaded_offchip(program, get_config("u55-256")) == set()  # nothing to cascade
