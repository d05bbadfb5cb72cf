"""The MAC array's block model equals Vela's own (its find_block_config and conv cycle estimate)
on random convolution, depthwise and fully connected shapes, 8- and 16-bit input maps, for every
preset Vela knows."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from partita.backends.npu.blocks import Query, find_block, mac_cycles
from partita.backends.npu.config import get_config

VELA_ACCELERATORS = {
    "u55-128": "Ethos_U55_128",
    "u55-256": "Ethos_U55_256",
    "u65-256": "Ethos_U65_256",
    "u65-512": "Ethos_U65_512",
}


def vela_estimate(preset: str, q: Query):
    """Vela's chosen output block and its compute cycles for ``q`` (weights and maps in SRAM)."""
    vela = pytest.importorskip("ethosu.vela")  # noqa: F841
    from ethosu.vela.architecture_allocator import find_block_config, resampling_mode
    from ethosu.vela.architecture_features import Accelerator, create_default_arch
    from ethosu.vela.npu_performance import PerformanceQuery, _estimate_conv_cycles
    from ethosu.vela.operation import Kernel, NpuBlockType, Op
    from ethosu.vela.shape4d import Shape4D
    from ethosu.vela.tensor import MemArea, TensorFormat

    arch = create_default_arch(getattr(Accelerator, VELA_ACCELERATORS[preset]))
    kind = {
        "conv": NpuBlockType.ConvolutionMxN,
        "dwconv": NpuBlockType.ConvolutionDepthWise,
        "fc": NpuBlockType.VectorProduct,
    }[q.kind]
    kernel = Kernel(q.kernel[1], q.kernel[0], q.strides[1], q.strides[0], *q.dilation[::-1])
    ifm, ofm = Shape4D(1, *q.ifm), Shape4D(1, *q.ofm)
    config = find_block_config(
        arch, kind, ofm, ifm, None, False, q.bits, kernel, 0, True, resampling_mode.NONE
    )
    query = PerformanceQuery(kind)
    query.ifm_shape, query.ofm_shape, query.ifm_bits, query.ofm_bits = ifm, ofm, q.bits, q.bits
    query.kernel, query.config = kernel, config
    query.ifm_memory_area = query.ofm_memory_area = query.const_memory_area = MemArea.Sram
    query.ifm_format = query.ofm_format = TensorFormat.NHCWB16
    query.const_shape = Shape4D(1, 1, 1, q.ofm[2])
    cycles = _estimate_conv_cycles(arch, Op.Conv2DBias, Op.Relu6, query)
    return tuple(config.ofm_block.as_list()[1:]), cycles


@st.composite
def queries(draw):
    kind = draw(st.sampled_from(["conv", "dwconv", "fc"]))
    bits = draw(st.sampled_from([8, 8, 16]))
    if kind == "fc":
        k, n = draw(st.integers(1, 2048)), draw(st.integers(1, 1024))
        return Query("fc", (1, 1, k), (1, 1, n), bits=bits)
    h, w = draw(st.integers(1, 64)), draw(st.integers(1, 64))
    kh, kw = draw(st.sampled_from([1, 3, 5])), draw(st.sampled_from([1, 3, 5]))
    s = draw(st.integers(1, 2))
    d = draw(st.sampled_from([1, 1, 2]))
    cin = draw(st.sampled_from([1, 3, 8, 16, 24, 32, 96, 144, 320]))
    cout = cin if kind == "dwconv" else draw(st.sampled_from([8, 16, 24, 64, 100, 160]))
    oh = max(1, (h - (kh - 1) * d - 1) // s + 1)
    ow = max(1, (w - (kw - 1) * d - 1) // s + 1)
    return Query(kind, (h, w, cin), (oh, ow, cout), (kh, kw), (s, s), (d, d), bits)


@settings(max_examples=40, deadline=None)
@given(preset=st.sampled_from(sorted(VELA_ACCELERATORS)), q=queries())
def test_block_choice_and_compute_cycles_equal_velas(preset, q):
    config = get_config(preset)
    block, cycles = vela_estimate(preset, q)
    # the output stage's rate: Vela's index 7, or index 3 for 40-bit accumulators (16-bit inputs)
    stage = config.mul_output_cycles if q.bits == 16 else config.conv_output_cycles
    assert find_block(config, q).ofm == block
    assert mac_cycles(config, q, stage)[0] == pytest.approx(cycles)


def test_the_presets_copy_velas_output_stage_tables():
    vela = pytest.importorskip("ethosu.vela")  # noqa: F841
    from ethosu.vela.architecture_features import Accelerator, create_default_arch

    for preset, name in VELA_ACCELERATORS.items():
        arch, config = create_default_arch(getattr(Accelerator, name)), get_config(preset)
        table = arch.output_cycles_per_elem
        assert (config.conv_output_cycles, config.mul_output_cycles) == (table[7], table[3])
        assert (config.add_output_cycles, config.pool_output_cycles) == (table[5], table[6])
        assert config.lut_cycles == arch.activation_cycles_per_elem[0]
