"""Files shipped in partita/data: the demo's model and its held-out test set. The CLI's demo and
scale's evaluations both read them (a core module, so neither imports the other)."""

from __future__ import annotations

from importlib import resources

from partita.errors import ModelFileError

MODEL = "digits_mobilenetv2.tflite"
TEST_SET = "digits_test.npz"


def data_path(name: str):
    """A file shipped in partita/data (a PartitaError if this installation lacks it)."""
    path = resources.files("partita") / "data" / name
    if not path.is_file():
        raise ModelFileError(f"partita/data/{name} is missing from this installation")
    return path
