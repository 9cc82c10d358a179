"""Tokens of a formula: a hand-written scanner (no regex), lazily, so the first offending token is the one
reported; and the limits checked on the text before parsing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from autoscaler.core.formula.tree import (
    DIGITS,
    MAX_DEPTH,
    MAX_LENGTH,
    ONE_CHAR,
    TWO_CHAR,
    WORD_OPERATORS,
    FormulaError,
)


@dataclass(frozen=True)
class Token:
    kind: str  # "num", "name", "op", "end"
    text: str
    pos: int


def _is_name_start(c: str) -> bool:
    return c == "_" or ("a" <= c <= "z") or ("A" <= c <= "Z")


def _is_name_char(c: str) -> bool:
    return _is_name_start(c) or ("0" <= c <= "9")


def _scan_digits(text: str, i: int) -> int:
    while i < len(text) and (text[i] in DIGITS or text[i] == "_"):
        i += 1
    return i


def _scan_number(text: str, start: int) -> int:
    i = _scan_digits(text, start)
    if i < len(text) and text[i] == "." and not text.startswith("..", i):
        i = _scan_digits(text, i + 1)
    if i < len(text) and text[i] in "eE":
        i += 1
        if i < len(text) and text[i] in "+-":
            i += 1
        i = _scan_digits(text, i)
    if i < len(text) and _is_name_char(text[i]):
        end = i
        while end < len(text) and _is_name_char(text[end]):
            end += 1
        raise FormulaError("bad number syntax", text[start:end], start)
    return i


def tokenize(text: str) -> Iterator[Token]:
    """The tokens of ``text``, lazily (so the first offending token is the one reported); any character
    outside the subset is refused where it stands."""
    i = 0
    while i < len(text):
        c = text[i]
        if c in " \t\r\n":
            i += 1
        elif c in DIGITS or (c == "." and text[i + 1 : i + 2] in DIGITS):
            end = _scan_number(text, i)
            yield (Token("num", text[i:end], i))
            i = end
        elif _is_name_start(c):
            end = i + 1
            while end < len(text) and _is_name_char(text[end]):
                end += 1
            word = text[i:end]
            if word in WORD_OPERATORS:
                yield (Token("op", word, i))
            else:
                yield (Token("name", word, i))
            i = end
        elif text[i : i + 2] in TWO_CHAR:
            yield (Token("op", text[i : i + 2], i))
            i += 2
        elif c in ONE_CHAR:
            yield (Token("op", c, i))
            i += 1
        else:
            raise FormulaError("unsupported character", c, i)
    yield Token("end", "", len(text))


def check_limits(text: str) -> None:
    if len(text) > MAX_LENGTH:
        raise FormulaError(f"formula longer than {MAX_LENGTH} characters", text[MAX_LENGTH], MAX_LENGTH)
    depth = 0
    for pos, c in enumerate(text):  # the subset has no strings, so every "(" opens a group
        if c == "(":
            depth += 1
            if depth > MAX_DEPTH:
                raise FormulaError(f"parentheses nested deeper than {MAX_DEPTH}", c, pos)
        elif c == ")":
            depth -= 1
