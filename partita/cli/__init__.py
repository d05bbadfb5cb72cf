"""The ``partita`` command line, thin over the Python API (also ``python -m partita``).

    partita compile MODEL --target "npu, llvm" -o model.partita
    partita run model.partita --input input=image.npy [-o outputs.npz] | --random
    partita inspect MODEL --target "npu, llvm" [--json] [--svg FILE | --dot FILE]
    partita profile model.partita [--random] [--repeat N] [--json]
    partita info MODEL [--json]       (inputs and outputs: name, shape, dtype, scale, zero point)
    partita backends [--json]
    partita demo [--target "npu, llvm"]   (the main job on the shipped digits model)
    partita sweep MODEL... --target "npu -config={u55-128,u55-256}, llvm" [--engine ray]
    partita eval MODEL --data FILE.npz|digits --target "npu, llvm" [--engine ray]

Exit status (one table, partita/cli/errors.py): 0 success; 1 --strict found ops left on the CPU;
2 usage error (arguments, target, inputs, an output path, a missing optional package); 3 a model,
executable or data file that cannot be read; 4 a model partita does not support; 5 an internal
error (a bug: please report it with the -v output); 130 interrupted; 141 stdout was closed early.
With --json, stdout holds exactly one JSON document: the result, or {"error": ...}.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback

from partita.cli import commands, compare, scale_cmds
from partita.cli.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_PIPE,
    EXIT_USAGE,
    UsageError,
    classify,
    exit_status,
)
from partita.cli.models import LOADERS, load_model
from partita.cli.parser import CommandLineError, build_parser
from partita.cli.progress import Progress
from partita.errors import PartitaError

COMMANDS = {
    "compile": commands.compile_cmd,
    "run": commands.run_cmd,
    "inspect": commands.inspect_cmd,
    "info": commands.info_cmd,
    "profile": commands.profile_cmd,
    "backends": commands.backends_cmd,
    "demo": commands.demo_cmd,
    "sweep": scale_cmds.sweep_cmd,
    "eval": scale_cmds.eval_cmd,
    "compare": compare.compare_cmd,
}


def _report_error(error: BaseException, command: str, as_json: bool, verbose: bool) -> int:
    """One message, a hint and the documented status (as one JSON document with --json)."""
    status, hint = classify(error)
    hint = hint.format(command=command or "COMMAND")
    message = str(error) if isinstance(error, PartitaError) else f"{type(error).__name__}: {error}"
    if status == EXIT_INTERNAL:
        message = f"internal error: {message}"
    if as_json:
        data = {"type": type(error).__name__, "message": message, "hint": hint,
                "exit_status": status}
        if isinstance(error, CommandLineError):
            data["usage"] = error.usage.strip()
        report = getattr(error, "report", None)
        if report is not None and hasattr(report, "to_dict"):
            data["report"] = report.to_dict()
        sys.stdout.write(json.dumps({"error": data}, indent=2) + "\n")
    else:
        if isinstance(error, CommandLineError):
            sys.stderr.write(error.usage)
        first, _, rest = message.partition("\n")
        sys.stderr.write(f"partita{' ' + command if command else ''}: error: {first}\n")
        if rest:
            sys.stderr.write(rest + "\n")
        if hint:
            sys.stderr.write(f"partita: hint: {hint}\n")
    if verbose and status == EXIT_INTERNAL:
        traceback.print_exception(error, file=sys.stderr)
    return status


def _command_of(argv: list[str]) -> str:
    return next((a for a in argv if a in COMMANDS), "")


def main(argv=None) -> int:
    """Entry point of the ``partita`` console script."""
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    as_json = "--json" in argv
    try:
        return _main(argv, as_json)
    except BrokenPipeError:  # ``partita demo | head``: the reader stopped reading
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes
        except (OSError, ValueError):
            pass
        return EXIT_PIPE


def _main(argv: list[str], as_json: bool) -> int:
    from partita.passes import PassContext
    from partita.passes.infra import PassTimingInstrument

    try:
        if as_json:  # --help / --version print text and exit 0: one JSON document instead
            text, args = io.StringIO(), None
            with contextlib.redirect_stdout(text):
                try:
                    args = build_parser().parse_args(argv)
                except SystemExit as done:
                    if done.code not in (0, None):
                        raise
            if args is None:
                sys.stdout.write(json.dumps({"text": text.getvalue()}, indent=2) + "\n")
                return 0
        else:
            args = build_parser().parse_args(argv)
    except CommandLineError as error:
        return _report_error(error, _command_of(argv), as_json, False)
    progress = Progress(verbose=args.verbose)
    timing = PassTimingInstrument()
    # with --json the result is held back until the command succeeds, so that stdout gets
    # one document: the result or the error, never both
    out = io.StringIO() if args.json else sys.stdout
    try:
        with PassContext(instruments=[timing] if args.verbose else []):
            status = COMMANDS[args.command](args, out, progress)
        if args.json:
            sys.stdout.write(out.getvalue())
    except KeyboardInterrupt:
        sys.stderr.write("partita: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        raise
    except Exception as error:  # every error gets one line, a hint and its documented status
        status = _report_error(error, args.command, args.json, args.verbose)
    finally:
        progress.finish()
    if args.verbose and timing.timings:
        sys.stderr.write("partita: passes\n" + timing.render() + "\n")
    return status


__all__ = ["EXIT_USAGE", "LOADERS", "UsageError", "exit_status", "load_model", "main"]
