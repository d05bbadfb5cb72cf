"""The token cursor the parser stands on, and the leaf grammars: attribute values and types.

out_dtype="int8"   strides=[2, 2]   pad_width=[[0, 0], [1, 1]]   units=None   alpha=0.2
Tensor[(1, 8, 8, 4), int8]   float32   (Tensor[(4), int8], Tensor[(4), int8])
"""

from __future__ import annotations

import json
import re

from partita.errors import ParseError
from partita.ir.types import DTYPES, RefType, TensorType, TupleType

from .lexer import EOF, Tokens

_ATTR_NUMBER = re.compile(r"(-?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?)(f(?:16|32|64)?|[iu][0-9]+)?")


class TokenCursor:
    """A position in a token stream, with errors that carry line and column."""

    def __init__(self, text: str):
        self.toks = Tokens(text)
        self.kinds, self.texts, self.spans = self.toks.kinds, self.toks.texts, self.toks.spans
        self.i = 0

    def error(self, message: str, i: int | None = None) -> ParseError:
        return self.toks.error(message, self.toks.starts[self.i if i is None else i])

    def _describe(self, i: int) -> str:
        return "the end of the input" if self.kinds[i] == EOF else repr(self.texts[i])

    def expect(self, kind: str, what: str = "") -> int:
        i = self.i
        if self.kinds[i] != kind:
            raise self.error(f"expected {what or repr(kind)}, got {self._describe(i)}", i)
        self.i = i + 1
        return i

    def _word(self, word: str) -> int:
        i = self.i
        if self.kinds[i] != "IDENT" or self.texts[i] != word:
            raise self.error(f"expected {word!r}, got {self._describe(i)}", i)
        self.i = i + 1
        return i

    def _string(self, i: int) -> str:
        try:
            return json.loads(self.texts[i])
        except ValueError as e:
            raise self.error(f"bad string literal: {e}", i) from None

    def _attr_value(self):
        """A string, number, True/False, None, inf/nan, or a [list] / (tuple) of those."""
        i, k, text = self.i, self.kinds[self.i], self.texts[self.i]
        self.i = i + 1
        if k == "STRING":
            return self._string(i)
        if k == "NUMBER":
            return self._attr_number(i, text)
        if k == "IDENT" and text in _WORDS:
            return _WORDS[text]
        if k == "-" and self.texts[i + 1] == "inf":
            self.i += 1
            return float("-inf")
        if k == "[" or k == "(":
            close, items = "]" if k == "[" else ")", []
            while self.kinds[self.i] != close:
                items.append(self._attr_value())
                if self.kinds[self.i] == ",":
                    self.i += 1
                elif self.kinds[self.i] != close:
                    raise self.error(f"expected ',' or {close!r}, got {self._describe(self.i)}")
            self.i += 1
            return tuple(items)
        raise self.error(
            "expected an attribute value (a string, number, True, False, None or "
            f"[list]), got {self._describe(i)}",
            i,
        )

    def _attr_number(self, i: int, text: str):
        m = _ATTR_NUMBER.fullmatch(text)
        if m is None:
            raise self.error(f"malformed number {text!r}", i)
        digits, frac, exp, suffix = m.groups()
        if frac is not None or exp is not None or (suffix or "").startswith("f"):
            return float(digits)
        return int(digits)

    def _type(self):
        i, k, text = self.i, self.kinds[self.i], self.texts[self.i]
        if k == "IDENT" and text == "Tensor":
            self.i += 1
            return self._tensor_type()
        if k == "IDENT" and text == "ref" and self.kinds[i + 1] == "(":
            self.i += 2
            value = self._type()
            self.expect(")", "to close ref(...)")
            return RefType(value)
        if k == "IDENT":
            return TensorType((), self._dtype())
        if k == "(":
            self.i += 1
            fields, comma = [], False
            while self.kinds[self.i] != ")":
                fields.append(self._type())
                comma = self.kinds[self.i] == ","
                if comma:
                    self.i += 1
                elif self.kinds[self.i] != ")":
                    raise self.error(
                        f"expected ',' or ')' in a tuple type, got {self._describe(self.i)}"
                    )
            self.i += 1
            return fields[0] if len(fields) == 1 and not comma else TupleType(fields)
        raise self.error(
            f"expected a type such as Tensor[(1, 8), int8], got {self._describe(i)}", i
        )

    def _tensor_type(self) -> TensorType:
        self.expect("[", "'[' after Tensor")
        self.expect("(", "a shape like (1, 8, 8, 4)")
        dims = []
        while self.kinds[self.i] != ")":
            at = self.expect("NUMBER", "a dimension")
            if not self.texts[at].isdigit():
                raise self.error(
                    f"a dimension is a non-negative integer, got {self.texts[at]!r}", at
                )
            dims.append(int(self.texts[at]))
            if self.kinds[self.i] == ",":
                self.i += 1
            elif self.kinds[self.i] != ")":
                raise self.error(f"expected ',' or ')' in the shape, got {self._describe(self.i)}")
        self.i += 1
        self.expect(",", "',' then a dtype after the shape")
        dtype = self._dtype()
        self.expect("]", "']' to close the tensor type")
        return TensorType(dims, dtype)

    def _dtype(self) -> str:
        at = self.expect("IDENT", "a dtype")
        if self.texts[at] not in DTYPES:
            raise self.error(
                f"unknown dtype {self.texts[at]!r} (partita supports {', '.join(DTYPES)})", at
            )
        return self.texts[at]


_WORDS = {"True": True, "False": False, "None": None, "inf": float("inf"), "nan": float("nan")}
