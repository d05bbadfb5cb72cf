"""Tokenizer of the text format, and the two small grammars that live inside tokens: scalar
literals (``0.05f``, ``3i8``) and span comments (``/* span=CONV_2D:3:conv_out */``).

Tokens are kept in three parallel lists (kind, text, offset) because a 100,000-node program has
close to a million tokens. Comments vanish, except that a span comment is remembered as trailing
the token before it, which is how the parser gives a node back its span.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right

import numpy as np

from partita.errors import ParseError
from partita.ir.span import Span

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_QUOTED = r'"(?:[^"\\\n]|\\.)*"'
_TOKEN = re.compile(  # the most frequent tokens first: the alternatives are tried in order
    rf"""(?P<WS>\s+)
    |(?P<PUNCT>[()\[\]{{}},;:=.\#])
    |(?P<LOCAL>%(?:{_NAME}|[0-9]+|{_QUOTED}))
    |(?P<IDENT>{_NAME}(?:\.{_NAME})*)
    |(?P<NUMBER>-?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?(?:[a-z][a-z0-9]*)?)
    |(?P<LC>//[^\n]*)
    |(?P<BC>/\*(?s:.*?)\*/)
    |(?P<GLOBAL>@(?:{_NAME}|{_QUOTED}))
    |(?P<STRING>{_QUOTED})
    |(?P<ARROW>->)
    |(?P<MINUS>-)
    |(?P<ERR>.)""",
    re.VERBOSE,
)
IDENTIFIER = re.compile(_NAME)
EOF = "EOF"
_NAMED = frozenset({"LOCAL", "GLOBAL", "NUMBER", "IDENT", "STRING"})

# Scalar literal suffixes, as Relay writes them: 0.05f, 0.05f16, 3i64, 3u8; plain ints are int32.
SUFFIX_DTYPE = {
    "f": "float32",
    "f32": "float32",
    "f16": "float16",
    "f64": "float64",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
}
_LITERAL = re.compile(r"(-?[0-9]+)(\.[0-9]*)?([eE][+-]?[0-9]+)?([a-z][a-z0-9]*)?")


class Tokens:
    """The token stream of one source text, with positions for error messages."""

    def __init__(self, text: str):
        self.text = text
        self.kinds: list[str] = []
        self.texts: list[str] = []
        self.starts: list[int] = []
        self.spans: dict[int, Span] = {}  # token index -> span comment that follows it
        self._line_starts: list[int] | None = None
        self._scan()

    def _scan(self) -> None:
        kinds, texts, starts = self.kinds, self.texts, self.starts
        for m in _TOKEN.finditer(self.text):
            kind = m.lastgroup
            if kind == "WS" or kind == "LC":
                continue
            if kind == "BC":
                self._comment(m.group(), m.start())
                continue
            if kind == "ERR":
                self._bad_char(m.start())
            value = m.group()
            if '"' in value[:2]:
                self._check_quoted(value, m.start())
            kinds.append(kind if kind in _NAMED else value)
            texts.append(value)
            starts.append(m.start())
        kinds.append(EOF)
        texts.append("")
        starts.append(len(self.text.rstrip()))

    def _comment(self, text: str, start: int) -> None:
        body = text[2:-2].strip()
        if body.startswith("span="):
            where = body[5:]
        elif body.startswith("ty=") and " span=" in body:
            where = body[body.index(" span=") + 6 :]
        else:
            return
        if self.kinds:
            try:
                self.spans[len(self.kinds) - 1] = decode_span(where.strip())
            except ValueError as e:
                raise self.error(f"malformed span comment: {e}", start) from None

    def _check_quoted(self, token: str, pos: int) -> None:
        try:
            json.loads(token[token.index('"') :])
        except ValueError as e:
            raise self.error(f"bad string literal {token}: {e}", pos) from None

    def _bad_char(self, pos: int) -> None:
        rest = self.text[pos : pos + 2]
        if rest == "/*":
            raise self.error("unterminated comment: '/*' is never closed by '*/'", pos)
        if rest[:1] == '"':
            raise self.error("unterminated string", pos)
        if rest[:1] in "%@":
            raise self.error(f"expected a name after {rest[0]!r}", pos)
        raise self.error(f"unexpected character {rest[:1]!r}", pos)

    def position(self, offset: int) -> tuple[int, int, str]:
        """(line, column, text of that line) of a character offset, all 1-based."""
        if self._line_starts is None:
            self._line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        line = bisect_right(self._line_starts, offset)
        begin = self._line_starts[line - 1]
        end = self.text.find("\n", begin)
        source = self.text[begin : end if end >= 0 else len(self.text)]
        return line, offset - begin + 1, source

    def error(self, message: str, offset: int) -> ParseError:
        line, column, source = self.position(offset)
        return ParseError(message, line, column, source)


def name_of(token: str) -> str:
    """The name in a ``%name``, ``@name``, ``%"quoted name"`` token."""
    body = token[1:]
    return json.loads(body) if body.startswith('"') else body


def quote(text: str) -> str:
    """A JSON string literal that is also safe inside a block comment."""
    return json.dumps(text).replace("*/", "*\\/")


def decode_literal(text: str) -> np.ndarray:
    """The 0-d array of a scalar literal token; ValueError with the reason if it is malformed."""
    m = _LITERAL.fullmatch(text)
    if m is None:
        raise ValueError(f"malformed number {text!r}")
    whole, frac, exp, suffix = m.groups()
    is_float = frac is not None or exp is not None
    if suffix is None:
        dtype = "float32" if is_float else "int32"
    elif suffix in SUFFIX_DTYPE:
        dtype = SUFFIX_DTYPE[suffix]
    else:
        known = ", ".join(SUFFIX_DTYPE)
        raise ValueError(f"unknown literal suffix {suffix!r} in {text!r} (known: {known})")
    digits = text[: len(text) - len(suffix or "")]
    if dtype.startswith("float"):
        with np.errstate(over="ignore"):
            value = np.array(digits, dtype=dtype)
        if not np.isfinite(value):
            raise ValueError(f"{digits} overflows {dtype}")
        return value
    if is_float:
        raise ValueError(f"{text!r}: an integer suffix on a number with a fraction or exponent")
    info, value = np.iinfo(dtype), int(whole)
    if not info.min <= value <= info.max:
        raise ValueError(f"{value} does not fit {dtype} (range {info.min}..{info.max})")
    return np.array(value, dtype=dtype)


def encode_span(span: Span) -> str:
    """``OP_TYPE:INDEX:tensor``; fields that could break the comment are JSON-quoted."""
    op = "" if span.op_type is None else span.op_type
    if span.op_type is not None and not _raw_ok(op, ":"):
        op = quote(op)
    index = "" if span.index is None else str(span.index)
    tensor = "" if span.tensor is None else span.tensor
    if span.tensor is not None and (span.source is not None or not _raw_ok(tensor, "")):
        tensor = quote(tensor)
    text = f"{op}:{index}:{tensor}"
    return text if span.source is None else f"{text} source={quote(span.source)}"


def _raw_ok(text: str, forbidden: str) -> bool:
    return (
        text != ""
        and text == text.strip()
        and text[0] != '"'
        and "*/" not in text
        and "/*" not in text
        and "\n" not in text
        and "\r" not in text
        and not text.startswith("source=")
        and not any(c in text for c in forbidden)
    )


def decode_span(text: str) -> Span:
    """Inverse of encode_span; ValueError on malformed text."""
    op, rest = _field(text, ":")
    index_text, rest = _field(rest, ":")
    if index_text and not index_text.lstrip("-").isdigit():
        raise ValueError(f"span index {index_text!r} is not an integer")
    tensor, source = None, None
    rest = rest.strip()
    if rest.startswith('"'):
        tensor, end = json.JSONDecoder().raw_decode(rest)
        rest = rest[end:].strip()
    elif rest and not rest.startswith("source="):
        tensor, rest = rest, ""
    if rest.startswith("source="):
        source, end = json.JSONDecoder().raw_decode(rest[7:])
        rest = rest[7 + end :].strip()
    if rest:
        raise ValueError(f"unexpected {rest!r} after the span")
    return Span(int(index_text) if index_text else None, op, tensor, source)


def _field(text: str, sep: str) -> tuple[str | None, str]:
    """One field of a span up to ``sep`` (a JSON string or raw text); empty means None."""
    if text.startswith('"'):
        value, end = json.JSONDecoder().raw_decode(text)
        if text[end : end + 1] != sep:
            raise ValueError(f"expected {sep!r} after {text[:end]}")
        return value, text[end + 1 :]
    cut = text.find(sep)
    if cut < 0:
        raise ValueError(f"expected OP_TYPE:INDEX:tensor, got {text!r}")
    return (text[:cut] or None), text[cut + 1 :]
