"""What the ``partita`` command exits with, and what it says to do, for every kind of error.

One table, ``STATUS``: error classes in order (the first that matches wins), each with its exit
status and the hint printed under the message. ``partita --help`` documents the statuses;
tests/cli/test_cli_errors.py raises one error of every row and checks both.
"""

from __future__ import annotations

import importlib.util

from partita.errors import (
    AttrError,
    InterpreterError,
    MissingPackageError,
    ModelFileError,
    OpNotFoundError,
    ParseError,
    PartitaError,
    TypeInferenceError,
    UnsupportedModelError,
    UsageError,
)

EXIT_OK, EXIT_STRICT, EXIT_USAGE, EXIT_FILE, EXIT_UNSUPPORTED, EXIT_INTERNAL = range(6)
EXIT_INTERRUPTED = 130  # Ctrl-C
EXIT_PIPE = 141  # stdout closed before the command finished writing (``partita demo | head``)

STATUS_HELP = (
    "exit status: 0 ok, 1 a check failed (--strict found ops left on the CPU; a sweep point "
    "failed; demo's outputs differ from TFLite's), 2 usage error (arguments, target, "
    "inputs, an output path, a missing optional package), 3 a model, executable or data file "
    "that cannot be read, 4 a model partita does not support, 5 internal error (a bug); 130 "
    "interrupted, 141 stdout closed before the output ended"
)


class OutputPathError(UsageError):
    """An output file that cannot be written where the user asked (no such directory, ...)."""


class DataFileError(ModelFileError):
    """A data file (``eval --data``) that cannot be read."""


def require(module: str, what: str, extra: str | None = None, package: str | None = None):
    """Raise MissingPackageError unless ``module`` can be imported (checked without importing)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        how = f"pip install 'partita[{extra}]'" if extra else f"pip install {package or module}"
        raise MissingPackageError(f"{what} needs the {package or module!r} package: {how}")


def _table():
    """(error class, exit status, hint); ``{command}`` in a hint is the command's name."""
    from partita.backends import BackendError
    from partita.backends.npu.config import ConfigError
    from partita.partition import StrictPartitionError
    from partita.runtime import InputError
    from partita.scale.engines import EngineError
    from partita.text.serialize import DeserializeError

    try:
        from partita.backends.llvm.host_cpu import HostCPUError
    except ImportError:  # no llvmlite: the LLVM backend cannot raise it
        HostCPUError = ()  # noqa: N806

    return [
        (StrictPartitionError, EXIT_STRICT,
         "the report says why each op stayed on the CPU; without --strict they run there"),
        (MissingPackageError, EXIT_USAGE, "install the package named above, or choose "
         "an option that does not need it"),
        (OutputPathError, EXIT_USAGE, "give a path in a directory that exists and is writable"),
        (ConfigError, EXIT_USAGE,
         "'partita backends' lists the NPU presets (-config=) and the -sram sizes"),
        (EngineError, EXIT_USAGE, "see 'partita {command} --help' for --engine"),
        (HostCPUError, EXIT_USAGE, "leave -mcpu and -isa out (or -mcpu=native, -isa=auto) to "
         "compile for this CPU; code for another CPU can be compiled here and run there"),
        (BackendError, EXIT_USAGE,
         "'partita backends' lists every backend and its options"),
        (InputError, EXIT_USAGE,
         "'partita info MODEL' lists each input's name, shape and dtype"),
        (UsageError, EXIT_USAGE, "see 'partita {command} --help'"),
        (DataFileError, EXIT_FILE, "give an .npz file (arrays images/inputs/x and labels/y) "
         "or 'digits'"),
        (ModelFileError, EXIT_FILE,
         "check the path and that the file is complete and of the format its extension names"),
        ((ParseError, DeserializeError), EXIT_FILE, "the file's text does not parse; the "
         "message points at the line"),
        ((UnsupportedModelError, TypeInferenceError, OpNotFoundError, AttrError,
          InterpreterError), EXIT_UNSUPPORTED,
         "'partita inspect MODEL --target ref' shows what partita makes of the model; the "
         "supported ops are listed in docs/ops.md of partita's repository"),
        # any other error partita raises on purpose is about what was asked of it
        (PartitaError, EXIT_USAGE, "see 'partita {command} --help'"),
        (MemoryError, EXIT_UNSUPPORTED, "the model needs more memory than this machine "
         "has; PARTITA_MEMORY_BUDGET sets the limit partita checks"),
        (BaseException, EXIT_INTERNAL,
         "this is a bug in partita: please report it with the output of -v"),
    ]


_TABLE: list | None = None


def table() -> list:
    global _TABLE
    if _TABLE is None:
        _TABLE = _table()
    return _TABLE


def classify(error: BaseException) -> tuple[int, str]:
    """The exit status and hint for ``error`` (the table's first matching row)."""
    for kind, status, hint in table():
        if isinstance(error, kind):
            return status, hint
    return EXIT_INTERNAL, ""


def exit_status(error: BaseException) -> int:
    """The documented exit status for an error."""
    return classify(error)[0]
