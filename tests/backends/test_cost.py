"""MACs from types, bytes across a boundary, and the cost model's verdict."""

from __future__ import annotations

import numpy as np
import pytest
from partita.backends import CostModel, RegionStats, count_macs, type_bytes

import partita as P
from partita.ir import TensorType, TupleType

op = P.get_op


def typed(call):
    P.infer_type(call)
    return call


def q8(shape):
    return P.const(np.zeros(shape, np.int8))


def qargs():
    return [
        P.const(np.int32(0)),
        P.const(np.int32(0)),
        P.const(np.float32(0.5)),
        P.const(np.float32(0.25)),
    ]


def test_conv2d_macs_are_outputs_times_kernel_volume():
    # out (1, 4, 6, 6) = 144 values, each 3 channels x 3 x 3 taps
    call = typed(
        op("nn.conv2d")(P.var("x", (1, 3, 8, 8)), P.const(np.zeros((4, 3, 3, 3), np.float32)))
    )
    assert count_macs(call) == 144 * 27


def test_depthwise_qnn_conv2d_counts_one_channel_per_group():
    # NHWC (1, 8, 8, 4), kernel HWOI (3, 3, 4, 1), groups 4: 256 outputs x 1 x 9
    call = typed(
        op("qnn.conv2d")(
            P.var("x", (1, 8, 8, 4), "int8"),
            q8((3, 3, 4, 1)),
            *qargs(),
            padding=(1, 1),
            groups=4,
            data_layout="NHWC",
            kernel_layout="HWOI",
        )
    )
    assert count_macs(call) == 256 * 9


def test_dense_and_batch_matmul_macs():
    dense = typed(op("qnn.dense")(P.var("x", (2, 16), "int8"), q8((8, 16)), *qargs()))
    assert count_macs(dense) == 2 * 8 * 16
    bmm = typed(op("nn.batch_matmul")(P.var("x", (2, 3, 5)), P.var("y", (2, 4, 5))))
    assert count_macs(bmm) == 2 * 3 * 4 * 5
    bmm_t = typed(
        op("nn.batch_matmul")(
            P.var("x", (2, 5, 3)), P.var("y", (2, 5, 4)), transpose_a=True, transpose_b=False
        )
    )
    assert count_macs(bmm_t) == 2 * 3 * 4 * 5


def test_conv2d_transpose_counts_inputs_times_kernel():
    # every one of the 32 inputs feeds 3 output channels x 3 x 3 taps
    call = typed(
        op("nn.conv2d_transpose")(
            P.var("x", (1, 2, 4, 4)), P.const(np.zeros((2, 3, 3, 3), np.float32))
        )
    )
    assert count_macs(call) == 32 * 27


def test_ops_without_macs_count_zero():
    assert count_macs(typed(op("nn.relu")(P.var("x", (4,))))) == 0
    assert count_macs(P.var("x", (4,))) == 0


def test_type_bytes():
    assert type_bytes(TensorType((2, 3), "int8")) == 6
    assert type_bytes(TupleType([TensorType((2,), "int32"), TensorType((4,), "float16")])) == 16
    assert type_bytes(None) == 0


@pytest.mark.parametrize("macs, nbytes, ok", [(1_000_000, 1000, True), (100, 100_000, False)])
def test_cost_model_weighs_saved_compute_against_transfers(macs, nbytes, ok):
    model = CostModel(cpu_macs_per_s=1e9, acc_macs_per_s=1e11, bytes_per_s=1e9)
    stats = RegionStats("npu", ops=2, macs=macs, input_bytes=nbytes, output_bytes=0)
    verdict = model(stats)
    assert verdict.ok is ok
    if not ok:
        # saves 100 * (1e-9 - 1e-11) s = 0.099 us; moves 100 kB at 1 GB/s = 100 us
        assert verdict.reason == (
            "moving 100.0 kB across the boundary costs 100 us, more than "
            "the 0.099 us its 100 MACs save"
        )
