"""partita.frontends: models from other frameworks as IRModules (see docs/architecture.md)."""

from partita.frontends.onnx import from_onnx
from partita.frontends.pytorch import from_pytorch
from partita.frontends.tflite import from_tflite

__all__ = ["from_onnx", "from_pytorch", "from_tflite"]
