"""Survey the LLVM backend's op coverage: every registered op, built for "llvm" on small graphs
and run against the reference interpreter.

    python tools/llvm_op_survey.py --out survey.json                 # every op
    python tools/llvm_op_survey.py --ops qnn.,tanh --max-cases-per-op 10 --out qnn.json

The cases (tools/llvm_op_cases.py) span the dtypes, mode attributes (semantics, accumulate
orders, rounding), per-tensor and per-channel quantization parameters and a few shapes of each
op; combinations the type relation rejects are dropped ("invalid", not counted). Of the rest at
most ``--max-cases-per-op`` run, picked so that every attribute value appears when the limit
allows. Each case ends as:

    exact     the same bits as partita.interpret
    tol       float outputs within the tolerance (FLOAT_TOL: ulps, or relative to the output's
              largest magnitude); the worst error is recorded
    refused   the build raised LLVMError (its message is recorded)
    wrong     any other difference (integers and bools must be bit-exact)
    crash     any other exception, or the worker process dying (a signal)

The table goes to stdout, the details (each case's label, status, message, kernels) to the
``--out`` JSON file. Each op runs in a forked worker (``--jobs`` at once), so a segfault costs
one case, not the survey. The compiled-code cache (PARTITA_CACHE_DIR) makes reruns faster.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import re
import sys
import time
import traceback
from collections import Counter
from multiprocessing.connection import wait
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import llvm_op_cases as C  # noqa: E402
from partita.backends.llvm.errors import LLVMError  # noqa: E402

import partita as P  # noqa: E402
from partita.ir import Function, IRModule  # noqa: E402
from partita.passes import infer_type  # noqa: E402

# dtype -> (ulps, relative error to the output's largest magnitude): within either is "tol".
# 4 ulps covers the documented transcendental (2) and MLAS-order sum (3) differences.
FLOAT_TOL = {"float16": (2, 1e-3), "float32": (4, 1e-6), "float64": (4, 1e-12)}
STATUSES = ("exact", "tol", "refused", "wrong", "crash")


def draw(rng, var, how) -> np.ndarray:
    """Random data for a parameter: normal floats (a -0.0, a 0.0; ``how="pos"``: positive),
    integers over the dtype's range or ``how = (lo, hi)``, random bools."""
    t = var.type_annotation
    shape, dtype = tuple(t.shape), t.dtype
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if dtype.startswith("float"):
        x = np.asarray(rng.standard_normal(shape) * 3).astype(dtype)
        if how == "pos":
            return np.abs(x) + np.asarray(0.1, dtype)
        flat = x.reshape(-1)
        if flat.size > 4:
            flat[:2] = [-0.0, 0.0]
        return x
    info = np.iinfo(dtype)
    lo, hi = how if isinstance(how, tuple) else (info.min, info.max)
    return np.asarray(rng.integers(lo, hi, shape, dtype=np.int64, endpoint=True)).astype(dtype)


def ordered(a: np.ndarray) -> np.ndarray:
    """Float bits as integers that count ulps across zero (-0.0 and 0.0 both 0)."""
    bits = a.view({2: np.int16, 4: np.int32, 8: np.int64}[a.itemsize]).astype(np.int64)
    sign = np.int64(1) << (8 * a.itemsize - 1)
    return np.where(bits < 0, -(bits & (sign - 1)), bits)


def compare(got: list, want: list) -> tuple[str, str, dict]:
    """(status, message, worst error) of the LLVM outputs against the interpreter's."""
    worst = {}
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.ascontiguousarray(g), np.ascontiguousarray(w)
        if g.dtype != w.dtype or g.shape != w.shape:
            return "wrong", f"output {k}: {g.dtype}{g.shape}, want {w.dtype}{w.shape}", worst
        if np.array_equal(g.view(np.uint8), w.view(np.uint8)):
            continue
        if w.dtype.kind != "f":
            bad = np.argwhere(g != w)
            i = tuple(int(v) for v in bad[0])
            return "wrong", (f"output {k}: {len(bad)} of {w.size} differ, first at {i}: "
                             f"got {g[i]}, want {w[i]}"), worst  # fmt: skip
        nan = np.isnan(w)
        if not np.array_equal(np.isnan(g), nan):
            return "wrong", f"output {k}: nan at different places", worst
        ulps = int(np.max(np.abs(ordered(g) - ordered(w))[~nan], initial=0))
        fin = np.isfinite(w) & np.isfinite(g)
        err = np.abs(g[fin].astype(np.float64) - w[fin])
        scale = max(float(np.max(np.abs(w[fin]), initial=0)), 1e-30)
        rel = float(np.max(err, initial=0)) / scale
        worst = {"ulps": max(ulps, worst.get("ulps", 0)), "rel": max(rel, worst.get("rel", 0))}
        max_ulps, max_rel = FLOAT_TOL[str(w.dtype)]
        if ulps > max_ulps and (rel > max_rel or not np.array_equal(fin, np.isfinite(w))):
            i = tuple(int(v) for v in np.unravel_index(np.argmax(np.abs(
                ordered(g) - ordered(w)) * ~nan), w.shape))  # fmt: skip
            return "wrong", (f"output {k}: {ulps} ulps (relative {rel:.2g}), worst at {i}: "
                             f"got {g[i]!r}, want {w[i]!r}"), worst  # fmt: skip
    sign_only = bool(worst) and not worst["ulps"] and not worst["rel"]
    return ("tol" if worst else "exact"), "only zero signs or nan payloads" * sign_only, worst


