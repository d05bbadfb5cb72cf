"""No user input makes ``partita`` die: every command with each documented option value, and
every mistake issue 29 lists, in a process of its own, failing on a signal (SIGABRT from LLVM,
SIGILL from code for another CPU), a traceback, "internal error" or "LLVM ERROR", or a status
other than the documented one. With --json, stdout must be exactly one JSON document.

One driver process imports partita once and forks a child per case (the child runs
``partita.cli.main`` with its stdout and stderr in files), so a crash kills only that case and
the whole table takes seconds rather than a fresh interpreter per case.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "partita" / "data" / "digits_mobilenetv2.tflite"
CONV = ROOT / "tests" / "models" / "tflite" / "ops" / "conv2d_same_s1_relu.tflite"
ONNX = ROOT / "tests" / "models" / "onnx" / "ops" / "conv_1x1.qop_s8s8_pt.onnx"

DRIVER = textwrap.dedent(
    """
    import importlib.util, json, os, sys, time
    import partita.cli as cli

    # What every case would import and initialise again (the backends, the frontends, LLVM's
    # targets: ~0.4 s of CPU per case), done once before the forks, as in a long-lived process.
    import partita.backends.llvm, partita.backends.npu, partita.frontends.tflite
    from partita.backends.llvm.runtime import jit
    jit.ensure_initialized()
    if importlib.util.find_spec("onnx") is not None:
        import partita.frontends.onnx

    cases = json.load(sys.stdin)
    results = []
    for i, case in enumerate(cases):
        out, err = f"out{i}.txt", f"err{i}.txt"
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            fd_out = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            if case.get("closed_stdout"):  # a pipe whose reader is gone (partita demo | head)
                r, fd_out = os.pipe()
                os.close(r)
            fd_err = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd_out, 1)
            os.dup2(fd_err, 2)
            status = 99
            try:
                status = cli.main(case["argv"])
            finally:
                try:
                    sys.stdout.flush()
                except BaseException:
                    pass
                sys.stderr.flush()
                os._exit(status if isinstance(status, int) else 98)
        _, wait = os.waitpid(pid, 0)
        results.append({
            "signal": os.WTERMSIG(wait) if os.WIFSIGNALED(wait) else 0,
            "status": os.WEXITSTATUS(wait) if os.WIFEXITED(wait) else None,
            "out": open(out, errors="replace").read(),
            "err": open(err, errors="replace").read(),
            "seconds": time.perf_counter() - start,
        })
    json.dump(results, sys.stdout)
    """
)


def _host_runs(isa: str) -> bool:
    from partita.backends.llvm.runtime.jit import amx_permitted, runs_isa

    return amx_permitted() if isa == "amx" else runs_isa(isa)


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def cases(tmp: Path) -> list[tuple[list[str], set[int] | int, dict]]:
    """(argv, the documented status (or the set allowed), options)."""
    m, c = str(DIGITS), str(CONV)
    exe, conv_exe = str(tmp / "d.partita"), str(tmp / "c.partita")
    npu = "npu, llvm"
    out: list = [
        (["compile", m, "-t", npu, "-o", exe], 0, {}),
        (["compile", c, "-t", "llvm", "-o", conv_exe], 0, {}),
        (["backends"], 0, {"json": True}),
        (["info", m], 0, {"json": True}),
        (["info", exe], 0, {"json": True}),
        (["inspect", exe], 0, {"json": True}),
        (["inspect", m, "-t", npu], 0, {"json": True}),
        (["run", exe, "--random", "--seed", "1"], 0, {"json": True}),
        (["run", conv_exe, "--random", "-o", str(tmp / "outs")], 0, {}),
        (["profile", exe, "--repeat", "1"], 0, {"json": True}),
        (["demo", "--limit", "2"], 0, {"json": True}),
        (["eval", m, "--data", "digits", "--limit", "4", "--engine", "local:1"], 0, {}),
        (["eval", m, "--data", "digits", "--limit", "4", "--workers", "1",
          "--reference", "interpreter"], 0, {}),
        (["sweep", m, "-t", "npu -config={u55-128,u65-256}, llvm", "--workers", "1", "--csv"],
         0, {}),
        # --strict (1) in every command that compiles
        (["compile", m, "-t", npu, "--cpu-op", "CONV_2D", "--strict", "-o",
          str(tmp / "s.partita")], 1, {"json": True}),
        (["run", m, "-t", npu, "--cpu-op", "CONV_2D", "--strict", "--random"], 1, {}),
        (["profile", m, "-t", npu, "--cpu-op", "CONV_2D", "--strict"], 1, {}),
        (["inspect", m, "-t", npu, "--cpu-op", "CONV_2D", "--strict"], 1, {"json": True}),
        (["inspect", m, "-t", npu, "--semantics", "tflite_builtin"], 0, {}),
    ]
    for match in ("ort", "ort_disable_all"):
        out.append((["inspect", str(ONNX), "-t", npu, "--match", match], 0, {}))
    for ort_cpu in ("vnni", "avx2"):
        out.append((["run", str(ONNX), "-t", npu, "--ort-cpu", ort_cpu, "--random"], 0, {}))
    out.append((["eval", m, "--data", "digits", "--limit", "2", "--engine", "local",
                 "--reference", "tflite" if _has("ai_edge_litert") else "interpreter"], 0, {}))
    for preset in ("u55-128", "u55-256", "u65-256", "u65-512"):
        out.append((["inspect", m, "-t", f"npu -config={preset}, llvm"], 0, {}))
    for sram in ("16k", "256k", "1m", "64m"):
        out.append((["inspect", m, "-t", f"npu -sram={sram}, llvm"], 0, {}))
    # every kernel family and thread count of the LLVM host, run on a convolution: the host
    # runs it (0) or refuses cleanly (2), never SIGABRT/SIGILL
    for isa in ("auto", "amx", "vnni", "avxvnni", "avx2", "plain"):
        want = 0 if isa in ("auto", "plain") or _host_runs(isa) else 2
        out.append((["run", c, "-t", f"llvm -isa={isa}", "--random"], want, {}))
    for threads in ("1", "2"):
        out.append((["run", c, "-t", f"llvm -threads={threads}", "--random"], 0, {}))
    for mcpu in ("native", "x86-64", "haswell", "skylake-avx512", "sapphirerapids", "znver4"):
        out.append((["run", c, "-t", f"llvm -mcpu={mcpu}", "--random"], {0, 2}, {}))
    # compiling for another CPU (object code only) works; running it here is refused cleanly
    out.append((["compile", c, "-t", "llvm -mcpu=sapphirerapids", "-o", str(tmp / "spr.p")], 0,
                {}))
    out.append((["run", str(tmp / "spr.p"), "--random"], 0 if _host_runs("amx") else 2, {}))
    out += [
        # the mistakes issue 29 lists
        (["run", c, "-t", "llvm -mcpu=foo", "--random"], 2, {"json": True}),
        (["compile", m, "-t", npu, "-o", str(tmp / "nodir" / "x.partita")], 2, {"json": True}),
        (["compile", m, "-t", npu, "-o", str(tmp)], 2, {}),
        (["run", exe, "--random", "-o", str(tmp / "nodir" / "o.npz")], 2, {}),
        (["inspect", m, "-t", npu, "--dot", str(tmp / "nodir" / "p.dot")], 2, {}),
        (["inspect", m, "-t", npu, "--svg", str(tmp / "nodir" / "p.svg")], 2, {"json": True}),
        (["run", exe, "--random", "--seed", "-1"], 2, {"json": True}),
        (["eval", m, "--data", str(tmp / "x.npy")], 3, {"json": True}),
        (["eval", m, "--data", str(tmp / "missing.npz")], 3, {}),
        (["eval", m, "--data", "digits", "--reference", "onnx"], 2, {}),
        (["inspect", m, "-t", "npu -config=u77, llvm"], 2, {"json": True}),
        (["compile", m, "-t", "npu -config=U55-256, llvm"], 2, {}),
        (["compile", m, "-t", "npu -sram=lots, llvm"], 2, {}),
        (["compile", m, "-t", f"npu -config={tmp / 'bad.toml'}, llvm"], 2, {}),
        (["compile", m, "-t", npu, "--cpu-op", "FOO"], 2, {}),
        (["compile", m, "-t", npu, "--min-region-size", "-1"], 2, {"json": True}),
        (["compile", m, "-t", npu, "--match", "foo"], 2, {}),
        (["eval", m, "--data", "digits", "--engine", "foo"], 2, {}),
        (["sweep", m, "-t", "npu -config={}, llvm"], 2, {}),
        (["sweep", m, "-t", "npu -config={u65-256, llvm"], 2, {"json": True}),
        (["sweep", m, "-t", "npu -config={u55-128,u66-256}, llvm"], 2, {}),
        (["inspect", m, "-t", "npu -config=u55-999, llvm"], 2, {}),
        (["sweep", m, "-t", npu, "--resume"], 2, {}),
        (["sweep", m, "-t", npu, "--out", str(tmp / "text.npy")], 2, {"json": True}),
        (["demo", "--limit", "-5"], 2, {"json": True}),
        (["profile", exe, "--repeat", "0"], 2, {}),
        (["eval", m, "--data", "digits", "--workers", "-1"], 2, {}),
        (["run", exe, "--input", str(tmp / "text.npy")], 2, {"json": True}),
        (["run", exe, "-t", "llvm", "--cpu-op", "CONV_2D", "--random"], 2, {}),
        (["compile", m, "--bogus", "-t", npu], 2, {"json": True}),
        (["compile", m], 2, {"json": True}),
        (["inspect", str(tmp / "missing.tflite"), "-t", npu], 3, {"json": True}),
        (["run", str(tmp / "garbage.partita"), "--random"], 3, {}),
        (["demo", "--limit", "3"], 141, {"closed_stdout": True}),
    ]
    if not _has("ray"):
        out.append((["eval", m, "--data", "digits", "--engine", "ray"], 2, {"json": True}))
    if not _has("matplotlib"):
        out.append((["sweep", m, "-t", npu, "--plot", str(tmp / "p.svg")], 2, {}))
    return out


def _setup(tmp: Path) -> None:
    (tmp / "text.npy").write_text("hello\n")
    np.save(tmp / "x.npy", np.zeros(3))
    (tmp / "bad.toml").write_text("bad = [\n")
    (tmp / "garbage.partita").write_bytes(b"PK\x03\x04 not really")


@pytest.mark.slow
def test_no_input_makes_partita_die(tmp_path):
    _setup(tmp_path)
    table = []
    for argv, want, opts in cases(tmp_path):
        table.append((argv, want, opts))
        if opts.get("json"):
            table.append((argv + ["--json"], want, {**opts, "parse": True}))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER],
        input=json.dumps([{"argv": a, **o} for a, _, o in table]),
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=1500,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    failures = []
    results = json.loads(done.stdout)
    slowest = sorted(zip((r["seconds"] for r in results), (" ".join(a) for a, _, _ in table)))
    print("slowest cases:", *[f"{t:.1f} s {a}" for t, a in slowest[-8:]], sep="\n  ")
    for (argv, want, opts), got in zip(table, results):
        text = got["out"] + got["err"]
        allowed = want if isinstance(want, set) else {want}
        problems = [
            p for p, bad in (
                (f"signal {got['signal']}", got["signal"]),
                (f"status {got['status']} (documented: {sorted(allowed)})",
                 got["status"] not in allowed),
                ("a traceback", "Traceback" in text),
                ("internal error", "internal error" in text),
                ("LLVM ERROR", "LLVM ERROR" in text),
                ("a warning from LLVM", "not a recognized processor" in text),
            ) if bad
        ]
        if opts.get("parse"):
            try:
                doc = json.loads(got["out"])
                if got["status"] not in (0, 1) and "error" not in doc:
                    problems.append("an error without an error document")
            except ValueError:
                problems.append("stdout is not exactly one JSON document")
        if problems:
            failures.append(f"partita {' '.join(argv)}: {', '.join(problems)}\n"
                            f"  {text.strip()[-600:]}")
    assert not failures, "\n".join(failures)
