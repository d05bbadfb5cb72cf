"""Relay's text format, parsed: a hand-written recursive descent over the token lists.

    parse('def @main(%x: Tensor[(4), float32]) { %0 = nn.relu(%x); add(%0, 1f) }')

Graph form only (``%n = expr;`` bindings, no ``let``); ops resolve through the registry and attrs
through the op's schema; every error is a ParseError with line and column. Nesting depth is the
only recursion, so a 100,000-binding program parses in time linear in its length.
"""

from __future__ import annotations

import re

import numpy as np

from partita.errors import AttrError, OpNotFoundError, ParseError, PartitaError
from partita.ir.gc_pause import gc_paused
from partita.ir.module import IRModule
from partita.ir.nodes import Call, Constant, Function, GlobalVar, If, Let, Tuple, TupleGetItem, Var
from partita.ir.refs import RefCreate, RefRead, RefWrite
from partita.ops.registry import get_op

from .lexer import EOF, decode_literal, name_of
from .values import TokenCursor

_UNSUPPORTED = {"match", "type", "extern"}
_REFS = {"ref": (RefCreate, 1), "ref_read": (RefRead, 1), "ref_write": (RefWrite, 2)}
_INDEX = re.compile(r"[0-9]+(?:\.[0-9]+)?")


@gc_paused
def parse(text: str, constants=None) -> IRModule:
    """Parse a module (``def @main(...) {...}``, optionally after ``#[version = "0.0.5"]``) or a
    bare expression; ``constants`` (from ``astext``) binds ``meta[relay.Constant][i]``."""
    if not isinstance(text, str):
        raise ParseError(f"parse expects a str, got {type(text).__name__}", 1, 1)
    parser = _Parser(text, constants)
    try:
        return parser.module()
    except RecursionError:
        raise parser.error("expression nested too deeply; bind inner calls to %n first") from None


def _constants(constants) -> list | None:
    if constants is None:
        return None
    if isinstance(constants, dict):
        constants = constants.get("relay.Constant", [])
    if not isinstance(constants, (list, tuple)):
        raise ParseError(
            "constants must be a list (the second value astext returns), got "
            f"{type(constants).__name__}",
            1,
            1,
        )
    return list(constants)


