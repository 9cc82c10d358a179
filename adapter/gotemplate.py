"""A subset of Go's text/template with `<<` `>>` delimiters, as prometheus-adapter uses it.

Supported: text, trim markers (`<<- ` / ` ->>`), comments, fields (`.A.B`, `$x.A`), variables
(`:=`, `=`), pipelines, parenthesised sub-pipelines, string/raw/char/number/bool/nil literals,
`if`/`else if`/`else`, `range` (with `$v :=` or `$i, $v :=`, `else`, `break`, `continue`), `with`,
and Go's builtin functions `and or not len index slice print printf println eq ne lt le gt ge
html js urlquery` (not `call`, and no sprig: prometheus-adapter registers none). Values print
like Go's `fmt`: slices as `[a b]`, maps as `map[k:v]` with sorted keys, a missing map entry as
`<no value>`.

`parse(text)` raises `TemplateError` (a start-up error for configs); `Template.render(data)` raises
`TemplateExecError`. Parsing also compiles the template's top level: text and plain fields render by
dictionary reads and a join (a metricsQuery of the default config: 1.2 µs instead of 6.2 µs through the
interpreter), the rest through the interpreter, whose output and errors the compiled form keeps.
Data is Python values: `str`, `int`, `float`, `bool`, `None`, `list`, `dict` (a Go map) and `GoStruct`
(a Go struct: unknown fields are errors, not `<no value>`).
"""

from __future__ import annotations

import math
import re
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import partial
from typing import Any

from adapter.naming.promql import go_quote

LEFT_DELIM = "<<"
RIGHT_DELIM = ">>"
_SPACE = " \t\r\n"


class TemplateError(ValueError):
    """The template text does not parse."""


class TemplateExecError(ValueError):
    """The template failed while executing against some data."""


class _Missing:
    """Go's invalid reflect.Value: the result of a field lookup of a missing map key."""

    def __repr__(self) -> str:
        return "<no value>"


MISSING: Any = _Missing()


@dataclass(frozen=True, slots=True)
class GoStruct:
    """A Go struct value: named fields in declaration order."""

    type_name: str
    fields: Mapping[str, Any]


# ---------------------------------------------------------------------------------------------
# Go fmt
# ---------------------------------------------------------------------------------------------


def go_type_name(value: Any) -> str:
    """The Go type name used in fmt's and template's error messages."""
    if value is None or value is MISSING:
        return "<nil>"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, GoStruct):
        return value.type_name
    if isinstance(value, Mapping):
        return "map[string]string"
    if isinstance(value, list | tuple):
        return "[]string"
    return type(value).__name__


