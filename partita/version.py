"""The version of partita (pyproject.toml gives the same number)."""

__version__ = "0.1.0"