class _Parser(TokenCursor):
    def __init__(self, text: str, constants):
        super().__init__(text)
        self.constants = _constants(constants)
        self.meta: dict[int, Constant] = {}
        self.scopes: list[dict] = []
        self.keys: dict[str, object] = {}
        self.ops: dict[str, object] = {}
        self.defaults: dict[str, object] = {}
        self.globals: dict[str, GlobalVar] = {}
        self.global_refs: dict[str, int] = {}
        self.bare = False

    def _make(self, at: int, cls, *args):
        try:
            return cls(*args)
        except PartitaError as e:
            raise self.error(str(e), at) from None

    def _key(self, token: str):
        """Scope key of a ``%`` token: ints for ``%0``, strings for names (``%"0"`` is a name)."""
        key = self.keys.get(token)
        if key is None:
            body = token[1:]
            key = int(body) if body.isdigit() else name_of(token)
            self.keys[token] = key
        return key

    # Module structure.
    def module(self) -> IRModule:
        self._header()
        if self.kinds[self.i] == EOF or self.texts[self.i] == "def":
            return self._defs()
        self.bare, self.scopes = True, [{}]
        expr = self._body(None)
        self._check_globals({})
        return IRModule.from_expr(expr)

    def _header(self) -> None:
        if self.kinds[self.i] != "#":
            return
        self.i += 1
        self.expect("[")
        if self.texts[self.i] == "metadata":
            raise self.error(
                "#[metadata] sections are not supported: pass the constants list to "
                "parse(text, constants=...) instead"
            )
        self._word("version")
        self.expect("=")
        self.expect("STRING", "a version string")
        self.expect("]")

    def _defs(self) -> IRModule:
        functions: dict[str, Function] = {}
        while self.kinds[self.i] != EOF:
            if self.kinds[self.i] == "#":
                self._header()
                continue
            start = self._word("def")
            name_at = self.expect("GLOBAL", "a function name like @main")
            name = name_of(self.texts[name_at])
            if name in functions:
                raise self.error(f"@{name} is defined twice", name_at)
            self.scopes = [{}]
            functions[name] = self._function(start)
        self._check_globals(functions)
        return IRModule(functions)

    def _check_globals(self, functions) -> None:
        for name, at in self.global_refs.items():
            if name not in functions:
                known = ", ".join("@" + n for n in functions) or "none"
                raise self.error(f"undefined global function @{name} (defined: {known})", at)

    def _function(self, start: int) -> Function:
        """``(params) [-> type] { body }`` in a new scope (pushed by the caller)."""
        self.expect("(")
        params, attrs = self._params()
        ret = None
        if self.kinds[self.i] == "->":
            self.i += 1
            ret = self._type()
        body = self._body(self.expect("{", "'{' to open the function body"))
        self.scopes.pop()
        return self._make(start, Function, params, body, ret, attrs, self.spans.get(self.i - 1))

    def _params(self) -> tuple[list[Var], dict]:
        params, attrs = [], {}
        kinds = self.kinds
        while kinds[self.i] != ")":
            i = self.i
            if kinds[i] == "LOCAL":
                params.append(self._param(i))
            elif kinds[i] in ("IDENT", "STRING") and kinds[i + 1] == "=":
                key = self.texts[i] if kinds[i] == "IDENT" else self._string(i)
                if key in attrs:
                    raise self.error(f"function attribute {key!r} is given twice", i)
                self.i = i + 2
                value = self._attr_value()
                if not isinstance(value, (str, int, float, bool)):
                    raise self.error("a function attribute is a string, number or bool", i + 2)
                attrs[key] = value
            else:
                raise self.error(
                    "expected a parameter (%name: type) or an attribute (Name=value)"
                    f", got {self._describe(i)}",
                    i,
                )
            if kinds[self.i] == ",":
                self.i += 1
            elif kinds[self.i] != ")":
                raise self.error(
                    f"expected ',' or ')' in the parameter list, got {self._describe(self.i)}"
                )
        self.i += 1
        return params, attrs

    def _param(self, i: int) -> Var:
        if self.kinds[i] != "LOCAL":
            raise self.error(f"expected a variable like %x, got {self._describe(i)}", i)
        token = self.texts[i]
        key, scope = self._key(token), self.scopes[-1]
        if key in scope:
            raise self.error(f"parameter {token} is declared twice", i)
        self.i = i + 1
        ty = None
        if self.kinds[self.i] == ":":
            self.i += 1
            ty = self._type()
        var = self._make(i, Var, name_of(token), ty, self.spans.get(self.i - 1))
        scope[key] = var
        return var

    def _body(self, open_at: int | None):
        """Bindings ``%n = expr;`` then the result, up to the '}' at open_at's match (or EOF)."""
        kinds, scope = self.kinds, self.scopes[-1]
        while True:
            i = self.i
            if kinds[i] == EOF and open_at is not None:
                raise self._unterminated(open_at)
            if open_at is None and kinds[i] == "IDENT" and self.texts[i] == "free_var":
                self._param(i + 1)
                self._end(";", None, "';' after the free_var declaration")
                continue
            if kinds[i] == "IDENT" and self.texts[i] == "let":
                return self._let(i, open_at)
            if kinds[i] == "LOCAL" and kinds[i + 1] == "=":
                key = self._key(self.texts[i])
                if key in scope:
                    raise self.error(f"{self.texts[i]} is already defined", i)
                self.i = i + 2
                scope[key] = self._expr()
                self._end(";", open_at, f"';' after the binding of {self.texts[i]}")
            else:
                value = self._expr()
                self._end(
                    "}" if open_at is not None else EOF,
                    open_at,
                    "'}' after the function's result"
                    if open_at is not None
                    else "the end of the input after the result",
                )
                return value

    def _let(self, i: int, open_at: int | None):
        """``let %v[: type] = value;`` then the rest of the block, which is the Let's body."""
        if self.kinds[i + 1] != "LOCAL":
            raise self.error(f"expected a variable after 'let', got {self._describe(i + 1)}", i + 1)
        var = self._param(i + 1)  # declared in the current scope, visible to the rest
        if self.kinds[self.i] != "=":
            raise self.error(f"expected '=' after let {self.texts[i + 1]}", self.i)
        self.i += 1
        value = self._expr()
        self._end(";", open_at, "';' after the let binding")
        return self._make(i, Let, var, value, self._body(open_at), self.spans.get(i))

    def _if(self, i: int):
        """``if (cond) { ... } else { ... }``; each branch a block of bindings then a result."""
        self.i = i + 1
        self.expect("(")
        cond = self._expr()
        self.expect(")")
        branches = []
        for k in range(2):
            if k:
                if not (self.kinds[self.i] == "IDENT" and self.texts[self.i] == "else"):
                    raise self.error(f"expected 'else', got {self._describe(self.i)}", self.i)
                self.i += 1
            self.scopes.append({})
            branches.append(self._body(self.expect("{", "'{' to open a branch")))
            self.scopes.pop()
        return self._make(i, If, cond, branches[0], branches[1], self.spans.get(i))

    def _end(self, kind: str, open_at: int | None, what: str) -> None:
        if self.kinds[self.i] == kind:
            self.i += 1
        elif self.kinds[self.i] == EOF and open_at is not None:
            raise self._unterminated(open_at)
        else:
            raise self.error(f"expected {what}, got {self._describe(self.i)}")

    def _unterminated(self, open_at: int) -> ParseError:
        return self.error("unterminated block: this '{' is never closed", open_at)

    # Expressions.
    def _expr(self):
        node = self._primary()
        kinds = self.kinds
        while True:
            k = kinds[self.i]
            if k == "(":
                at = self.i
                self.i += 1
                args, attrs, _ = self._args(False)
                node = self._make(at, Call, node, args, None, self.spans.get(self.i - 1))
            elif k == ".":
                node = self._getitem(node)
            else:
                return node

    def _primary(self):
        i, kinds = self.i, self.kinds
        k = kinds[i]
        if k == "LOCAL":
            self.i = i + 1
            return self._lookup(i)
        if k == "IDENT":
            return self._word_expr(i, self.texts[i])
        if k == "NUMBER":
            self.i = i + 1
            try:
                value = decode_literal(self.texts[i])
            except ValueError as e:
                raise self.error(str(e), i) from None
            return Constant(value, self.spans.get(i))
        if k == "(":
            return self._tuple(i)
        if k == "GLOBAL":
            return self._global(i)
        if k == "STRING":
            raise self.error('a string can only be an attribute value (name="...")', i)
        raise self.error(f"expected an expression, got {self._describe(i)}", i)

    def _word_expr(self, i: int, word: str):
        nxt = self.kinds[i + 1]
        if word == "fn":
            self.i = i + 1
            self.scopes.append({})
            return self._function(i)
        if word == "if":
            return self._if(i)
        if word in _UNSUPPORTED:
            raise self.error(
                f"'{word}' is not supported: partita reads the graph form "
                "(%n = expr; bindings) only",
                i,
            )
        if nxt == "(" and word in _REFS:
            cls, arity = _REFS[word]
            self.i = i + 2
            args = self._args(False)[0]
            if len(args) != arity:
                raise self.error(f"{word} takes {arity} argument(s), got {len(args)}", i)
            return self._make(i, cls, *args, self.spans.get(self.i - 1))
        if nxt == "(":
            return self._op_call(i, word)
        if word == "meta":
            return self._meta(i)
        if word == "True" or word == "False":
            self.i = i + 1
            return Constant(np.array(word == "True"), self.spans.get(i))
        raise self.error(f"expected an expression, got {word!r} (ops are called: {word}(...))", i)

    def _lookup(self, i: int):
        key = self._key(self.texts[i])
        for scope in reversed(self.scopes):
            node = scope.get(key)
            if node is not None:
                return node
        if self.bare and isinstance(key, str):
            node = self.scopes[0][key] = Var(key)  # a free variable of a bare expression
            return node
        if isinstance(key, int):
            raise self.error(
                f"{self.texts[i]} is not defined (a binding must come before its uses)", i
            )
        raise self.error(f"undefined variable {self.texts[i]}", i)

    def _global(self, i: int) -> GlobalVar:
        self.i = i + 1
        name = name_of(self.texts[i])
        self.global_refs.setdefault(name, i)
        gv = self.globals.get(name)
        if gv is None:
            gv = self.globals[name] = GlobalVar(name)
        return gv

    def _op_call(self, i: int, name: str) -> Call:
        op = self.ops.get(name)
        if op is None:
            try:
                op = self.ops[name] = get_op(name)
            except OpNotFoundError as e:
                raise self.error(str(e), i) from None
        self.i = i + 2
        args, attrs, where = self._args(True)
        if attrs is None:  # the schema's defaults, validated once per op rather than per call
            attrs = self.defaults.get(name)
            if attrs is None:
                attrs = self.defaults[name] = self._make(i, op.make_attrs, None)
        try:
            return Call(op, args, attrs, self.spans.get(self.i - 1))
        except AttrError as e:
            raise self.error(str(e), _attr_position(str(e), where, i)) from None
        except PartitaError as e:
            raise self.error(str(e), i) from None

    def _args(self, allow_attrs: bool):
        """Arguments after '(' up to ')': positional expressions, then ``name=value`` attrs."""
        args, attrs, where = [], None, None
        kinds, texts = self.kinds, self.texts
        while kinds[self.i] != ")":
            i = self.i
            if kinds[i] == "IDENT" and kinds[i + 1] == "=":
                if not allow_attrs:
                    raise self.error("a call to a function takes no attributes", i)
                if attrs is None:
                    attrs, where = {}, {}
                if texts[i] in attrs:
                    raise self.error(f"attribute {texts[i]!r} is given twice", i)
                self.i = i + 2
                attrs[texts[i]] = self._attr_value()
                where[texts[i]] = (i, i + 2)
            elif attrs is not None:
                raise self.error("positional argument after the attributes", i)
            else:
                args.append(self._expr())
            if kinds[self.i] == ",":
                self.i += 1
            elif kinds[self.i] != ")":
                raise self.error(
                    f"expected ',' or ')' in the argument list, got {self._describe(self.i)}"
                )
        self.i += 1
        return args, attrs, where

    def _tuple(self, i: int):
        """``()``, ``(a,)``, ``(a, b)``; ``(a)`` is just a."""
        self.i = i + 1
        fields, comma = [], False
        while self.kinds[self.i] != ")":
            fields.append(self._expr())
            if self.kinds[self.i] == ",":
                self.i += 1
                comma = True
            elif self.kinds[self.i] != ")":
                raise self.error(f"expected ',' or ')', got {self._describe(self.i)}")
        self.i += 1
        if len(fields) == 1 and not comma:
            return fields[0]
        return Tuple(fields, self.spans.get(self.i - 1))

    def _getitem(self, node):
        self.i += 1
        i = self.i
        text = self.texts[i]
        if self.kinds[i] != "NUMBER" or not _INDEX.fullmatch(text):
            raise self.error(f"expected a tuple index after '.', got {self._describe(i)}", i)
        self.i = i + 1
        parts = text.split(".")  # the lexer reads %t.0.1 as %t . 0.1
        for k, part in enumerate(parts):
            span = self.spans.get(i) if k == len(parts) - 1 else None
            node = TupleGetItem(node, int(part), span)
        return node

    def _meta(self, i: int) -> Constant:
        self.i = i + 1
        self.expect("[")
        kind_at = self.expect("IDENT", "relay.Constant")
        if self.texts[kind_at] != "relay.Constant":
            raise self.error(
                f"only meta[relay.Constant] is supported, got meta[{self.texts[kind_at]}]", kind_at
            )
        self.expect("]")
        self.expect("[")
        index_at = self.expect("NUMBER", "a constant index")
        self.expect("]")
        if not self.texts[index_at].isdigit():
            raise self.error("a meta index is a non-negative integer", index_at)
        return self._meta_constant(int(self.texts[index_at]), i)

    def _meta_constant(self, index: int, at: int) -> Constant:
        ref = f"meta[relay.Constant][{index}]"
        if self.constants is None:
            raise self.error(
                f"{ref} needs the constants: parse(text, constants=...) with the "
                "list that astext(mod) returned",
                at,
            )
        if index >= len(self.constants):
            raise self.error(
                f"{ref} is out of range: {len(self.constants)} constants were given", at
            )
        c = self.meta.get(index)
        if c is None:
            entry = self.constants[index]
            c = entry if isinstance(entry, Constant) else self._make(at, Constant, entry)
            self.meta[index] = c
        return c


def _attr_position(message: str, where, default: int) -> int:
    """The token an AttrError is about: the key of an unknown attribute, else the bad value."""
    for key, (key_at, value_at) in (where or {}).items():
        if f"unknown attribute {key!r}" in message:
            return key_at
        if f"attribute {key!r}" in message and f"missing required attribute {key!r}" not in message:
            return value_at
    return default
