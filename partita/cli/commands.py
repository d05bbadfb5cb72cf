"""The commands behind ``partita compile | run | inspect | info | profile | backends``, over the
API."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from partita.cli.errors import OutputPathError, UsageError
from partita.cli.models import is_executable, load_model, parse_shapes
from partita.cli.progress import Progress
from partita.cli.targets import check_target

# options that say how to compile a model file; a saved executable is already compiled
COMPILE_OPTIONS = {
    "target": "-t/--target",
    "cpu_op": "--cpu-op",
    "cpu_node": "--cpu-node",
    "input_shape": "--input-shape",
    "semantics": "--semantics",
    "match": "--match",
    "ort_cpu": "--ort-cpu",
}


def output_path(text: str | None, flag: str) -> Path | None:
    """``text`` as a file to write, checked before any work: its directory exists and is
    writable, and it is not itself a directory."""
    if text is None:
        return None
    path = Path(text)
    if path.is_dir():
        raise OutputPathError(f"{flag} {text}: that is a directory; give a file name in it")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise OutputPathError(f"{flag} {text}: there is no directory {str(parent)!r}")
    if not os.access(parent, os.W_OK):
        raise OutputPathError(f"{flag} {text}: the directory {str(parent)!r} is not writable")
    return path


def writing(path: Path, flag: str):
    """A context that turns an OSError while writing ``path`` into an OutputPathError."""
    import contextlib

    @contextlib.contextmanager
    def guard():
        try:
            yield
        except OSError as e:
            raise OutputPathError(f"{flag} {path}: cannot write it ({e.strerror or e})") from None

    return guard()


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


def _refuse_compile_options(args) -> None:
    """A saved executable is compiled already: options that say how to compile are refused
    rather than silently ignored."""
    given = [flag for key, flag in COMPILE_OPTIONS.items() if getattr(args, key, None)]
    if getattr(args, "min_region_size", 1) != 1:
        given.append("--min-region-size")
    if given:
        raise UsageError(
            f"{args.model} is a saved executable, compiled already: {', '.join(given)} "
            f"appl{'ies' if len(given) == 1 else 'y'} when compiling a model file (compile the "
            "model again with them)"
        )


def load_saved(args, progress: Progress):
    """The saved executable ``args.model`` (object code it carries used per --trust)."""
    from partita.runtime import load

    _refuse_compile_options(args)
    with progress.step(f"load {Path(args.model).name}"):
        exe = load(args.model, trust=getattr(args, "trust", False))
    note = getattr(exe, "load_note", "")
    if note:
        progress.note(note)
    if getattr(args, "strict", False) and args.command != "inspect":
        from partita.partition import StrictPartitionError

        if exe.report is not None and exe.report.host_rows:
            raise StrictPartitionError(exe.report)
    return exe


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
    from partita import build

    if is_executable(args.model):
        return load_saved(args, progress)
    if not args.target:
        raise UsageError(f"{args.model} is a model file: give --target to compile it first")
    check_target(args.target)
    mod = _import(args, progress)
    exe = build(mod, args.target, config=_config(args), progress=progress.message)
    progress.finish()
    return exe


def compile_cmd(args, out, progress: Progress) -> int:
    """``partita compile``: build and save; print the placement summary and the steps."""
    if is_executable(args.model):
        raise UsageError(f"{args.model} is a saved executable already; compile a model file")
    output = output_path(args.output or Path(args.model).with_suffix(".partita").name, "-o")
    exe = executable_of(args, progress)
    with progress.step(f"save {output}"), writing(output, "-o"):
        exe.save(output)
    if args.json:
        data = {"output": str(output), "target": exe.target, "steps": _steps(exe)}
        data["summary"] = exe.report.summary() if exe.report else None
        out.write(json.dumps(data, indent=2) + "\n")
        return 0
    if exe.report is not None:
        out.write(exe.report.summary_line() + "\n")
        explain_split(exe.report, out)
    for step in _steps(exe):
        out.write(f"  {step['symbol']:24} {step['target']:8} {_summary_text(step['summary'])}\n")
    out.write(f"wrote {output} ({output.stat().st_size:,} bytes)\n")
    return 0


def _steps(exe) -> list[dict]:
    return [
        {"symbol": s.symbol, "target": s.target, "summary": s.region.summary()} for s in exe.steps
    ]


def _summary_text(summary: dict) -> str:
    """A region's summary as ``key value`` pairs (``ops 66, cycles 550,930, ...``)."""
    def show(v):
        if isinstance(v, bool):
            return "yes" if v else "no"
        return f"{v:,}" if isinstance(v, int) else str(v)

    return ", ".join(f"{k.replace('_', ' ')} {show(v)}" for k, v in summary.items())


def explain_split(report, out) -> None:
    """Say what a target written ``a+b`` in the report means, when there is one."""
    split = sorted({r.target for r in report.rows if "+" in r.target})
    if split:
        a, _, b = split[0].partition("+")
        out.write(
            f"({split[0]}: a source op that became several IR ops, some placed on {a} and the "
            f"rest on {b})\n"
        )


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
        given[name] = _read_npy(item, file)
    if not given:
        raise UsageError(
            f"give the inputs ({', '.join(exe.input_names)}) with --input "
            f"NAME=FILE.npy, or --random"
        )
    return exe.bind_inputs((), given)


