"""Saved executables: one zip file with a JSON manifest, .npy arrays and backend blobs.

The format is in docs/file-format.md. Every member's SHA-256 is in the manifest and the
manifest's own hash is in the zip comment; ``load`` checks all of them before it trusts a byte,
refuses other versions, and never unpickles (arrays load with ``allow_pickle=False``; regions
come back through their backend's ``load`` hook, which does not compile again).

Loading is bounded and runs no foreign native code:
- the file, every member and their sum must fit the memory budget (partita/limits.py), and no
  member may claim more than ``MAX_RATIO`` times its compressed size (past ``RATIO_FLOOR``
  bytes), all checked from the zip's directory before a byte is decompressed;
- regions of native code (``writer.NATIVE_CODE``) are loaded from their object code only when the
  file was written by this user on this machine (origin.py) or the caller trusts it
  (``trust=True``); otherwise they are compiled again from the IR the file carries (the LLVM
  backend's region cache makes the second load of the same file fast). ``exe.load_report``
  says which happened.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np

from partita.backends.registry import get_backend
from partita.errors import ModelFileError, PartitaError
from partita.ir import TensorType
from partita.limits import memory_budget
from partita.runtime import origin
from partita.runtime.executable import Executable, Port, Step
from partita.runtime.writer import (  # noqa: F401  (save_executable: re-exported)
    COMMENT,
    FORMAT,
    MANIFEST,
    NATIVE_CODE,
    VERSION,
    _sha,
    executable_bytes,
    save_executable,
)

MAX_MEMBER_BYTES = 1 << 32  # no member may claim more than 4 GiB, whatever the budget
MAX_RATIO = 200  # uncompressed / compressed, for members larger than RATIO_FLOOR
RATIO_FLOOR = 1 << 20
MAX_MEMBERS = 100_000


class ArtifactError(ModelFileError):
    """A saved executable that cannot be loaded: not one, another version, tampered, truncated."""


def load_executable(path, trust: bool = False) -> Executable:
    """Read an executable written by ``save``; an ArtifactError says what is wrong. Native
    object code in the file runs only if this user wrote it here or ``trust`` is given;
    otherwise those regions are compiled again from the file's IR."""
    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"no such file: {str(path)!r}")
    size, budget = path.stat().st_size, memory_budget()
    if size > budget:
        raise ArtifactError(
            f"{path} is {size:,} bytes, over the memory budget of {budget:,} "
            "(PARTITA_MEMORY_BUDGET)"
        )
    return load_executable_bytes(path.read_bytes(), str(path), trust)


def load_executable_bytes(data: bytes, where: str = "<bytes>", trust: bool = False) -> Executable:
    """The executable in ``data`` (the bytes of a saved file); ``trust`` as in load."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            check_sizes(z, where)
            manifest, blobs, manifest_bytes, stored_tag = _read_members(z, where)
    except zipfile.BadZipFile as exc:
        raise ArtifactError(
            f"{where} is not a partita executable (not a zip file: {exc})"
        ) from None
    except (OSError, EOFError, zipfile.LargeZipFile, NotImplementedError) as exc:
        raise ArtifactError(f"{where} is truncated or corrupt: {exc}") from None
    here = origin.written_here(manifest_bytes, stored_tag)
    why = "trusted" if trust else "written here" if here else None
    try:
        return _build(manifest, blobs, where, why)
    except ArtifactError:
        raise
    except PartitaError as exc:
        raise ArtifactError(f"{where}: {exc}") from None
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ArtifactError(f"{where}: malformed manifest ({type(exc).__name__}: {exc})") from None


def check_sizes(z: zipfile.ZipFile, where: str, budget: int | None = None) -> None:
    """Refuse, from the zip's directory alone, members that would decompress past the memory
    budget (each, and all together) or by more than MAX_RATIO: a decompression bomb is
    refused before a byte of it is inflated."""
    budget = memory_budget() if budget is None else budget
    infos = z.infolist()
    if len(infos) > MAX_MEMBERS:
        raise ArtifactError(f"{where} has {len(infos):,} members (at most {MAX_MEMBERS:,})")
    total = 0
    for info in infos:
        size = info.file_size
        if size > min(budget, MAX_MEMBER_BYTES):
            raise ArtifactError(
                f"{where}: member {info.filename!r} claims {size:,} bytes, over the memory "
                f"budget of {budget:,} (PARTITA_MEMORY_BUDGET)"
            )
        if size > RATIO_FLOOR and size > MAX_RATIO * max(info.compress_size, 1):
            raise ArtifactError(
                f"{where}: member {info.filename!r} would inflate {size:,} bytes from "
                f"{info.compress_size:,} (over {MAX_RATIO}:1): refused as a decompression bomb"
            )
        total += size
    if total > budget:
        raise ArtifactError(
            f"{where}: its members hold {total:,} bytes together, over the memory budget of "
            f"{budget:,} (PARTITA_MEMORY_BUDGET)"
        )


def _read_members(z: zipfile.ZipFile, where: str):
    comment = z.comment
    if not comment.startswith(COMMENT):
        raise ArtifactError(f"{where} is not a partita executable (no partita signature)")
    names = set(z.namelist())
    if MANIFEST not in names:
        raise ArtifactError(f"{where} has no {MANIFEST}")
    manifest_bytes = _read(z, MANIFEST, where)
    if _sha(manifest_bytes) != comment[len(COMMENT) :].decode(errors="replace"):
        raise ArtifactError(f"{where}: the manifest was modified (its SHA-256 does not match)")
    try:
        manifest = json.loads(manifest_bytes)
    except ValueError as exc:
        raise ArtifactError(f"{where}: the manifest is not JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArtifactError(f"{where} is not a partita executable")
    if manifest.get("version") != VERSION:
        raise ArtifactError(
            f"{where} is a version {manifest.get('version')!r} executable; this partita reads "
            f"version {VERSION} (rebuild it with this partita)"
        )
    expected = manifest.get("members")
    if not isinstance(expected, dict):
        raise ArtifactError(f"{where}: the manifest lists no members")
    extra = names - set(expected) - {MANIFEST, origin.ORIGIN}
    if extra:
        raise ArtifactError(f"{where}: unexpected member {sorted(extra)[0]!r}")
    blobs = {}
    for name, digest in expected.items():
        if name not in names:
            raise ArtifactError(f"{where}: member {name!r} is missing")
        data = _read(z, name, where)
        if _sha(data) != digest:
            raise ArtifactError(f"{where}: member {name!r} was modified (SHA-256 mismatch)")
        blobs[name] = data
    stored_tag = _read(z, origin.ORIGIN, where) if origin.ORIGIN in names else None
    return manifest, blobs, manifest_bytes, stored_tag


def _read(z: zipfile.ZipFile, name: str, where: str) -> bytes:
    info = z.getinfo(name)
    if info.file_size > MAX_MEMBER_BYTES:
        raise ArtifactError(f"{where}: member {name!r} claims {info.file_size:,} bytes")
    try:
        return z.read(name)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise ArtifactError(f"{where}: member {name!r} is corrupt ({exc})") from None


def _load_array(data: bytes, name: str, where: str) -> np.ndarray:
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ArtifactError(f"{where}: member {name!r} is not a .npy array ({exc})") from None


def _function(data: bytes, where: str, name: str):
    """A step's function from its serialized IR (an .npz inside the file: its sizes are
    checked like the file's own before numpy reads it)."""
    from partita.text import deserialize

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as inner:
            check_sizes(inner, f"{where}: {name}")
    except zipfile.BadZipFile as exc:
        raise ArtifactError(f"{where}: member {name!r} is not serialized IR ({exc})") from None
    from partita.ir import IRModule
    from partita.passes import InferType

    return InferType()(IRModule({"main": deserialize(data)}))["main"]


