"""The simulator equals the interpreter per operation and on random chains, also striped; the
cycle model is monotone; configs and constraints say why."""

from __future__ import annotations

import numpy as np
import pytest
from common_graphs import registered  # noqa: F401  (the tests folder on sys.path)
from hypothesis import given, settings
from hypothesis import strategies as st
from partita.backends import get_backend
from partita.backends.npu.config import PRESETS, ConfigError, get_config
from partita.backends.npu.cycles import program_cycles
from partita.partition import partition_for

import partita as P

SCALE = 0.05


def conv_graph(
    h, w, cin, cout, k, stride, dilation, pad, depthwise, relu6, kernel_seed=0, semantics="tflite"
):
    """One quantized conv (TFLite-style constants) as Relay text plus its constants."""
    rng = np.random.default_rng(kernel_seed)
    if depthwise:
        cout = cin
        weight = rng.integers(-127, 128, (k, k, cin, 1), dtype=np.int8)
        layout, groups = "HWOI", cin
    else:
        weight = rng.integers(-127, 128, (cout, k, k, cin), dtype=np.int8)
        layout, groups = "OHWI", 1
    bias = rng.integers(-2000, 2000, cout, dtype=np.int32)
    wscale = rng.uniform(0.002, 0.02, cout).astype(np.float32)
    in_scale = np.float64(SCALE) * wscale.astype(np.float64)
    consts = [weight, wscale, bias, in_scale]
    clip = (
        "\n  clip(%2, a_min=-128f, a_max=127f)"
        if not relu6
        else ("\n  clip(%2, a_min=-20f, a_max=100f)")
    )
    text = f"""
def @main(%x: Tensor[(1, {h}, {w}, {cin}), int8]) {{
  %0 = qnn.conv2d(%x, meta[relay.Constant][0], -3, 0, {SCALE}f, meta[relay.Constant][1],
       strides=[{stride}, {stride}], padding=[{pad}, {pad}, {pad}, {pad}],
       dilation=[{dilation}, {dilation}], groups={groups}, data_layout="NHWC",
       kernel_layout="{layout}", out_dtype="int32");
  %1 = nn.bias_add(%0, meta[relay.Constant][2], axis=3);
  %2 = qnn.requantize(%1, meta[relay.Constant][3], 0, 0.08f, 5, axis=3, out_dtype="int8",
       semantics="{semantics}");{clip}
}}"""
    return P.parse(text, consts)


@settings(max_examples=30, deadline=None)
@given(
    h=st.integers(3, 12),
    w=st.integers(3, 12),
    cin=st.integers(1, 12),
    cout=st.integers(1, 12),
    k=st.sampled_from([1, 2, 3, 5]),
    stride=st.integers(1, 3),
    dilation=st.integers(1, 2),
    pad=st.integers(0, 2),
    depthwise=st.booleans(),
    relu6=st.booleans(),
    sram=st.sampled_from([None, "16k"]),
)
def test_conv_on_the_npu_equals_the_interpreter(
    h, w, cin, cout, k, stride, dilation, pad, depthwise, relu6, sram
):
    if (k - 1) * dilation + 1 > min(h, w) + 2 * pad:
        return
    mod = conv_graph(h, w, cin, cout, k, stride, dilation, pad, depthwise, relu6)
    target = "npu -config=u65-256" + (f" -sram={sram}" if sram else "") + ", ref"
    exe = P.build(mod, target)
    assert [s.target for s in exe.steps] == ["npu"]
    x = np.random.default_rng(h * w).integers(-128, 128, (1, h, w, cin), dtype=np.int8)
    assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])


