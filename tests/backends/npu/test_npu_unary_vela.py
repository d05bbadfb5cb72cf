"""One-op tables, ReLUs and native elementwise operations on a region's NHWC maps, against
Vela 5.2's debug database (`vela --enable-debug-db`, session 20, n30j; the one-op models of
tests/models/tflite/ops, 8x8x4 int8 maps): Vela runs each on the map reshaped to one 4x4x16
block (vela_access.flat_shape). Per model and preset, Vela's op cycles and (for the
elementwise operations) its cmd cycles, the bound our elementwise rule computes."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from partita.backends.npu import vela_access
from partita.backends.npu.config import get_config
from partita.backends.npu.program import TensorDesc

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))

from npu import P, from_tflite  # noqa: E402

# Vela 5.2's op cycles (the debug database's perf table) on u55-256 / u65-256
VELA = {
    # LUT: a 1x1 pool on the 4x4x16 block (est_op_cycles 320 / 1,026) plus the table's load
    # from the weight memory (64 + 256 / 1 on flash, 500 + 256 / 12 on DRAM)
    "logistic": (640, 1547),
    "tanh": (640, 1547),
    "exp": (640, 1547),
    "log": (640, 1547),
    "rsqrt": (640, 1547),
    "elu": (640, 1547),
    "hard_swish": (640, 1547),
    "leaky_relu": (640, 1547),
    # Relu with rescaling: the pool alone, no table
    "relu": (320, 1026),
    "relu6": (320, 1026),
    "relu_0_to_1": (320, 1026),
    # native elementwise (ao cycles on u55-256; cmd cycles on u65-256: 152 ABS, 160 MUL, 184
    # ADD, op cycles max(ao, cmd))
    "abs": (64, 152),
    "maximum": (96, 152),
    "minimum": (96, 152),
    "mul_same": (96, 160),
    "add_same": (192, 192),
    "sub_same": (192, 192),
    "neg": (192, 192),
}


def _cycles(name: str, preset: str) -> int:
    exe = P.build(
        from_tflite(str(ROOT / f"tests/models/tflite/ops/{name}.tflite")),
        f"npu -config={preset}, ref",
    )
    return sum(c["cycles"] for s in exe.steps if s.target == "npu" for c in s.region.cycles)


@pytest.mark.parametrize("name", sorted(VELA))
@pytest.mark.parametrize("preset", ["u55-256", "u65-256"])
def test_one_op_is_velas(name, preset):
    vela = VELA[name][preset == "u65-256"]
    ours = _cycles(name, preset)
    assert 0.99 <= ours / vela <= 1.01, (ours, vela)


def test_flat_shape():
    assert vela_access.flat_shape((1, 8, 8, 4)) == (4, 4, 16)
    assert vela_access.flat_shape((1, 16, 16, 8)) == (8, 16, 16)
    assert vela_access.flat_shape((1, 3, 5, 3)) == (3, 5, 3)  # 45 elements: its own depth
    assert vela_access.flat_shape((16,)) == (1, 1, 16)


@pytest.mark.parametrize(
    "src, dst, rate, vela_cmd",
    [
        ("dram", "dram", "conv_output_cycles", 152),  # ABS: the DRAM read binds (542.7)
        ("dram", "dram", "mul_output_cycles", 160),  # MUL
        ("dram", "sram", "mul_output_cycles", 160),  # PRELU's rescaling MUL into SRAM
        ("sram", "dram", "conv_output_cycles", 89),  # PRELU's MAXIMUM: the DRAM write binds
    ],
)
def test_elementwise_bound_is_the_slower_transfer(src, dst, rate, vela_cmd):
    """Vela's per-block bound takes the slower of the input block's transfer and the output
    block's, not their sum (which would give 224, 233, 174 and 101 cycles)."""
    config = get_config("u65-256")
    ins = [TensorDesc((1, 8, 8, 4), "int8", src)]
    out = TensorDesc((1, 8, 8, 4), "int8", dst)
    r = getattr(config, rate)
    bound = vela_access.elementwise_cycles(config, ins, out, 0.0, reshaped=(4, 4, 16))
    cmd = (bound / 256 * 4 + r) / 4 * 256  # the bound with the rate: Vela's cmd cycles
    assert int(cmd) in (vela_cmd - 1, vela_cmd), cmd
    assert np.isclose(
        vela_access.elementwise_cycles(config, ins, out, r, reshaped=(4, 4, 16)),
        max(r * 256, cmd),
    )


# Vela 5.2's total cycles on the other two presets (its summary CSV, session 20): the same rules
# give its figures to 0.2% (before them: u65-512's elementwise rows were 0.48-0.60 of Vela's)
OTHER = {
    "logistic": (832, 1451),
    "relu": (512, 930),
    "abs": (128, 144),
    "add_same": (384, 160),
    "mul_same": (192, 148),
    "neg": (384, 160),
}


@pytest.mark.parametrize("name", sorted(OTHER))
@pytest.mark.parametrize("preset", ["u55-128", "u65-512"])
def test_one_op_is_velas_on_the_other_presets(name, preset):
    vela = OTHER[name][preset == "u65-512"]
    ours = _cycles(name, preset)
    assert 0.99 <= ours / vela <= 1.01, (ours, vela)
