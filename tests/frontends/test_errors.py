"""One errors module for the three frontends: the same family per format, one base to catch."""

from __future__ import annotations

import pytest
from partita.frontends import errors
from partita.frontends.onnx import UnsupportedOperatorError as ONNXUnsupported
from partita.frontends.pytorch import UnsupportedOperatorError as PyTorchUnsupported
from partita.frontends.tflite import UnsupportedOperatorError as TFLiteUnsupported

from partita.errors import ModelFileError, PartitaError, UnsupportedModelError

ROWS = {
    TFLiteUnsupported: (
        [(3, "PRELU", "no converter", ("x",), ("y",))] * 2,
        "2 unsupported operators (2 PRELU)",
    ),
    ONNXUnsupported: ([(1, "com.x::Foo", "foo_1", "no converter")], "1 unsupported node:"),
    PyTorchUnsupported: ([(0, "foo", "aten.foo", "no converter")], "#0 foo = aten.foo"),
}


@pytest.mark.parametrize("cls", list(ROWS), ids=lambda c: c.__name__)
def test_every_format_lists_its_unsupported_operators_under_one_base(cls):
    rows, text = ROWS[cls]
    error = cls(rows)
    assert isinstance(error, errors.UnsupportedOperatorError)
    assert isinstance(error, UnsupportedModelError) and error.unsupported == rows
    assert text in str(error)


@pytest.mark.parametrize("fmt", ["TFLite", "ONNX", "PyTorch"])
def test_each_family_has_format_and_conversion_errors(fmt):
    base = getattr(errors, f"{fmt}Error")
    assert issubclass(base, PartitaError)
    assert issubclass(getattr(errors, f"{fmt}FormatError"), (base, ModelFileError))
    assert issubclass(getattr(errors, f"{fmt}ConversionError"), UnsupportedModelError)
