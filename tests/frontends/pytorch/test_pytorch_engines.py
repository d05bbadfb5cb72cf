"""Issue 16 part 3: an eager-mode TorchScript MobileNetV2 (torchvision's 0.35 shapes, 96 x 96,
x86 qconfig: fused conv-bn, standalone ReLU6, FloatFunctional adds) against PyTorch on each x86
quantized engine, bit for bit.

PyTorch re-packs a TorchScript model's weights for the engine in use when it loads it; under
"x86" a convolution goes to oneDNN on AVX512-VNNI CPUs (at most 100 groups, symmetric weights)
and to fbgemm elsewhere, whose output stages round differently (the 7-quanta difference the
issue saw was fbgemm's stage applied to oneDNN's results). The default import follows the
engine and this CPU; every engine is checked on whatever CPU runs the test.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from partita.frontends import from_pytorch  # noqa: E402
from partita.frontends.pytorch import PyTorchError  # noqa: E402
from partita.frontends.pytorch.ts_ops import conv_kernel, pair_accumulate  # noqa: E402

import partita  # noqa: E402
from partita.ir import iter_calls  # noqa: E402

MODEL = Path(__file__).resolve().parents[2] / "models" / "pytorch" / (
    "ts_eager_x86_tv_mobilenetv2_035.pt")
SHAPE = (1, 3, 96, 96)


def images(n: int, seed: int) -> np.ndarray:
    g = torch.Generator().manual_seed(seed)
    low = torch.randn(n, 3, 12, 12, generator=g)
    up = torch.nn.functional.interpolate(low, size=SHAPE[2:], mode="bilinear")
    return (up + 0.2 * torch.randn(n, 3, *SHAPE[2:], generator=g)).numpy()


@pytest.fixture
def engine():
    old = torch.backends.quantized.engine
    yield lambda name: setattr(torch.backends.quantized, "engine", name)
    torch.backends.quantized.engine = old


def semantics(mod) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in iter_calls(mod["main"]):
        if c.op.name == "qnn.requantize":
            out[c.attrs.semantics] = out.get(c.attrs.semantics, 0) + 1
    return out


@pytest.mark.parametrize("name", ["x86", "fbgemm", "onednn"])
def test_eager_x86_mobilenet_is_bit_exact_on_every_engine(engine, name):
    engine(name)
    model = torch.jit.load(str(MODEL))  # packed for this engine, as PyTorch runs it
    x = images(16, 77)  # one batch: the interpreter's numpy kernels run it ~4x faster per image
    mod = from_pytorch(MODEL, [x.shape])  # follows torch.backends.quantized.engine
    want = model(torch.from_numpy(x)).numpy()
    got = partita.interpret(mod, [x])[0]
    assert got.tobytes() == want.tobytes(), (name, float(np.abs(got - want).max()))
    kinds = semantics(mod)
    if name == "onednn" or (name == "x86" and torch.cpu._is_vnni_supported()):
        assert kinds.get("onednn", 0) > 0
    else:
        assert set(kinds) == {"fbgemm"}


def test_the_two_output_stages_differ_on_this_model(engine):
    """Importing with the wrong engine is off (what the issue reported): the test above can
    tell the stages apart."""
    engine("onednn")
    model = torch.jit.load(str(MODEL))
    x = images(64, 77)  # one batch; on this seed only image 28 differs, by one output quantum
    wrong = from_pytorch(MODEL, [x.shape], engine="fbgemm")
    got = partita.interpret(wrong, [x])[0]
    assert np.abs(got - model(torch.from_numpy(x)).numpy()).max() > 0


def test_x86_engine_splits_convolutions_as_pytorch_does():
    assert conv_kernel("x86", 1, True, avx512_vnni=True) == "onednn"
    assert conv_kernel("x86", 100, True, avx512_vnni=True) == "onednn"
    assert conv_kernel("x86", 101, True, avx512_vnni=True) == "fbgemm"  # wide depthwise
    assert conv_kernel("x86", 1, False, avx512_vnni=True) == "fbgemm"  # asymmetric weights
    assert conv_kernel("x86", 1, True, avx512_vnni=False) == "fbgemm"
    assert conv_kernel("fbgemm", 1, True, avx512_vnni=True) == "fbgemm"
    assert conv_kernel("onednn", 500, False, avx512_vnni=False) == "onednn"
    vnni = from_pytorch(MODEL, [SHAPE], engine="x86", avx512_vnni=True)
    # 52 convolutions: the depthwise ones of 144 .. 672 channels stay on fbgemm
    assert semantics(vnni) == {"onednn": 42, "fbgemm": 11}


def test_which_sums_saturate_pairs():
    """Measured on an AVX2 CPU against torch.ops.quantized.conv2d with activations up to 255
    (docs/pytorch.md); on AVX512-VNNI CPUs only fbgemm's depthwise kernels (AVX2 code) do."""
    for vnni in (False, True):
        assert pair_accumulate("fbgemm", True, True, vnni) == "vpmaddubsw"
        assert pair_accumulate("onednn", True, True, vnni) == "exact"
    assert pair_accumulate("fbgemm", False, False, False) == "vpmaddubsw"
    assert pair_accumulate("fbgemm", False, True, True) == "exact"
    assert pair_accumulate("onednn", False, True, False) == "vpmaddubsw"
    assert pair_accumulate("onednn", False, False, False) == "vpmaddubsw_tap"
    assert pair_accumulate("onednn", False, False, True) == "exact"


def test_bad_engine():
    with pytest.raises(PyTorchError, match="engine must be one of"):
        from_pytorch(MODEL, [SHAPE], engine="qnnpack")
