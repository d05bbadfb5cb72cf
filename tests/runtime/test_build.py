"""partita.build and the Executable: the schedule, running, inputs, profile, threads."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from common_graphs import int8_convnet, registered
from partita.backends import Backend, get_backend
from partita.backends.ref import InterpretedRegion

import partita as P
from partita.runtime import InputError
from partita.runtime.schedule import plan_schedule

ROOT = Path(__file__).resolve().parents[2]
MOBILENET = ROOT / "tests" / "models" / "tflite" / "nets" / "mobilenet_v2_035_96.tflite"


def acc_backend(name="acc", ops=("add", "multiply")):
    """An accelerator for float add/multiply whose regions run on the interpreter."""
    return Backend(
        name,
        ops={op: True for op in ops},
        compile=lambda fn, opts: InterpretedRegion(fn, backend=name),
        load=InterpretedRegion.loader(name),
    )


def interleaved():
    """acc (add) -> host (tanh) -> acc (multiply) -> host (exp), plus a host branch to the end."""
    return P.parse(
        """
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(2, 3), float32]) {
  %0 = add(%x, %y);
  %1 = tanh(%0);
  %2 = multiply(%1, %y);
  %3 = exp(%2);
  %4 = sigmoid(%x);
  (%3, %4, %0)
}
"""
    )


def test_schedule_alternates_accelerator_and_host_steps():
    with registered(acc_backend()):
        exe = P.build(interleaved(), "acc, ref")
        assert [(s.symbol, s.target) for s in exe.steps] == [
            ("acc_main_0", "acc"),
            ("host_1", "ref"),
            ("acc_main_1", "acc"),
            ("host_2", "ref"),
        ]
        # sigmoid(x) is read only by the result: it waits for the last host segment
        assert "sigmoid" in P.astext(exe.steps[3].region.function)[0]
        x, y = (np.random.default_rng(i).standard_normal((2, 3), np.float32) for i in (0, 1))
        got = exe.run(x, y)
        want = P.interpret(interleaved(), [x, y])
        assert len(got) == 3 and all(np.array_equal(g, w) for g, w in zip(got, want))


def test_slots_are_released_after_their_last_reader():
    with registered(acc_backend()):
        exe = P.build(interleaved(), "acc, ref")
    outputs = {p.slot for p in exe.outputs}
    for i, step in enumerate(exe.steps):
        for slot in step.release:
            assert slot not in outputs
            assert not any(slot in later.inputs for later in exe.steps[i + 1 :])


def test_host_only_build_is_one_step_and_equals_the_interpreter():
    mod = int8_convnet()
    exe = P.build(mod, "ref")
    assert [s.symbol for s in exe.steps] == ["host_0"]
    x = np.random.default_rng(3).integers(-128, 128, (1, 8, 8, 4), dtype=np.int8)
    assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])


def test_partition_outputs_feeding_main_directly_need_no_host_step():
    mod = P.parse("def @main(%x: Tensor[(4), float32]) { add(%x, %x) }")
    with registered(acc_backend()):
        exe = P.build(mod, "acc, ref")
    assert [s.target for s in exe.steps] == ["acc"]
    assert exe.run(np.ones(4, np.float32))[0].tolist() == [2.0] * 4


def test_inputs_by_name_and_graph_executor_style():
    with registered(acc_backend()):
        exe = P.build(interleaved(), "acc, ref")
    x = np.ones((2, 3), np.float32)
    y = np.full((2, 3), 2.0, np.float32)
    assert exe.input_names == ["x", "y"]
    assert [str(t) for t in exe.input_types] == ["Tensor[(2, 3), float32]"] * 2
    by_name = exe.run(y=y, x=x)
    exe.set_input("x", x)
    exe.set_input(1, y)
    exe.run()
    assert exe.get_num_outputs() == 3
    assert all(np.array_equal(exe.get_output(i), by_name[i]) for i in range(3))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda e, x: e.run(x), r"expected 2 inputs \(x, y\), got 1"),
        (
            lambda e, x: e.run(x, x.astype(np.float64)),
            r"input 'y': expected Tensor\[\(2, 3\), "
            r"float32\], got Tensor\[\(2, 3\), float64\]",
        ),
        (lambda e, x: e.run(x, x[:1]), r"input 'y': expected Tensor\[\(2, 3\), float32\]"),
        (lambda e, x: e.run(x=x, z=x), r"unknown input 'z'; the inputs are x, y"),
        (lambda e, x: e.run(x=x), r"missing input 'y'"),
        (lambda e, x: e.run(x, y=x), r"either by position or by name"),
        (lambda e, x: e.run("x", x), r"input 'x': expected a numpy array"),
        (lambda e, x: e.set_input("w", x), r"unknown input 'w'"),
        (lambda e, x: e.get_output(0), r"get_output before run"),
    ],
)
def test_wrong_inputs_get_errors_naming_the_expected_type(call, message):
    with registered(acc_backend()):
        exe = P.build(interleaved(), "acc, ref")
    with pytest.raises(InputError, match=message):
        call(exe, np.ones((2, 3), np.float32))


def test_unset_inputs_are_named():
    exe = P.build(int8_convnet(), "ref")
    with pytest.raises(InputError, match="was not set: call set_input"):
        exe.run()


def test_params_bind_inputs_as_constants():
    mod = P.parse(
        "def @main(%x: Tensor[(3), float32], %w: Tensor[(3), float32]) { multiply(%x, %w) }"
    )
    w = np.array([1, 2, 3], np.float32)
    exe = P.build(mod, "ref", params={"w": w})
    assert exe.input_names == ["x"]
    assert exe.run(np.ones(3, np.float32))[0].tolist() == [1, 2, 3]
    with pytest.raises(P.PartitaError, match="params names 'v'"):
        P.build(mod, "ref", params={"v": w})


def test_build_errors():
    mod = int8_convnet()
    if not get_backend("llvm").can_compile:
        with pytest.raises(P.PartitaError, match="host backend 'llvm' cannot compile yet"):
            P.build(mod, "llvm")
    with pytest.raises(P.PartitaError, match="unknown build config key 'opt'"):
        P.build(mod, "ref", config={"opt": 3})
    with pytest.raises(P.PartitaError, match="build takes an IRModule"):
        P.build("model.tflite", "ref")


def test_profile_reports_every_step_and_totals():
    with registered(acc_backend()):
        exe = P.build(interleaved(), "acc, ref")
        x = np.ones((2, 3), np.float32)
        profile = exe.profile(x, x, repeat=3)
    assert [s.symbol for s in profile.steps] == [s.symbol for s in exe.steps]
    assert set(profile.totals) == {"acc", "ref"}
    assert profile.totals["acc"]["steps"] == 2
    data = profile.to_dict()
    assert data["repeat"] == 3 and len(data["steps"]) == 4
    table = str(profile)
    assert "acc_main_0" in table and "total:" in table


def test_eight_threads_fifty_runs_each_are_identical():
    with registered(acc_backend()):
        exe = P.build(interleaved(), "acc, ref")
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal((2, 2, 3), np.float32) for _ in range(8)]
    expected = [exe.run(*pair) for pair in inputs]
    failures = []

    def worker(k):
        for _ in range(50):
            got = exe.run(*inputs[k])
            exe.set_input("x", inputs[k][0])
            exe.set_input("y", inputs[k][1])
            exe.run()
            staged = exe.get_output(0)
            if not all(np.array_equal(g, w) for g, w in zip(got, expected[k])):
                failures.append(k)
            if not np.array_equal(staged, expected[k][0]):
                failures.append(-k)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_schedule_of_a_tuple_producing_partition():
    mod = P.parse(
        """
