"""``python -m partita``: the same as the ``partita`` console script."""

from .cli import main

raise SystemExit(main())