def _read_npy(item: str, file: str) -> np.ndarray:
    try:
        with open(file, "rb") as f:
            head = f.read(6)
    except OSError as e:
        raise UsageError(f"--input {item!r}: cannot read {file} ({e.strerror or e})") from None
    if head != b"\x93NUMPY":
        raise UsageError(
            f"--input {item!r}: {file} is not a .npy file (write one with numpy.save; "
            "'partita info MODEL' gives each input's shape, dtype, scale and zero point)"
        )
    try:
        return np.load(file, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise UsageError(f"--input {item!r}: cannot read {file} as .npy ({e})") from None


def _random(rng, ty) -> np.ndarray:
    dtype = np.dtype(ty.dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, ty.shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(ty.shape).astype(dtype)


def digest(array: np.ndarray) -> str:
    """A stable fingerprint of an array's dtype, shape and bytes: the full SHA-256 of
    ``f"{dtype}{shape}"`` followed by the bytes in C order."""
    h = hashlib.sha256(f"{array.dtype}{array.shape}".encode())
    h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()


def run_cmd(args, out, progress: Progress) -> int:
    """``partita run``: run once, print each output's shape, dtype and digest."""
    output = output_path(args.output, "-o")
    exe = executable_of(args, progress)
    inputs = read_inputs(exe, args.input, args.random, args.seed)
    with progress.step("run"):
        outputs = exe.run(*inputs)
    if output is not None:  # exactly the name given (numpy.savez would append .npz to a name)
        with writing(output, "-o"), open(output, "wb") as f:
            np.savez(f, **dict(zip(exe.output_names, outputs)))
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

    drawings = {fmt: output_path(getattr(args, fmt), f"--{fmt}") for fmt in ("svg", "dot")}
    if is_executable(args.model):
        if args.svg or args.dot:
            raise UsageError("--svg/--dot draw a model file, not a saved executable")
        exe = load_saved(args, progress)
        report, partitioned = exe.report, None
        if report is None:
            raise UsageError(f"{args.model} holds no placement report")
        status = 1 if args.strict and report.host_rows else 0
    else:
        if not args.target:
            raise UsageError("inspect needs --target for a model file")
        check_target(args.target)
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
    notes = []
    for fmt, target in drawings.items():
        if target and partitioned is not None:
            from partita.cli.draw import write_drawing

            with writing(target, f"--{fmt}"):
                notes.append(write_drawing(partitioned, report, str(target), fmt))
    out.write(report.to_json() + "\n" if args.json else str(report) + "\n")
    if not args.json:
        explain_split(report, out)
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
    for r in rows:
        if r["name"] == "npu" and not r["error"]:
            r["presets"], r["sram"] = _npu_presets()
    if args.json:
        out.write(json.dumps(rows, indent=2) + "\n")
        return 0
    for r in rows:
        opts = " ".join(
            f"-{k}=(unset)" if v is None else f"-{k}={v}" for k, v in r["options"].items()
        ) or "(no options)"
        role = "host" if r["host"] else "accelerator"
        out.write(f"{r['name']:8} {role:11} {r['origin']}\n")
        if r["description"]:
            out.write(f"         {r['description']}\n")
        if r["error"]:
            out.write(f"         cannot load: {r['error']}\n")
        else:
            out.write(f"         options: {opts}\n")
        for p in r.get("presets", ()):
            out.write(
                f"         -config={p['name']:8} {p['macs_per_cycle']:4} MACs/cycle, "
                f"{p['sram_bytes'] >> 10:,} KiB SRAM, {p['clock_hz'] / 1e6:,.0f} MHz\n"
            )
        if r.get("sram"):
            out.write(f"         -sram=SIZE: {r['sram']}\n")
    return 0


def _npu_presets() -> tuple[list[dict], str]:
    from partita.backends.npu.config import PRESETS

    presets = [
        {"name": n, "macs_per_cycle": c.macs_per_cycle, "sram_bytes": c.sram_bytes,
         "clock_hz": c.clock_hz}
        for n, c in PRESETS.items()
    ]
    return presets, "16k to 64m, in bytes or with k/m (256k, 1m, 393216); or -config=FILE.toml"


def info_cmd(args, out, progress: Progress) -> int:
    """``partita info``: each input's and output's name, shape, dtype, scale and zero point."""
    from partita.cli.info import executable_ports, model_ports, render

    if is_executable(args.model):
        exe = load_saved(args, progress)
        info = executable_ports(exe)
        if args.json:
            info["load"] = exe.load_report
    else:
        info = model_ports(_import(args, progress))
    out.write(json.dumps(info, indent=2) + "\n" if args.json else render(info) + "\n")
    return 0


def demo_cmd(args, out, progress: Progress) -> int:
    """``partita demo``: the main job (partita/cli/demo.py)."""
    from partita.cli.demo import run_demo

    if args.target:
        check_target(args.target)
    return run_demo(out, args.target, args.limit, say=progress.note, as_json=args.json)
