"""Bad input gives PartitaErrors that name the problem; unsupported ops are listed at once."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from partita.frontends import from_pytorch  # noqa: E402
from partita.frontends.pytorch import (  # noqa: E402
    PyTorchError,
    PyTorchFormatError,
    UnsupportedOperatorError,
)
from partita.frontends.pytorch.pt2e import quantize_bias  # noqa: E402

from partita.errors import PartitaError  # noqa: E402

MODELS = Path(__file__).resolve().parents[2] / "models" / "pytorch"


def test_importing_frontends_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, partita.frontends; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("data,match", [
    (b"", "not a zip file"),
    (b"not a model at all", "not a zip file"),
])
def test_garbage_bytes(data, match):
    with pytest.raises(PyTorchFormatError, match=match):
        from_pytorch(data)


def test_zip_that_is_no_model():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("hello.txt", "hi")
    with pytest.raises(PyTorchFormatError, match="neither a torch.export archive"):
        from_pytorch(buf.getvalue())


@pytest.mark.parametrize("name", ["pt2e_x86_ops.pt2", "ts_eager_ops.pt"])
def test_truncated_and_corrupt_archives(name):
    data = (MODELS / name).read_bytes()
    with pytest.raises(PyTorchFormatError):
        from_pytorch(data[: len(data) // 2], [(1, 3, 16, 16)])
    # Flip bytes inside the stored members (the zip directory stays readable).
    corrupt = bytearray(data)
    for i in range(200, len(corrupt) - 2000, 997):
        corrupt[i] ^= 0x5A
    with pytest.raises(PartitaError):
        from_pytorch(bytes(corrupt), [(1, 3, 16, 16)])


def test_missing_file_and_wrong_type(tmp_path):
    with pytest.raises(PyTorchError, match="cannot read the PyTorch model"):
        from_pytorch(tmp_path / "nope.pt2")
    with pytest.raises(PyTorchError, match="not int"):
        from_pytorch(42)


def test_torchscript_needs_example_inputs():
    with pytest.raises(PyTorchError, match="pass example_inputs"):
        from_pytorch(MODELS / "ts_eager_ops.pt")
    with pytest.raises(PyTorchError, match="2 entries but the model takes 1"):
        from_pytorch(MODELS / "ts_eager_ops.pt", [(1, 3, 16, 16), (1, 3)])
    with pytest.raises(PyTorchError, match="example_inputs\\[0\\] must be"):
        from_pytorch(MODELS / "ts_eager_ops.pt", ["x"])


def test_example_inputs_must_fit_static_shape():
    with pytest.raises(PyTorchError, match=r"shape \[1, 3, 8, 8\], but input 'x'"):
        from_pytorch(MODELS / "pt2e_x86_ops.pt2", [(1, 3, 8, 8)])


def test_unsupported_ops_are_listed_at_once():
    class Net(torch.nn.Module):
        def forward(self, x):
            a = torch.cumsum(x, 1)
            b = torch.sort(x, 1).values
            return torch.relu(x) + torch.erf(x) + a + b

    ep = torch.export.export(Net(), (torch.randn(2, 5),))
    with pytest.raises(UnsupportedOperatorError) as info:
        from_pytorch(ep)
    names = [u[2] for u in info.value.unsupported]
    assert names == ["aten.cumsum.default", "aten.sort.default", "aten.erf.default"]
    text = str(info.value)
    assert "3 unsupported operators" in text and "#1 cumsum = aten.cumsum.default" in text


def test_conversion_errors_name_the_node():
    class Net(torch.nn.Module):
        def forward(self, x):
            return x.reshape(3, 7)

    ep = torch.export.export(Net(), (torch.randn(21),))
    mod = from_pytorch(ep)  # fine as exported
    assert mod["main"].body.checked_type.shape == (3, 7)

    class Bad(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.max_pool2d(x, 3, 1, 1, return_indices=True)[1]

    ep = torch.export.export(Bad(), (torch.randn(1, 2, 5, 5),))
    with pytest.raises(UnsupportedOperatorError, match="getitem.*pooling indices"):
        from_pytorch(ep)


def test_quantize_bias_rounds_half_to_even_in_float32():
    scale = np.array([0.5, 0.25, 2.0], np.float32)
    b = np.array([0.25, -0.125, 3.0], np.float32)  # 0.5, -0.5, 1.5 quanta
    np.testing.assert_array_equal(quantize_bias(b, scale), [0, 0, 2])
    assert quantize_bias(np.array([1e12], np.float32), np.float32(1e-3))[0] == 2**31 - 1
