"""``partita sweep`` and ``partita eval``: long work with progress bars, on a local pool or Ray."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from partita.cli.errors import DataFileError, UsageError, require
from partita.cli.targets import check_target
from partita.errors import ModelFileError, PartitaError

SWEEP_FORMATS = (".tflite", ".onnx", ".pt2")
EVAL_FORMATS = (".tflite", ".onnx", ".pt2", ".pt")


@contextlib.contextmanager
def bar(description: str, total: int, enabled: bool = True):
    """A rich progress bar with ETA on stderr; ``advance(n)`` moves it."""
    if not enabled:
        yield lambda n=1: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=True) as progress:
        task = progress.add_task(description, total=total)
        yield lambda n=1: progress.advance(task, n)


def _models(paths, formats) -> None:
    for m in paths:
        path = Path(m)
        if path.suffix.lower() not in formats:
            raise UsageError(f"{m}: this command reads {', '.join(formats)} models")
        if not path.is_file():
            raise ModelFileError(f"no such model file: {m!r}")


def _engine(args):
    """The engine, its packages checked before any work starts."""
    from partita.scale import get_engine

    spec = args.engine or "local"
    if spec.startswith("local:"):
        n = spec.split(":", 1)[1]
        if not n.isdigit() or int(n) < 1:
            raise UsageError(f"--engine {spec}: write local:N with N a positive whole number")
    if spec.startswith("ray"):
        require("ray", f"--engine {spec}", extra="ray")
    return get_engine(spec, args.workers, args.retries)


def _targets(text: str) -> list[str]:
    from partita.scale import expand_target

    if text.count("{") != text.count("}"):
        raise UsageError(f"target {text!r}: a brace list is not closed (write {{a,b}})")
    targets = expand_target(text)
    for t in targets:
        check_target(t)
    return targets


def sweep_cmd(args, out, progress) -> int:
    """``partita sweep``: every model at every point of the target grid (checked before the
    pool starts: models, every target of the grid, the engine, --plot's package and path)."""
    from partita.cli.commands import output_path, writing
    from partita.scale import sweep
    from partita.scale.report import plot, table, to_csv

    _models(args.models, SWEEP_FORMATS)
    points = len(_targets(args.target)) * len(args.models)
    if args.resume and not args.out:
        raise UsageError("--resume continues the points recorded in --out DIR: give --out")
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        raise UsageError(f"--out {args.out}: that is a file; --out names a directory")
    plot_path = output_path(args.plot, "--plot")
    if plot_path is not None:
        require("matplotlib", "--plot", extra="plot")
    engine = _engine(args)
    got: list[dict] = []
    records: list[dict] = []
    progress.note(f"sweep: {points} points on {engine.name}")
    with bar("sweep", points, enabled=sys.stderr.isatty()) as advance:
        try:
            records = sweep(
                args.models,
                args.target,
                engine,
                args.out,
                args.resume,
                on_record=lambda r: (got.append(r), advance()),
            )
        except KeyboardInterrupt:
            records = got
            progress.note(f"interrupted: {len(got)} of {points} points finished")
            if args.out:
                progress.note(f"finished points are in {args.out}; --resume continues")
    if plot_path is not None:
        with writing(plot_path, "--plot"):
            plot(records, plot_path)
        progress.note(f"wrote {plot_path}")
    if args.json:
        out.write(json.dumps(records, indent=2, default=str) + "\n")
    elif args.csv:
        out.write(to_csv(records))
    else:
        out.write(table(records) + "\n")
    failed = [r for r in records if r.get("status") != "ok"]
    for r in failed:
        progress.note(f"failed: {r['model']} | {r['target']}: {r['error']}")
    return 0 if not failed and len(records) == points else 1


REFERENCE_PACKAGES = {"tflite": ("ai_edge_litert", "ai-edge-litert"),
                      "onnx": ("onnxruntime", "onnxruntime")}


def _check_eval(args):
    """Everything eval reads, checked before the model is compiled or a worker starts."""
    from partita.scale import load_data

    _models([args.model], EVAL_FORMATS)
    check_target(args.target)
    ext = Path(args.model).suffix.lower()
    if args.reference in REFERENCE_PACKAGES:
        if args.reference == "tflite" and ext != ".tflite" or args.reference == "onnx" and (
            ext != ".onnx"
        ):
            raise UsageError(f"--reference {args.reference} runs {args.reference} models, "
                             f"not {ext}; use --reference interpreter (or auto)")
        module, package = REFERENCE_PACKAGES[args.reference]
        require(module, f"--reference {args.reference}", package=package)
    if args.data != "digits":
        path = Path(args.data)
        if path.suffix.lower() != ".npz":
            raise DataFileError(
                f"--data {args.data}: give an .npz file (numpy.savez with the inputs as images, "
                "inputs or x and the labels as labels or y) or 'digits'"
            )
        if not path.is_file():
            raise DataFileError(f"--data {args.data}: no such file")
    try:
        inputs, _ = load_data(args.data)
    except PartitaError as e:
        raise DataFileError(str(e)) from None
    return inputs


def eval_cmd(args, out, progress) -> int:
    """``partita eval``: accuracy and agreement with a reference over a dataset."""
    from partita.scale import evaluate

    inputs = _check_eval(args)
    engine = _engine(args)
    total = min(len(inputs), args.limit) if args.limit else len(inputs)
    with bar("eval", total, enabled=sys.stderr.isatty()) as advance:
        result = evaluate(
            args.model,
            args.data,
            args.target,
            engine,
            args.limit,
            args.reference,
            on_progress=advance,
        )
    if result.get("interrupted"):
        progress.note(f"interrupted: {result['samples']} of {total} samples finished")
    if args.json:
        out.write(json.dumps(result, indent=2) + "\n")
        return 0
    out.write(
        f"model: {result['model']}  target: {result['target']!r}  engine: {result['engine']}\n"
    )
    out.write(f"samples: {result['samples']}\n")
    if "accuracy" in result:
        out.write(f"accuracy: {100 * result['accuracy']:.2f}%\n")
    if result["samples"]:
        out.write(
            f"vs {result['reference']}: top-1 agreement "
            f"{100 * result['top1_agreement']:.2f}%, bit-exact "
            f"{100 * result['bit_exact']:.2f}%, max |diff| {result['max_abs_diff']:g}\n"
        )
        out.write(
            f"throughput: {result['samples_per_s']:.1f} samples/s per worker (partita's runs "
            f"only; the whole evaluation with the reference took {result['wall_s']:.2f} s)\n"
        )
    return 0
