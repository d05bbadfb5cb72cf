"""Every test model of the three frontends goes through ``partita compile`` and ``partita run``
(in process), and the saved executable's outputs equal the interpreter's on the same inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import partita as P
import partita.cli as cli

MODELS = Path(__file__).resolve().parents[2] / "tests" / "models"
FILES = sorted(  # the three frontends' test models (transformers have their own tests)
    p
    for folder in ("tflite", "onnx", "pytorch")
    for p in (MODELS / folder).rglob("*")
    if p.suffix in (".tflite", ".onnx", ".pt2", ".pt") and "large" not in p.parts
)
SHAPES = {".pt": ["--input-shape", "x=1,3,16,16"]}
MOBILENET_PT = ["--input-shape", "x=1,3,64,64"]


def _params(path: Path):
    marks = []
    if path.suffix in (".pt2", ".pt"):
        marks.append(pytest.mark.skipif(not _has_torch(), reason="needs torch"))
    if "nets" not in path.parts and path.parent.name != "pytorch":
        marks.append(pytest.mark.slow)  # the many op models: together ~1 minute
    return pytest.param(path, id=str(path.relative_to(MODELS)), marks=marks)


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("path", [_params(p) for p in FILES])
def test_compile_then_run_equals_the_interpreter(path, tmp_path, capsys):
    flags = SHAPES.get(path.suffix, [])
    if path.suffix == ".pt" and "mobilenet" in path.name:
        flags = MOBILENET_PT
    exe_path = tmp_path / "m.partita"
    status = cli.main(["compile", str(path), "-t", "ref", "-o", str(exe_path), *flags])
    _, err = capsys.readouterr()
    if status == 4:
        pytest.skip(f"unsupported by its frontend: {err.splitlines()[0]}")
    assert status == 0, err
    out = tmp_path / "out.npz"
    assert cli.main(["run", str(exe_path), "--random", "--seed", "1", "-o", str(out)]) == 0
    exe = P.load(exe_path)
    rng = np.random.default_rng(1)
    inputs = [cli.commands._random(rng, t) for t in exe.input_types]
    kwargs = {}
    if path.suffix in (".pt", ".pt2"):
        from partita.frontends import from_pytorch

        shapes = [tuple(int(d) for d in flags[1].split("=")[1].split(","))] if flags else None
        mod = from_pytorch(str(path), shapes)
    else:
        mod = cli.load_model(path, **kwargs)
    want = P.interpret(mod, inputs)
    with np.load(out) as z:
        got = [z[name] for name in exe.output_names]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w, equal_nan=True)
