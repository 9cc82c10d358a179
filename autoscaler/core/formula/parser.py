"""Parsing: expr-lang's precedence climbing over the subset, then the type check."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator

from autoscaler.core.formula.lexer import Token, check_limits, tokenize
from autoscaler.core.formula.tree import (
    BINARY,
    CHAINED,
    FUNCTIONS,
    INT64_MAX,
    KEYWORDS,
    MAX_RECURSION,
    UNARY,
    WORD_OPERATORS,
    Call,
    Cond,
    Fold,
    Formula,
    FormulaError,
    Name,
    Node,
    Num,
    Step,
    Unary,
)
from autoscaler.core.formula.typecheck import BOOL, TypeRefusal, type_of


def number(token: Token) -> Num:
    digits = token.text.replace("_", "")
    if "." in digits or "e" in digits or "E" in digits:
        try:
            value = float(digits)
        except ValueError:
            raise FormulaError("invalid float literal", token.text, token.pos) from None
        if math.isinf(value):
            raise FormulaError("float literal is too large", token.text, token.pos)
        return Num(value, token.pos)
    value_int = int(digits, 10)
    if value_int > INT64_MAX:
        raise FormulaError("integer literal is too large", token.text, token.pos)
    return Num(value_int, token.pos)


class _Parser:
    """expr-lang's precedence climbing (parser.go parseExpression/parsePrimary/parseConditional), restricted
    to the subset."""

    def __init__(self, tokens: Iterator[Token], known: Collection[str] | None) -> None:
        self.tokens = tokens
        self.current = next(tokens)
        self.known = known
        self.names: set[str] = set()
        self.recursion = 0

    def advance(self) -> Token:
        token = self.current
        if token.kind != "end":
            self.current = next(self.tokens)
        return token

    def expect(self, text: str) -> Token:
        token = self.current
        if token.kind == "end":
            raise FormulaError(f"expected {text!r} before the end of the formula", "", token.pos)
        if token.kind != "op" or token.text != text:
            raise FormulaError(f"expected {text!r}, found", token.text, token.pos)
        return self.advance()

    def unexpected(self, token: Token) -> FormulaError:
        if token.kind == "end":
            return FormulaError("unexpected end of formula", "", token.pos)
        return FormulaError("unexpected token", token.text, token.pos)

    def expression(self, precedence: int) -> Node:
        self.recursion += 1
        if self.recursion > MAX_RECURSION:
            raise FormulaError("formula nested too deeply", self.current.text, self.current.pos)
        first = self.primary()
        steps: list[Step] = []
        previous = ""
        while self.current.kind == "op":
            token = self.current
            op = WORD_OPERATORS.get(token.text, token.text)
            if op not in BINARY or BINARY[op][0] < precedence:
                break
            self.advance()
            if previous == "??" and op != "??":
                raise FormulaError(
                    "operator and coalesce expressions (??) cannot be mixed; add parentheses",
                    token.text,
                    token.pos,
                )
            op_precedence, right_assoc = BINARY[op]
            right = self.expression(op_precedence if right_assoc else op_precedence + 1)
            steps.append(Step(op, right, token.pos))
            while op in CHAINED and self.current.kind == "op" and self.current.text in CHAINED:
                token = self.advance()
                right = self.expression(op_precedence + 1)
                steps.append(Step(token.text, right, token.pos, chained=True))
            previous = op
        node: Node = Fold(first, tuple(steps)) if steps else first
        if precedence == 0:
            node = self.conditional(node)
        self.recursion -= 1
        return node

    def conditional(self, node: Node) -> Node:
        while self.current.kind == "op" and self.current.text == "?":
            question = self.advance()
            then = self.expression(0)
            self.expect(":")
            other = self.expression(0)
            node = Cond(node, then, other, question.pos)
        return node

    def primary(self) -> Node:
        token = self.current
        op = WORD_OPERATORS.get(token.text, token.text) if token.kind == "op" else ""
        if op in UNARY:
            self.advance()
            return Unary(op, self.expression(UNARY[op]), token.pos)
        if op == "(":
            self.advance()
            inner = self.expression(0)
            self.expect(")")
            return inner
        if token.kind == "num":
            self.advance()
            return number(token)
        if token.kind == "name":
            return self.name_or_call()
        raise self.unexpected(token)

    def name_or_call(self) -> Node:
        token = self.advance()
        if token.text in KEYWORDS:
            raise FormulaError("unsupported keyword", token.text, token.pos)
        if self.current.kind == "op" and self.current.text == "(":
            if token.text not in FUNCTIONS:
                raise FormulaError("unsupported function", token.text, token.pos)
            return self.call(token)
        if self.known is not None and token.text not in self.known:
            raise FormulaError("unknown input name", token.text, token.pos)
        self.names.add(token.text)
        return Name(token.text, token.pos)

    def call(self, func: Token) -> Node:
        self.advance()  # "("
        args: list[Node] = []
        while not (self.current.kind == "op" and self.current.text == ")"):
            if args:
                self.expect(",")
            args.append(self.expression(0))
        close = self.advance()
        if func.text in ("min", "max"):
            if not args:
                raise FormulaError(f"not enough arguments to call {func.text}", close.text, close.pos)
        elif len(args) != 1:
            raise FormulaError(f"{func.text} takes exactly 1 argument, got {len(args)}", func.text, func.pos)
        return Call(func.text, tuple(args), func.pos)


def parse_formula(text: str, known: Collection[str] | None = None) -> Formula:
    """Parse and type-check ``text``; with ``known``, an input name outside it is refused."""
    check_limits(text)
    parser = _Parser(tokenize(text), known)
    tree = parser.expression(0)
    if parser.current.kind != "end":
        raise parser.unexpected(parser.current)
    try:
        if type_of(tree) == BOOL:
            # The last operator applied made the result a boolean.
            last = tree.steps[-1].pos if isinstance(tree, Fold) else tree.pos
            raise TypeRefusal("the formula's result is a boolean, not a number", last)
    except TypeRefusal as refusal:
        written = next(tokenize(text[refusal.pos :])).text
        raise FormulaError(refusal.message, written, refusal.pos) from None
    return Formula(text, frozenset(parser.names), tree)