def module(case: C.Case) -> IRModule:
    mod = IRModule({"main": Function(case.params, case.body)})
    infer_type(mod["main"], mod)
    return mod


def run_case(case: C.Case, rng) -> dict:
    """Build, run and compare one case; a dict with its status and what was learned."""
    row = {"label": {k: repr(v) if isinstance(v, tuple) else v for k, v in case.label.items()}}
    mod = module(case)
    feeds = [draw(rng, p, case.feeds.get(p.name_hint)) for p in case.params]
    try:
        want = P.interpret(mod, feeds)
    except Exception as e:  # the reference refuses this data: not a backend case
        return {**row, "status": "invalid", "message": f"reference: {first_line(e)}"}
    start = time.perf_counter()
    try:
        exe = P.build(mod, "llvm")
    except LLVMError as e:
        return {**row, "status": "refused", "message": first_line(e)}
    except Exception as e:
        return {**row, "status": "crash", "message": f"build: {type(e).__name__}: {first_line(e)}",
                "trace": traceback.format_exc(limit=-3)}  # fmt: skip
    row["kernels"] = sorted({k.split()[0] for s in exe.steps if s.target == "llvm"
                             for k in getattr(s.region, "kernels", ())})  # fmt: skip
    row["targets"] = sorted({s.target for s in exe.steps})
    try:
        got = exe.run(*feeds)
    except Exception as e:
        return {**row, "status": "crash", "message": f"run: {type(e).__name__}: {first_line(e)}",
                "trace": traceback.format_exc(limit=-3)}  # fmt: skip
    status, message, worst = compare(list(got), list(want))
    row.update(status=status, seconds=round(time.perf_counter() - start, 3))
    return {**row, **({"message": message} if message else {}), **worst}


def first_line(e: BaseException) -> str:
    return str(e).strip().split("\n")[0][:400]


def valid_cases(op: str, seed: int) -> tuple[list[C.Case], Counter]:
    """The op's cases the type relation accepts, and the reasons of the others."""
    valid, invalid = [], Counter()
    for case in C.cases(op, seed):
        try:
            if isinstance(case.body, str):
                raise ValueError(case.body)
            module(case)
            valid.append(case)
        except Exception as e:
            invalid[first_line(e)[:160]] += 1
    return valid, invalid


def select(cases: list, limit: int, seed: int) -> list:
    """At most ``limit`` cases: first one per unseen attribute value (random order), then any."""
    if len(cases) <= limit:
        return cases
    order = [int(i) for i in np.random.default_rng(seed).permutation(len(cases))]
    seen, picked = set(), []
    for i in order:
        pairs = {(k, repr(v)) for k, v in cases[i].label.items()}
        if not pairs <= seen and len(picked) < limit:
            picked.append(i)
            seen |= pairs
    picked += [i for i in order if i not in picked][: limit - len(picked)]
    return [cases[i] for i in sorted(picked)]


def worker(op: str, seed: int, limit: int, start: int, conn) -> None:
    """Child process: stream (index, row) for the op's selected cases from ``start`` on."""
    valid, invalid = valid_cases(op, seed)
    chosen = select(valid, limit, seed)
    conn.send(("meta", len(chosen), sum(invalid.values()), dict(invalid.most_common(5))))
    for i in range(start, len(chosen)):
        try:
            row = run_case(chosen[i], np.random.default_rng([seed, i]))
        except Exception as e:  # the survey's own failure: still one row, not a dead worker
            row = {"status": "crash", "message": f"survey: {type(e).__name__}: {first_line(e)}"}
        conn.send(("case", i, row))
    conn.send(("done",))
    conn.close()


