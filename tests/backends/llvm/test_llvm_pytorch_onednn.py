"""Part 3 of the hardening issue: the x86 engine's oneDNN convolution output stage of a
TorchScript model, under build("llvm"), forced on any machine: the torchvision-shaped
MobileNetV2 with engine="onednn" (every convolution oneDNN's: the interpreter equals PyTorch's
own run under that engine, and llvm equals the interpreter) and with the "x86" engine as on an
AVX512-VNNI CPU (avx512_vnni=True: oneDNN for the convolutions it takes there, fbgemm for the
rest; llvm equals the interpreter), each on -isa=plain and the vector tier this CPU runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from partita.backends.llvm.host_cpu import lacking

import partita as P
from partita.ir import iter_calls

torch = pytest.importorskip("torch")

MODEL = Path(__file__).resolve().parents[2] / "models" / "pytorch" / (
    "ts_eager_x86_tv_mobilenetv2_035.pt")
SHAPE = (1, 3, 96, 96)
ISAS = ["plain"] + ([] if lacking(["avx2"]) else ["avx2"])


@pytest.mark.slow
@pytest.mark.parametrize("form", ["onednn", "x86_vnni"])
def test_onednn_output_stage_builds_for_llvm_bit_exactly(form):
    from partita.frontends import from_pytorch

    kwargs = {"engine": "onednn"} if form == "onednn" else {"engine": "x86", "avx512_vnni": True}
    mod = from_pytorch(str(MODEL), example_inputs=[SHAPE], **kwargs)
    stages = {c.attrs.semantics for c in iter_calls(mod["main"]) if c.op.name == "qnn.requantize"}
    assert "onednn" in stages and (stages == {"onednn"}) == (form == "onednn")
    x = np.random.default_rng(7).standard_normal(SHAPE).astype(np.float32)
    ref = P.interpret(mod, [x])[0]
    if form == "onednn":  # PyTorch's own run under that engine, on this machine
        old = torch.backends.quantized.engine
        try:
            torch.backends.quantized.engine = "onednn"
            want = torch.jit.load(str(MODEL))(torch.from_numpy(x)).numpy()
        finally:
            torch.backends.quantized.engine = old
        assert ref.tobytes() == want.tobytes()
    for isa in ISAS:
        exe = P.build(mod, f"llvm -isa={isa}")
        kinds = {k.split()[0] for k in exe.steps[0].region.kernels}
        assert kinds & {"VCONV", "WMAC"}  # the convolutions ran as native kernels
        assert exe.run(x)[0].tobytes() == ref.tobytes(), isa
