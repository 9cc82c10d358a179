"""Fuzzing the scalingModifiers formula language, which a tenant writes and the autoscaler runs.

Two properties. Token soup (the language's tokens, refused ones and arbitrary characters, in any order) is
either parsed or refused with a FormulaError whose token stands at its position; a parsed soup evaluates to a
finite float or raises ValueError/FormulaInputMissing, never anything else (no ZeroDivisionError,
OverflowError, RecursionError, TypeError). Generated well-typed expressions, printed with only the
parentheses expr-lang's precedence needs, evaluate to what an independent interpreter over the generated tree
computes (Go semantics: int64 wrapping via ctypes, IEEE float64 via numpy, math.Round via Decimal; only
``**`` reuses the module's port of Go's math.Pow, pinned by its own tests), missing inputs and non-finite
results included. `make fuzz` runs 100,000 examples per campaign (SURGE_FUZZ=1); the
default suite runs a small sample.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from functools import cache
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from autoscaler.core.formula import (
    MAX_LENGTH,
    FormulaError,
    FormulaInputMissing,
    evaluate,
    go_pow,
    parse_formula,
)

SMALL_SAMPLE = settings(max_examples=300)  # the default suite's share; `make fuzz` runs the marked ones
NAMES = ("a", "b", "c", "q_1")

# -- token soup

VOCABULARY = (
    *NAMES,
    *("0", "1", "7", "2.5", "1e3", ".5", "1_0", "9223372036854775807", "9223372036854775808", "1e400"),
    *("+", "-", "*", "/", "%", "**", "^", "==", "!=", "<", "<=", ">", ">=", "&&", "||", "!"),
    *("and", "or", "not", "?", ":", "??", "(", ")", ","),
    *("min", "max", "abs", "ceil", "floor", "round"),
    # refused: strings, other functions, member access, let, pipes, closures, arrays, maps, literals
    *('"s"', "'s'", "len", "float", ".", "?.", "[", "]", "{", "}", "let", "=", ";", "|", "#", "in", "true"),
    *("nil", "0x1F", "0b1", "1e", "2x", "//", "&", "$", "é", "\x00", "if", "else", "..", "::"),
)
soups = st.lists(
    st.one_of(st.sampled_from(VOCABULARY), st.text(max_size=3)),
    max_size=40,
).flatmap(lambda words: st.sampled_from(["", " "]).map(lambda sep: sep.join(words)))
inputs = st.dictionaries(
    st.sampled_from(NAMES),
    st.one_of(st.none(), st.floats(), st.integers(-1000, 1000).map(float)),
)


def check_soup(text: str, values: dict[str, float | None]) -> None:
    try:
        formula = parse_formula(text)
    except FormulaError as error:
        assert 0 <= error.position <= len(text)
        assert text[error.position : error.position + len(error.token)] == error.token
        assert f"at position {error.position}" in str(error)
        event("refused")
        return
    event("parsed")
    try:
        result = evaluate(formula, values)
    except FormulaInputMissing as missing:
        assert missing.name in formula.names
        return
    except ValueError as error:
        assert type(error) is ValueError
        return
    assert isinstance(result, float) and math.isfinite(result)


@pytest.mark.fuzz
@given(text=soups, values=inputs)
def test_fuzz_token_soup(text: str, values: dict[str, float | None]) -> None:
    check_soup(text, values)


@SMALL_SAMPLE
@given(text=soups, values=inputs)
def test_token_soup_sample(text: str, values: dict[str, float | None]) -> None:
    check_soup(text, values)


@SMALL_SAMPLE
@given(text=st.text(max_size=80), values=inputs)
def test_arbitrary_text_sample(text: str, values: dict[str, float | None]) -> None:
    check_soup(text, values)


# -- generated expressions and a reference interpreter
#
# A tree is a tuple: ("num", int | float), ("name", str), ("neg" | "pos" | "not", x), ("bin", op, l, r)
# (arithmetic and ??), ("cmp", op, l, r), ("chain", first, ((op, x), ...)), ("logic", written op, l, r),
# ("cond", c, a, b), ("call", func, (args...)).

ARITHMETIC = ("+", "-", "*", "/", "**", "^")
COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
ORDERINGS = ("<", "<=", ">", ">=")
# expr-lang parser/operator/operator.go, written down again here: precedence, right-associative.
TABLE = {"??": (500, False), "**": (100, True), "^": (100, True), "*": (60, False), "/": (60, False)}
TABLE |= {"%": (60, False), "+": (30, False), "-": (30, False), "&&": (15, False), "||": (10, False)}
TABLE |= {op: (20, False) for op in COMPARISONS}
WORDS = {"and": "&&", "or": "||"}

Tree = tuple[Any, ...]

int_literals = st.one_of(st.integers(0, 20), st.integers(0, 2**63 - 1)).map(lambda v: ("num", v))
leaves = st.one_of(
    int_literals,
    st.floats(0, 1e300, allow_nan=False).map(lambda v: ("num", v)),
    st.sampled_from(NAMES).map(lambda n: ("name", n)),
)


@cache
def ints(depth: int) -> st.SearchStrategy[Tree]:
    """Trees whose value is always an int (no inputs): the operands % accepts."""
    if depth == 0:
        return int_literals
    sub = ints(depth - 1)
    return st.one_of(
        sub,
        st.tuples(st.just("neg"), sub),
        st.tuples(st.just("bin"), st.sampled_from(("+", "-", "*", "%", "??")), sub, sub),
        st.tuples(st.just("call"), st.just("abs"), st.tuples(sub)),
        st.tuples(st.just("call"), st.sampled_from(("min", "max")), st.lists(sub, min_size=1, max_size=3)),
    )


@cache
def nums(depth: int) -> st.SearchStrategy[Tree]:
    if depth == 0:
        return leaves
    sub = nums(depth - 1)
    return st.one_of(
        sub,
        ints(depth),
        st.tuples(st.sampled_from(("neg", "pos")), sub),
        st.tuples(st.just("bin"), st.sampled_from(ARITHMETIC), sub, sub),
        st.tuples(st.just("bin"), st.just("%"), ints(depth - 1), ints(depth - 1)),
        st.tuples(st.just("bin"), st.just("??"), sub, sub),
        st.tuples(st.just("cond"), bools(depth - 1), sub, sub),
        st.tuples(st.just("call"), st.sampled_from(("abs", "ceil", "floor", "round")), st.tuples(sub)),
        st.tuples(st.just("call"), st.sampled_from(("min", "max")), st.lists(sub, min_size=1, max_size=3)),
    )


@cache
def bools(depth: int) -> st.SearchStrategy[Tree]:
    sub = nums(depth)
    comparisons = st.one_of(
        st.tuples(st.just("cmp"), st.sampled_from(COMPARISONS), sub, sub),
        st.tuples(
            st.just("chain"),
            sub,
            st.lists(st.tuples(st.sampled_from(ORDERINGS), sub), min_size=2, max_size=3).map(tuple),
        ),
    )
    if depth == 0:
        return comparisons
    deeper = bools(depth - 1)
    return st.one_of(
        comparisons,
        st.tuples(st.just("not"), deeper),
        st.tuples(st.just("logic"), st.sampled_from(("&&", "||", "and", "or")), deeper, deeper),
    )


# -- printing with the fewest parentheses expr-lang needs


@dataclass(frozen=True)
class Printed:
    text: str
    precedence: int  # how tightly the top of the text binds: 1000 for atoms, 0 for a ternary
    coalesce: bool = False  # the top is ??: no other operator may follow it unparenthesised


def paren(printed: Printed, needed: bool) -> str:
    return f"({printed.text})" if needed else printed.text


def show(tree: Tree) -> Printed:
    kind = tree[0]
    if kind == "num":
        return Printed(str(tree[1]) if isinstance(tree[1], int) else repr(tree[1]), 1000)
    if kind == "name":
        return Printed(tree[1], 1000)
    if kind in ("neg", "pos", "not"):
        precedence = 50 if kind == "not" else 90
        operand = show(tree[1])
        sign = {"neg": "-", "pos": "+", "not": "!"}[kind]
        return Printed(sign + paren(operand, operand.precedence < precedence), precedence)
    if kind == "call":
        return Printed(f"{tree[1]}({', '.join(show(arg).text for arg in tree[2])})", 1000)
    if kind == "cond":
        return Printed(f"{show(tree[1]).text} ? {show(tree[2]).text} : {show(tree[3]).text}", 0)
    if kind == "chain":
        first = show(tree[1])
        text = paren(first, first.precedence < 20 or first.coalesce)
        for op, operand in tree[2]:
            printed = show(operand)
            text += f" {op} {paren(printed, printed.precedence <= 20)}"
        return Printed(text, 20)
    op = tree[1]
    precedence, right_assoc = TABLE[WORDS.get(op, op)]
    left, right = show(tree[2]), show(tree[3])
    left_needs = left.precedence < precedence or (right_assoc and left.precedence == precedence)
    left_needs = left_needs or (left.coalesce and op != "??")
    right_needs = right.precedence < precedence or (not right_assoc and right.precedence == precedence)
    text = f"{paren(left, left_needs)} {op} {paren(right, right_needs)}"
    return Printed(text, precedence, coalesce=op == "??")


# -- the reference interpreter


class Missing(Exception):
    def __init__(self, name: str) -> None:
        self.name = name


class Failed(Exception):
    pass


@dataclass(frozen=True)
class Nil:
    name: str


def present(v: Any) -> Any:
    if isinstance(v, Nil):
        raise Missing(v.name)
    return v


def wrap(v: int) -> int:
    return ctypes.c_int64(v).value


def both_int(a: Any, b: Any) -> bool:
    return isinstance(a, int) and isinstance(b, int)


def go_round(x: float) -> float:
    if not math.isfinite(x):
        return x
    rounded = float(Decimal(x).to_integral_value(rounding=ROUND_HALF_UP))
    return rounded if rounded != 0 else math.copysign(0.0, x)


def compare(op: str, a: Any, b: Any) -> bool:
    a, b = present(a), present(b)
    if not both_int(a, b):
        a, b = float(a), float(b)
    return bool({"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op])


def arithmetic(op: str, a: Any, b: Any) -> Any:
    a, b = present(a), present(b)
    if op == "%":
        if b == 0:
            raise Failed
        return 0 if b == -1 else int(np.fmod(np.int64(a), np.int64(b)))
    if op in ("+", "-", "*") and both_int(a, b):
        return wrap(a + b if op == "+" else a - b if op == "-" else a * b)
    with np.errstate(all="ignore"):
        x, y = np.float64(a), np.float64(b)
        result = {"+": x + y, "-": x - y, "*": x * y, "/": x / y}.get(op)
        return go_pow(float(x), float(y)) if result is None else float(result)


def reference(tree: Tree, values: dict[str, float | None]) -> Any:
    kind = tree[0]
    if kind == "num":
        return tree[1]
    if kind == "name":
        v = values.get(tree[1])
        return Nil(tree[1]) if v is None else v
    if kind == "neg":
        v = present(reference(tree[1], values))
        return wrap(-v) if isinstance(v, int) else -v
    if kind == "pos":
        return present(reference(tree[1], values))
    if kind == "not":
        return not present(reference(tree[1], values))
    if kind == "cond":
        return reference(tree[2] if present(reference(tree[1], values)) else tree[3], values)
    if kind == "call":
        args = [present(reference(arg, values)) for arg in tree[2]]
        return call(tree[1], args)
    if kind == "chain":
        previous = reference(tree[1], values)
        for op, operand in tree[2]:
            current = reference(operand, values)
            if not compare(op, previous, current):
                return False
            previous = current
        return True
    written: str = tree[1]
    op = WORDS.get(written, written)
    if op in ("&&", "||"):
        left = present(reference(tree[2], values))
        if left == (op == "||"):
            return left
        return present(reference(tree[3], values))
    if op == "??":
        left = reference(tree[2], values)
        return reference(tree[3], values) if isinstance(left, Nil) else left
    left, right = reference(tree[2], values), reference(tree[3], values)
    if kind == "cmp":
        return compare(op, left, right)
    return arithmetic(op, left, right)


def call(func: str, args: list[Any]) -> Any:
    if func in ("min", "max"):
        best = args[0]
        for arg in args[1:]:
            a, b = (best, arg) if both_int(best, arg) else (float(best), float(arg))
            if (a < b) if func == "max" else (b < a):
                best = arg
        return best
    (x,) = args
    if func == "abs":
        return (wrap(-x) if isinstance(x, int) else -x) if x < 0 else x
    if isinstance(x, int):
        return float(x)
    if func == "round":
        return go_round(x)
    return float(np.ceil(x) if func == "ceil" else np.floor(x))


def outcome(tree: Tree, values: dict[str, float | None]) -> tuple[str, Any]:
    try:
        result = present(reference(tree, values))
    except Missing as missing:
        return ("missing", missing.name)
    except Failed:
        return ("error", None)
    result = float(result)
    return ("value", result) if math.isfinite(result) else ("error", None)


def check_expression(tree: Tree, values: dict[str, float | None]) -> None:
    text = show(tree).text
    assume(len(text) <= MAX_LENGTH)
    formula = parse_formula(text)
    expected = outcome(tree, values)
    event(expected[0])
    if expected[0] == "missing":
        with pytest.raises(FormulaInputMissing) as caught:
            evaluate(formula, values)
        assert caught.value.name == expected[1]
    elif expected[0] == "error":
        with pytest.raises(ValueError) as failed:
            evaluate(formula, values)
        assert type(failed.value) is ValueError
    else:
        got = evaluate(formula, values)
        assert got == expected[1] and math.copysign(1, got) == math.copysign(1, expected[1]), text


expressions = st.integers(1, 4).flatmap(nums)


@pytest.mark.fuzz
@given(tree=expressions, values=inputs)
def test_fuzz_expressions_match_the_reference(tree: Tree, values: dict[str, float | None]) -> None:
    check_expression(tree, values)


@SMALL_SAMPLE
@given(tree=expressions, values=inputs)
def test_expressions_match_the_reference_sample(tree: Tree, values: dict[str, float | None]) -> None:
    check_expression(tree, values)


def test_printer_needs_parentheses_only_where_expr_does() -> None:
    # The printer's own rules, pinned on the cases where expr-lang's grammar is least obvious.
    cases = {
        ("bin", "-", ("num", 2), ("bin", "-", ("num", 3), ("num", 4))): "2 - (3 - 4)",
        ("bin", "**", ("num", 2), ("bin", "**", ("num", 3), ("num", 2))): "2 ** 3 ** 2",
        ("bin", "**", ("neg", ("num", 2)), ("num", 2)): "(-2) ** 2",
        ("neg", ("bin", "**", ("num", 2), ("num", 2))): "-2 ** 2",
        ("bin", "+", ("bin", "??", ("name", "a"), ("name", "b")), ("name", "c")): "(a ?? b) + c",
        ("bin", "+", ("name", "c"), ("bin", "??", ("name", "a"), ("name", "b"))): "c + a ?? b",
    }
    for tree, text in cases.items():
        assert show(tree).text == text
