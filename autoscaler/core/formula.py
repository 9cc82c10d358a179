"""The formula language of KEDA's ``advanced.scalingModifiers``: a pure parser and evaluator.

KEDA compiles the formula with expr-lang (github.com/expr-lang/expr v1.17.8, KEDA's go.mod) and runs it on a
map of trigger name -> float64 metric value. Surge reads the subset ScaledObjects use, so a converted formula
means what it meant under KEDA. What is copied, and from where:

- Grammar and precedence (expr ``parser/operator/operator.go``, ``parser/parser.go``): ``??`` 500 (binds
  tightest), ``**`` and ``^`` 100 right-associative, unary ``-``/``+`` 90 (so ``-2**2`` is ``-(2**2)``),
  ``* / %`` 60, ``+ -`` 30, comparisons 20, ``&&``/``and`` 15, ``||``/``or`` 10, all left-associative; a
  unary operator's operand is parsed at the operator's own precedence (``!a * b`` is ``!(a * b)``, which the
  type check then refuses). ``a < b < c`` means ``a < b && b < c`` (``parseComparison``; ``==``/``!=`` do
  not chain). ``cond ? a : b`` is parsed only at the top of an expression, its branches are full
  expressions. After ``??``, another binary operator at the same level is an error ("cannot be mixed"), so
  ``a ?? b + c`` is refused while ``c + a ?? b`` is ``c + (a ?? b)``.
- Numbers (expr ``parser/lexer/state.go``): decimal digits with ``_`` separators, an optional fraction and
  exponent, ``.5``; a literal with ``.`` or ``e`` is a float, else an int (int64; too large is an error, as is
  a float literal that overflows). Hex, octal and binary literals are refused (no ScaledObject uses them).
- Types (expr ``checker/checker.go``, the compile KEDA's webhook does with ``expr.Env(map[string]float64)``):
  inputs are floats, ``%`` needs two ints, arithmetic needs numbers, ``&& || !`` and the condition of ``?:``
  need booleans, and a formula whose result is a boolean is refused (KEDA wraps it in ``float(...)``, which
  rejects a bool). Ternary branches of different types make an unknown type, checked when it runs.
- Values (expr ``vm/runtime``, ``builtin/lib.go``): int arithmetic wraps at 64 bits, ``/`` and ``**`` always
  give floats (IEEE: no error on a zero divisor), an int ``%`` by zero is an error, an int meets a float as a
  float; ``min``/``max`` keep the first of equal values and the type of the winner, ``abs`` keeps the type,
  ``ceil``/``floor``/``round`` give floats (``round`` is Go's ``math.Round``: half away from zero); ``**`` is
  Go's ``math.Pow``, ported (see :func:`go_pow`).
  ``&&``, ``||``, ``?:`` and ``??`` evaluate lazily.
- Missing values (KEDA ``pkg/scaling/modifiers/formula.go``): a trigger whose metric failed past the fallback
  threshold, or has no reading, is nil in the map; ``a ?? b`` reads ``b`` only when ``a`` is nil; a formula
  that evaluates to nil takes KEDA's fallback, and any other operation on nil is a runtime error there. Here
  both surface as :class:`FormulaInputMissing` (the integrator maps it to ``spec.fallback``). Unlike expr,
  ``nil == x`` is an error too, not ``false``.

Limits are checked before parsing: 1024 characters and 32 levels of parentheses, because the parser, the
type check and the evaluator are recursive and must stay far from Python's recursion limit. Chains that nest
without parentheses (unary runs, ``**`` chains, nested ternaries) are bounded by a recursion budget while
parsing, and left-associative chains are stored flat (:class:`Fold`), so the tree is never deeper than that.
Evaluation visits each node of the tree at most once per reference (a chained comparison reads its middle
operand twice), so it is bounded by the tree size. The lexer is a hand-written scanner: no regex.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass

MAX_LENGTH = 1024
MAX_DEPTH = 32
# Recursive descent allowed: each level of parentheses may pass a ternary branch and climb through every
# precedence level (|| && == + * ** unary ??) once; unparenthesised chains (- - -x, 2**2**2) share the budget.
MAX_RECURSION = (MAX_DEPTH + 1) * 10

FUNCTIONS = frozenset({"min", "max", "abs", "ceil", "floor", "round"})
# expr keywords and literals that are not part of the subset; they can never be input names.
KEYWORDS = frozenset(
    {"true", "false", "nil", "let", "if", "else", "in", "matches", "contains", "startsWith", "endsWith"}
)
WORD_OPERATORS = {"and": "&&", "or": "||", "not": "!"}
# Binary operators: precedence, right-associative (expr parser/operator/operator.go).
BINARY: dict[str, tuple[int, bool]] = {
    "||": (10, False),
    "&&": (15, False),
    "==": (20, False),
    "!=": (20, False),
    "<": (20, False),
    ">": (20, False),
    "<=": (20, False),
    ">=": (20, False),
    "+": (30, False),
    "-": (30, False),
    "*": (60, False),
    "/": (60, False),
    "%": (60, False),
    "**": (100, True),
    "^": (100, True),
    "??": (500, False),
}
UNARY = {"!": 50, "-": 90, "+": 90}
CHAINED = frozenset({"<", ">", "<=", ">="})
TWO_CHAR = frozenset({"**", "==", "!=", "<=", ">=", "&&", "||", "??"})
ONE_CHAR = frozenset("+-*/%^<>!?:(),")
DIGITS = frozenset("0123456789")
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


class FormulaError(ValueError):
    """A formula Surge cannot read: the offending token and where it starts (0-based character offset)."""

    def __init__(self, message: str, token: str, position: int) -> None:
        super().__init__(f"{message}: {token!r} at position {position}")
        self.token = token
        self.position = position


class FormulaInputMissing(ValueError):
    """An input the formula needed had no value (nil in KEDA)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"formula input {name!r} has no value")
        self.name = name


