"""The ``partita`` command line, thin over the Python API (also ``python -m partita``).

    partita compile MODEL --target "npu, llvm" -o model.partita
    partita run model.partita --input input=image.npy [-o outputs.npz] | --random
    partita inspect MODEL --target "npu, llvm" [--json] [--svg FILE | --dot FILE]
    partita profile model.partita [--random] [--repeat N] [--json]
    partita backends [--json]
    partita demo [--target "npu, llvm"]   (the main job on the shipped digits model)
    partita sweep MODEL... --target "npu -config={u55-128,u55-256}, llvm" [--engine ray]
    partita eval MODEL --data FILE.npz|digits --target "npu, llvm" [--engine ray]

Exit status: 0 success; 1 --strict found ops left on the CPU; 2 usage error (bad arguments,
target or inputs); 3 a model or executable file that cannot be read; 4 a model partita does not
support; 5 an internal error (a bug: please report it with the -v output).
"""

from __future__ import annotations

import json
import sys
import traceback

from partita.cli import commands, compare, scale_cmds
from partita.cli.models import LOADERS, UsageError, load_model
from partita.cli.parser import build_parser
from partita.cli.progress import Progress
from partita.errors import ModelFileError, PartitaError, UnsupportedModelError

EXIT_OK, EXIT_STRICT, EXIT_USAGE, EXIT_MODEL_FILE, EXIT_UNSUPPORTED, EXIT_INTERNAL = range(6)

HINTS = {
    EXIT_USAGE: "see 'partita {command} --help'",
    EXIT_MODEL_FILE: "check the path and that the file is a complete model of the format its "
    "extension names",
    EXIT_UNSUPPORTED: "run 'partita inspect MODEL --target ref' to see what partita makes of it, "
    "or see docs/ops.md for the supported ops",
    EXIT_INTERNAL: "this is a bug in partita: please report it with the output of -v",
}

COMMANDS = {
    "compile": commands.compile_cmd,
    "run": commands.run_cmd,
    "inspect": commands.inspect_cmd,
    "profile": commands.profile_cmd,
    "backends": commands.backends_cmd,
    "demo": commands.demo_cmd,
    "sweep": scale_cmds.sweep_cmd,
    "eval": scale_cmds.eval_cmd,
    "compare": compare.compare_cmd,
}


def exit_status(error: BaseException) -> int:
    """The documented exit status for an error."""
    from partita.backends import BackendError
    from partita.runtime import InputError

    if isinstance(error, ModelFileError):
        return EXIT_MODEL_FILE
    if isinstance(error, UnsupportedModelError):
        return EXIT_UNSUPPORTED
    if isinstance(error, (UsageError, BackendError, InputError)):
        return EXIT_USAGE
    if isinstance(error, PartitaError):
        return EXIT_UNSUPPORTED
    return EXIT_INTERNAL


def _report_error(error: BaseException, args, status: int) -> None:
    command = getattr(args, "command", "") or ""
    hint = HINTS.get(status, "").format(command=command)
    message = str(error) if isinstance(error, PartitaError) else f"{type(error).__name__}: {error}"
    if status == EXIT_INTERNAL:
        message = f"internal error: {message}"
    if getattr(args, "json", False):
        data = {
            "error": {
                "type": type(error).__name__,
                "message": message,
                "hint": hint,
                "exit_status": status,
            }
        }
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        first, _, rest = message.partition("\n")
        sys.stderr.write(f"partita: error: {first}\n")
        if rest:
            sys.stderr.write(rest + "\n")
        if hint:
            sys.stderr.write(f"partita: hint: {hint}\n")
    if getattr(args, "verbose", False) and status == EXIT_INTERNAL:
        traceback.print_exception(error, file=sys.stderr)


def main(argv=None) -> int:
    """Entry point of the ``partita`` console script."""
    from partita.passes import PassContext
    from partita.passes.infra import PassTimingInstrument

    args = build_parser().parse_args(argv)
    progress = Progress(verbose=args.verbose)
    timing = PassTimingInstrument()
    try:
        with PassContext(instruments=[timing] if args.verbose else []):
            status = COMMANDS[args.command](args, sys.stdout, progress)
    except KeyboardInterrupt:
        sys.stderr.write("partita: interrupted\n")
        return 130
    except Exception as error:  # every error gets one line, a hint and its documented status
        status = exit_status(error)
        _report_error(error, args, status)
    finally:
        progress.finish()
    if args.verbose and timing.timings:
        sys.stderr.write("partita: passes\n" + timing.render() + "\n")
    return status


__all__ = ["LOADERS", "exit_status", "load_model", "main"]
