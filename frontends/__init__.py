"""partita.frontends: models from other frameworks as IRModules (see ARCHITECTURE.md)."""

from .onnx import from_onnx
from .pytorch import from_pytorch
from .tflite import from_tflite

__all__ = ["from_onnx", "from_pytorch", "from_tflite"]
