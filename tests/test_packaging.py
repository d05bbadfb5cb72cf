"""The wheel carries every subpackage: build it into a temporary folder and import from it."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUBPACKAGES = [
    "partita",
    "partita.ir",
    "partita.ops",
    "partita.text",
    "partita.passes",
    "partita.patterns",
    "partita.partition",
    "partita.backends",
    "partita.frontends",
]


def test_every_source_package_is_listed():
    """A folder with an __init__.py that pyproject.toml forgets would be missing from the wheel."""
    import tomllib

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = cfg["package-dir"]
    listed = set(cfg["packages"])
    for pkg, folder in dirs.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            name = ".".join((pkg, *rel)) if rel else pkg
            if "__pycache__" not in rel:
                assert name in listed, f"{name} ({init.parent}) is not in pyproject's packages"


@pytest.mark.slow
def test_wheel_imports_every_subpackage(tmp_path):
    out = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    wheel = next(out.glob("partita-*.whl"))
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = f"import importlib; [importlib.import_module(m) for m in {SUBPACKAGES!r}]; "
    code += f"import partita; assert partita.__file__.startswith({str(site)!r}), partita.__file__"
    # Run from an empty folder with only the unpacked wheel on the path (not the source tree).
    subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            f"import sys; sys.path[:0] = [{str(site)!r}] + "
            f"[p for p in {sys.path!r} if 'site-packages' in p]; " + code,
        ],
        check=True,
        cwd=tmp_path,
    )


@pytest.mark.slow
def test_an_installed_partita_runs_from_the_repository_root(tmp_path):
    """After a (non-editable) install, ``python -c "import partita"`` and ``python -m partita``
    in the repository root pick the source folder first: it must still be the whole package."""
    out, site = tmp_path / "dist", tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    wheel = next(out.glob("partita-*.whl"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(site),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    import os

    env = {**os.environ, "PYTHONPATH": str(site)}
    code = "import partita, partita.partition, partita.frontends, partita.backends.npu"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True)
    done = subprocess.run(
        [sys.executable, "-m", "partita", "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "compile" in done.stdout