def @main(%x: Tensor[(4), float32]) {
  %0 = add(%x, %x);
  %1 = multiply(%x, %x);
  %2 = tanh(%0);
  %3 = tanh(%1);
  add(%2, %3)
}
"""
    )
    with registered(acc_backend(ops=("add", "multiply"))):
        part = P.partition_for(mod, "acc, ref")
        plan = plan_schedule(part, "ref")
        exe = P.build(mod, "acc, ref")
    assert len(plan.steps) == len(exe.steps)
    x = np.arange(4, dtype=np.float32)
    assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])


@pytest.mark.skipif(not MOBILENET.exists(), reason="test model missing")
def test_mobilenet_on_ref_equals_the_interpreter():
    from partita.frontends import from_tflite

    mod = from_tflite(str(MOBILENET))
    exe = P.build(mod, "ref")
    x = np.random.default_rng(7).integers(-128, 128, exe.input_types[0].shape, dtype=np.int8)
    assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])
    assert exe.output_names == list(mod.attrs["output_names"])
    assert exe.report.summary()["ops"] > 50


def test_profile_table_shows_npu_style_metrics():
    from partita.backends.compiled import OpProfile

    from partita.runtime.profile import Profile, StepProfile

    ops = [
        OpProfile(
            "conv #0",
            "npu op",
            1e-5,
            {"cycles": 1000, "macs": 50_000, "utilisation": 0.8, "bytes": {"sram": 100}},
        ),
        OpProfile("add #1", "npu op", 2e-6, {"cycles": 10, "bytes": {"sram": 10, "dram": 5}}),
    ]
    profile = Profile("npu, ref", 0.01, [StepProfile("npu_main_0", "npu", 0.005, ops)])
    assert profile.totals["npu"]["cycles"] == 1010
    assert profile.totals["npu"]["bytes"] == {"sram": 110, "dram": 5}
    table = profile.table()
    assert "80%" in table and "1,010 cycles" in table and "bytes sram 110, dram 5" in table
