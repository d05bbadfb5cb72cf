"""Fuzz partita's model import and build with mutated TFLite and ONNX models.

    python tools/fuzz.py --cases 100000 --seed 1 --out fuzz-out
    python tools/fuzz.py --seconds 600 --workers 2 --formats onnx

Each case takes a seed model (the committed test models), applies a few structure-aware edits
(tools/fuzz_mutate.py: shapes, scales, zero points, dilations, pads, strides, indices, node
outputs, opsets, ... and byte flips), then imports it, builds it for ``--target`` (default
``"npu, ref"``; ``"npu, llvm"`` also compiles the host regions to native code and runs that) and,
when its inputs are small, runs it once. A case ends in one of:

  ok        the model imported, built and ran
  refused   a PartitaError subclass (the only acceptable failure)
  finding   any other exception (grouped by type and the innermost partita frame)
  hang      no answer within --timeout seconds of the worker's CPU time (a worker starved by
            a busy machine, or run at nice 19, is not hung: wall time only backs this up); its
            message says which threads spent the CPU time, and after the campaign every hang
            is run again by a fresh worker (summary "hangs_run_again": the outcomes)
  crash     the worker process died (a segfault, the --memory-mb cap)

Workers are separate processes (forked, so seeds and imports are shared) with an address-space
cap; a hung or dead worker is replaced. Every new finding class is shrunk to the fewest edits that
still show it and written to --out as a reproducer (the model file and a JSON of its edits).
The summary (counts per format and outcome, findings, peak RSS of any worker, cases per second)
is printed, and written to --out/summary.json. Same --seed, same cases.

Speed: workers run case after case in one process (imports and LLVM set-up paid once), and the
LLVM host's caches key compiled regions by structure, so a mutant whose plan matches an earlier
one reuses its object code. The campaign uses its own object-code cache, a fresh temporary
folder of at most --cache-size (not the user's ~/.cache/partita/llvm): the cache trims itself by
scanning its folder on each write, which over a user cache of thousands of entries took 55% of
a case's time.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))  # this checkout's partita, not an installed copy
import fuzz_mutate as fm  # noqa: E402

MODELS = ROOT / "tests" / "models"
SUFFIX = {"tflite": ".tflite", "onnx": ".onnx"}
SEED_LIMIT = 1 << 20  # seed models up to 1 MB: small enough to mutate and run thousands of times
TARGET = "npu, ref"  # what each case builds for (--target; workers are forked after it is set)


class Hang(BaseException):
    """Raised by the per-case alarm (BaseException: no ``except Exception`` swallows it)."""


def seed_files(formats) -> list[tuple[str, Path]]:
    out = []
    for fmt in formats:
        folders = [MODELS / fmt / "ops", MODELS / fmt / "nets", MODELS / "transformers"]
        for folder in folders:
            for p in sorted(folder.glob("*" + SUFFIX[fmt])):
                if p.stat().st_size <= SEED_LIMIT:
                    out.append((fmt, p))
    return out


class Seeds:
    """The seed models' bytes and mutable fields, read once in the parent (workers fork it)."""

    def __init__(self, formats):
        import onnx

        self.items = []
        for fmt, path in seed_files(formats):
            data = path.read_bytes()
            info = fm.tflite_fields(data) if fmt == "tflite" else onnx.load_from_string(data)
            self.items.append((fmt, path, data, info))

    def case(self, seed: int, index: int) -> tuple:
        """``(fmt, seed index, edits)`` of case ``index``: the same for the same seed."""
        rng = np.random.default_rng([seed, index])
        k = int(rng.integers(len(self.items)))
        fmt, _path, data, info = self.items[k]
        count = (1, 1, 1, 2, 3)[int(rng.integers(5))]
        if fmt == "tflite":
            return fmt, k, fm.tflite_edits(rng, data, info, count)
        return fmt, k, fm.onnx_edits(rng, info, len(data), count)

    def bytes_of(self, k: int, edits) -> bytes:
        fmt, _path, data, _info = self.items[k]
        return fm.apply_tflite(data, edits) if fmt == "tflite" else fm.apply_onnx(data, edits)


def check(fmt: str, data: bytes) -> tuple[str, str, str]:
    """``(outcome, class, message)`` of importing, building and running one model."""
    from partita.frontends import from_onnx, from_tflite

    from partita import build
    from partita.errors import PartitaError

    try:
        mod = from_tflite(data) if fmt == "tflite" else from_onnx(data)
        exe = build(mod, TARGET)
        if sum(int(np.prod(t.shape)) for t in exe.input_types) <= 1 << 18:
            exe.run(*[_random(t) for t in exe.input_types])
        return "ok", "", ""
    except PartitaError as e:
        return "refused", type(e).__name__, str(e).splitlines()[0][:200]
    except Hang:
        return "hang", "hang", ""
    except Exception as e:  # a finding: anything else escaped
        return "finding", _where(e), f"{type(e).__name__}: {e}"[:300]