# -- the tree ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Num:
    value: int | float
    pos: int


@dataclass(frozen=True)
class Name:
    name: str
    pos: int


@dataclass(frozen=True)
class Unary:
    op: str  # "-", "+" or "!" (``not`` is read as "!")
    operand: Node
    pos: int


@dataclass(frozen=True)
class Step:
    """One binary operator applied to the value folded so far: ``acc = acc <op> right``. A ``chained``
    comparison instead compares the previous step's right operand, and-ed onto ``acc`` (``a < b < c``)."""

    op: str  # a key of BINARY; ``and``/``or`` are read as "&&"/"||"
    right: Node
    pos: int
    chained: bool = False


@dataclass(frozen=True)
class Fold:
    """The operators one precedence-climbing loop consumed, left to right. Kept flat so a long
    left-associative chain (``a + b + c + ...``) adds no depth."""

    first: Node
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Cond:
    cond: Node
    then: Node
    other: Node
    pos: int


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple[Node, ...]
    pos: int


Node = Num | Name | Unary | Fold | Cond | Call


@dataclass(frozen=True)
class Formula:
    """A parsed, type-checked formula: its source text, the inputs it reads, and its tree."""

    text: str
    names: frozenset[str]
    tree: Node


# -- lexing --------------------------------------------------------------------------------------------------


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


def _check_limits(text: str) -> None:
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


# -- parsing -------------------------------------------------------------------------------------------------


def _number(token: Token) -> Num:
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
            return _number(token)
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


# -- type check ----------------------------------------------------------------------------------------------

INT, FLOAT, BOOL, ANY = "int", "float", "bool", "any"
NUMERIC = frozenset({INT, FLOAT, ANY})


