"""The weight stream as Vela 5.2 writes it (backends/npu/vela_weights.py) and the cycles the U55
charges for it.

Vela's figures were read off its debug database (`vela --accelerator-config ethos-u55-256
--enable-debug-db --verbose-weights`, perf_debug's weight_total_bytes, weight_max_range_bytes
and traversal; perf's op_cycles) on 2026-11-29. `--verbose-weights` printed for
fc_bias_relu "Original Weights Size 0.50 KiB, NPU Encoded Weights Size 0.52 KiB" and for
digits_mobilenetv2 386.84 KiB and 435.58 KiB (with its MEAN's 1x1 depthwise convolution,
which partita does not run as a MAC operation).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from partita.backends.npu.config import get_config
from partita.backends.npu.vela_weights import (
    encoded_weight_bytes,
    scale_record_bytes,
    traversal,
    weight_stream_bytes,
)
from partita.frontends import from_tflite
from vela_record import ROOT, ops_region

import partita as P

DIGITS = ROOT / "partita" / "data" / "digits_mobilenetv2.tflite"
# Vela's debug database on u55-256: (encoded weight bytes, traversal, output block depth) of
# digits_mobilenetv2's MAC operations in order, its 1x1 depthwise MEAN left out; per operation
# the encoder's choices differ from regor's in a few (the first depthwise: 208 against 224)
DIGITS_VELA_U55_256 = {
    0: (608, "part_kernel", 16),  # the 3x3 stem convolution, 3 input channels
    4: (512, "depthwise", 32),
    11: (912, "depth_first", 16),  # a 1x1 convolution 48 -> 16
    52: (15_072, "depth_first", 16),  # the classifier, 1280 -> 10
}
DIGITS_VELA_TOTAL = 445_376  # the 53 operations' weight_total_bytes


def _mac_ops(model, preset="u55-256"):
    exe = P.build(from_tflite(str(model)), f"npu -config={preset}, ref")
    steps = [s for s in exe.steps if s.target == "npu"]
    return [o for s in steps for o in s.region.program.ops if "weights" in o.arrays]


def test_fully_connected_stream_is_velas():
    """fc_bias_relu's 16x32 weights: 528 encoded bytes and 16 10-byte records, 688 in all
    (Vela's weight_total_bytes and weight_max_range_bytes); the raw weights are 512."""
    region, _ = ops_region("fc_bias_relu", "u55-256")
    (op,) = [o for o in region.program.ops if o.kind == "FC"]
    config = get_config("u55-256")
    assert op.arrays["weights"].nbytes == 512
    assert encoded_weight_bytes(op, config, 16) == 528
    assert scale_record_bytes(op, config) == 160
    assert weight_stream_bytes(op, config, 16) == 688


def test_digits_streams_match_velas():
    ops = _mac_ops(DIGITS)
    config = get_config("u55-256")
    assert len(ops) == 53
    for i, (nbytes, order, depth) in DIGITS_VELA_U55_256.items():
        assert traversal(ops[i]) == order, i
        assert encoded_weight_bytes(ops[i], config, depth) == nbytes, i
    total = sum(encoded_weight_bytes(o, config, 16) for o in ops)
    raw = sum(o.arrays["weights"].nbytes for o in ops)
    assert raw < 0.9 * DIGITS_VELA_TOTAL  # the encoding is larger than the raw weights
    assert abs(total / DIGITS_VELA_TOTAL - 1) < 0.01


def test_two_cores_stream_each_half():
    """u65-512's two cores each read their own stream: channels alternate between them, each
    stream and its records 16-byte aligned (Vela: 15,088 bytes and 2 x 64 of records for the
    classifier)."""
    op = _mac_ops(DIGITS, "u65-512")[52]
    one, two = get_config("u65-256"), get_config("u65-512")
    assert scale_record_bytes(op, one) == 112 and scale_record_bytes(op, two) == 128
    assert abs(encoded_weight_bytes(op, two, 16) / 15_088 - 1) < 0.01
    assert encoded_weight_bytes(op, two, 16) != encoded_weight_bytes(op, one, 16)


def test_zero_points_are_taken_out():
    """uint8 weights with a zero point encode as their signed differences, as Vela's do."""
    region, _ = ops_region("fc_bias_relu", "u55-256")
    (op,) = [o for o in region.program.ops if o.kind == "FC"]
    config = get_config("u55-256")
    arrays = {
        **op.arrays,
        "weights": (op.arrays["weights"].astype(np.int16) + 128).astype(np.uint8),
        "w_zp": np.full_like(op.arrays["w_zp"], 128),
    }
    shifted = replace(op, arrays=arrays)
    assert encoded_weight_bytes(shifted, config, 16) == encoded_weight_bytes(op, config, 16)


@pytest.mark.parametrize("name", ["fc_bias_relu", "fc_nobias", "fc_keep_dims"])
def test_fully_connected_cycles_are_velas(name):
    """On the U55 a weight-bound FULLY_CONNECTED costs its stream's bytes at flash's byte per
    cycle, no first-byte latency: Vela's op cycles, 688 (it was 840 / 776 with the raw weights,
    our scale, zero-point and bias arrays and the latency)."""
    region, row = ops_region(name, "u55-256")
    (fc,) = [c for c, o in zip(region.cycles, region.program.ops) if o.kind == "FC"]
    assert fc["bytes"]["flash"] == 688
    assert sum(c["cycles"] for c in region.cycles) == row["cycles"] == 688