def test_small_sram_stripes_and_spills_and_still_computes_the_same_bits(tmp_path):
    mod = conv_graph(40, 40, 16, 32, 3, 1, 1, 1, False, True)
    # region inputs and outputs in SRAM (not the U65 preset's DRAM), so only spills go off-chip
    toml = tmp_path / "u65_io_sram.toml"
    toml.write_text('base = "u65-256"\nio_memory = "sram"\n')
    small = P.build(mod, f"npu -config={toml} -sram=16k, ref")
    region = small.steps[0].region
    assert region.program.ops[0].stripes > 1
    assert {t.memory for t in region.program.tensors} == {"dram"}
    x = np.random.default_rng(1).integers(-128, 128, (1, 40, 40, 16), dtype=np.int8)
    assert np.array_equal(small.run(x)[0], P.interpret(mod, [x])[0])
    big = P.build(mod, f"npu -config={toml} -sram=1m, ref").steps[0].region
    assert big.program.ops[0].stripes == 1
    # spills move the maps off-chip (their memory cycles need not grow: the DRAM and SRAM
    # transfers run in parallel, and a 16-channel input read in 16-deep blocks takes whole
    # bursts, regor's EstimateMemoryTransfer), and the op takes longer in all
    dram = [sum(c["bytes"].get("dram", 0) for c in r.cycles) for r in (region, big)]
    assert dram[0] > dram[1] + 40 * 40 * 16
    assert region.summary()["cycles"] >= big.summary()["cycles"]


def test_u65_keeps_region_inputs_and_outputs_in_dram_and_charges_bursts():
    mod = conv_graph(16, 16, 3, 8, 3, 2, 1, 1, False, True)
    u65 = P.build(mod, "npu -config=u65-256, ref").steps[0].region
    program = u65.program
    assert {program.tensors[t].memory for t in (*program.inputs, *program.outputs)} == {"dram"}
    (cycles,) = u65.cycles
    # a 3-channel input read in 8-byte bursts of a 128-byte memory: >= 16x its size in cycles
    assert cycles["memory_cycles"] * 12 >= 16 * 16 * 16 * 3
    u55 = P.build(mod, "npu -config=u55-256, ref").steps[0].region
    assert {t.memory for t in u55.program.tensors} == {"sram"}


def test_u55_puts_a_region_whose_maps_exceed_its_sram_on_the_cpu_with_the_reason():
    """No off-chip memory for feature maps: the region's input and output (64 KiB each) must be
    resident; the region goes back to the CPU and the build succeeds."""
    mod = conv_graph(64, 64, 16, 16, 1, 1, 1, 0, False, False)
    exe = P.build(mod, "npu -sram=16k, ref")
    assert [s.target for s in exe.steps] == ["ref"]
    reasons = {r.reason for r in exe.report.host_rows}
    assert any(
        "u55-256 SRAM (16,384 bytes) cannot hold the feature maps live at once" in r
        and "131,072 bytes" in r
        for r in reasons
    ), reasons
    x = np.random.default_rng(0).integers(-128, 128, (1, 64, 64, 16), dtype=np.int8)
    assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])
    # the U65 spills the same maps to DRAM and keeps the op
    assert [s.target for s in P.build(mod, "npu -config=u65-256 -sram=16k, ref").steps] == ["npu"]


# the same memory system with more MACs; not u55-256 against u65-256: the U65 keeps a model's
# inputs and outputs in DRAM (Dedicated_Sram), and Vela 5.2 charges it more than the U55-256 on
# 109 of the 141 models in data/vela_cycles.json (a one-conv model: 3,138 against 1,600 cycles)
@pytest.mark.parametrize("slower, faster", [("u55-128", "u55-256"), ("u65-256", "u65-512")])
def test_more_macs_or_bandwidth_is_never_slower(slower, faster):
    mod = conv_graph(24, 24, 32, 64, 3, 1, 1, 1, False, True)
    cycles = {}
    for name in (slower, faster):
        region = P.build(mod, f"npu -config={name}, ref").steps[0].region
        cycles[name] = sum(c["cycles"] for c in program_cycles(region.program, region.config))
    assert cycles[faster] <= cycles[slower]


def test_cycles_are_monotone_in_bandwidth_and_mac_count():
    import dataclasses

    mod = conv_graph(16, 16, 32, 32, 3, 1, 1, 1, False, True)
    region = P.build(mod, "npu, ref").steps[0].region
    base = get_config("u55-256")
    wider = dataclasses.replace(base, weight_bandwidth=4.0, sram_bandwidth=16.0)
    bigger = dataclasses.replace(base, macs_per_cycle=512, ifm_depth_per_cycle=16)
    total = [
        sum(c["cycles"] for c in program_cycles(region.program, c)) for c in (base, wider, bigger)
    ]
    assert total[1] <= total[0] and total[2] <= total[0]


