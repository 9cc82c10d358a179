"""Go's integer and float-to-integer semantics, which the decision must reproduce bit for bit."""

from __future__ import annotations

import math

from autoscaler.core.types import MAX_INT32, MAX_INT64, MIN_INT32


def div_trunc(a: int, b: int) -> int:
    """Go integer division: the quotient truncated toward zero (Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def ceil_int32(f: float) -> int:
    """``int32(math.Ceil(f))``, saturated at the int32 limits instead of Go's undefined overflow."""
    if f != f:  # NaN
        return MIN_INT32
    if f >= MAX_INT32:
        return MAX_INT32
    if f <= MIN_INT32:
        return MIN_INT32
    return math.ceil(f)


def trunc_int32(f: float) -> int:
    """``int32(f)``: truncation toward zero, saturated at the int32 limits."""
    if f != f:
        return MIN_INT32
    if f >= MAX_INT32:
        return MAX_INT32
    if f <= MIN_INT32:
        return MIN_INT32
    return int(f)


def ceil_int64(f: float) -> int:
    """``int64(math.Ceil(f))``, saturated at the int64 limits."""
    if f != f:
        return -MAX_INT64 - 1
    if f >= MAX_INT64:
        return MAX_INT64
    if f <= -MAX_INT64 - 1:
        return -MAX_INT64 - 1
    return math.ceil(f)


def fdiv(a: float, b: float) -> float:
    """float64 division with IEEE results for a zero divisor (Python raises instead)."""
    if b == 0:
        if a == 0 or a != a:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b
