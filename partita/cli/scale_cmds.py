"""``partita sweep`` and ``partita eval``: long work with progress bars, on a local pool or Ray."""

from __future__ import annotations

import contextlib
import json
import sys


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


def sweep_cmd(args, out, progress) -> int:
    """``partita sweep``: every model at every point of the target grid."""
    from partita.scale import expand_target, get_engine, sweep
    from partita.scale.report import plot, table, to_csv

    points = len(expand_target(args.target)) * len(args.models)
    engine = get_engine(args.engine, args.workers, args.retries)
    records: list[dict] = []
    progress.note(f"sweep: {points} points on {engine.name}")
    with bar("sweep", points, enabled=sys.stderr.isatty()) as advance:
        try:
            sweep(
                args.models,
                args.target,
                engine,
                args.out,
                args.resume,
                on_record=lambda r: (records.append(r), advance()),
            )
        except KeyboardInterrupt:
            progress.note(f"interrupted: {len(records)} of {points} points finished")
            if args.out:
                progress.note(f"finished points are in {args.out}; --resume continues")
    if args.plot:
        plot(records, args.plot)
        progress.note(f"wrote {args.plot}")
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


def eval_cmd(args, out, progress) -> int:
    """``partita eval``: accuracy and agreement with a reference over a dataset."""
    from partita.scale import evaluate, get_engine, load_data

    engine = get_engine(args.engine, args.workers, args.retries)
    inputs, _ = load_data(args.data)
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
        out.write(f"throughput: {result['samples_per_s']:.1f} samples/s\n")
    return 0
