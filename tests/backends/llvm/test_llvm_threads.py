"""``-threads=2`` for the int8 kernels (backends/llvm/pool.py): a worker thread per driver call
takes the second halves it claims first; the driver without a worker; each kernel called on
its own; and the choice between the two drivers by measured speed. Every way gives the same
bits as one thread and as the interpreter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from partita.backends.llvm.jit import host_isa
from partita.backends.llvm.lower import lower
from partita.backends.llvm.pool import PROBE, TwoModes
from partita.backends.llvm.vplan import THREAD_MACS, split_units
from partita.frontends import from_tflite
from test_llvm_kernels import build_graph

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


@pytest.mark.skipif(host_isa() == "plain", reason="the split kernels are the vector ones")
@settings(max_examples=12, deadline=None)
@given(
    hw=st.sampled_from([(3, 3), (7, 7), (5, 8), (6, 9), (2, 5)]),
    cin=st.sampled_from([160, 320, 960]),
    cout=st.sampled_from([160, 272, 1000]),
    isa=st.sampled_from(["avx2", "auto"]),
    dtype=st.sampled_from(["int8", "uint8"]),
)
def test_a_short_single_row_splits_its_output_channels(hw, cin, cout, isa, dtype):
    """A pointwise convolution of fewer than two pixel tiles (MobileNet's 7 x 7 layers: one
    row of 49 pixels) splits its output channel groups between the two threads (AMX: pairs
    of 16-channel vectors; else register tiles), bit for bit as one thread."""
    geo = {"hw": hw, "k": (1, 1), "strides": (1, 1), "dilation": (1, 1),
           "padding": (0, 0, 0, 0)}
    assume(hw[0] * hw[1] * cin * cout >= THREAD_MACS["VCONV"])  # worth a split
    mod, _ = build_graph("conv", dtype, cin, cout, geo, 5, True, (0, 127))
    if isa == "auto" and host_isa() == "avx2":
        isa = "avx2"
    plan = lower(P.InferType()(mod)["main"], host_isa() if isa == "auto" else isa, threads=2)
    conv = next(k for k in plan.kernels if k.kind == "VCONV")
    short = conv.params["OW"] // conv.params["R"] < 2  # fewer than two full pixel tiles
    assert split_units("VCONV", conv.params)[0] == ("channels" if short else "rows")
    assert conv.params.get("threads") == 2
    exe = P.build(mod, f"llvm -isa={isa} -threads=2")
    info = np.iinfo(dtype)
    rng = np.random.default_rng(cin + cout)
    for _ in range(3):  # both drivers
        x = rng.integers(info.min, info.max, (1, *hw, cin), dtype=dtype, endpoint=True)
        assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])
