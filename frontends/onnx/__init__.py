"""partita's ONNX frontend: ``from_onnx(path_or_model, input_shapes=None, qdq_to_qnn=True,
match="ort", ort_threads=None) -> IRModule``.

The model is read with the ``onnx`` package (reader.py), each node is converted by the row of
table.py that names it (constant shape arithmetic is folded first), QOperator nodes become qnn ops
with ONNX Runtime's semantics, and QDQ groups are rewritten into qnn ops by frontends/qdq.py.
See docs/onnx.md.
"""

from partita.frontends.errors import (
    ONNXConversionError,
    ONNXError,
    ONNXFormatError,
)
from partita.frontends.errors import (
    ONNXUnsupportedOperatorError as UnsupportedOperatorError,
)

from .frontend import compare_semantics, from_onnx
from .table import CONVERTERS

__all__ = [
    "CONVERTERS",
    "ONNXConversionError",
    "ONNXError",
    "ONNXFormatError",
    "UnsupportedOperatorError",
    "compare_semantics",
    "from_onnx",
]
