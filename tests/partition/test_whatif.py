"""What-if from Python: the predicted change of a placement or preset change, nothing
compiled; and the estimate's measured column after a run."""

from __future__ import annotations

import numpy as np
import pytest
from common_graphs import int8_convnet
from partita.partition import partition_for
from partita.partition.estimate import estimate
from partita.partition.whatif import what_if

import partita as P
from partita.errors import PartitaError


def test_forcing_a_node_onto_the_cpu_predicts_more_host_time_and_transfers():
    w = what_if(int8_convnet(), "npu, llvm", ["cpu-node=conv0"], "cortex-a55")
    d = w.delta()
    assert d["host_s"] > 0 and d["accelerator_s"] < 0
    assert d["transfer_bytes"] != 0
    assert "cpu-node=conv0" in w.table() and w.to_dict()["delta"] == d


def test_a_bigger_preset_predicts_a_faster_accelerator():
    w = what_if(int8_convnet(), "npu -config=u55-128, llvm", ["preset=u65-512"], "cortex-a55")
    assert w.delta()["accelerator_s"] < 0


def test_an_npu_node_the_npu_cannot_run_says_why():
    w = what_if(int8_convnet(), "npu, llvm", ["npu-node=conv1"], "cortex-a55")
    assert w.delta()["total_s"] == 0
    assert "Stride" in w.notes[0]


def test_an_npu_node_undoes_a_cpu_override():
    w = what_if(int8_convnet(), "npu, llvm", ["npu-node=conv0"], "cortex-a55", cpu_nodes=["conv0"])
    assert w.delta()["host_s"] < 0


def test_bad_changes_are_named():
    with pytest.raises(PartitaError, match="what-if change 'gpu-node=3'"):
        what_if(int8_convnet(), "npu, llvm", ["gpu-node=3"], "cortex-a55")


def test_the_measured_column_follows_a_run():
    mod = int8_convnet()
    est = estimate(partition_for(mod, "npu, llvm"), "npu, llvm", "cortex-a55")
    exe = P.build(mod, "npu, llvm")
    x = np.zeros((1, 8, 8, 4), np.int8)
    est.with_measured(exe, exe.profile(x))
    m, e = est.measured, est.totals()
    assert m["accelerator_cycles"] == pytest.approx(e["accelerator_cycles"])  # one cycle model
    assert m["host_s"] > 0 and m["sram_peak_bytes"] == e["sram_peak_bytes"]
    assert "-" not in est.table().splitlines()[3].split()[-1]
