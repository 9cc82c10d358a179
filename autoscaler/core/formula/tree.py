"""The formula language's vocabulary (operators, functions, limits), its errors and its tree."""

from __future__ import annotations

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