def _region(s: dict, blobs: dict, where: str, why: str | None, report: dict):
    """A step's compiled region: from the file, or for native code from elsewhere, compiled
    again from the IR the file carries."""
    target, symbol = s["target"], str(s["symbol"])
    ir = s.get("ir")
    source = (blobs[ir], dict(s.get("options") or {})) if ir else None
    if target not in NATIVE_CODE or why is not None:
        if target in NATIVE_CODE:
            report["object_code"].append(symbol)
        return get_backend(target).load(blobs[s["member"]]), source
    if source is None:
        raise ArtifactError(
            f"{where}: region {symbol!r} is native {target} code without the IR it was compiled "
            "from (written by an older partita), and the file was not written by this user on "
            "this machine: load it with trust=True (--trust) only if you trust where it came "
            "from, or compile the model again"
        )
    function = _function(blobs[ir], where, ir)
    region = get_backend(target).compile(function, source[1])
    report["recompiled"].append(symbol)
    return region, source


def _build(manifest: dict, blobs: dict[str, bytes], where: str, why: str | None) -> Executable:
    from partita.partition import PlacementReport

    n_slots = int(manifest["n_slots"])

    def slot(value) -> int:
        s = int(value)
        if not 0 <= s < n_slots:
            raise ArtifactError(f"{where}: slot {s} out of range")
        return s

    def port(d: dict) -> Port:
        quant = (d["scale"], d["zero_point"]) if "scale" in d else None
        return Port(str(d["name"]), TensorType(tuple(d["shape"]), d["dtype"]), slot(d["slot"]),
                    quant)

    constants = {
        slot(c["slot"]): _load_array(blobs[c["member"]], c["member"], where)
        for c in manifest["constants"]
    }
    steps = []
    load_report = {"origin": why or "elsewhere", "object_code": [], "recompiled": []}
    for s in manifest["steps"]:
        region, source = _region(s, blobs, where, why, load_report)
        steps.append(
            Step(
                s["target"],
                s["symbol"],
                region,
                tuple(map(slot, s["inputs"])),
                tuple(map(slot, s["outputs"])),
                tuple(map(slot, s["release"])),
                bool(s["host"]),
                source,
            )
        )
    report = manifest.get("report")
    exe = Executable(
        steps,
        n_slots,
        [port(p) for p in manifest["inputs"]],
        [port(p) for p in manifest["outputs"]],
        constants,
        str(manifest.get("target", "")),
        PlacementReport.from_dict(report) if report else None,
    )
    exe.load_report = load_report
    exe.load_note = load_note(load_report, where)
    return exe


def load_note(report: dict, where: str) -> str:
    """One line on what ran of the file's native code ('' when it holds none)."""
    code, again = report["object_code"], report["recompiled"]
    if again:
        return (
            f"{where} was not written by this user on this machine: its native code was not "
            f"used; {', '.join(again)} compiled again from the IR it carries (--trust / "
            "trust=True would run its object code)"
        )
    if code and report["origin"] == "trusted":
        return f"{where}: object code of {', '.join(code)} loaded as trusted (--trust)"
    return ""  # written here, or no native code: nothing to say
