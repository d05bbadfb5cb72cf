"""Pass infrastructure: Pass, Sequential, PassContext and instruments.

A pass is a named function IRModule -> IRModule with an opt level. ``Sequential`` runs a visible
list of passes; a ``PassContext`` chooses the opt level, per-pass config, disabled or required
passes and the instruments that time passes or dump the IR after them.

    with PassContext(opt_level=3, instruments=[PassTimingInstrument()]) as ctx:
        mod = Sequential([InferType(), FoldConstant()])(mod)
    print(ctx.instruments[0].render())
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
import time
from collections.abc import Callable

from partita.errors import PartitaError
from partita.ir.module import IRModule

log = logging.getLogger("partita.passes")


class Pass:
    """A named transformation of a module. Subclasses implement ``transform(mod, ctx)``."""

    name = "Pass"
    opt_level = 0

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        raise NotImplementedError

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise PartitaError(f"pass {self.name} takes an IRModule, got {type(mod).__name__}")
        return PassContext.current().run_pass(self, mod)

    def __repr__(self):
        return f"<Pass {self.name}>"


class _FunctionBackedPass(Pass):
    def __init__(self, name, opt_level, fn, options):
        self.name, self.opt_level, self._fn, self.options = name, opt_level, fn, options
        self.__doc__ = fn.__doc__
        self._check_options(options, "option")

    def _check_options(self, options, what):
        params = inspect.signature(self._fn).parameters
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return
        allowed = [n for n, p in params.items() if p.default is not p.empty]
        for key in options:
            if key not in allowed:
                raise PartitaError(
                    f"pass {self.name}: unknown {what} {key!r} "
                    f"(allowed: {', '.join(allowed) or 'none'})"
                )

    def transform(self, mod, ctx):
        self._check_options(ctx.config.get(self.name, {}), "config key")
        config = {**ctx.config.get(self.name, {}), **self.options}
        result = self._fn(mod, ctx, **config)
        if not isinstance(result, IRModule):
            raise PartitaError(f"pass {self.name} returned {type(result).__name__}, not IRModule")
        return result


def module_pass(name: str, opt_level: int = 0):
    """Decorator: ``fn(mod, ctx, **options) -> IRModule`` becomes a factory ``Name(**options)``."""

    def wrap(fn: Callable) -> Callable[..., Pass]:
        @functools.wraps(fn)
        def factory(**options) -> Pass:
            return _FunctionBackedPass(name, opt_level, fn, options)

        factory.pass_name = name
        return factory

    return wrap


def function_pass(name: str, opt_level: int = 0):
    """Decorator: ``fn(func, mod, ctx, **options) -> Function`` applied to every function."""

    def wrap(fn: Callable) -> Callable[..., Pass]:
        def per_module(mod, ctx, **options):
            out = IRModule({}, mod.attrs)
            for gname, func in mod.functions.items():
                out[gname] = fn(func, mod, ctx, **options)
            return out

        per_module.__doc__ = fn.__doc__
        return module_pass(name, opt_level)(functools.wraps(fn)(per_module))

    return wrap


class Sequential(Pass):
    """Run passes in order (each subject to the context's opt level and disabled list)."""

    def __init__(self, passes, name: str = "Sequential", opt_level: int = 0):
        self.passes, self.name, self.opt_level = list(passes), name, opt_level
        for p in self.passes:
            if not isinstance(p, Pass):
                raise PartitaError(f"{name}: {p!r} is not a pass (did you forget the ()?)")

    def transform(self, mod, ctx):
        for p in self.passes:
            mod = ctx.run_pass(p, mod)
        return mod

    def __repr__(self):
        return f"<Sequential {self.name}: {', '.join(p.name for p in self.passes)}>"


class PassInstrument:
    """Hooks around every pass run under a PassContext. Override what you need."""

    def should_run(self, p: Pass, mod: IRModule) -> bool:
        return True

    def run_before_pass(self, p: Pass, mod: IRModule) -> None:
        pass

    def run_after_pass(self, p: Pass, mod: IRModule) -> None:
        pass


class PassTimingInstrument(PassInstrument):
    """Wall time per pass (nested Sequentials show their parts indented)."""

    def __init__(self):
        self.timings: list[tuple[int, str, float]] = []
        self._stack: list[tuple[int, float]] = []

    def run_before_pass(self, p, mod):
        self._stack.append((len(self.timings), time.perf_counter()))
        self.timings.append((len(self._stack) - 1, p.name, 0.0))

    def run_after_pass(self, p, mod):
        index, start = self._stack.pop()
        depth, name, _ = self.timings[index]
        self.timings[index] = (depth, name, time.perf_counter() - start)

    def render(self) -> str:
        return "\n".join(f"{'  ' * d}{name}: {t * 1e3:.3f} ms" for d, name, t in self.timings)


class DumpIR(PassInstrument):
    """Keep (or write to ``directory``) the IR text after the passes named in ``after``
    (all passes when ``after`` is None)."""

    def __init__(self, after=None, directory: str | None = None):
        self.after = set(after) if after is not None else None
        self.directory = directory
        self.dumps: list[tuple[str, str]] = []

    def run_after_pass(self, p, mod):
        if self.after is not None and p.name not in self.after:
            return
        text = str(mod)
        self.dumps.append((p.name, text))
        if self.directory:
            import os

            os.makedirs(self.directory, exist_ok=True)
            path = os.path.join(self.directory, f"{len(self.dumps):03d}_{p.name}.txt")
            with open(path, "w") as f:
                f.write(text)


_local = threading.local()


class PassContext:
    """Configuration for running passes; use as a context manager (``with PassContext(...)``)."""

    def __init__(
        self,
        opt_level: int = 2,
        config: dict | None = None,
        instruments=None,
        disabled_pass=None,
        required_pass=None,
    ):
        self.opt_level = opt_level
        self.config = {k: dict(v) for k, v in (config or {}).items()}
        self.instruments = list(instruments or [])
        self.disabled_pass = set(disabled_pass or [])
        self.required_pass = set(required_pass or [])

    @staticmethod
    def current() -> PassContext:
        stack = getattr(_local, "stack", None)
        return stack[-1] if stack else _DEFAULT

    def __enter__(self):
        if not hasattr(_local, "stack"):
            _local.stack = []
        _local.stack.append(self)
        return self

    def __exit__(self, *exc):
        _local.stack.pop()

    def enabled(self, p: Pass) -> bool:
        if p.name in self.disabled_pass:
            return False
        return p.opt_level <= self.opt_level or p.name in self.required_pass

    def run_pass(self, p: Pass, mod: IRModule) -> IRModule:
        if not self.enabled(p) or not all(i.should_run(p, mod) for i in self.instruments):
            log.debug("skip pass %s", p.name)
            return mod
        for i in self.instruments:
            i.run_before_pass(p, mod)
        log.debug("run pass %s", p.name)
        out = p.transform(mod, self)
        for i in self.instruments:
            i.run_after_pass(p, out)
        return out


_DEFAULT = PassContext()
