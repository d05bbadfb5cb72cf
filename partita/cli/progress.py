"""Progress on stderr: a spinner (rich) on a terminal, timed lines with -v, silence otherwise."""

from __future__ import annotations

import contextlib
import sys
import time


class Progress:
    """``with progress.step("import model.tflite"): ...``; ``progress.message`` is the callback
    ``partita.build`` calls before each of its steps."""

    def __init__(self, verbose: bool = False, stream=None, enabled: bool = True):
        self.verbose, self.stream = verbose, stream or sys.stderr
        self.status = None
        self.spinner = None
        if enabled and not verbose and getattr(self.stream, "isatty", lambda: False)():
            try:
                from rich.console import Console
            except ImportError:  # rich is a dependency, but a spinner is not worth failing over
                Console = None
            if Console is not None:
                self.spinner = Console(file=self.stream, stderr=True)
        self._last: tuple[str, float] | None = None

    @contextlib.contextmanager
    def step(self, what: str):
        start = time.perf_counter()
        if self.spinner is not None:
            with self.spinner.status(f"{what} ..."):
                yield
        else:
            yield
        if self.verbose:
            self.stream.write(f"partita: {what}: {time.perf_counter() - start:.3f} s\n")

    def message(self, what: str) -> None:
        """A build step started (the previous one, if any, ended)."""
        now = time.perf_counter()
        if self.verbose and self._last is not None:
            name, start = self._last
            self.stream.write(f"partita: {name}: {now - start:.3f} s\n")
        self._last = (what, now)
        if self.spinner is not None:
            if self.status is None:
                self.status = self.spinner.status(f"{what} ...")
                self.status.start()
            else:
                self.status.update(f"{what} ...")

    def finish(self) -> None:
        self.message("done")
        self._last = None
        if self.status is not None:
            self.status.stop()
            self.status = None

    def note(self, text: str) -> None:
        self.stream.write(f"partita: {text}\n")
