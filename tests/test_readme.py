"""The README opens with two commands: the main job, and the tests. Both must work as written."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def commands() -> list[str]:
    return re.findall(r"^```sh\n(.*?)\n```", (ROOT / "README.md").read_text(), flags=re.S | re.M)


def test_the_readme_opens_with_the_main_job_and_the_test_command():
    text = (ROOT / "README.md").read_text()
    assert text.index("```sh") < 20
    main_job, tests = commands()[:2]
    assert "partita demo" in main_job
    assert "pytest" in tests
    assert tests.replace(" && ", "\n").splitlines()[0] in (ROOT / ".ci" / "run").read_text()
    assert "../shared" not in text and "this machine" not in text


def test_the_readme_quotes_the_demos_own_figures(capsys):
    """The cycles and accuracy README.md quotes are what `partita demo` prints today."""
    import re

    from partita.cli import main

    text = " ".join((ROOT / "README.md").read_text().split())
    cycles = re.search(r"([\d,]+) NPU cycles per image", text).group(1)
    accuracy = re.search(r"([\d.]+)% accuracy on the 450 held-out digits", text).group(1)
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert f"{cycles} NPU cycles" in out, out
    assert f"accuracy: {accuracy}%" in out, out


@pytest.mark.slow
def test_the_main_job_command_works_in_a_fresh_virtual_environment(tmp_path):
    """Copy the tracked files, make a new venv, run the README's first command verbatim."""
    src = tmp_path / "partita"
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in files:
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "VIRTUAL_ENV": str(venv)}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        ["bash", "-c", commands()[0]],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "accuracy:" in done.stdout and "placement:" in done.stdout, done.stdout