class _TypeRefusal(Exception):
    """A type error at a position; parse_formula names the token written there (``not`` rather than ``!``)."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


def _type_of(node: Node) -> str:
    """The static type expr's checker gives ``node`` when inputs are float64; refuses what it refuses."""
    if isinstance(node, Num):
        return INT if isinstance(node.value, int) else FLOAT
    if isinstance(node, Name):
        return FLOAT
    if isinstance(node, Unary):
        operand = _type_of(node.operand)
        wanted = (BOOL, ANY) if node.op == "!" else NUMERIC
        if operand not in wanted:
            raise _TypeRefusal(f"invalid operation: {node.op} on {operand}", node.pos)
        return BOOL if node.op == "!" else operand
    if isinstance(node, Fold):
        acc = _type_of(node.first)
        last_right = acc
        for step in node.steps:
            right = _type_of(step.right)
            acc = _step_type(step, last_right if step.chained else acc, right)
            last_right = right
        return acc
    if isinstance(node, Cond):
        cond = _type_of(node.cond)
        if cond not in (BOOL, ANY):
            raise _TypeRefusal(f"non-bool expression ({cond}) used as condition", node.pos)
        then, other = _type_of(node.then), _type_of(node.other)
        return then if then == other else ANY
    args = [_type_of(arg) for arg in node.args]
    for arg in args:
        if arg not in NUMERIC:
            raise _TypeRefusal(f"invalid argument for {node.func} ({arg})", node.pos)
    if node.func in ("ceil", "floor", "round"):
        return FLOAT
    return ANY if ANY in args else args[0]


def _step_type(step: Step, left: str, right: str) -> str:
    op = step.op

    def refuse() -> _TypeRefusal:
        return _TypeRefusal(f"invalid operation: {op} (mismatched types {left} and {right})", step.pos)

    if op == "??":
        return left if left == right else ANY
    if op in ("&&", "||"):
        if left not in (BOOL, ANY) or right not in (BOOL, ANY):
            raise refuse()
        return BOOL
    if op in ("==", "!="):
        if ANY not in (left, right) and (left == BOOL) != (right == BOOL):
            raise refuse()
        return BOOL
    if left not in NUMERIC or right not in NUMERIC or (op == "%" and FLOAT in (left, right)):
        raise refuse()
    if op in CHAINED:
        return BOOL
    if op == "%":
        return INT
    if op in ("/", "**", "^"):
        return FLOAT
    if ANY in (left, right):
        return ANY
    return INT if left == right == INT else FLOAT


def parse_formula(text: str, known: Collection[str] | None = None) -> Formula:
    """Parse and type-check ``text``; with ``known``, an input name outside it is refused."""
    _check_limits(text)
    parser = _Parser(tokenize(text), known)
    tree = parser.expression(0)
    if parser.current.kind != "end":
        raise parser.unexpected(parser.current)
    try:
        if _type_of(tree) == BOOL:
            # The last operator applied made the result a boolean.
            last = tree.steps[-1].pos if isinstance(tree, Fold) else tree.pos
            raise _TypeRefusal("the formula's result is a boolean, not a number", last)
    except _TypeRefusal as refusal:
        written = next(tokenize(text[refusal.pos :])).text
        raise FormulaError(refusal.message, written, refusal.pos) from None
    return Formula(text, frozenset(parser.names), tree)


# -- evaluation ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Nil:
    """A nil value, remembering which input it came from (for the error that names it)."""

    name: str


Value = bool | int | float | _Nil


def _wrap(value: int) -> int:
    """Go int64 arithmetic wraps around."""
    return (value - INT64_MIN) % 2**64 + INT64_MIN


def _present(value: Value) -> bool | int | float:
    if isinstance(value, _Nil):
        raise FormulaInputMissing(value.name)
    return value


def _number_value(value: Value, what: str) -> int | float:
    value = _present(value)
    if isinstance(value, bool):
        raise ValueError(f"invalid operation: {what} on a boolean")
    return value


def _bool_value(value: Value, what: str) -> bool:
    value = _present(value)
    if not isinstance(value, bool):
        raise ValueError(f"invalid operation: {what} on a number")
    return value


def _ldexp(frac: float, exp: int) -> float:
    try:
        return math.ldexp(frac, exp)
    except OverflowError:
        return math.copysign(math.inf, frac)


