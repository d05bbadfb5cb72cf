"""Helpers for backend tests: temporary registrations and fake installed packages."""

from __future__ import annotations

import textwrap


def fake_distribution(site, dist: str, entry_points: dict, modules: dict) -> None:
    """Write an installed distribution (a .dist-info folder with entry points in the group
    ``partita.backends``) and its modules into ``site`` (a folder on sys.path)."""
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[partita.backends]\n{lines}\n")
    for name, source in modules.items():
        (site / f"{name}.py").write_text(textwrap.dedent(source))
