"""The Kubernetes CEL quantity library (k8s.io/apiserver/pkg/cel/library/quantity.go) for cel-python.

kube-apiserver offers it to CRD validation rules: `isQuantity(s)`, `quantity(s)` and, on a quantity,
`sign()`, `isInteger()`, `asInteger()`, `asApproximateFloat()`, `compareTo(q)`, `isGreaterThan(q)`,
`isLessThan(q)`, `add(q or int)`, `sub(q or int)`. cel-python has no such library, so it is written
here on `shared.quantity` (exact Go parsing); cel-python calls `x.f(y)` as the function `f(x, y)`.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from shared.quantity import Quantity

_INT64 = 2**63
_FORMAT_WRONG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


class QuantityValue:
    """A CEL `Quantity` value."""

    def __init__(self, quantity: Quantity) -> None:
        self.quantity = quantity

    def __repr__(self) -> str:
        return f"quantity({str(self.quantity)!r})"


def _parse(text: Any) -> Quantity | None:
    try:
        return Quantity.parse(str(text))
    except ValueError:
        return None


def _is_quantity(text: celtypes.StringType) -> celtypes.BoolType:
    return celtypes.BoolType(_parse(text) is not None)


def _quantity(text: celtypes.StringType) -> QuantityValue | CELEvalError:
    parsed = _parse(text)
    if parsed is None:
        return CELEvalError(_FORMAT_WRONG)
    return QuantityValue(parsed)


def _value(other: Any) -> Decimal:
    """The number of a quantity or int operand (anything else is cel-python's "no such overload")."""
    if isinstance(other, QuantityValue):
        return other.quantity.value
    if isinstance(other, celtypes.IntType) and not isinstance(other, celtypes.BoolType):
        return Decimal(int(other))
    raise TypeError(f"not a quantity or int: {other!r}")


def _sign(q: QuantityValue) -> celtypes.IntType:
    value = q.quantity.value
    return celtypes.IntType((value > 0) - (value < 0))


def _is_integer(q: QuantityValue) -> celtypes.BoolType:
    value = q.quantity.value
    return celtypes.BoolType(value == value.to_integral_value() and -_INT64 <= value < _INT64)


def _as_integer(q: QuantityValue) -> celtypes.IntType | CELEvalError:
    if not _is_integer(q):
        return CELEvalError("cannot convert value to integer")
    return celtypes.IntType(int(q.quantity.value))


def _as_approximate_float(q: QuantityValue) -> celtypes.DoubleType:
    return celtypes.DoubleType(float(q.quantity.value))


def _compare_to(q: QuantityValue, other: QuantityValue) -> celtypes.IntType:
    a, b = _value(q), _value(other)
    return celtypes.IntType((a > b) - (a < b))


def _is_greater_than(q: QuantityValue, other: QuantityValue) -> celtypes.BoolType:
    return celtypes.BoolType(_value(q) > _value(other))


def _is_less_than(q: QuantityValue, other: QuantityValue) -> celtypes.BoolType:
    return celtypes.BoolType(_value(q) < _value(other))


def _add(q: QuantityValue, other: Any) -> QuantityValue:
    return QuantityValue(Quantity(_value(q) + _value(other), q.quantity.format))


def _sub(q: QuantityValue, other: Any) -> QuantityValue:
    return QuantityValue(Quantity(_value(q) - _value(other), q.quantity.format))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "isQuantity": _is_quantity,
    "quantity": _quantity,
    "sign": _sign,
    "isInteger": _is_integer,
    "asInteger": _as_integer,
    "asApproximateFloat": _as_approximate_float,
    "compareTo": _compare_to,
    "isGreaterThan": _is_greater_than,
    "isLessThan": _is_less_than,
    "add": _add,
    "sub": _sub,
}
