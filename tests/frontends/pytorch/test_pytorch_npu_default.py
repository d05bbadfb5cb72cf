"""Quantized PyTorch models built for a target with the NPU run as integer networks on it
(backends/npu/semantics.py): TorchScript's fbgemm/oneDNN output stages and pair-saturating sums,
and PT2E programs imported with match="pytorch_eager", become exact integer convolutions with
TFLite-style requantization, bit-exact with the interpreter on that variant; CPU-only builds
keep reproducing PyTorch."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
importlib.import_module("torch.ao.quantization.fx._decomposed")
from partita.backends.npu import semantics_for  # noqa: E402
from partita.frontends import from_pytorch  # noqa: E402

import partita as P  # noqa: E402

MODELS = Path(__file__).resolve().parents[2] / "models" / "pytorch"


@pytest.fixture(scope="module", autouse=True)
def fbgemm():
    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = "fbgemm"
    yield
    torch.backends.quantized.engine = old


@pytest.mark.parametrize(
    "name, side",
    [
        ("ts_eager_mobilenetv2.pt", 64),
        ("ts_fx_mobilenetv2.pt", 64),
        ("ts_eager_x86_tv_mobilenetv2_035.pt", 96),
    ],
)
def test_torchscript_quantized_nets_run_on_the_npu_in_one_partition(name, side):
    mod = from_pytorch(str(MODELS / name), [(1, 3, side, side)])
    exe = P.build(mod, "npu, ref")
    summary = exe.report.summary()
    assert summary["macs_by_target"].get("npu", 0) >= 0.99 * summary["macs"]
    npu_parts = [s for s in exe.steps if s.target == "npu"]
    assert len(npu_parts) <= 2  # the body and the classifier (21-46 one-op splinters before)
    x = np.random.default_rng(0).standard_normal((1, 3, side, side)).astype(np.float32)
    got = exe.run(x)[0]
    assert np.array_equal(got, P.interpret(semantics_for(mod, "npu, ref"), [x])[0])
    assert any("may differ from PyTorch" in n for n in exe.report.notes)
    # without the NPU: PyTorch's kernels, bit for bit (the interpreter on the module itself)
    cpu = P.build(mod, "ref")
    assert np.array_equal(cpu.run(x)[0], P.interpret(mod, [x])[0])
    assert not cpu.report.notes


def test_pt2e_x86_with_pytorch_eager_match_puts_its_qdq_groups_on_the_npu():
    """match="pytorch_eager" keeps PyTorch's float execution for CPU builds (0% on the NPU
    before); a target with the NPU builds the qnn import. The x86 quantizer leaves the conv
    before each residual add unquantized (the add is quantized after): the variant runs it as
    an integer conv requantized to the add's output parameters and a quantized add
    (frontends/pytorch/residual.py; 87.7% of the MACs on the NPU before). Only the float
    classifier (its output is never quantized) stays on the host."""
    mod = from_pytorch(str(MODELS / "pt2e_x86_mobilenetv2.pt2"), match="pytorch_eager")
    exe = P.build(mod, "npu, ref")
    summary = exe.report.summary()
    assert summary["macs_by_target"].get("npu", 0) >= 0.99 * summary["macs"]
    assert summary["partitions"] == 1
    x = np.random.default_rng(1).standard_normal((1, 3, 64, 64)).astype(np.float32)
    assert np.array_equal(exe.run(x)[0], P.interpret(semantics_for(mod, "npu, ref"), [x])[0])
