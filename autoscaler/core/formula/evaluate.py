"""Evaluation on floats with KEDA's nil inputs: lazily for ``&& || ?: ??``, Go's numbers otherwise."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from autoscaler.core.formula.gomath import divide, go_pow, go_round, integral, wrap
from autoscaler.core.formula.tree import (
    CHAINED,
    Call,
    Cond,
    Fold,
    Formula,
    FormulaInputMissing,
    Name,
    Node,
    Num,
    Unary,
)


@dataclass(frozen=True)
class _Nil:
    """A nil value, remembering which input it came from (for the error that names it)."""

    name: str


Value = bool | int | float | _Nil


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


def _arithmetic(op: str, a: int | float, b: int | float) -> int | float:
    if op == "/":
        return divide(float(a), float(b))
    if op in ("**", "^"):
        return go_pow(float(a), float(b))
    if op == "%":
        if not (isinstance(a, int) and isinstance(b, int)):
            raise ValueError("invalid operation: % needs two integers")
        if b == 0:
            raise ValueError("integer divide by zero")
        quotient = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        return wrap(a - b * quotient)
    if isinstance(a, int) and isinstance(b, int):
        exact = a + b if op == "+" else a - b if op == "-" else a * b
        return wrap(exact)
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
        return wrap(-x) if x < 0 and isinstance(x, int) else (-x if x < 0 else x)
    if isinstance(x, int):
        return float(x)
    if func == "round":
        return go_round(x)
    return integral(x, math.ceil if func == "ceil" else math.floor)


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
        return wrap(-number) if isinstance(number, int) else -number
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
