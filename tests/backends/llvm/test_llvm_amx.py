"""The AMX kernels (-isa=amx: pointwise convolutions and dense layers of 32 rows and more on
AMX tiles, everything else VNNI) equal the interpreter bit for bit, on every x86-64 CPU: on
tiles where the CPU and OS grant them, elsewhere through -emulate=yes (the tile instructions as
exact stand-ins, backends/llvm/emit/emulate.py). Without -emulate on a CPU or OS without AMX
the ISA is refused with a reason, and a saved region that needs AMX says so when loaded. The
VNNI kernels, the fallback, are tested by test_llvm_kernels.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_checks import build_graph, llvm_target
from partita.backends.llvm.lower.context import lower
from partita.backends.llvm.runtime import jit

import partita as P

needs_amx = pytest.mark.skipif(not jit.amx_permitted(), reason="this CPU or OS has no AMX")
# emulated tiles compile and run slower: fewer draws there (every case kind still drawn)
EXAMPLES = 25 if jit.amx_permitted() else 10


@st.composite
def pointwise(draw):
    kind = draw(st.sampled_from(["conv", "dense"]))
    cin = draw(st.sampled_from([1, 3, 16, 24, 64, 96, 130, 192]))
    cout = draw(st.sampled_from([1, 16, 24, 40, 70, 144]))
    rows = draw(st.integers(32, 160))
    if kind == "dense":
        geo = {"rows": rows}
    else:
        w = draw(st.integers(4, 16))
        geo = {"hw": (-(-rows // w), w), "k": (1, 1), "strides": (1, 1), "dilation": (1, 1),
               "padding": (0, 0, 0, 0), "batch": draw(st.sampled_from([1, 1, 2]))}
    return (kind, draw(st.sampled_from(["int8", "uint8"])), cin, cout, geo,
            draw(st.integers(0, 2**16)), draw(st.booleans()),
            draw(st.sampled_from([None, (0, 127)])),
            draw(st.sampled_from(["tflite", "onnx", "tflite_double"])))


def _run_both(mod, target, seed):
    exe = P.build(mod, target)
    ty = exe.input_types[0]
    info = np.iinfo(ty.dtype)
    data = np.random.default_rng(seed).integers(info.min, info.max, ty.shape, dtype=ty.dtype,
                                                endpoint=True)
    return exe.run(data)[0], P.interpret(mod, [data])[0]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=pointwise(), pre_clip=st.booleans(), threads=st.sampled_from([1, 2]))
def test_amx_kernels_equal_the_interpreter(case, pre_clip, threads):
    mod, _ = build_graph(*case, pre_clip=pre_clip)
    got, ref = _run_both(mod, llvm_target("amx", f" -threads={threads}"), seed=3)
    assert np.array_equal(got, ref), f"{np.count_nonzero(got != ref)} outputs differ"
    # the case really ran on tiles: a graph input is read by AMX only when C is a multiple of
    # 64 (its tile rows may not read past the caller's array)
    plan = lower(P.InferType()(mod)["main"], "amx")
    mac = [k for k in plan.kernels if k.kind == "VCONV"]
    assert mac[0].params["isa"] == ("amx" if pre_clip or case[2] % 64 == 0 else "vnni")


@pytest.mark.parametrize("cin, staged", [(24, True), (144, True), (64, False), (192, False)])
def test_amx_rows_off_cache_lines_are_staged(cin, staged):
    """A pointwise convolution reading an intermediate whose channel count is no multiple of
    64 copies each block's A rows onto cache lines first (emit/int8/amx.py amx_stage: TILELOADD
    of rows off a line runs ~6x slower); a multiple of 64 reads them in place. Bits equal the
    interpreter either way (on tiles where the CPU grants them, else emulated)."""
    from partita.backends.llvm.emit.module import generate_parts

    geo = {"hw": (7, 28), "k": (1, 1), "strides": (1, 1), "dilation": (1, 1),
           "padding": (0, 0, 0, 0)}
    mod, _ = build_graph("conv", "int8", cin, 40, geo, 7, True, None, pre_clip=True)
    plan = lower(P.InferType()(mod)["main"], "amx")
    (mac,) = [k for k in plan.kernels if k.kind == "VCONV"]
    assert mac.params["isa"] == "amx" and mac.params["C"] == cin
    text = "".join(make() for make in generate_parts(plan))
    assert ("amx_stage" in text) == staged  # the copy loop's label
    got, ref = _run_both(mod, llvm_target("amx"), seed=11)
    assert np.array_equal(got, ref), f"{np.count_nonzero(got != ref)} outputs differ"


def test_a_short_row_stays_on_vnni():
    """Fewer than 32 rows (a batch-1 classifier) is a matrix-vector product: VNNI's."""
    mod, _ = build_graph("dense", "int8", 64, 10, {"rows": 1}, 0, True, None)
    plan = lower(P.InferType()(mod)["main"], "amx")
    assert [k.params["isa"] for k in plan.kernels if k.kind == "VCONV"] == ["vnni"]
    got, ref = _run_both(mod, llvm_target("amx"), seed=0)
    assert np.array_equal(got, ref)


@needs_amx
def test_a_saved_amx_region_loads_only_where_amx_runs(tmp_path, monkeypatch):
    geo = {"hw": (8, 8), "k": (1, 1), "strides": (1, 1), "dilation": (1, 1),
           "padding": (0, 0, 0, 0)}
    mod, _ = build_graph("conv", "int8", 64, 32, geo, 1, True, None)
    exe = P.build(mod, "llvm -isa=amx")
    path = tmp_path / "m.partita"
    exe.save(path)
    data = np.arange(64 * 64, dtype=np.int8).reshape(1, 8, 8, 64)
    assert np.array_equal(P.load(path).run(data)[0], exe.run(data)[0])
    monkeypatch.setattr(jit, "_AMX", False)
    with pytest.raises(P.PartitaError, match="compiled with AMX kernels"):
        P.load(path)


def test_amx_is_refused_with_a_reason_where_the_host_lacks_it(monkeypatch):
    monkeypatch.setattr(jit, "_AMX", False)
    mod, _ = build_graph("dense", "int8", 64, 10, {"rows": 40}, 0, True, None)
    with pytest.raises(P.PartitaError, match="-isa=amx needs a CPU with AMX-INT8"):
        P.build(mod, "llvm -isa=amx")
    # auto never picks it there
    from partita.backends.llvm import resolve_isa

    assert resolve_isa({}) != "amx"


@pytest.mark.parametrize("pixels", [49, 33, 96])
def test_a_short_row_of_amx_blocks_splits_over_two_threads(pixels):
    """MobileNet's 7 x 7 pointwise layers: 49 pixels are one full AMX block and a partial one,
    a half each for the two threads; the same bits as the interpreter, run after run (each
    run either hands the second block to the worker or runs it here)."""
    mod, _ = build_graph("conv", "int8", 160, 144, {"hw": (1, pixels), "k": (1, 1),
                         "strides": (1, 1), "dilation": (1, 1), "padding": (0, 0, 0, 0)},
                         5, True, None, pre_clip=True)
    plan = lower(P.InferType()(mod)["main"], "amx", threads=2)
    (mac,) = [k for k in plan.kernels if k.kind == "VCONV"]
    assert mac.params["isa"] == "amx" and mac.params.get("threads") == 2
    exe = P.build(mod, llvm_target("amx", " -threads=2"))
    data = np.random.default_rng(1).integers(-128, 128, (1, 1, pixels, 160), dtype=np.int8)
    want = P.interpret(mod, [data])[0]
    for _ in range(12):
        assert np.array_equal(exe.run(data)[0], want)