def _format_float_shortest(value: float) -> str:
    """Go's `strconv.FormatFloat(v, 'g', -1, 64)`, i.e. fmt's `%v` for a float64."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    # repr() gives the shortest round-tripping digits, the same digits Go's shortest mode picks.
    sign, digit_tuple, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    decimal_point = len(digits) + exponent
    exp = decimal_point - 1
    neg = "-" if sign else ""
    # Shortest %g switches to %e when the exponent is < -4 or >= 6 (strconv's eprec = 6).
    if exp < -4 or exp >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{neg}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if decimal_point <= 0:
        return f"{neg}0.{'0' * -decimal_point}{digits}"
    if decimal_point >= len(digits):
        return neg + digits + "0" * (decimal_point - len(digits))
    return f"{neg}{digits[:decimal_point]}.{digits[decimal_point:]}"


def fmt_value(value: Any) -> str:
    """fmt's `%v` of a value."""
    if value is None:
        return "<nil>"
    if value is MISSING:
        return "<no value>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    if isinstance(value, float):
        return _format_float_shortest(value)
    if isinstance(value, GoStruct):
        return "{" + " ".join(fmt_value(v) for v in value.fields.values()) + "}"
    if isinstance(value, Mapping):
        return "map[" + " ".join(f"{fmt_value(k)}:{fmt_value(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list | tuple):
        return "[" + " ".join(fmt_value(v) for v in value) + "]"
    return str(value)


def _bad_verb(verb: str, value: Any) -> str:
    if value is None:
        return f"%!{verb}(<nil>)"
    return f"%!{verb}({go_type_name(value)}={fmt_value(value)})"


def _quote_rune(code: int) -> str:
    """Go's `strconv.QuoteRune` (what `%q` prints for an integer)."""
    if code == ord("'"):
        return "'\\''"
    if code == ord('"'):
        return "'\"'"
    if not 0 <= code <= 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        code = 0xFFFD
    return "'" + go_quote(chr(code))[1:-1] + "'"


def _format_one(verb: str, flags: str, precision: int | None, value: Any) -> str:
    if isinstance(value, list | tuple) and verb in "sdqxXfeEgG":
        return "[" + " ".join(_format_one(verb, flags, precision, v) for v in value) + "]"
    if isinstance(value, Mapping) and not isinstance(value, GoStruct) and verb in "sdqxX":
        items = (
            f"{_format_one(verb, flags, precision, k)}:{_format_one(verb, flags, precision, value[k])}"
            for k in sorted(value)
        )
        return "map[" + " ".join(items) + "]"
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if verb == "v":
        return fmt_value(value)
    if verb == "s" and isinstance(value, str):
        return value if precision is None else value[:precision]
    if verb == "q":
        if isinstance(value, str):
            return go_quote(value)
        if is_int:
            return _quote_rune(value)
    if verb == "d" and is_int:
        return f"+{value}" if "+" in flags and value >= 0 else str(value)
    if verb in "xX" and (is_int or isinstance(value, str)):
        text = f"{value:x}" if is_int else value.encode().hex()
        return text.upper() if verb == "X" else text
    if verb == "t" and isinstance(value, bool):
        return fmt_value(value)
    if verb == "c" and is_int:
        return chr(value)
    if verb in "feEgG" and isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return _format_float_shortest(value)
        if verb in "gG" and precision is None:
            text = _format_float_shortest(value)
            return text.upper() if verb == "G" else text
        text = format(value, f"{'+' if '+' in flags else ''}.{6 if precision is None else precision}{verb}")
        return text
    return _bad_verb(verb, value)


_VERB = re.compile(r"%([-+# 0]*)(\d+)?(?:\.(\d*))?(.?)", re.DOTALL)


def sprintf(format_text: str, args: Sequence[Any]) -> str:
    """Go's `fmt.Sprintf` for the verbs `v s d q x X t c f e E g G %` with flags, width, precision."""
    out: list[str] = []
    arg_index = 0
    pos = 0
    for match in _VERB.finditer(format_text):
        out.append(format_text[pos : match.start()])
        pos = match.end()
        flags, width, precision, verb = match.groups()
        if verb == "%":
            out.append("%")
            continue
        if not verb:
            out.append("%!(NOVERB)")
            continue
        if arg_index >= len(args):
            out.append(f"%!{verb}(MISSING)")
            continue
        value = args[arg_index]
        arg_index += 1
        text = _format_one(verb, flags, int(precision or 0) if precision is not None else None, value)
        if width and len(text) < int(width):
            padding = int(width) - len(text)
            numeric = isinstance(value, int | float) and not isinstance(value, bool)
            if "-" in flags:
                text += " " * padding
            elif "0" in flags and numeric:
                sign = text[0] if text[:1] in "+-" else ""
                text = sign + "0" * padding + text[len(sign) :]
            else:
                text = " " * padding + text
        out.append(text)
    out.append(format_text[pos:])
    if arg_index < len(args):
        extra = ", ".join(
            "<nil>" if a is None else f"{go_type_name(a)}={fmt_value(a)}" for a in args[arg_index:]
        )
        out.append(f"%!(EXTRA {extra})")
    return "".join(out)


def sprint(args: Sequence[Any]) -> str:
    """Go's `fmt.Sprint`: a space between operands when neither is a string."""
    out: list[str] = []
    previous_string = False
    for i, arg in enumerate(args):
        is_string = isinstance(arg, str)
        if i > 0 and not is_string and not previous_string:
            out.append(" ")
        out.append(fmt_value(arg))
        previous_string = is_string
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Lexer
# ---------------------------------------------------------------------------------------------

_KEYWORDS = frozenset(
    {"if", "else", "end", "range", "with", "break", "continue", "define", "template", "block"}
)
_NUMBER = re.compile(
    r"[+-]?(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|(?:[0-9][0-9_]*)?\.?[0-9_]+(?:[eE][+-]?[0-9]+)?)"
)
_IDENT_CHARS = re.compile(r"[A-Za-z_0-9]*")
_SIMPLE_UNESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\"}


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # text, left/right (delimiters), or an action token: space pipe lparen rparen comma
    # declare assign string number field variable dot ident
    value: Any
    pos: int


def _unquote(body: str, quote: str) -> str:
    """Decode the escapes of a Go interpreted string or char literal body."""
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= len(body):
            raise ValueError("bad escape at end of literal")
        esc = body[i + 1]
        if esc in _SIMPLE_UNESCAPES:
            out.append(_SIMPLE_UNESCAPES[esc])
            i += 2
        elif esc == quote:
            out.append(quote)
            i += 2
        elif esc in "xuU":
            size = {"x": 2, "u": 4, "U": 8}[esc]
            digits = body[i + 2 : i + 2 + size]
            if len(digits) != size or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ValueError(f"invalid \\{esc} escape")
            code = int(digits, 16)
            if esc != "x" and (code > 0x10FFFF or 0xD800 <= code <= 0xDFFF):
                raise ValueError(f"invalid Unicode code point in \\{esc} escape")
            out.append(chr(code))
            i += 2 + size
        elif esc in "01234567":
            digits = body[i + 1 : i + 4]
            if len(digits) != 3 or not all(c in "01234567" for c in digits) or int(digits, 8) > 255:
                raise ValueError("invalid octal escape")
            out.append(chr(int(digits, 8)))
            i += 4
        else:
            raise ValueError(f"unknown escape sequence \\{esc}")
    return "".join(out)


class _Lexer:
    def __init__(self, text: str, name: str) -> None:
        self.text = text
        self.name = name
        self.tokens: list[_Token] = []

    def error(self, pos: int, message: str) -> TemplateError:
        return TemplateError(_error_prefix(self.text, pos, self.name) + message)

    def run(self) -> list[_Token]:
        text = self.text
        pos = 0
        trim_next = False
        while True:
            start = text.find(LEFT_DELIM, pos)
            end_of_text = len(text) if start == -1 else start
            marker = text[start + 2 : start + 4] if start != -1 else ""
            trim_left = len(marker) == 2 and marker[0] == "-" and marker[1] in _SPACE
            chunk = text[pos:end_of_text]
            if trim_next:
                chunk = chunk.lstrip(_SPACE)
            if trim_left:
                chunk = chunk.rstrip(_SPACE)
            if chunk:
                self.tokens.append(_Token("text", chunk, pos))
            if start == -1:
                return self.tokens
            inside = start + (4 if trim_left else 2)
            if text.startswith("/*", inside):
                pos, trim_next = self._comment(inside)
            else:
                self.tokens.append(_Token("left", None, start))
                pos, trim_next = self._action(inside)

    def _comment(self, pos: int) -> tuple[int, bool]:
        close = self.text.find("*/", pos + 2)
        if close == -1:
            raise self.error(pos, "unclosed comment")
        after = close + 2
        if self.text.startswith(" -" + RIGHT_DELIM, after):
            return after + 4, True
        if self.text.startswith(RIGHT_DELIM, after):
            return after + 2, False
        raise self.error(pos, "comment ends before closing delimiter")

    def _action(self, pos: int) -> tuple[int, bool]:
        text = self.text
        while True:
            if text.startswith(" -" + RIGHT_DELIM, pos) or text.startswith("\t-" + RIGHT_DELIM, pos):
                self.tokens.append(_Token("right", None, pos))
                return pos + 4, True
            if text.startswith(RIGHT_DELIM, pos):
                self.tokens.append(_Token("right", None, pos))
                return pos + 2, False
            if pos >= len(text):
                raise self.error(pos, "unclosed action")
            pos = self._token(pos)

    def _token(self, pos: int) -> int:
        text = self.text
        ch = text[pos]
        add = self.tokens.append
        if ch in _SPACE:
            end = pos
            while end < len(text) and text[end] in _SPACE and not text.startswith(" -" + RIGHT_DELIM, end):
                end += 1
            add(_Token("space", None, pos))
            return max(end, pos + 1)
        single = {"|": "pipe", "(": "lparen", ")": "rparen", ",": "comma", "=": "assign"}
        if ch in single:
            add(_Token(single[ch], ch, pos))
            return pos + 1
        if text.startswith(":=", pos):
            add(_Token("declare", ":=", pos))
            return pos + 2
        if ch == '"':
            end = pos + 1
            while end < len(text) and text[end] != '"':
                if text[end] == "\n":
                    break
                end += 2 if text[end] == "\\" else 1
            if end >= len(text) or text[end] != '"':
                raise self.error(pos, "unterminated quoted string")
            try:
                add(_Token("string", _unquote(text[pos + 1 : end], '"'), pos))
            except ValueError as exc:
                raise self.error(pos, f"bad string literal: {exc}") from None
            return end + 1
        if ch == "`":
            end = text.find("`", pos + 1)
            if end == -1:
                raise self.error(pos, "unterminated raw quoted string")
            add(_Token("string", text[pos + 1 : end], pos))
            return end + 1
        if ch == "'":
            end = pos + 1
            while end < len(text) and text[end] != "'":
                end += 2 if text[end] == "\\" else 1
            try:
                decoded = _unquote(text[pos + 1 : end], "'") if end < len(text) else ""
            except ValueError as exc:
                raise self.error(pos, f"bad character constant: {exc}") from None
            if len(decoded) != 1:
                raise self.error(pos, "malformed character constant")
            add(_Token("number", ord(decoded), pos))
            return end + 1
        if ch == "." and not text[pos + 1 : pos + 2].isdigit():
            name = _IDENT_CHARS.match(text, pos + 1)
            assert name is not None
            if name.group():
                add(_Token("field", name.group(), pos))
                return name.end()
            add(_Token("dot", None, pos))
            return pos + 1
        if ch == "$":
            name = _IDENT_CHARS.match(text, pos + 1)
            assert name is not None
            add(_Token("variable", "$" + name.group(), pos))
            return name.end()
        number = _NUMBER.match(text, pos)
        if number and number.group() and (ch.isdigit() or ch in "+-."):
            add(_Token("number", self._number(number.group(), pos), pos))
            return number.end()
        if ch.isalpha() or ch == "_":
            name = _IDENT_CHARS.match(text, pos)
            assert name is not None
            add(_Token("ident", name.group(), pos))
            return name.end()
        raise self.error(pos, f"unexpected {ch!r} in command")

    def _number(self, literal: str, pos: int) -> int | float:
        body = literal.lstrip("+-")
        negative = literal.startswith("-")
        try:
            if body[:2].lower() in ("0x", "0b", "0o"):
                value: int | float = int(body, 0)
            elif body.replace("_", "").isdigit():
                digits = body.replace("_", "")
                # Go reads a leading 0 as octal.
                value = int(digits, 8) if len(digits) > 1 and digits[0] == "0" else int(digits)
            else:
                value = float(body.replace("_", ""))
        except ValueError:
            raise self.error(pos, f"bad number syntax: {literal!r}") from None
        return -value if negative else value


def _error_prefix(text: str, pos: int, name: str) -> str:
    return f"template: {name}:{text.count(chr(10), 0, pos) + 1}: "


# ---------------------------------------------------------------------------------------------
# Parse tree
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Literal:
    value: Any
    kind: str  # string number bool nil


@dataclass(frozen=True, slots=True)
class _Dot:
    pass


@dataclass(frozen=True, slots=True)
class _Field:
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Variable:
    name: str
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Function:
    name: str


@dataclass(frozen=True, slots=True)
class _Chain:
    node: _Pipeline
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Command:
    args: tuple[Any, ...]
    pos: int


@dataclass(frozen=True, slots=True)
class _Pipeline:
    decl: tuple[str, ...]
    is_assign: bool
    commands: tuple[_Command, ...]
    pos: int


@dataclass(frozen=True, slots=True)
class _Action:
    pipe: _Pipeline


@dataclass(frozen=True, slots=True)
class _Control:
    kind: str  # if range with
    pipe: _Pipeline
    body: tuple[Any, ...]
    else_body: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class _LoopJump:
    kind: str  # break continue


_Node = str | _Action | _Control | _LoopJump

_FUNCTION_NAMES = frozenset(
    {
        "html",
        "js",
        "urlquery",
        "and",
        "or",
        "not",
        "len",
        "index",
        "slice",
        "print",
        "printf",
        "println",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
    }
)
_LITERAL_KINDS = (_Literal, _Dot)


class _Parser:
    def __init__(self, text: str, name: str) -> None:
        self.text = text
        self.name = name
        self.tokens = _Lexer(text, name).run()
        self.index = 0
        self.variables: list[str] = ["$"]
        self.range_depth = 0
        self.dot_rebound = 0  # > 0 inside range/with bodies, where dot is no longer the data
        self.root_fields: set[str] = set()

    def error(self, message: str, pos: int | None = None) -> TemplateError:
        if pos is None:
            pos = self.tokens[self.index].pos if self.index < len(self.tokens) else len(self.text)
        return TemplateError(_error_prefix(self.text, pos, self.name) + message)

    def peek(self, skip_space: bool = True) -> _Token | None:
        if skip_space:
            while self.index < len(self.tokens) and self.tokens[self.index].kind == "space":
                self.index += 1
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def next(self, skip_space: bool = True) -> _Token:
        token = self.peek(skip_space)
        if token is None:
            raise self.error("unexpected EOF")
        self.index += 1
        return token

    def expect(self, kind: str, context: str) -> _Token:
        token = self.next()
        if token.kind != kind:
            raise self.error(f"unexpected {self.describe(token)} in {context}", token.pos)
        return token

    @staticmethod
    def describe(token: _Token) -> str:
        if token.kind == "right":
            return f'"{RIGHT_DELIM}"'
        if token.value is None:
            return token.kind
        return f"<{token.value}>" if token.kind != "string" else go_quote(token.value)

    def parse(self) -> tuple[_Node, ...]:
        body, stop = self.parse_list()
        if stop is not None:
            raise self.error(f"unexpected {{{{{stop}}}}}")
        return body

    def parse_list(self) -> tuple[tuple[_Node, ...], str | None]:
        """Parse nodes until `end`/`else` (returned, with the token consumed) or EOF (None)."""
        nodes: list[_Node] = []
        while self.index < len(self.tokens):
            token = self.next(skip_space=False)
            if token.kind == "text":
                nodes.append(token.value)
                continue
            head = self.peek()
            if head is not None and head.kind == "ident" and head.value in _KEYWORDS:
                self.index += 1
                keyword = head.value
                if keyword in ("end", "else"):
                    return tuple(nodes), keyword
                nodes.append(self.parse_keyword(keyword, head.pos))
            else:
                pipe = self.parse_pipeline("command", allow_decl=True)
                self.expect("right", "command")
                nodes.append(_Action(pipe))
        return tuple(nodes), None

    def parse_keyword(self, keyword: str, pos: int) -> _Node:
        if keyword in ("break", "continue"):
            if self.range_depth == 0:
                raise self.error(f"{{{{{keyword}}}}} outside {{{{range}}}}", pos)
            self.expect("right", keyword)
            return _LoopJump(keyword)
        if keyword in ("if", "range", "with"):
            return self.parse_control(keyword)
        raise self.error(f"{{{{{keyword}}}}} is not supported", pos)

    def parse_control(self, kind: str) -> _Control:
        mark = len(self.variables)
        pipe = self.parse_pipeline(kind, allow_decl=True, allow_two=kind == "range")
        self.expect("right", kind)
        loop, rebinds_dot = kind == "range", kind in ("range", "with")
        self.range_depth += loop
        self.dot_rebound += rebinds_dot
        body, stop = self.parse_list()
        self.range_depth -= loop
        self.dot_rebound -= rebinds_dot
        else_body: tuple[_Node, ...] = ()
        if stop == "else":
            chained = self.peek()
            is_chained = chained is not None and chained.kind == "ident" and chained.value == kind
            if kind in ("if", "with") and is_chained:
                # `else if` / `else with` is sugar for a nested control sharing this `end`.
                self.index += 1
                else_body = (self.parse_control(kind),)
                stop = "end"
            else:
                self.expect("right", "else")
                else_body, stop = self.parse_list()
                if stop == "else":
                    raise self.error("expected end; found {{else}}")
                if stop is None:
                    raise self.error("unexpected EOF")
                self.expect("right", "end")
        elif stop == "end":
            self.expect("right", "end")
        else:
            raise self.error("unexpected EOF")
        del self.variables[mark:]
        return _Control(kind, pipe, body, else_body)

    def parse_pipeline(self, context: str, allow_decl: bool, allow_two: bool = False) -> _Pipeline:
        start = self.peek()
        pos = start.pos if start is not None else len(self.text)
        decl: list[str] = []
        is_assign = False
        if allow_decl and start is not None and start.kind == "variable":
            saved = self.index
            self.index += 1
            after = self.peek()
            if after is not None and after.kind in ("declare", "assign"):
                self.index += 1
                decl = [start.value]
                is_assign = after.kind == "assign"
            elif after is not None and after.kind == "comma" and allow_two:
                self.index += 1
                second = self.next()
                op = self.next()
                if second.kind != "variable" or op.kind not in ("declare", "assign"):
                    raise self.error("range can only initialize variables", second.pos)
                decl = [start.value, second.value]
                is_assign = op.kind == "assign"
            else:
                self.index = saved
            for name in decl:
                if is_assign and name not in self.variables:
                    raise self.error(f'undefined variable "{name}"', start.pos)
                if not is_assign:
                    self.variables.append(name)
        commands: list[_Command] = []
        while True:
            token = self.peek()
            if token is None:
                raise self.error("unexpected EOF")
            if token.kind in ("right", "rparen"):
                break
            commands.append(self.parse_command())
            token = self.peek()
            if token is not None and token.kind == "pipe":
                self.index += 1
                following = self.peek()
                if following is not None and following.kind in ("right", "rparen"):
                    raise self.error("missing command after |", following.pos)
        if not commands:
            raise self.error(f"missing value for {context}")
        for stage, command in enumerate(commands[1:], start=1):
            if isinstance(command.args[0], _LITERAL_KINDS):
                raise self.error(f"non executable command in pipeline stage {stage + 1}", command.pos)
        return _Pipeline(tuple(decl), is_assign, tuple(commands), pos)

    def parse_command(self) -> _Command:
        args: list[Any] = []
        pos = self.tokens[self.index].pos
        while True:
            token = self.peek(skip_space=False)
            if token is None:
                raise self.error("unexpected EOF")
            if token.kind == "space":
                self.index += 1
                continue
            if token.kind in ("right", "rparen", "pipe"):
                break
            args.append(self.parse_operand())
            after = self.peek(skip_space=False)
            if after is not None and after.kind not in ("space", "right", "rparen", "pipe"):
                raise self.error(f"missing space? unexpected {self.describe(after)}", after.pos)
        if not args:
            raise self.error("empty command", pos)
        if isinstance(args[0], _Literal) and args[0].kind == "nil":
            raise self.error("nil is not a command", pos)
        return _Command(tuple(args), pos)

    def parse_operand(self) -> Any:
        token = self.next(skip_space=False)
        node: Any
        if token.kind == "ident":
            if token.value in ("true", "false"):
                node = _Literal(token.value == "true", "bool")
            elif token.value == "nil":
                node = _Literal(None, "nil")
            elif token.value in _FUNCTION_NAMES:
                node = _Function(token.value)
            else:
                raise self.error(f'function "{token.value}" not defined', token.pos)
        elif token.kind == "dot":
            node = _Dot()
        elif token.kind == "field":
            node = _Field((token.value, *self.field_names()))
            if not self.dot_rebound:
                self.root_fields.add(token.value)
        elif token.kind == "variable":
            if token.value not in self.variables:
                raise self.error(f'undefined variable "{token.value}"', token.pos)
            node = _Variable(token.value, self.field_names())
            if node.name == "$" and node.names:
                self.root_fields.add(node.names[0])
        elif token.kind == "string":
            node = _Literal(token.value, "string")
        elif token.kind == "number":
            node = _Literal(token.value, "number")
        elif token.kind == "lparen":
            pipe = self.parse_pipeline("parenthesized pipeline", allow_decl=False)
            self.expect("rparen", "parenthesized pipeline")
            node = _Chain(pipe, self.field_names())
        else:
            raise self.error(f"unexpected {self.describe(token)} in operand", token.pos)
        return node

    def field_names(self) -> tuple[str, ...]:
        names: list[str] = []
        while True:
            token = self.peek(skip_space=False)
            if token is None or token.kind != "field":
                return tuple(names)
            names.append(token.value)
            self.index += 1


# ---------------------------------------------------------------------------------------------
# Execution
# ---------------------------------------------------------------------------------------------


class _BreakLoop(Exception):
    pass


class _ContinueLoop(Exception):
    pass


_NO_FINAL: Any = object()


def truth(value: Any) -> bool:
    """Go template truthiness: false, 0, nil, missing and empty strings/slices/maps are false."""
    if value is None or value is MISSING:
        return False
    if isinstance(value, GoStruct):
        return True
    if isinstance(value, bool | int | float):
        return bool(value)
    if isinstance(value, str | list | tuple | Mapping):
        return len(value) > 0
    return True


def _basic_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if value is None or value is MISSING:
        return "nil"
    return "other"


def _eq(first: Any, *others: Any) -> bool:
    if not others:
        raise TemplateExecError("missing argument for comparison")
    kind = _basic_kind(first)
    for other in others:
        other_kind = _basic_kind(other)
        if kind == "other" or other_kind == "other":
            raise TemplateExecError("non-comparable type")
        if kind != other_kind:
            if kind == "nil" or other_kind == "nil":
                continue
            raise TemplateExecError("incompatible types for comparison")
        if first == other:
            return True
    return False


def _less(first: Any, second: Any) -> bool:
    kind, other_kind = _basic_kind(first), _basic_kind(second)
    if kind not in ("int", "float", "string") or other_kind not in ("int", "float", "string"):
        raise TemplateExecError("invalid type for comparison")
    if kind != other_kind:
        raise TemplateExecError("incompatible types for comparison")
    return bool(first < second)


def _len(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, list | tuple | Mapping) and not isinstance(value, GoStruct):
        return len(value)
    raise TemplateExecError(f"len of type {go_type_name(value)}")


def _index(item: Any, *indexes: Any) -> Any:
    if item is None or item is MISSING:
        raise TemplateExecError("index of untyped nil")
    for key in indexes:
        if isinstance(item, Mapping) and not isinstance(item, GoStruct):
            if not isinstance(key, str):
                raise TemplateExecError(f"value has type {go_type_name(key)}; should be string")
            # Go returns the zero value of the element type (our maps hold strings) for a missing key.
            item = item.get(key, "")
        elif isinstance(item, list | tuple | str):
            if not isinstance(key, int) or isinstance(key, bool):
                raise TemplateExecError(f"cannot index slice/array with type {go_type_name(key)}")
            sequence = item.encode() if isinstance(item, str) else item
            if not 0 <= key < len(sequence):
                raise TemplateExecError(f"index out of range: {key}")
            item = sequence[key]
        else:
            raise TemplateExecError(f"can't index item of type {go_type_name(item)}")
    return item


def _slice(item: Any, *bounds: Any) -> Any:
    if not isinstance(item, list | tuple | str):
        raise TemplateExecError(f"can't slice item of type {go_type_name(item)}")
    if len(bounds) > 2:
        raise TemplateExecError("too many slice indexes")
    length = len(item.encode()) if isinstance(item, str) else len(item)
    low = bounds[0] if bounds else 0
    high = bounds[1] if len(bounds) > 1 else length
    if not all(isinstance(b, int) and not isinstance(b, bool) for b in (low, high)):
        raise TemplateExecError("slice indexes must be integers")
    if not 0 <= low <= high <= length:
        message = f"invalid slice index: {low} > {high}" if low > high else "index out of range"
        raise TemplateExecError(message)
    if isinstance(item, str):
        return item.encode()[low:high].decode(errors="replace")
    return list(item[low:high])


_HTML_ESCAPES = str.maketrans(
    {"<": "&lt;", ">": "&gt;", "&": "&amp;", "'": "&#39;", '"': "&#34;", "\x00": "\ufffd"}
)
_JS_ESCAPES = {
    "\\": "\\\\",
    "'": "\\'",
    '"': '\\"',
    "<": "\\u003C",
    ">": "\\u003E",
    "&": "\\u0026",
    "=": "\\u003D",
}


def _js_escape(text: str) -> str:
    """Go's `template.JSEscapeString`."""
    out = []
    for ch in text:
        if ch in _JS_ESCAPES:
            out.append(_JS_ESCAPES[ch])
        elif ch < " " or (not ch.isascii() and not ch.isprintable()):
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return "".join(out)


_ESCAPERS: dict[str, Callable[[str], str]] = {
    "html": lambda text: text.translate(_HTML_ESCAPES),
    "js": _js_escape,
    # Go's url.QueryEscape: only letters, digits and `-_.~` stay; space becomes `+`.
    "urlquery": lambda text: urllib.parse.quote_plus(text, safe=""),
}


def _arity(name: str, args: Sequence[Any], want: int) -> None:
    if len(args) != want:
        raise TemplateExecError(f"wrong number of args for {name}: want {want} got {len(args)}")


def _call(name: str, args: list[Any]) -> Any:
    if name == "not":
        _arity(name, args, 1)
        return not truth(args[0])
    if name == "len":
        _arity(name, args, 1)
        return _len(args[0])
    if name == "index":
        if not args:
            raise TemplateExecError("wrong number of args for index: want at least 1 got 0")
        return _index(args[0], *args[1:])
    if name == "slice":
        if not args:
            raise TemplateExecError("wrong number of args for slice: want at least 1 got 0")
        return _slice(args[0], *args[1:])
    if name in _ESCAPERS:
        # Go's escapers take one string as is, otherwise fmt.Sprint of all arguments.
        text = args[0] if len(args) == 1 and isinstance(args[0], str) else sprint(args)
        return _ESCAPERS[name](text)
    if name == "print":
        return sprint(args)
    if name == "println":
        return " ".join(fmt_value(a) for a in args) + "\n"
    if name == "printf":
        if not args or not isinstance(args[0], str):
            raise TemplateExecError("wrong type for value; expected string")
        return sprintf(args[0], args[1:])
    if name == "eq":
        return _eq(*args) if args else _eq(None)
    if name == "ne":
        _arity(name, args, 2)
        return not _eq(args[0], args[1])
    _arity(name, args, 2)
    if name == "lt":
        return _less(args[0], args[1])
    if name == "le":
        return _less(args[0], args[1]) or _eq(args[0], args[1])
    if name == "gt":
        return not (_less(args[0], args[1]) or _eq(args[0], args[1]))
    return not _less(args[0], args[1])  # ge


def _field(value: Any, name: str) -> Any:
    if isinstance(value, GoStruct):
        if name not in value.fields:
            raise TemplateExecError(f"can't evaluate field {name} in type {value.type_name}")
        return value.fields[name]
    if isinstance(value, Mapping):
        return value.get(name, MISSING)
    if value is None or value is MISSING:
        return MISSING
    raise TemplateExecError(f"can't evaluate field {name} in type {go_type_name(value)}")


@dataclass
class _State:
    template: Template
    out: list[str] = field(default_factory=list)
    variables: list[tuple[str, Any]] = field(default_factory=list)

    def error(self, pos: int, message: str) -> TemplateExecError:
        prefix = _error_prefix(self.template.text, pos, self.template.name)
        return TemplateExecError(f"{prefix}executing: {message}")

    def lookup(self, name: str) -> Any:
        for var_name, value in reversed(self.variables):
            if var_name == name:
                return value
        raise TemplateExecError(f"undefined variable: {name}")

    def assign(self, name: str, value: Any) -> None:
        for i in range(len(self.variables) - 1, -1, -1):
            if self.variables[i][0] == name:
                self.variables[i] = (name, value)
                return
        raise TemplateExecError(f"undefined variable: {name}")

    def walk(self, nodes: Sequence[_Node], dot: Any) -> None:
        for node in nodes:
            if isinstance(node, str):
                self.out.append(node)
            elif isinstance(node, _Action):
                value = self.pipeline(node.pipe, dot)
                if not node.pipe.decl:
                    self.out.append(fmt_value(value))
            elif isinstance(node, _Control):
                self.control(node, dot)
            elif node.kind == "break":
                raise _BreakLoop
            else:
                raise _ContinueLoop

    def control(self, node: _Control, dot: Any) -> None:
        mark = len(self.variables)
        try:
            if node.kind == "range":
                self.range(node, dot)
                return
            value = self.pipeline(node.pipe, dot, declare=True)
            if truth(value):
                self.walk(node.body, value if node.kind == "with" else dot)
            else:
                self.walk(node.else_body, dot)
        finally:
            del self.variables[mark:]

    def range(self, node: _Control, dot: Any) -> None:
        value = self.pipeline(node.pipe, dot, declare=False)
        items: Iterator[tuple[Any, Any]]
        if value is None or value is MISSING:
            items = iter(())
        elif isinstance(value, Mapping) and not isinstance(value, GoStruct):
            items = ((k, value[k]) for k in sorted(value))
        elif isinstance(value, list | tuple):
            items = enumerate(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            items = ((i, i) for i in range(value))
        else:
            raise self.error(node.pipe.pos, f"range can't iterate over {fmt_value(value)}")
        ran = False
        mark = len(self.variables)
        for key, element in items:
            ran = True
            del self.variables[mark:]
            if len(node.pipe.decl) == 1:
                self.variables.append((node.pipe.decl[0], element))
            elif len(node.pipe.decl) == 2:
                self.variables.append((node.pipe.decl[0], key))
                self.variables.append((node.pipe.decl[1], element))
            try:
                self.walk(node.body, element)
            except _BreakLoop:
                break
            except _ContinueLoop:
                continue
        if not ran:
            self.walk(node.else_body, dot)

    def pipeline(self, pipe: _Pipeline, dot: Any, declare: bool = True) -> Any:
        value = _NO_FINAL
        for command in pipe.commands:
            try:
                value = self.command(command, dot, value)
            except TemplateExecError as exc:
                if str(exc).startswith("template: "):
                    raise
                raise self.error(command.pos, str(exc)) from None
        if declare:
            for name in pipe.decl:
                if pipe.is_assign:
                    self.assign(name, value)
                else:
                    self.variables.append((name, value))
        return value

    def command(self, command: _Command, dot: Any, final: Any) -> Any:
        first = command.args[0]
        if isinstance(first, _Function):
            if first.name in ("and", "or"):
                return self.and_or(first.name, command.args[1:], dot, final)
            args = [self.argument(a, dot) for a in command.args[1:]]
            if final is not _NO_FINAL:
                args.append(final)
            return _call(first.name, [None if a is MISSING else a for a in args])
        if len(command.args) > 1 or final is not _NO_FINAL:
            raise TemplateExecError(f"can't give argument to non-function {self.describe(first)}")
        return self.argument(first, dot)

    def and_or(self, name: str, nodes: Sequence[Any], dot: Any, final: Any) -> Any:
        thunks: list[Callable[[], Any]] = [partial(self.argument, n, dot) for n in nodes]
        if final is not _NO_FINAL:
            thunks.append(lambda: final)
        if not thunks:
            raise TemplateExecError(f"wrong number of args for {name}: want at least 1 got 0")
        value: Any = None
        for thunk in thunks:
            value = thunk()
            if truth(value) != (name == "and"):
                return value
        return value

    def argument(self, node: Any, dot: Any) -> Any:
        if isinstance(node, _Literal):
            return node.value
        if isinstance(node, _Dot):
            return dot
        if isinstance(node, _Function):
            return self.command(_Command((node,), 0), dot, _NO_FINAL)
        if isinstance(node, _Field):
            return self.fields(dot, node.names)
        if isinstance(node, _Variable):
            return self.fields(self.lookup(node.name), node.names)
        value = self.pipeline(node.node, dot, declare=False)
        return self.fields(value, node.names)

    @staticmethod
    def fields(value: Any, names: Sequence[str]) -> Any:
        for name in names:
            value = _field(value, name)
        return value

    @staticmethod
    def describe(node: Any) -> str:
        if isinstance(node, _Field):
            return "." + ".".join(node.names)
        if isinstance(node, _Variable):
            return node.name + "".join("." + n for n in node.names)
        if isinstance(node, _Literal):
            return fmt_value(node.value)
        return "."


# A compiled step: text, the field path of a top-level `<<.A.B>>` (read straight from the data), or a
# node left to the interpreter.
_Step = str | tuple[str, ...] | _Action | _Control | _LoopJump


def _compile(nodes: Sequence[_Node]) -> tuple[_Step, ...]:
    """The steps of a template's top level. A metricsQuery is text and plain fields (`<<.Series>>`,
    `<<.LabelMatchers>>`, `<<.GroupBy>>`) in practice: those become text and field paths, so rendering
    one is a few dictionary reads and a join; anything else runs through the interpreter."""
    steps: list[_Step] = []
    for node in nodes:
        step: _Step = node
        if isinstance(node, _Action) and not node.pipe.decl and len(node.pipe.commands) == 1:
            args = node.pipe.commands[0].args
            if len(args) == 1 and isinstance(args[0], _Field):
                step = args[0].names
        if isinstance(step, str) and steps and isinstance(steps[-1], str):
            steps[-1] += step  # text around a comment
        else:
            steps.append(step)
    return tuple(steps)


class Template:
    """A parsed template; `render(data)` executes it with `data` as dot (and `$`)."""

    def __init__(self, text: str, name: str = "") -> None:
        self.text = text
        self.name = name
        parser = _Parser(text, name)
        self._nodes = parser.parse()
        self._steps = _compile(self._nodes)
        # First field names looked up on the data itself (`.X` outside range/with, `$.X`): lets
        # callers reject unknown fields at load time instead of at execution.
        self.root_fields = frozenset(parser.root_fields)

    def render(self, data: Any) -> str:
        out: list[str] = []
        state: _State | None = None  # made for the first interpreted step; its variables persist
        for step in self._steps:
            if isinstance(step, str):
                out.append(step)
            elif isinstance(step, tuple):
                value = data
                try:
                    for name in step:
                        value = _field(value, name)
                except TemplateExecError:
                    return self._interpret(data)  # raises the error, with Go's position prefix
                out.append(value if type(value) is str else fmt_value(value))
            else:
                if state is None:
                    state = _State(self, out, [("$", data)])
                state.walk((step,), data)
        return "".join(out)

    def _interpret(self, data: Any) -> str:
        """The whole template through the interpreter (the reference `render` agrees with)."""
        state = _State(self, variables=[("$", data)])
        state.walk(self._nodes, data)
        return "".join(state.out)

    def __repr__(self) -> str:
        return f"Template({self.text!r})"


def parse(text: str, name: str = "") -> Template:
    """Parse `text` (delimiters `<<` `>>`); raises `TemplateError` with Go's message shape."""
    return Template(text, name)
