"""Saved executables: round trip, no recompilation, and every kind of bad file refused."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
from common_graphs import int8_convnet, registered
from partita.backends import Backend
from partita.backends.ref import InterpretedRegion

import partita as P
from partita.runtime import ArtifactError


@pytest.fixture()
def saved(tmp_path):
    calls = []

    def compile_hook(fn, opts):
        calls.append(fn)
        return InterpretedRegion(fn, backend="sacc")

    acc = Backend(
        "sacc",
        ops={"qnn.conv2d": True, "nn.bias_add": True, "qnn.requantize": True, "clip": True},
        compile=compile_hook,
        load=InterpretedRegion.loader("sacc"),
    )
    with registered(acc):
        mod = int8_convnet()
        exe = P.build(mod, "sacc, ref")
        path = tmp_path / "m.partita"
        exe.save(path)
        yield mod, exe, path, calls


def test_round_trip_gives_the_same_bits_without_compiling(saved):
    mod, exe, path, calls = saved
    compiled = len(calls)
    loaded = P.load(path)
    assert len(calls) == compiled  # load used the loader, not the compile hook
    assert [(s.symbol, s.target) for s in loaded.steps] == [(s.symbol, s.target) for s in exe.steps]
    assert loaded.input_names == exe.input_names and loaded.output_types == exe.output_types
    assert loaded.report.summary() == exe.report.summary()
    x = np.random.default_rng(0).integers(-128, 128, (1, 8, 8, 4), dtype=np.int8)
    assert np.array_equal(loaded.run(x)[0], P.interpret(mod, [x])[0])


def rewrite(path, change):
    """Rewrite the zip with ``change(members) -> members`` (keeping the comment)."""
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
        comment = z.comment
    members, comment = change(members, comment)
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
        z.comment = comment


def flip_member(prefix):
    def change(members, comment):
        name = next(n for n in members if n.startswith(prefix))
        data = bytearray(members[name])
        data[len(data) // 2] ^= 0x01
        members[name] = bytes(data)
        return members, comment

    return change


def edit_manifest(**fields):
    def change(members, comment):
        manifest = json.loads(members["manifest.json"])
        manifest.update(fields)
        members["manifest.json"] = json.dumps(manifest).encode()
        return members, comment

    return change


def add_member(members, comment):
    members["extra.npy"] = b"\x93NUMPY"
    return members, comment


@pytest.mark.parametrize(
    "change, message",
    [
        (flip_member("regions/"), r"member 'regions/.*' was modified"),
        (flip_member("manifest.json"), r"the manifest was modified"),
        (edit_manifest(version=2), r"the manifest was modified"),
        (add_member, r"unexpected member 'extra.npy'"),
        (lambda m, c: (m, b""), r"not a partita executable \(no partita signature\)"),
        (lambda m, c: ({k: v for k, v in m.items() if "regions" not in k}, c), r"is missing"),
    ],
)
def test_tampered_files_are_refused(saved, change, message):
    _, _, path, _ = saved
    with registered(Backend("sacc", load=InterpretedRegion.loader("sacc"))):
        rewrite(path, change)
        with pytest.raises(ArtifactError, match=message):
            P.load(path)


def test_other_versions_are_refused_with_a_hint(saved):
    _, _, path, _ = saved
    import hashlib

    def change(members, comment):
        manifest = json.loads(members["manifest.json"])
        manifest["version"] = 99
        data = json.dumps(manifest).encode()
        members["manifest.json"] = data
        return members, b"partita-executable sha256=" + hashlib.sha256(data).hexdigest().encode()

    rewrite(path, change)
    with pytest.raises(ArtifactError, match="version 99 executable; this partita reads version 1"):
        P.load(path)


def test_truncated_and_foreign_files_are_refused(saved, tmp_path):
    _, _, path, _ = saved
    data = path.read_bytes()
    for cut in (10, len(data) // 2, len(data) - 30):
        short = tmp_path / f"short{cut}.partita"
        short.write_bytes(data[:cut])
        with pytest.raises(ArtifactError):
            P.load(short)
    other = tmp_path / "model.tflite"
    other.write_bytes(b"TFL3" + bytes(100))
    with pytest.raises(ArtifactError, match="not a partita executable"):
        P.load(other)
    with pytest.raises(ArtifactError, match="no such file"):
        P.load(tmp_path / "missing.partita")


def test_corrupt_region_blob_is_refused(saved):
    _, _, path, _ = saved
    import hashlib

    def change(members, comment):
        name = next(n for n in members if n.startswith("regions/"))
        members[name] = b"not an npz"
        manifest = json.loads(members["manifest.json"])
        manifest["members"][name] = hashlib.sha256(b"not an npz").hexdigest()
        data = json.dumps(manifest).encode()
        members["manifest.json"] = data
        return members, b"partita-executable sha256=" + hashlib.sha256(data).hexdigest().encode()

    with registered(Backend("sacc", load=InterpretedRegion.loader("sacc"))):
        rewrite(path, change)
        with pytest.raises(ArtifactError, match="corrupt IR blob"):
            P.load(path)


def test_arrays_are_never_unpickled(saved):
    _, _, path, _ = saved
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            if name.endswith(".npy"):
                np.load(io.BytesIO(z.read(name)), allow_pickle=False)


def test_bytes_round_trip_is_the_file(saved):
    from partita.runtime import load_bytes

    mod, exe, path, _ = saved
    data = exe.to_bytes()
    loaded = load_bytes(data)
    x = np.random.default_rng(4).integers(-128, 128, (1, 8, 8, 4), dtype=np.int8)
    assert np.array_equal(loaded.run(x)[0], P.interpret(mod, [x])[0])
    with pytest.raises(ArtifactError, match="<bytes>.*not a zip file"):
        load_bytes(data[:100] + b"junk")
