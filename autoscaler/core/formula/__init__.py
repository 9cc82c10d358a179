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

from autoscaler.core.formula.evaluate import evaluate
from autoscaler.core.formula.gomath import go_pow, go_round
from autoscaler.core.formula.lexer import tokenize
from autoscaler.core.formula.parser import parse_formula
from autoscaler.core.formula.tree import (
    FUNCTIONS,
    KEYWORDS,
    MAX_DEPTH,
    MAX_LENGTH,
    MAX_RECURSION,
    WORD_OPERATORS,
    Formula,
    FormulaError,
    FormulaInputMissing,
)

__all__ = [
    "FUNCTIONS",
    "KEYWORDS",
    "MAX_DEPTH",
    "MAX_LENGTH",
    "MAX_RECURSION",
    "WORD_OPERATORS",
    "Formula",
    "FormulaError",
    "FormulaInputMissing",
    "evaluate",
    "go_pow",
    "go_round",
    "parse_formula",
    "tokenize",
]