def test_configs_presets_toml_and_errors(tmp_path):
    assert set(PRESETS) == {"u55-128", "u55-256", "u65-256", "u65-512"}
    custom = tmp_path / "mine.toml"
    custom.write_text('base = "u65-256"\nmacs_per_cycle = 1024\nsram_bytes = 1048576\n')
    config = get_config(str(custom))
    assert (config.name, config.macs_per_cycle, config.clock_hz) == ("mine", 1024, 1e9)
    with pytest.raises(ConfigError, match="unknown NPU config 'u99'"):
        get_config("u99")
    with pytest.raises(ConfigError, match="-sram=lots"):
        get_config("u55-256", "lots")
    custom.write_text("macs_per_cycle = -1\n")
    with pytest.raises(ConfigError, match="macs_per_cycle must be a positive number"):
        get_config(str(custom))
    custom.write_text("colour = 3\n")
    with pytest.raises(ConfigError, match="unknown field 'colour'"):
        get_config(str(custom))


def test_constraint_refusals_name_the_requirement():
    mod = conv_graph(12, 12, 4, 4, 3, 4, 1, 1, False, False)  # stride 4
    report = P.placement_report(partition_for(mod, "npu, ref"))
    assert "Stride height and width must be in the range [1, 3] (got 4x4)" in report.rows[0].reason
    big = conv_graph(12, 12, 4, 4, 3, 1, 3, 4, False, False)  # dilation 3
    report = P.placement_report(partition_for(big, "npu, ref"))
    assert "Dilation must be in the range [1, 2] (got 3x3)" in report.rows[0].reason


