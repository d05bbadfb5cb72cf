"""``python -m partita``: the same as the ``partita`` console script."""

from partita.cli import main

raise SystemExit(main())
