"""The commands behind ``partita compile | run | inspect | profile | backends``, over the API."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from partita.cli.models import UsageError, is_executable, load_model, parse_shapes
from partita.cli.progress import Progress


def _import(args, progress: Progress):
    with progress.step(f"import {Path(args.model).name}"):
        return load_model(
            args.model,
            parse_shapes(getattr(args, "input_shape", None)),
            getattr(args, "semantics", None),
            getattr(args, "match", None),
            getattr(args, "ort_cpu", None),
        )


def _config(args) -> dict:
    return {
        "min_region_size": args.min_region_size,
        "cpu_ops": args.cpu_op,
        "cpu_nodes": args.cpu_node,
        "strict": args.strict,
        **_placement_config(args),
    }


def _placement_config(args) -> dict:
    """--placement and --host-model (docs/placement.md)."""
    out = {}
    if getattr(args, "placement", "all") != "all":
        out["placement"] = args.placement
    if getattr(args, "host_model", None):
        out["host_model"] = args.host_model
    return out


def executable_of(args, progress: Progress):
    """A saved executable, or the model compiled in memory for ``--target``."""
    from partita import build, load

    if is_executable(args.model):
        with progress.step(f"load {Path(args.model).name}"):
            return load(args.model)
    if not args.target:
        raise UsageError(f"{args.model} is a model file: give --target to compile it first")
    mod = _import(args, progress)
    exe = build(mod, args.target, config=_config(args), progress=progress.message)
    progress.finish()
    return exe


def compile_cmd(args, out, progress: Progress) -> int:
    """``partita compile``: build and save; print the placement summary and the steps."""
    exe = executable_of(args, progress)
    output = Path(args.output or Path(args.model).with_suffix(".partita").name)
    with progress.step(f"save {output}"):
        exe.save(output)
    if args.json:
        data = {"output": str(output), "target": exe.target, "steps": _steps(exe)}
        data["summary"] = exe.report.summary() if exe.report else None
        out.write(json.dumps(data, indent=2) + "\n")
        return 0
    if exe.report is not None:
        out.write(exe.report.summary_line() + "\n")
    for step in _steps(exe):
        out.write(f"  {step['symbol']:24} {step['target']:8} {step['summary']}\n")
    out.write(f"wrote {output} ({output.stat().st_size:,} bytes)\n")
    return 0


def _steps(exe) -> list[dict]:
    return [
        {"symbol": s.symbol, "target": s.target, "summary": s.region.summary()} for s in exe.steps
    ]


def read_inputs(exe, items, random: bool, seed: int) -> list[np.ndarray]:
    """``NAME=file.npy`` arguments (or a seeded random input per port) in the port order."""
    if random and items:
        raise UsageError("give --input files or --random, not both")
    if random:
        rng = np.random.default_rng(seed)
        return [_random(rng, p.type) for p in exe.inputs]
    given = {}
    for item in items or ():
        name, sep, file = item.partition("=")
        if not sep:
            if len(exe.inputs) != 1:
                raise UsageError(
                    f"--input {item!r}: write NAME=FILE.npy (inputs: {', '.join(exe.input_names)})"
                )
            name, file = exe.input_names[0], item
        try:
            given[name] = np.load(file, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise UsageError(f"--input {item!r}: cannot read {file} as .npy ({e})") from None
    if not given:
        raise UsageError(
            f"give the inputs ({', '.join(exe.input_names)}) with --input "
            f"NAME=FILE.npy, or --random"
        )
    return exe.bind_inputs((), given)


def _random(rng, ty) -> np.ndarray:
    dtype = np.dtype(ty.dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, ty.shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(ty.shape).astype(dtype)


def digest(array: np.ndarray) -> str:
    """A short, stable fingerprint of an array's dtype, shape and bytes."""
    h = hashlib.sha256(f"{array.dtype}{array.shape}".encode())
    h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()[:16]


def run_cmd(args, out, progress: Progress) -> int:
    """``partita run``: run once, print each output's shape, dtype and digest."""
    exe = executable_of(args, progress)
    inputs = read_inputs(exe, args.input, args.random, args.seed)
    with progress.step("run"):
        outputs = exe.run(*inputs)
    if args.output:
        np.savez(args.output, **dict(zip(exe.output_names, outputs)))
    rows = [
        {"name": n, "shape": list(o.shape), "dtype": str(o.dtype), "sha256": digest(o)}
        for n, o in zip(exe.output_names, outputs)
    ]
    if args.json:
        out.write(json.dumps({"outputs": rows}, indent=2) + "\n")
    else:
        for r in rows:
            out.write(f"{r['name']}: {tuple(r['shape'])} {r['dtype']} sha256:{r['sha256']}\n")
        if args.output:
            out.write(f"wrote {args.output}\n")
    return 0


def profile_cmd(args, out, progress: Progress) -> int:
    """``partita profile``: the per-step and per-operation profile of one inference."""
    exe = executable_of(args, progress)
    inputs = read_inputs(exe, args.input, args.random or not args.input, args.seed)
    with progress.step(f"profile ({args.repeat} runs)"):
        profile = exe.profile(*inputs, repeat=args.repeat)
    out.write(profile.to_json() + "\n" if args.json else profile.table() + "\n")
    return 0


def inspect_cmd(args, out, progress: Progress) -> int:
    """``partita inspect``: the placement report; optionally a drawing of the partitions."""
    from partita.partition import StrictPartitionError, partition_for, placement_report

    if is_executable(args.model):
        exe = executable_of(args, progress)
        report, partitioned, status = exe.report, None, 0
        if args.svg or args.dot:
            raise UsageError("--svg/--dot draw a model file, not a saved executable")
    else:
        if not args.target:
            raise UsageError("inspect needs --target for a model file")
        mod = _import(args, progress)
        try:
            with progress.step("partition"):
                partitioned = partition_for(mod, args.target, **_config(args))
            report, status = placement_report(partitioned), 0
        except StrictPartitionError as e:
            report, partitioned, status = e.report, None, 1
    if partitioned is not None:
        from partita.cli.placement import placement_extras

        report = placement_extras(args, mod, partitioned, report, progress)
    out.write(report.to_json() + "\n" if args.json else str(report) + "\n")
    notes = []
    for fmt in ("svg", "dot"):
        target = getattr(args, fmt)
        if target and partitioned is not None:
            from partita.cli.draw import write_drawing

            notes.append(write_drawing(partitioned, report, target, fmt))
    for note in notes:
        progress.note(note)
    if status:
        n = len(report.host_rows)
        progress.note(f"strict mode: {n} source op{'s' * (n != 1)} left on the {report.host}")
    return status


def backends_cmd(args, out, progress: Progress) -> int:
    """``partita backends``: every backend, where it comes from, its options."""
    from partita.backends import describe_backends

    rows = describe_backends()
    if args.json:
        out.write(json.dumps(rows, indent=2) + "\n")
        return 0
    for r in rows:
        opts = " ".join(f"-{k}={v}" for k, v in r["options"].items()) or "(no options)"
        role = "host" if r["host"] else "accelerator"
        out.write(f"{r['name']:8} {role:11} {r['origin']}\n")
        if r["description"]:
            out.write(f"         {r['description']}\n")
        if r["error"]:
            out.write(f"         cannot load: {r['error']}\n")
        else:
            out.write(f"         options: {opts}\n")
    return 0


def demo_cmd(args, out, progress: Progress) -> int:
    """``partita demo``: the main job (partita/cli/demo.py)."""
    from partita.cli.demo import run_demo

    return run_demo(out, args.target, args.limit, say=progress.note)