def test_npu_is_listed_with_its_options():
    backend = get_backend("npu")
    assert backend.describe_options()["config"] == "u55-256"
    with pytest.raises(P.PartitaError, match="no option -colour"):
        P.build(conv_graph(4, 4, 2, 2, 1, 1, 1, 0, False, False), "npu -colour=red, ref")


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    shift=st.integers(-31, 0),
    magnitude=st.sampled_from([2**8, 2**13, 2**20, 2**30, 2**31 - 1]),
)
def test_fast_multiplier_equals_tflite_helper(seed, shift, magnitude):
    from partita.backends.npu.simulator import _multiply_by_quantized_multiplier

    from partita.ops.emulation.tflite_fixedpoint import multiply_by_quantized_multiplier

    rng = np.random.default_rng(seed)
    x = rng.integers(-magnitude, magnitude, (64, 4), dtype=np.int64)
    if magnitude > 2**20:
        x[0, :] = [-(2**30), 2**30, -1, 0]  # exact halves and zero
    else:  # small enough for the float64 path: ties of the rounding at this magnitude
        x[0, :] = [-(magnitude // 2), magnitude // 2, -1, 0]
    q = rng.integers(1 << 30, 1 << 31, 4, dtype=np.int64)
    sh = np.array([shift, min(0, shift + 1), -31, 0], np.int64)
    want = multiply_by_quantized_multiplier(x, q, sh)
    got = _multiply_by_quantized_multiplier(x, q, sh, exact=True)
    np.testing.assert_array_equal(got, want)
    # the float64 path, taken when |x| * q < 2**52
    bound = float(np.abs(x).max())
    small = _multiply_by_quantized_multiplier(x, q, sh, exact=True, bound=bound)
    np.testing.assert_array_equal(small, want)


@settings(max_examples=15, deadline=None)
@given(
    h=st.integers(3, 10),
    cin=st.integers(1, 10),
    cout=st.integers(1, 10),
    k=st.sampled_from([1, 3]),
    stride=st.integers(1, 2),
    depthwise=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_onnx_rounding_conv_equals_interpreter(h, cin, cout, k, stride, depthwise, seed):
    mod = conv_graph(h, h, cin, cout, k, stride, 1, k // 2, depthwise, True, seed, "onnx")
    exe = P.build(mod, "npu, ref")
    assert [s.target for s in exe.steps] == ["npu"]
    x = np.random.default_rng(seed).integers(-128, 128, (1, h, h, cin), dtype=np.int8)
    assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])


def test_concatenation_of_two_feature_maps_runs_on_the_npu():
    """The tuple is inside the composite, each field a feature-map input (with the tuple as one
    input the simulator saw a single array; found by tools/fuzz.py)."""
    mod = P.parse("""
def @main(%a: Tensor[(1, 4, 4, 3), int8], %b: Tensor[(1, 4, 4, 5), int8]) {
  concatenate((%a, %b), axis=3)
}""")
    exe = P.build(mod, "npu, ref")
    assert [s.target for s in exe.steps] == ["npu"]
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (1, 4, 4, 3), dtype=np.int8)
    b = rng.integers(-128, 128, (1, 4, 4, 5), dtype=np.int8)
    assert np.array_equal(exe.run(a, b)[0], P.interpret(mod, [a, b])[0])


def test_a_toml_config_travels_resolved_in_the_saved_executable(tmp_path):
    """The stream records every field of a custom config: the executable loads and computes the
    same cycles after the TOML file is gone (or edited)."""
    custom = tmp_path / "mine.toml"
    custom.write_text('base = "u65-256"\nmacs_per_cycle = 512\nclock_hz = 7e8\n')
    mod = conv_graph(8, 8, 4, 8, 3, 1, 1, 1, False, False)
    exe = P.build(mod, f"npu -config={custom} -sram=512k, ref")
    region = next(s.region for s in exe.steps if s.target == "npu")
    saved = tmp_path / "model.partita"
    exe.save(saved)
    custom.write_text('base = "u55-128"\n')  # an edit after the build changes nothing
    loaded = P.load(saved)
    again = next(s.region for s in loaded.steps if s.target == "npu")
    custom.unlink()
    assert again.config == region.config and again.config.macs_per_cycle == 512
    assert again.config.sram_bytes == 512 << 10 and again.summary()["config"] == "mine"
    assert again.summary()["cycles"] == region.summary()["cycles"]
    x = np.random.default_rng(0).integers(-128, 128, (1, 8, 8, 4), dtype=np.int8)
    assert np.array_equal(loaded.run(x)[0], exe.run(x)[0])


@pytest.mark.parametrize("name", ["concat_same_scale", "concat_diff_scale"])
def test_quantized_concatenation_runs_on_the_npu(name):
    """qnn.concatenate's per-input scales and zero points (tuples of constants) travel inside
    the composite, so TFLite's CONCATENATION runs on the NPU, bit-exact (it never matched)."""
    from pathlib import Path

    from partita.frontends import from_tflite

    path = Path(__file__).resolve().parents[2] / "models" / "tflite" / "ops" / f"{name}.tflite"
    mod = from_tflite(str(path))
    exe = P.build(mod, "npu, ref")
    assert [s.target for s in exe.steps] == ["npu"]
    rng = np.random.default_rng(0)
    inputs = [rng.integers(-128, 128, t.shape, dtype=t.dtype) for t in exe.input_types]
    assert np.array_equal(exe.run(*inputs)[0], P.interpret(mod, inputs)[0])


@pytest.mark.parametrize("k, depthwise", [(9, False), (11, False), (15, True)])
def test_kernels_beyond_8x8_run_on_the_npu_as_vela_takes_them(k, depthwise):
    mod = conv_graph(20, 20, 8, 8, k, 1, 1, k // 2, depthwise, False)
    exe = P.build(mod, "npu, ref")
    assert [s.target for s in exe.steps] == ["npu"]
    x = np.random.default_rng(k).integers(-128, 128, (1, 20, 20, 8), dtype=np.int8)
    assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])


def test_unpadded_pooling_windows_beyond_8_run_on_the_npu():
    mod = P.parse("""
def @main(%x: Tensor[(1, 16, 16, 8), int8]) {
  nn.max_pool2d(%x, pool_size=[16, 16], strides=[1, 1], layout="NHWC")
}""")
    exe = P.build(mod, "npu, ref")
    assert [s.target for s in exe.steps] == ["npu"]
    x = np.random.default_rng(0).integers(-128, 128, (1, 16, 16, 8), dtype=np.int8)
    assert np.array_equal(exe.run(x)[0], P.interpret(mod, [x])[0])
