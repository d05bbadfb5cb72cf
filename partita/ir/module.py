"""IRModule: a map from names to Functions; ``main`` is the entry."""

from __future__ import annotations

from collections.abc import Iterator

from partita.errors import PartitaError

from .nodes import TEXT_FORMAT, Expr, Function, GlobalVar
from .visitor import free_vars


class IRModule:
    """Global functions by name. Immutable by convention: passes return new modules."""

    def __init__(self, functions: dict[str, Function] | None = None, attrs: dict | None = None):
        self.functions: dict[str, Function] = {}
        for name, fn in (functions or {}).items():
            self[name] = fn
        self.attrs = dict(attrs or {})

    @staticmethod
    def from_expr(expr: Expr, name: str = "main") -> IRModule:
        """Wrap an expression (or Function) as ``name``; free vars become parameters in order."""
        if not isinstance(expr, Function):
            expr = Function(free_vars(expr), expr)
        return IRModule({name: expr})

    def __getitem__(self, name) -> Function:
        key = name.name_hint if isinstance(name, GlobalVar) else name
        try:
            return self.functions[key]
        except KeyError:
            known = ", ".join(sorted(self.functions)) or "none"
            raise PartitaError(f"module has no function @{key} (it has: {known})") from None

    def __setitem__(self, name: str, fn: Function) -> None:
        if not isinstance(fn, Function):
            raise PartitaError(f"@{name} must be a Function, got {type(fn).__name__}")
        self.functions[name.name_hint if isinstance(name, GlobalVar) else name] = fn

    def __contains__(self, name) -> bool:
        return (name.name_hint if isinstance(name, GlobalVar) else name) in self.functions

    def __iter__(self) -> Iterator[str]:
        return iter(self.functions)

    def __len__(self):
        return len(self.functions)

    def items(self):
        return self.functions.items()

    def get_global_vars(self) -> list[GlobalVar]:
        """The module's functions as GlobalVars (Relay's ``mod.get_global_vars()``)."""
        return [GlobalVar(name) for name in self.functions]

    @property
    def type_definitions(self) -> dict:
        """Relay's ADT definitions: partita has no ADTs, so always empty."""
        return {}

    def get_global_var(self, name: str) -> GlobalVar:
        if name not in self.functions:
            self[name]  # the error naming the functions there are
        return GlobalVar(name)

    @property
    def main(self) -> Function:
        return self["main"]

    def with_function(self, name: str, fn: Function) -> IRModule:
        """A new module with ``name`` added or replaced."""
        out = IRModule(self.functions, self.attrs)
        out[name] = fn
        return out

    def copy(self) -> IRModule:
        return IRModule(self.functions, self.attrs)

    def __str__(self):
        printer = TEXT_FORMAT.get("module")
        return printer(self) if printer is not None else repr(self)

    def __repr__(self):
        return f"<IRModule {', '.join('@' + n for n in self.functions)}>"
