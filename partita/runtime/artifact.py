"""Saved executables: one zip file with a JSON manifest, .npy arrays and backend blobs.

The format is in docs/file-format.md. Every member's SHA-256 is in the manifest and the
manifest's own hash is in the zip comment; ``load`` checks all of them before it trusts a byte,
refuses other versions, and never unpickles (arrays load with ``allow_pickle=False``; regions
come back through their backend's ``load`` hook, which does not compile again).
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
from partita.runtime.executable import Executable, Port, Step
from partita.runtime.writer import (  # noqa: F401  (save_executable: re-exported)
    COMMENT,
    FORMAT,
    MANIFEST,
    VERSION,
    _sha,
    executable_bytes,
    save_executable,
)

MAX_MEMBER_BYTES = 1 << 32  # refuse members that claim more than 4 GiB before reading them


class ArtifactError(ModelFileError):
    """A saved executable that cannot be loaded: not one, another version, tampered, truncated."""


def load_executable(path, trust: bool = False) -> Executable:
    """Read an executable written by ``save``; an ArtifactError says what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"no such file: {str(path)!r}")
    return load_executable_bytes(path.read_bytes(), str(path))


def load_executable_bytes(data: bytes, where: str = "<bytes>") -> Executable:
    """The executable in ``data`` (the bytes of a saved file)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            manifest, blobs = _read_members(z, where)
    except zipfile.BadZipFile as exc:
        raise ArtifactError(
            f"{where} is not a partita executable (not a zip file: {exc})"
        ) from None
    except (OSError, EOFError, zipfile.LargeZipFile, NotImplementedError) as exc:
        raise ArtifactError(f"{where} is truncated or corrupt: {exc}") from None
    try:
        return _build(manifest, blobs, where)
    except ArtifactError:
        raise
    except PartitaError as exc:
        raise ArtifactError(f"{where}: {exc}") from None
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ArtifactError(f"{where}: malformed manifest ({type(exc).__name__}: {exc})") from None


def _read_members(z: zipfile.ZipFile, where: str) -> tuple[dict, dict[str, bytes]]:
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
    extra = names - set(expected) - {MANIFEST}
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
    return manifest, blobs


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


def _build(manifest: dict, blobs: dict[str, bytes], where: str) -> Executable:
    from partita.partition import PlacementReport

    n_slots = int(manifest["n_slots"])

    def slot(value) -> int:
        s = int(value)
        if not 0 <= s < n_slots:
            raise ArtifactError(f"{where}: slot {s} out of range")
        return s

    def port(d: dict) -> Port:
        return Port(str(d["name"]), TensorType(tuple(d["shape"]), d["dtype"]), slot(d["slot"]))

    constants = {
        slot(c["slot"]): _load_array(blobs[c["member"]], c["member"], where)
        for c in manifest["constants"]
    }
    steps = []
    for s in manifest["steps"]:
        region = get_backend(s["target"]).load(blobs[s["member"]])
        steps.append(
            Step(
                s["target"],
                s["symbol"],
                region,
                tuple(map(slot, s["inputs"])),
                tuple(map(slot, s["outputs"])),
                tuple(map(slot, s["release"])),
                bool(s["host"]),
            )
        )
    report = manifest.get("report")
    return Executable(
        steps,
        n_slots,
        [port(p) for p in manifest["inputs"]],
        [port(p) for p in manifest["outputs"]],
        constants,
        str(manifest.get("target", "")),
        PlacementReport.from_dict(report) if report else None,
    )