def _is_odd_int(y: float) -> bool:
    return abs(y) < 2**53 and y.is_integer() and int(y) & 1 == 1


def _pow_special(x: float, y: float) -> float | None:
    """The special cases of Go's ``math.Pow``, in its order; None when none applies."""
    if y == 0 or x == 1:
        return 1.0
    if y == 1:
        return x
    if math.isnan(x) or math.isnan(y):
        return math.nan
    if x == 0:
        odd_negative_zero = math.copysign(1.0, x) < 0 and _is_odd_int(y)
        if y < 0:
            return -math.inf if odd_negative_zero else math.inf
        return x if odd_negative_zero else 0.0
    if math.isinf(y):
        if x == -1:
            return 1.0
        return 0.0 if (abs(x) < 1) == (y > 0) else math.inf
    if math.isinf(x):
        if x < 0:
            return go_pow(1 / x, -y)  # Pow(-0, -y)
        return 0.0 if y < 0 else math.inf
    if y in (0.5, -0.5):
        root = math.sqrt(x) if x >= 0 else math.nan
        return root if y > 0 else 1 / root
    return None


def go_pow(x: float, y: float) -> float:
    """Go's ``math.Pow`` (src/math/pow.go), step for step: an integer exponent by Go's repeated squaring on
    the frexp mantissa (not always the correctly rounded result C's pow gives, so copied rather than
    approximated); a fractional part by ``Exp(yf * Log(x))``, where Python's exp and log stand in for Go's
    and may differ in the last bit."""
    special = _pow_special(x, y)
    if special is not None:
        return special
    yf, yi = math.modf(abs(y))
    if yf != 0 and x < 0:
        return math.nan
    if yi >= 2**63:  # a huge even integer: overflow or underflow for every x but -1
        if x == -1:
            return 1.0
        return 0.0 if (abs(x) < 1) == (y > 0) else math.inf
    a1, ae = 1.0, 0
    if yf != 0:
        if yf > 0.5:
            yf -= 1
            yi += 1
        a1 = math.exp(yf * math.log(x))
    x1, xe = math.frexp(x)
    i = int(yi)
    while i != 0:
        if xe < -(1 << 12) or xe > (1 << 12):  # catastrophic overflow: left to ldexp
            ae += xe
            break
        if i & 1 == 1:
            a1 *= x1
            ae += xe
        x1 *= x1
        xe <<= 1
        if x1 < 0.5:
            x1 += x1
            xe -= 1
        i >>= 1
    if y < 0:
        a1 = 1 / a1
        ae = -ae
    return _ldexp(a1, ae)


def go_round(x: float) -> float:
    """Go's ``math.Round``: half away from zero, keeping the sign of zero."""
    if not math.isfinite(x):
        return x
    whole = float(math.trunc(x))
    if abs(x - whole) >= 0.5:
        whole += math.copysign(1.0, x)
    return math.copysign(whole, x) if whole == 0 else whole


def _integral(x: float, to: Callable[[float], int]) -> float:
    if not math.isfinite(x) or x.is_integer():
        return x
    result = float(to(x))
    return math.copysign(result, x) if result == 0 else result


def _divide(a: float, b: float) -> float:
    if b == 0:
        if a == 0 or a != a:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _arithmetic(op: str, a: int | float, b: int | float) -> int | float:
    if op == "/":
        return _divide(float(a), float(b))
    if op in ("**", "^"):
        return go_pow(float(a), float(b))
    if op == "%":
        if not (isinstance(a, int) and isinstance(b, int)):
            raise ValueError("invalid operation: % needs two integers")
        if b == 0:
            raise ValueError("integer divide by zero")
        quotient = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        return _wrap(a - b * quotient)
    if isinstance(a, int) and isinstance(b, int):
        exact = a + b if op == "+" else a - b if op == "-" else a * b
        return _wrap(exact)
    fa, fb = float(a), float(b)
    return fa + fb if op == "+" else fa - fb if op == "-" else fa * fb


