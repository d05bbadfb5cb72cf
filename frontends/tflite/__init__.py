"""partita's TFLite frontend: ``from_tflite(path_or_bytes) -> IRModule``.

The flatbuffer is read with the ``tflite`` package (reader.py), each operator is converted by the
row of table.py that names it, and quantized operators become qnn ops with TFLite's integer
semantics. See docs/tflite.md.
"""

from partita.frontends.errors import (
    TFLiteConversionError,
    TFLiteError,
    TFLiteFormatError,
)
from partita.frontends.errors import (
    TFLiteUnsupportedOperatorError as UnsupportedOperatorError,
)

from .frontend import SEMANTICS, from_tflite
from .table import CONVERTERS

__all__ = [
    "CONVERTERS",
    "SEMANTICS",
    "TFLiteConversionError",
    "TFLiteError",
    "TFLiteFormatError",
    "UnsupportedOperatorError",
    "from_tflite",
]
