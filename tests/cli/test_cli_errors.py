"""The one table of exit statuses (partita/cli/errors.py): an error of every class gets the
status ``partita --help`` documents and a hint for that error, as text and as one JSON document."""

from __future__ import annotations

import json
import re

import pytest
from partita.backends import BackendError
from partita.backends.llvm.errors import LLVMError
from partita.backends.llvm.host_cpu import HostCPUError
from partita.backends.npu.config import ConfigError
from partita.partition import StrictPartitionError
from partita.partition.target import TargetError

import partita.cli as cli
from partita.cli.errors import (
    STATUS_HELP,
    DataFileError,
    MissingPackageError,
    OutputPathError,
    UsageError,
    require,
    table,
)
from partita.cli.parser import build_parser
from partita.errors import (
    AttrError,
    ModelFileError,
    OpNotFoundError,
    ParseError,
    PartitaError,
    TypeInferenceError,
    UnsupportedModelError,
)
from partita.limits import MemoryBudgetError
from partita.runtime import ArtifactError, InputError
from partita.scale.engines import EngineError
from partita.text.serialize import DeserializeError


class _Report:
    host_rows = ["x"]
    host = "llvm"

    def to_dict(self):
        return {"rows": []}


def _strict():
    error = StrictPartitionError.__new__(StrictPartitionError)
    PartitaError.__init__(error, "strict mode: 1 source op left on the llvm")
    error.report = _Report()
    return error


# (error, status, words the hint must have: what to do for *that* error)
CASES = [
    (_strict(), 1, "without --strict"),
    (MissingPackageError("--plot needs the 'matplotlib' package"), 2, "install"),
    (OutputPathError("-o x/y: there is no directory 'x'"), 2, "directory that exists"),
    (ConfigError("unknown NPU config 'u77'"), 2, "partita backends"),
    (EngineError("unknown engine 'foo'"), 2, "--engine"),
    (TargetError("unknown backend 'gpu9'"), 2, "partita backends"),
    (HostCPUError("llvm: -mcpu=foo is not a CPU LLVM knows"), 2, "-mcpu=native, -isa=auto"),
    (LLVMError("llvm cannot compile nn.foo"), 2, "partita backends"),
    (BackendError("backend npu has no option -x"), 2, "partita backends"),
    (InputError("input x: expected (1, 4) int8"), 2, "partita info"),
    (UsageError("give --input files or --random, not both"), 2, "--help"),
    (DataFileError("--data x.npy: give an .npz"), 3, ".npz"),
    (ArtifactError("m.partita is not a partita executable"), 3, "check the path"),
    (ModelFileError("no such model file"), 3, "check the path"),
    (ParseError("unexpected token", 1, 2), 3, "does not parse"),
    (DeserializeError("bad json"), 3, "does not parse"),
    (UnsupportedModelError("op FOO is not supported"), 4, "inspect MODEL --target ref"),
    (TypeInferenceError("conv2d: shapes"), 4, "inspect MODEL --target ref"),
    (MemoryBudgetError("over the budget"), 4, "inspect MODEL --target ref"),
    (OpNotFoundError("no op foo"), 4, "inspect MODEL --target ref"),
    (AttrError("bad attr"), 4, "inspect MODEL --target ref"),
    (PartitaError("CPU override FOO match no op of the model"), 2, "--help"),
    (MemoryError(), 4, "PARTITA_MEMORY_BUDGET"),
    (ZeroDivisionError("oops"), 5, "bug"),
]


@pytest.mark.parametrize("error, status, hint", CASES, ids=lambda c: type(c).__name__)
def test_every_error_class_has_its_documented_status_and_hint(
    capsys, monkeypatch, error, status, hint
):
    def fail(*args, **kwargs):
        raise error

    monkeypatch.setitem(cli.COMMANDS, "backends", fail)
    assert cli.main(["backends"]) == status
    out, err = capsys.readouterr()
    assert out == "" and "partita: hint: " in err and hint in err, err
    assert ("internal error" in err) == (status == 5)
    assert cli.main(["backends", "--json"]) == status
    out, err = capsys.readouterr()
    data = json.loads(out)["error"]
    assert data["exit_status"] == status and hint in data["hint"]
    if status == 1:
        assert data["report"] == {"rows": []}


def test_every_row_of_the_table_is_tested_and_the_help_documents_each_status():
    tested = {type(e) for e, _, _ in CASES}
    for kinds, status, _ in table():
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        assert any(issubclass(t, kinds) for t in tested), kinds
        assert re.search(rf"\b{status} ", STATUS_HELP) or status == 5
    assert " ".join(STATUS_HELP.split()) in " ".join(build_parser().format_help().split())


def test_argparse_errors_are_usage_errors_with_the_subcommands_usage(capsys):
    assert cli.main(["run", "x.partita", "--bogus"]) == 2
    _, err = capsys.readouterr()
    assert "usage: partita run" in err and "unrecognized arguments: --bogus" in err
    assert cli.main(["compile", "m.tflite", "--json"]) == 2
    out, _ = capsys.readouterr()
    data = json.loads(out)["error"]
    assert "--target" in data["message"] and data["usage"].startswith("usage: partita compile")
    assert cli.main(["demo", "--limit", "0", "--json"]) == 2
    assert "positive" in json.loads(capsys.readouterr().out)["error"]["message"]


def test_a_missing_package_names_the_pip_extra():
    with pytest.raises(MissingPackageError, match=r"pip install 'partita\[plot\]'"):
        require("a_module_that_is_not_installed", "--plot", extra="plot")
    require("json", "anything")  # present: no error


@pytest.mark.parametrize("argv", [["--help"], ["compile", "--help"], ["--version"],
                                  ["inspect", "-h"]])
def test_help_and_version_with_json_are_one_json_document(capsys, argv):
    """--help and --version print text and exit 0; with --json that text is one document."""
    assert cli.main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"text"} and data["text"].startswith(("usage: partita", "partita "))