def survey(ops: list[str], seed: int, limit: int, jobs: int) -> dict:
    """Run every op's cases in forked workers, ``jobs`` at a time; restart after a death."""
    ctx = mp.get_context("fork")
    results = {op: {"cases": {}, "n": None} for op in ops}
    pending, active = [(op, 0) for op in ops], {}
    while pending or active:
        while pending and len(active) < jobs:
            op, start = pending.pop(0)
            parent, child = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=worker, args=(op, seed, limit, start, child), daemon=True)
            proc.start()
            child.close()
            active[parent] = (op, proc, start)
        for conn in wait(list(active)):
            op, proc, start = active[conn]
            res = results[op]
            try:
                msg = conn.recv()
            except EOFError:  # died: the next unreported case crashed it
                proc.join()
                del active[conn]
                i = next((j for j in range(start, res["n"] or 0) if j not in res["cases"]), None)
                if i is None:
                    res["error"] = f"worker died (exit code {proc.exitcode}) before its cases"
                    continue
                res["cases"][i] = {
                    "status": "crash",
                    "message": f"worker process died (exit code {proc.exitcode})",
                }
                pending.insert(0, (op, i + 1))
                continue
            if msg[0] == "meta":
                res["n"], res["invalid"], res["invalid_reasons"] = msg[1:]
            elif msg[0] == "case":
                res["cases"][msg[1]] = msg[2]
            else:
                proc.join()
                del active[conn]
    return results


def refusal_key(message: str) -> str:
    """A refusal message with its numbers and shapes blanked, to group alike reasons."""
    return re.sub(r"(?<![\w.])-?\d+(\.\d+)?(?!\w)", "N", re.sub(r"\([\d, ]*\)", "(..)", message))


def summarize(results: dict, skipped: dict) -> dict:
    ops, totals = {}, Counter()
    for op, res in results.items():
        rows = [res["cases"][i] for i in sorted(res["cases"])]
        counts = Counter(r["status"] for r in rows)
        counts["invalid"] += res.get("invalid", 0)
        counted = {s: counts[s] for s in STATUSES}
        ops[op] = {"cases": sum(counted.values()), **counted, "invalid": counts["invalid"],
                   "max_ulps": max((r.get("ulps", 0) for r in rows), default=0),
                   "max_rel": max((r.get("rel", 0) for r in rows), default=0),
                   "invalid_reasons": res.get("invalid_reasons", {}),
                   **({"error": res["error"]} if "error" in res else {}),
                   "details": rows}  # fmt: skip
        totals.update({k: v for k, v in ops[op].items() if k in ("cases", "invalid", *STATUSES)})
    refusals = Counter(refusal_key(r["message"]) for o in ops.values() for r in o["details"]
                       if r["status"] == "refused")  # fmt: skip
    return {"totals": dict(totals), "ops": ops, "skipped": skipped,
            "refusals": dict(refusals.most_common())}  # fmt: skip


def table(summary: dict) -> str:
    head = f"{'op':28} {'cases':>5} {'ok':>4} {'exact':>5} {'tol':>4} {'refused':>7} " \
           f"{'wrong':>5} {'crash':>5} {'invalid':>7}  worst float error"  # fmt: skip
    lines = [head, "-" * len(head)]

    def line(name, c, err=""):
        return (
            f"{name:28} {c['cases']:5} {c['exact'] + c['tol']:4} {c['exact']:5} {c['tol']:4} "
            f"{c['refused']:7} {c['wrong']:5} {c['crash']:5} {c['invalid']:7}  {err}"
        )

    for op, c in summary["ops"].items():
        err = f"{c['max_ulps']} ulp / {c['max_rel']:.1g} rel" if c["tol"] else ""
        lines.append(line(op, c, err or c.get("error", "") or ("no cases" * (not c["cases"]))))
    lines += ["-" * len(head), line("TOTAL", Counter(summary["totals"]))]
    lines += [f"{op:28} skipped: {why}" for op, why in summary["skipped"].items()]
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the JSON file of detailed results")
    p.add_argument("--ops", default="", help="comma-separated op names, or prefixes (qnn.,add)")
    p.add_argument("--max-cases-per-op", type=int, default=96)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1)
    return p.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    every = [o.name for o in P.list_ops()]
    wanted = [w for w in args.ops.split(",") if w]
    names = [n for n in every if not wanted or any(  # a name, else a prefix
        n == w if w in every else n.startswith(w) for w in wanted)]  # fmt: skip
    skipped = {n: C.SKIPPED[n] for n in names if n in C.SKIPPED}
    start = time.perf_counter()
    results = survey([n for n in names if n not in skipped], args.seed,
                     args.max_cases_per_op, max(1, args.jobs))  # fmt: skip
    summary = summarize(results, skipped)
    summary["seconds"] = round(time.perf_counter() - start, 1)
    summary["args"] = vars(args)
    print(table(summary))
    print(f"\n{summary['seconds']} s; refusals by reason:")
    for reason, n in summary["refusals"].items():
        print(f"{n:5}  {reason}")
    Path(args.out).write_text(json.dumps(summary, indent=1, default=str))
    return summary


if __name__ == "__main__":
    main()
