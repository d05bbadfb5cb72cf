"""partita's PyTorch frontend: ``from_pytorch(model_or_path, example_inputs=None) -> IRModule``.

torch.export programs (float, or PT2E-quantized by torchao) are converted node by node through
table.py; their quantize/dequantize groups become QNN ops by the shared QDQ rewrites. TorchScript
quantized models (eager or FX quantization, traced) are converted from their quantized:: ops with
weights from the packed parameters. torch is imported only when from_pytorch runs. See
docs/pytorch.md.
"""

from partita.frontends.errors import (
    PyTorchConversionError,
    PyTorchError,
    PyTorchFormatError,
)
from partita.frontends.errors import (
    PyTorchUnsupportedOperatorError as UnsupportedOperatorError,
)

from .frontend import from_pytorch

__all__ = [
    "PyTorchConversionError",
    "PyTorchError",
    "PyTorchFormatError",
    "UnsupportedOperatorError",
    "from_pytorch",
]