def _compare(op: str, a: Value, b: Value) -> bool:
    if op in ("==", "!="):
        pa, pb = _present(a), _present(b)
        if isinstance(pa, bool) != isinstance(pb, bool):
            equal = False
        elif isinstance(pa, bool) or (isinstance(pa, int) and isinstance(pb, int)):
            equal = pa == pb
        else:
            equal = float(pa) == float(pb)  # Go compares an int with a float as float64
        return equal if op == "==" else not equal
    na, nb = _number_value(a, op), _number_value(b, op)
    if not (isinstance(na, int) and isinstance(nb, int)):
        na, nb = float(na), float(nb)
    if op == "<":
        return na < nb
    if op == "<=":
        return na <= nb
    if op == ">":
        return na > nb
    return na >= nb


def _call(func: str, args: list[int | float]) -> int | float:
    if func in ("min", "max"):
        best = args[0]
        for arg in args[1:]:
            both_int = isinstance(best, int) and isinstance(arg, int)
            # Go compares an int with a float as float64.
            a, b = (best, arg) if both_int else (float(best), float(arg))
            if (a < b) if func == "max" else (a > b):
                best = arg
        return best
    x = args[0]
    if func == "abs":
        return _wrap(-x) if x < 0 and isinstance(x, int) else (-x if x < 0 else x)
    if isinstance(x, int):
        return float(x)
    if func == "round":
        return go_round(x)
    return _integral(x, math.ceil if func == "ceil" else math.floor)


def _eval(node: Node, values: Mapping[str, float | None]) -> Value:
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Name):
        value = values.get(node.name)
        return _Nil(node.name) if value is None else float(value)
    if isinstance(node, Unary):
        operand = _eval(node.operand, values)
        if node.op == "!":
            return not _bool_value(operand, "!")
        number = _number_value(operand, node.op)
        if node.op == "+":
            return number
        return _wrap(-number) if isinstance(number, int) else -number
    if isinstance(node, Cond):
        chosen = node.then if _bool_value(_eval(node.cond, values), "?:") else node.other
        return _eval(chosen, values)
    if isinstance(node, Call):
        return _call(node.func, [_number_value(_eval(arg, values), node.func) for arg in node.args])
    return _eval_fold(node, values)


def _eval_fold(node: Fold, values: Mapping[str, float | None]) -> Value:
    acc = _eval(node.first, values)
    last_right = acc
    for step in node.steps:
        op = step.op
        if step.chained:  # ``acc && last_right <op> right``, lazily
            if not _bool_value(acc, "&&"):
                continue
            right = _eval(step.right, values)
            acc = _compare(op, last_right, right)
        elif op == "??":
            if isinstance(acc, _Nil):
                acc = _eval(step.right, values)
            continue
        elif op in ("&&", "||"):
            if _bool_value(acc, op) == (op == "&&"):
                acc = _bool_value(_eval(step.right, values), op)
            continue
        else:
            right = _eval(step.right, values)
            if op in CHAINED or op in ("==", "!="):
                acc = _compare(op, acc, right)
            else:
                acc = _arithmetic(op, _number_value(acc, op), _number_value(right, op))
        last_right = right
    return acc


def evaluate(formula: Formula, values: Mapping[str, float | None]) -> float:
    """The formula's value on ``values`` (None, or an absent key, is a missing input, nil in KEDA).

    Raises FormulaInputMissing when a missing input is used other than on the left of ``??`` (or the result
    itself is missing), ValueError when the result is not a finite number or a runtime error occurs
    (an integer ``%`` by zero, a boolean where a number belongs)."""
    result = _present(_eval(formula.tree, values))
    if isinstance(result, bool):
        raise ValueError(f"formula {formula.text!r} evaluated to a boolean, not a number")
    number = float(result)
    if not math.isfinite(number):
        raise ValueError(f"formula {formula.text!r} evaluated to {number}, not a finite number")
    return number