def _random(t) -> np.ndarray:
    rng = np.random.default_rng(0)
    if t.dtype.startswith(("int", "uint")):
        info = np.iinfo(t.dtype)
        return rng.integers(info.min, info.max, t.shape, dtype=t.dtype, endpoint=True)
    return rng.standard_normal(t.shape).astype(t.dtype)


def _where(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if str(ROOT) in f.filename]
    frame = frames[-1] if frames else traceback.extract_tb(exc.__traceback__)[-1]
    rel = os.path.relpath(frame.filename, ROOT)
    return f"{type(exc).__name__} in {rel}:{frame.name}"


# ---- workers -----------------------------------------------------------------------------------


def _worker(seeds: Seeds, tasks, results, wid: int, timeout: float, memory_mb: int):
    # the cap is on top of what the forked worker already maps (a parent that imported torch or
    # TensorFlow maps gigabytes of address space it never touches)
    with open("/proc/self/statm") as f:
        mapped = int(f.read().split()[0]) * resource.getpagesize()
    limit = mapped + (memory_mb << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    def alarm(signum, frame):
        raise Hang()

    signal.signal(signal.SIGPROF, alarm)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the campaign's graceful stop
    while True:
        task = tasks.get()
        if task is None:
            return
        tid, k, edits = task
        fmt = seeds.items[k][0]
        started, threads = time.monotonic(), _thread_cpu()
        try:
            signal.setitimer(signal.ITIMER_PROF, timeout)  # CPU seconds of this process
            try:
                outcome = check(fmt, seeds.bytes_of(k, edits))
            finally:
                signal.setitimer(signal.ITIMER_PROF, 0)
        except Hang:
            outcome = ("hang", "hang", "")
        except MemoryError:
            outcome = ("finding", "MemoryError (cap)", "")
        if outcome[0] == "hang":  # where the CPU time went: which thread, in how much wall time
            outcome = ("hang", "hang", _hang_report(time.monotonic() - started, threads))
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        results.put((wid, tid, outcome, rss_mb))


def _thread_cpu() -> dict[str, tuple[str, float]]:
    """This process's threads: id -> (name, user + system CPU seconds)."""
    tick, threads = os.sysconf("SC_CLK_TCK"), {}
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:  # the thread ended
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        threads[task.name] = (name, (int(fields[11]) + int(fields[12])) / tick)
    return threads


def _hang_report(wall: float, before: dict) -> str:
    """Where a case that ran out of CPU time spent it: each thread's CPU seconds during the
    case (the busiest four) and the case's wall time."""
    spent = [(name, cpu - before.get(tid, (name, 0.0))[1])
             for tid, (name, cpu) in _thread_cpu().items()]
    busy = ", ".join(f"{n} {c:.2f}" for n, c in sorted(spent, key=lambda t: -t[1])[:4])
    load = os.getloadavg()[0]
    return f"{wall:.1f} s of wall time; CPU seconds by thread: {busy}; load {load:.1f}"


class Workers:
    """N worker processes; ``map`` yields ``(task id, outcome, rss MB)`` as tasks finish."""

    def __init__(self, seeds: Seeds, n: int, timeout: float, memory_mb: int):
        self.ctx = mp.get_context("fork")
        self.seeds, self.timeout, self.memory_mb = seeds, timeout, memory_mb
        self.results = self.ctx.Queue()
        self.procs: dict[int, tuple] = {}
        self.cpu_at_start: dict[int, float] = {}  # task id -> its worker's CPU seconds then
        for wid in range(n):
            self._start(wid)

    def _start(self, wid: int):
        tasks = self.ctx.Queue()
        args = (self.seeds, tasks, self.results, wid, self.timeout, self.memory_mb)
        proc = self.ctx.Process(target=_worker, args=args, daemon=True)
        proc.start()
        self.procs[wid] = (proc, tasks)

    def map(self, tasks):
        tasks = iter(tasks)
        busy: dict[int, tuple] = {}  # wid -> (task id, started)
        idle = list(self.procs)
        done = False
        while True:
            while idle and not done:
                task = next(tasks, None)
                if task is None:
                    done = True
                    break
                wid = idle.pop()
                self.procs[wid][1].put(task)
                busy[wid] = (task[0], time.monotonic())
            if not busy:
                return
            try:
                wid, tid, outcome, rss = self.results.get(timeout=0.2)
                self.cpu_at_start.pop(tid, None)
                busy.pop(wid, None)
                idle.append(wid)
                yield tid, outcome, rss
            except queue.Empty:
                pass
            yield from self._reap(busy, idle)

    def _reap(self, busy, idle):
        """Replace workers that died or overran the timeout by far (stuck in C code): twice
        the timeout in CPU time spent on the case, or 30 times it in wall time."""
        for wid, (tid, started) in list(busy.items()):
            proc = self.procs[wid][0]
            if tid not in self.cpu_at_start:
                self.cpu_at_start[tid] = _cpu_seconds(proc.pid)
            spent = _cpu_seconds(proc.pid) - self.cpu_at_start[tid]
            overdue = (spent > self.timeout * 2 + 5
                       or time.monotonic() - started > self.timeout * 30 + 60)
            if proc.is_alive() and not overdue:
                continue
            code = proc.exitcode
            proc.kill()
            proc.join()
            self._start(wid)
            busy.pop(wid)
            idle.append(wid)
            self.cpu_at_start.pop(tid, None)
            outcome = (
                ("hang", "hang (killed)", "")
                if overdue
                else ("crash", f"worker died (exit {code})", "")
            )
            yield tid, outcome, 0.0

    def close(self):
        for _proc, tasks in self.procs.values():
            tasks.put(None)
        for proc, _ in self.procs.values():
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()


def _cpu_seconds(pid: int) -> float:
    """A process's user + system CPU seconds (Linux /proc; 0 where unreadable)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


# ---- the campaign ------------------------------------------------------------------------------


def shrink(workers: Workers, k: int, edits: list, key: str) -> list:
    """The fewest of ``edits`` (greedy, one at a time) that still give finding class ``key``."""
    edits = list(edits)
    i = 0
    while i < len(edits) and len(edits) > 1:
        trial = edits[:i] + edits[i + 1 :]
        ((_, outcome, _),) = list(workers.map([(0, k, trial)]))
        if outcome[1] == key:
            edits = trial
        else:
            i += 1
    return edits


class Tally:
    """What the campaign has seen: outcomes per format, refusal classes, findings (with the
    first case of each class, to shrink), and the case that set the peak RSS."""

    def __init__(self, seeds: Seeds):
        self.seeds = seeds
        self.counts: Counter = Counter()
        self.refusals: Counter = Counter()
        self.findings: dict[str, dict] = {}
        self.first: dict[str, tuple] = {}  # class -> (seed index, edits, message)
        self.peak, self.peak_case = 0.0, None
        self.hangs: list[tuple] = []  # (case, seed index, edits) of every hang
        self.hangs_again: dict[str, int] = {}  # their outcomes when run again

    def add(self, tid: int, case: tuple, outcome: tuple, rss: float) -> None:
        fmt, k, edits = case
        status, key, message = outcome
        self.counts[(fmt, status)] += 1
        if rss > self.peak:  # ru_maxrss only grows: this case raised its worker's high-water mark
            self.peak = rss
            self.peak_case = {
                "rss_mb": round(rss, 1),
                "seed_model": _name(self.seeds, k),
                "edits": edits,
            }
        if status == "refused":
            self.refusals[key] += 1
        elif status != "ok":
            entry = self.findings.setdefault(key, {"count": 0, "first": tid, "message": message})
            entry["count"] += 1
            self.first.setdefault(key, (k, edits, message))
            if status == "hang":
                self.hangs.append((tid, k, edits))


def campaign(args) -> dict:
    import partita.frontends  # noqa: F401  (imported once here: every worker forks with it)

    seeds = Seeds(args.formats)
    workers = Workers(seeds, args.workers, args.timeout, args.memory_mb)
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    tally, cases, start = Tally(seeds), {}, time.monotonic()

    stop = []  # SIGTERM / SIGINT: start no more cases, finish the running ones, then report
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(True))
    log = (out / "findings.jsonl").open("a") if out else None

    def tasks():
        i = args.start
        while (args.cases is None or i < args.start + args.cases) and (
            args.seconds is None or time.monotonic() - start < args.seconds
        ) and not stop:
            cases[i] = seeds.case(args.seed, i)
            yield (i, *cases[i][1:])
            i += 1

    try:
        for n, (tid, outcome, rss) in enumerate(workers.map(tasks()), 1):
            case = cases.pop(tid)
            tally.add(tid, case, outcome, rss)
            if log and outcome[0] not in ("ok", "refused"):  # each finding as it happens
                log.write(json.dumps({"case": tid, "seed_model": _name(seeds, case[1]),
                                      "edits": case[2], "status": outcome[0],
                                      "class": outcome[1], "message": outcome[2]},
                                     default=str) + "\n")
                log.flush()
            if args.progress and n % args.progress == 0:
                rate = n / (time.monotonic() - start)
                print(f"{n} cases, {rate:.0f}/s, {len(tally.findings)} finding classes", flush=True)
                if out:  # the counts so far, should the campaign be killed
                    summary = _summary(tally, time.monotonic() - start, args)
                    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
        for key, (k, edits, message) in tally.first.items():  # shrink once the run is over
            tally.findings[key]["reproducer"] = _keep(workers, seeds, k, edits, key, message, out)
        if tally.hangs:  # every hang run again, by fresh workers: does it recur?
            workers.close()
            workers = Workers(seeds, args.workers, args.timeout, args.memory_mb)
            again = Counter(outcome[0] for _, outcome, _ in workers.map(tally.hangs))
            tally.hangs_again = dict(again)
    finally:
        workers.close()
        if log:
            log.close()
    summary = _summary(tally, time.monotonic() - start, args)
    if args.out:
        (Path(args.out) / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary


def _name(seeds: Seeds, k: int) -> str:
    return str(seeds.items[k][1].relative_to(ROOT))


def _keep(workers, seeds, k, edits, key, message, out) -> str | None:
    edits = shrink(workers, k, edits, key)
    if out is None:
        return None
    fmt, path = seeds.items[k][0], seeds.items[k][1]
    slug = "".join(c if c.isalnum() else "_" for c in key)[:80]
    target = out / f"{slug}{SUFFIX[fmt]}"
    target.write_bytes(seeds.bytes_of(k, edits))
    meta = {
        "class": key,
        "message": message,
        "seed_model": str(path.relative_to(ROOT)),
        "edits": [list(e) for e in edits],
    }
    target.with_suffix(".json").write_text(json.dumps(meta, indent=1, default=str))
    return str(target)


def _summary(tally: Tally, elapsed: float, args) -> dict:
    counts, total = tally.counts, sum(tally.counts.values())
    by_format = {}
    for (fmt, status), c in sorted(counts.items()):
        by_format.setdefault(fmt, {})[status] = c
    summary = {
        "cases": total,
        "seed": args.seed,
        "first_case": args.start,
        "seconds": round(elapsed, 1),
        "cases_per_second": round(total / elapsed, 1) if elapsed else 0.0,
        "by_format": by_format,
        "outcomes": dict(Counter(status for (_, status) in counts.elements())),
        "findings": tally.findings,
        "hangs_run_again": tally.hangs_again,
        "refusal_classes": dict(tally.refusals.most_common()),
        "peak_rss_mb": round(tally.peak, 1),
        "peak_case": tally.peak_case,
        "timeout_s": args.timeout,
        "memory_cap_mb": args.memory_mb,
        "memory_budget": os.environ.get("PARTITA_MEMORY_BUDGET", "4g"),
    }
    return summary


def main(argv=None) -> int:
    global TARGET
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, help="number of cases (default: until --seconds)")
    parser.add_argument("--seconds", type=float, help="stop starting cases after this long")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start", type=int, default=0,
                        help="first case index (to resume a campaign: cases depend on seed and "
                             "index only)")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--formats", default="tflite,onnx")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds a case may take")
    parser.add_argument(
        "--memory-mb", type=int, default=3072, help="address space a worker may add (MiB)"
    )
    parser.add_argument(
        "--budget", default="256m", help="PARTITA_MEMORY_BUDGET in the workers (default 256m)"
    )
    parser.add_argument("--target", default="npu, ref",
                        help='what each case builds for (default "npu, ref"; e.g. "npu, llvm")')
    parser.add_argument("--out", help="folder for reproducers and summary.json")
    parser.add_argument("--cache-size", default="256m",
                        help="the campaign's own object-code cache limit (default 256m)")
    parser.add_argument("--progress", type=int, default=1000, help="print every N cases (0: no)")
    args = parser.parse_args(argv)
    args.formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    if args.cases is None and args.seconds is None:
        parser.error("give --cases N or --seconds T")
    os.environ["PARTITA_MEMORY_BUDGET"] = args.budget  # the workers inherit it
    TARGET = args.target
    own_cache = "PARTITA_CACHE_DIR" not in os.environ
    if own_cache:  # a small cache of the campaign's own (trimming scans the whole folder)
        os.environ["PARTITA_CACHE_DIR"] = tempfile.mkdtemp(prefix="partita-fuzz-cache-")
        os.environ["PARTITA_CACHE_SIZE"] = args.cache_size
    try:
        summary = campaign(args)
    finally:
        if own_cache:
            shutil.rmtree(os.environ.pop("PARTITA_CACHE_DIR"), ignore_errors=True)
    print(json.dumps({k: v for k, v in summary.items() if k != "refusal_classes"}, indent=1))
    return 1 if summary["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
