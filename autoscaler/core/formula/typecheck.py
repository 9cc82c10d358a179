"""The static types expr-lang's checker gives a formula when its inputs are float64 (what KEDA's webhook
compiles), refusing what it refuses."""

from __future__ import annotations

from autoscaler.core.formula.tree import CHAINED, Cond, Fold, Name, Node, Num, Step, Unary

INT, FLOAT, BOOL, ANY = "int", "float", "bool", "any"
NUMERIC = frozenset({INT, FLOAT, ANY})


class TypeRefusal(Exception):
    """A type error at a position; parse_formula names the token written there (``not`` rather than ``!``)."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


def type_of(node: Node) -> str:
    """The static type expr's checker gives ``node`` when inputs are float64; refuses what it refuses."""
    if isinstance(node, Num):
        return INT if isinstance(node.value, int) else FLOAT
    if isinstance(node, Name):
        return FLOAT
    if isinstance(node, Unary):
        operand = type_of(node.operand)
        wanted = (BOOL, ANY) if node.op == "!" else NUMERIC
        if operand not in wanted:
            raise TypeRefusal(f"invalid operation: {node.op} on {operand}", node.pos)
        return BOOL if node.op == "!" else operand
    if isinstance(node, Fold):
        acc = type_of(node.first)
        last_right = acc
        for step in node.steps:
            right = type_of(step.right)
            acc = _step_type(step, last_right if step.chained else acc, right)
            last_right = right
        return acc
    if isinstance(node, Cond):
        cond = type_of(node.cond)
        if cond not in (BOOL, ANY):
            raise TypeRefusal(f"non-bool expression ({cond}) used as condition", node.pos)
        then, other = type_of(node.then), type_of(node.other)
        return then if then == other else ANY
    args = [type_of(arg) for arg in node.args]
    for arg in args:
        if arg not in NUMERIC:
            raise TypeRefusal(f"invalid argument for {node.func} ({arg})", node.pos)
    if node.func in ("ceil", "floor", "round"):
        return FLOAT
    return ANY if ANY in args else args[0]


def _step_type(step: Step, left: str, right: str) -> str:
    op = step.op

    def refuse() -> TypeRefusal:
        return TypeRefusal(f"invalid operation: {op} (mismatched types {left} and {right})", step.pos)

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
