"""Saved executables from elsewhere: loading is bounded in memory, and runs no native code that
was not written by this user on this machine unless the caller trusts the file (issue 29).

The attacks are real files: a 2 GB member of zeros deflated to a few MB, and another region's
object code swapped in; in both the member hashes and the manifest hash are recomputed, so only
the new defences (sizes from the zip directory, the origin HMAC) stand in the way.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import partita as P
from partita.runtime import ArtifactError
from partita.runtime.writer import COMMENT, MANIFEST
from partita.text import parse

ROOT = Path(__file__).resolve().parents[2]
DOUBLE = """
def @main(%x: Tensor[(2, 4), float32]) {
  %0 = add(%x, %x);
  tanh(%0)
}
"""
HALF = """
def @main(%x: Tensor[(2, 4), float32]) {
  %0 = multiply(%x, 0.5f);
  nn.relu(%0)
}
"""
X = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def rewrite(src: Path, dst: Path, replace: dict[str, bytes], drop=()) -> None:
    """``src`` with members replaced (or dropped), every hash recomputed: what an attacker who
    can write the file can do."""
    with zipfile.ZipFile(src) as z:
        members = {n: z.read(n) for n in z.namelist() if n not in drop}
    members.update(replace)
    manifest = json.loads(members.pop(MANIFEST))
    manifest["members"] = {n: _sha(d) for n, d in members.items() if n in manifest["members"]}
    data = json.dumps(manifest).encode()
    with zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr(MANIFEST, data)
        for name, blob in members.items():
            z.writestr(name, blob)
        z.comment = COMMENT + _sha(data).encode()


def llvm_member(path: Path, prefix: str = "regions/") -> str:
    with zipfile.ZipFile(path) as z:
        return next(n for n in z.namelist() if n.startswith(prefix) and ".llvm." in n)


def read_member(path: Path, name: str) -> bytes:
    with zipfile.ZipFile(path) as z:
        return z.read(name)


@pytest.fixture()
def key(tmp_path, monkeypatch):
    path = tmp_path / "keys" / "origin.key"
    monkeypatch.setenv("PARTITA_KEY_FILE", str(path))
    return path


def test_a_file_written_here_loads_its_object_code_and_the_key_is_private(tmp_path, key):
    exe = P.build(parse(DOUBLE), "llvm")
    exe.save(tmp_path / "a.partita")
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_size == 32
    loaded = P.load(tmp_path / "a.partita")
    assert loaded.load_report == {"origin": "written here", "object_code": ["host_0"],
                                  "recompiled": []}
    assert np.array_equal(loaded.run(X)[0], exe.run(X)[0])


def test_a_file_from_elsewhere_is_compiled_again_from_its_ir(tmp_path, key, monkeypatch):
    exe = P.build(parse(DOUBLE), "llvm")
    exe.save(tmp_path / "a.partita")
    monkeypatch.setenv("PARTITA_KEY_FILE", str(tmp_path / "other user" / "origin.key"))
    loaded = P.load(tmp_path / "a.partita")
    assert loaded.load_report["recompiled"] == ["host_0"] and not loaded.load_report[
        "object_code"]
    assert "compiled again from the IR" in loaded.load_note
    assert np.array_equal(loaded.run(X)[0], exe.run(X)[0])
    again = P.load(tmp_path / "a.partita")  # the recompile is cached: the region cache's hit
    assert again.steps[0].region.cached
    trusted = P.load(tmp_path / "a.partita", trust=True)
    assert trusted.load_report["object_code"] == ["host_0"]
    # saved again here, the file is this user's: its object code loads
    loaded.save(tmp_path / "b.partita")
    assert P.load(tmp_path / "b.partita").load_report["origin"] == "written here"


def test_swapped_object_code_never_runs(tmp_path, key, monkeypatch):
    """Another region's object code in the file, hashes recomputed: loading compiles the
    region again from the IR and never loads the swapped code; the results are the model's.
    Trusted, the swapped code does run (so the swap was real)."""
    double, half = P.build(parse(DOUBLE), "llvm"), P.build(parse(HALF), "llvm")
    double.save(tmp_path / "double.partita")
    half.save(tmp_path / "half.partita")
    name = llvm_member(tmp_path / "double.partita")
    foreign = read_member(tmp_path / "half.partita", llvm_member(tmp_path / "half.partita"))
    rewrite(tmp_path / "double.partita", tmp_path / "swapped.partita", {name: foreign})

    backend = P.backends.get_backend("llvm")
    loads = []
    real_load = backend._load
    monkeypatch.setattr(backend, "_load", lambda data: loads.append(data) or real_load(data))
    loaded = P.load(tmp_path / "swapped.partita")
    assert foreign not in loads and loads == []  # the swapped bytes never reached the loader
    assert loaded.load_report["recompiled"] == ["host_0"]
    want = double.run(X)[0]
    assert np.array_equal(loaded.run(X)[0], want)

    trusted = P.load(tmp_path / "swapped.partita", trust=True)
    assert loads == [foreign]
    assert np.array_equal(trusted.run(X)[0], half.run(X)[0])
    assert not np.array_equal(trusted.run(X)[0], want)


def test_the_cli_says_what_happened_and_takes_trust(tmp_path, key, capsys, monkeypatch):
    import partita.cli as cli

    P.build(parse(DOUBLE), "llvm").save(tmp_path / "a.partita")
    monkeypatch.setenv("PARTITA_KEY_FILE", str(tmp_path / "elsewhere.key"))
    assert cli.main(["run", str(tmp_path / "a.partita"), "--random"]) == 0
    assert "compiled again from the IR" in capsys.readouterr().err
    assert cli.main(["run", str(tmp_path / "a.partita"), "--random", "--trust"]) == 0
    assert "loaded as trusted" in capsys.readouterr().err


def test_native_code_without_ir_from_elsewhere_needs_trust(tmp_path, key, monkeypatch):
    P.build(parse(DOUBLE), "llvm").save(tmp_path / "a.partita")
    ir = llvm_member(tmp_path / "a.partita", "ir/")
    with zipfile.ZipFile(tmp_path / "a.partita") as z:
        manifest = json.loads(z.read(MANIFEST))
    for step in manifest["steps"]:
        step.pop("ir", None)
    rewrite(tmp_path / "a.partita", tmp_path / "old.partita",
            {MANIFEST: json.dumps(manifest).encode()}, drop=(ir,))
    with pytest.raises(ArtifactError, match=r"without the IR .* trust=True \(--trust\)"):
        P.load(tmp_path / "old.partita")
    assert P.load(tmp_path / "old.partita", trust=True).load_report["origin"] == "trusted"


def _bomb(src: Path, dst: Path, size: int) -> None:
    """``src`` with its region member replaced by ``size`` zero bytes, deflated, hashes
    recomputed (streamed: the bomb is never in memory here either)."""
    with zipfile.ZipFile(src) as z:
        members = {n: z.read(n) for n in z.namelist()}
    victim = next(n for n in members if n.startswith("regions/"))
    del members[victim]
    manifest = json.loads(members.pop(MANIFEST))
    chunk = bytes(64 << 20)
    h = hashlib.sha256()
    for _ in range(size // len(chunk)):
        h.update(chunk)
    manifest["members"] = {n: _sha(d) for n, d in members.items() if n in manifest["members"]}
    manifest["members"][victim] = h.hexdigest()
    data = json.dumps(manifest).encode()
    with zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        z.writestr(MANIFEST, data)
        for name, blob in members.items():
            z.writestr(name, blob)
        with z.open(victim, "w", force_zip64=True) as f:
            for _ in range(size // len(chunk)):
                f.write(chunk)
        z.comment = COMMENT + _sha(data).encode()


PEAK = """
import resource, sys
import partita.cli as cli
status = cli.main(sys.argv[1:])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(status)
"""


@pytest.mark.slow
def test_a_decompression_bomb_is_refused_with_little_memory(tmp_path):
    from partita.backends.ref import InterpretedRegion  # noqa: F401  (the ref host's regions)

    P.build(parse(DOUBLE), "ref").save(tmp_path / "small.partita")
    bomb = tmp_path / "bomb.partita"
    _bomb(tmp_path / "small.partita", bomb, 2 << 30)
    assert bomb.stat().st_size < 16 << 20  # a few MB on disk, 2 GiB inflated
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def peak(path, extra_env):
        done = subprocess.run(
            [sys.executable, "-c", PEAK, "inspect", str(path)],
            capture_output=True, text=True, env={**env, **extra_env}, timeout=300,
        )
        return done, int(done.stderr.strip().splitlines()[-1])  # KiB

    _, baseline = peak(tmp_path / "small.partita", {})  # the same command on a sound file
    for extra_env, message in (({}, "decompression bomb"),
                               ({"PARTITA_MEMORY_BUDGET": "1g"}, "over the memory budget")):
        done, peak_kib = peak(bomb, extra_env)
        assert done.returncode == 3, done.stderr
        assert message in done.stderr and "Traceback" not in done.stderr
        # little more than loading a sound file takes; the member claims 2 GiB
        assert peak_kib < baseline + (200 << 10), (peak_kib, baseline)


def test_member_sizes_are_checked_against_the_budget(tmp_path, monkeypatch):
    exe = P.build(parse(DOUBLE), "ref")
    exe.save(tmp_path / "a.partita")
    monkeypatch.setenv("PARTITA_MEMORY_BUDGET", "1k")
    with pytest.raises(ArtifactError, match="over the memory budget"):
        P.load(tmp_path / "a.partita")
