"""Writing saved executables: the zip file docs/file-format.md describes (artifact.py reads it).

The writer needs only what an executable holds (constants, steps, ports, the report), not the
Executable class, so the class can offer ``save`` / ``to_bytes`` without an import loop.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from partita.runtime.origin import ORIGIN, tag
from partita.version import __version__

if TYPE_CHECKING:
    from partita.runtime.executable import Executable, Port

# backends whose saved regions hold native object code, which runs when the region is loaded:
# their functions are saved too (as Relay text with .npy constants, partita.text.serialize),
# so that a file from elsewhere is compiled again instead (artifact.py, origin.py)
NATIVE_CODE = {"llvm"}

FORMAT = "partita-executable"
VERSION = 1
MANIFEST = "manifest.json"
COMMENT = b"partita-executable sha256="


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()


def _serialize(function) -> bytes:
    from partita.text import serialize

    return serialize(function)


def _port(p: Port) -> dict:
    d = {"name": p.name, "shape": list(p.type.shape), "dtype": p.type.dtype, "slot": p.slot}
    if p.quant is not None:
        d["scale"], d["zero_point"] = p.quant
    return d


def save_executable(exe: Executable, path) -> None:
    """Write ``exe`` to ``path`` (see the module docstring); atomic (a temporary file renamed)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(executable_bytes(exe))
    tmp.replace(path)


def executable_bytes(exe: Executable) -> bytes:
    """The saved file's bytes: what travels to a worker process or a Ray task."""
    members: dict[str, bytes] = {}
    constants = []
    for slot, array in sorted(exe.constants.items()):
        name = f"constants/{slot}.npy"
        members[name] = _npy(array)
        constants.append({"slot": slot, "member": name})
    steps = []
    for i, step in enumerate(exe.steps):
        name = f"regions/{i}_{step.symbol}.{step.target}.bin"
        members[name] = step.region.to_bytes()
        entry = {
            "target": step.target,
            "symbol": step.symbol,
            "member": name,
            "inputs": list(step.inputs),
            "outputs": list(step.outputs),
            "release": list(step.release),
            "host": step.host,
        }
        if step.target in NATIVE_CODE and step.source is not None:
            function, options = step.source
            ir = f"ir/{i}_{step.symbol}.{step.target}.npz"
            members[ir] = function if isinstance(function, bytes) else _serialize(function)
            entry["ir"] = ir
            entry["options"] = {str(k): v if isinstance(v, (bool, int, float)) else str(v)
                                for k, v in (options or {}).items()}
        steps.append(entry)
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "partita": __version__,
        "target": exe.target,
        "n_slots": exe.n_slots,
        "inputs": [_port(p) for p in exe.inputs],
        "outputs": [_port(p) for p in exe.outputs],
        "constants": constants,
        "steps": steps,
        "report": exe.report.to_dict() if exe.report is not None else None,
        "members": {name: _sha(data) for name, data in members.items()},
    }
    manifest_bytes = json.dumps(manifest, indent=1).encode()
    buf = io.BytesIO()
    origin = tag(manifest_bytes)
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr(MANIFEST, manifest_bytes)
        for name, data in members.items():
            z.writestr(name, data)
        if origin is not None:
            z.writestr(ORIGIN, origin)
        z.comment = COMMENT + _sha(manifest_bytes).encode()
    return buf.getvalue()
