"""Make a source checkout importable as the whole package.

Run from the repository root (``python -c "import partita"``, ``python -m partita``), Python
finds this folder before any installed copy, and the sibling folders patterns/, partition/,
backends/ and frontends/ — partita's subpackages through pyproject's package-dir — would be
missing. When this module sits in a source checkout, the checkout's root joins the package's
search path, so those folders resolve as they do when installed. An installed partita has no
pyproject.toml beside it and is left alone.
"""

from __future__ import annotations

import os
import sys

_package = sys.modules[__name__.rpartition(".")[0]]
_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_root, "pyproject.toml")) and os.path.isfile(
    os.path.join(_root, "partition", "__init__.py")
):
    if _root not in _package.__path__:
        _package.__path__.append(_root)
