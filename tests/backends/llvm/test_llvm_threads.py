"""``-threads=2`` for the int8 kernels (backends/llvm/pool.py): a worker thread per driver call
takes the second halves it claims first; the driver without a worker; each kernel called on
its own; and the choice between the two drivers by measured speed. Every way gives the same
bits as one thread and as the interpreter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from partita.backends.llvm.jit import host_isa
from partita.backends.llvm.pool import PROBE, TwoModes
from partita.frontends import from_tflite

import partita as P

NETS = Path(__file__).resolve().parents[2] / "models" / "tflite" / "nets"


@pytest.mark.skipif(host_isa() == "plain", reason="the split kernels are the vector ones")
def test_int8_network_with_two_threads_equals_one_thread_and_the_interpreter():
    mod = from_tflite(str(NETS / "mobilenet_v2_035_96.tflite"))
    one = P.build(mod, "llvm").steps[0].region
    two = P.build(mod, "llvm -threads=2").steps[0].region
    assert two._alone is not None and one._alone is None  # only split plans get two drivers
    rng = np.random.default_rng(0)
    for _ in range(8):  # the first runs alternate between the drivers
        x = rng.integers(-128, 128, (1, 96, 96, 3), dtype=np.int8)
        want = P.interpret(mod, [x])[0]
        assert np.array_equal(one.run([x])[0], want)
        assert np.array_equal(two.run([x])[0], want)
    assert all(len(t) >= 3 for t in two.modes.times.values())  # both drivers ran
    x = rng.integers(-128, 128, (1, 96, 96, 3), dtype=np.int8)
    outputs, profile = two.profile([x])  # each kernel on its own: both halves in this thread
    assert np.array_equal(outputs[0], P.interpret(mod, [x])[0]) and len(profile) > 0


def test_the_faster_driver_is_chosen_and_the_other_probed():
    modes = TwoModes()
    chosen = []
    for _ in range(2 * TwoModes.WINDOW):  # both measured first
        mode = modes.choose()
        chosen.append(mode)
        modes.record(mode, 1.0 if mode == "pool" else 2.0)
    assert sorted(chosen) == ["alone"] * TwoModes.WINDOW + ["pool"] * TwoModes.WINDOW
    later = []
    for _ in range(4 * PROBE):
        mode = modes.choose()
        later.append(mode)
        modes.record(mode, 1.0 if mode == "pool" else 2.0)
    # only the probes, ever rarer while they confirm the choice (8, 16, then 32 runs apart)
    assert 1 <= later.count("alone") <= 3
    for _ in range(8 * PROBE):  # the machine gets busy: the worker now slows runs down
        mode = modes.choose()
        modes.record(mode, 3.0 if mode == "pool" else 2.0)
    tail = [modes.choose() for _ in range(PROBE)]
    assert tail.count("pool") <= 1
    # within MARGIN the worker buys nothing: the region runs alone
    even = TwoModes()
    for _ in range(4 * PROBE):
        mode = even.choose()
        even.record(mode, 1.0 if mode == "pool" else 1.01)
    assert [even.choose() for _ in range(PROBE)].count("pool") <= 1
