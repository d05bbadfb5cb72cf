"""Design-space sweeps: every model x every point of a target grid, compiled and simulated.

    sweep(["mobilenet.tflite"], "npu -config={u55-128,u55-256} -sram={256k,1m}, llvm")
      -> one record per (model, target): NPU cycles, time at the clock, SRAM peak, bytes moved,
         ops and MACs on the NPU, CPU time, or the error that point raised

Brace lists expand to their cartesian product (``expand_target``). Each point is one task: the
model file's bytes and the target string travel to the worker, a JSON-ready record comes back.
With ``out_dir`` every record is appended to ``sweep.jsonl`` as it arrives, and ``resume`` skips
the points already there.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from pathlib import Path

import numpy as np

from partita.errors import PartitaError

BRACES = re.compile(r"\{([^{}]*)\}")
RECORDS = "sweep.jsonl"


def expand_target(text: str) -> list[str]:
    """``"npu -config={a,b} -sram={1,2}, llvm"`` -> the four target strings, in grid order."""
    groups = BRACES.findall(text)
    if not groups:
        return [text]
    choices = [[c.strip() for c in g.split(",") if c.strip()] for g in groups]
    if any(not c for c in choices):
        raise PartitaError(f"empty brace list in target {text!r}")
    parts = BRACES.split(text)[::2]
    out = []
    for combo in itertools.product(*choices):
        pieces = [parts[0]]
        for value, rest in zip(combo, parts[1:]):
            pieces += [value, rest]
        out.append("".join(pieces))
    return out


def _frontend(name: str):
    from partita.frontends import from_onnx, from_pytorch, from_tflite

    suffix = Path(name).suffix.lower()
    table = {".tflite": from_tflite, ".onnx": from_onnx, ".pt2": from_pytorch}
    if suffix not in table:
        raise PartitaError(f"sweep reads .tflite, .onnx and .pt2 models, not {name!r}")
    return table[suffix]


def sweep_point(name: str, model: bytes, target: str, seed: int = 0) -> dict:
    """One point (runs in a worker): import, build, profile one seeded random input."""
    from partita.build import build
    from partita.partition import parse_target

    start = time.perf_counter()
    exe = build(_frontend(name)(model), target)
    compile_s = time.perf_counter() - start
    rng = np.random.default_rng(seed)
    inputs = [_random(rng, t) for t in exe.input_types]
    profile = exe.profile(*inputs)
    summary = exe.report.summary()
    accelerators = [t for t in parse_target(target).names]
    record = {
        "model": Path(name).name,
        "target": target,
        "options": {s.name: dict(s.options) for s in parse_target(target).targets},
        "compile_s": compile_s,
        "partitions": summary["partitions"],
        "ops": summary["ops"],
        "macs": summary["macs"],
    }
    totals = profile.totals
    for acc in accelerators:
        t = totals.get(acc, {})
        record.update(
            {
                f"{acc}_ops": summary["ops_by_target"].get(acc, 0),
                f"{acc}_macs": summary["macs_by_target"].get(acc, 0),
                f"{acc}_cycles": t.get("cycles"),
                f"{acc}_time_at_clock_s": t.get("time_at_clock_s"),
                f"{acc}_bytes": t.get("bytes"),
            }
        )
        regions = [s.region.summary() for s in exe.steps if s.target == acc]
        peaks = [r.get("sram_peak_bytes") for r in regions if r.get("sram_peak_bytes")]
        record[f"{acc}_sram_peak_bytes"] = max(peaks) if peaks else None
        macs = [r.get("macs_per_cycle") for r in regions if r.get("macs_per_cycle")]
        record[f"{acc}_macs_per_cycle"] = macs[0] if macs else None
    host = parse_target(target).host.name
    record["cpu_time_s"] = totals.get(host, {}).get("time_s", 0.0)
    return record


def _random(rng, ty) -> np.ndarray:
    dtype = np.dtype(ty.dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, ty.shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(ty.shape).astype(dtype)


def _key(model: str, target: str) -> str:
    return f"{Path(model).name} | {target}"


def _done_points(out_dir: Path | None) -> dict[str, dict]:
    if out_dir is None or not (out_dir / RECORDS).exists():
        return {}
    done = {}
    for line in (out_dir / RECORDS).read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut by an interruption
        if record.get("status") == "ok":
            done[_key(record["model"], record["target"])] = record
    return done


def sweep(
    models,
    target: str,
    engine=None,
    out_dir=None,
    resume: bool = False,
    on_record=None,
    seed: int = 0,
) -> list[dict]:
    """Compile and simulate every model at every point of ``target``'s grid; one record each
    (``status`` "ok" or "failed" with ``error``), in grid order."""
    from partita.scale.engines import get_engine

    engine = engine if engine is not None and not isinstance(engine, str) else get_engine(engine)
    targets = expand_target(target)
    files = [Path(m) for m in models]
    for f in files:
        if not f.is_file():
            raise PartitaError(f"no such model file: {str(f)!r}")
    out_dir = Path(out_dir) if out_dir else None
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
    done = _done_points(out_dir) if resume else {}
    if out_dir and not resume and (out_dir / RECORDS).exists():
        (out_dir / RECORDS).unlink()
    order = [_key(str(f), t) for f in files for t in targets]
    data = {f: f.read_bytes() for f in files}
    jobs = {
        _key(str(f), t): (str(f), data[f], t, seed)
        for f in files
        for t in targets
        if _key(str(f), t) not in done
    }
    results = dict(done)
    for key, record, error in engine.run(sweep_point, jobs):
        if error is not None:
            model, _, tgt = key.partition(" | ")
            record = {"model": model, "target": tgt, "status": "failed", "error": error}
        else:
            record["status"] = "ok"
        results[key] = record
        if out_dir:
            with open(out_dir / RECORDS, "a") as f:
                f.write(json.dumps(record, default=_plain) + "\n")
        if on_record:
            on_record(record)
    return [results[k] for k in order if k in results]


def _plain(value):
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
