"""Go's numbers where Python's differ: int64 wrap-around, ``math.Pow`` (ported), ``math.Round``, and
float division and rounding that keep the sign of zero."""

from __future__ import annotations

import math
from collections.abc import Callable

from autoscaler.core.formula.tree import INT64_MIN


def wrap(value: int) -> int:
    """Go int64 arithmetic wraps around."""
    return (value - INT64_MIN) % 2**64 + INT64_MIN


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


def integral(x: float, to: Callable[[float], int]) -> float:
    if not math.isfinite(x) or x.is_integer():
        return x
    result = float(to(x))
    return math.copysign(result, x) if result == 0 else result


def divide(a: float, b: float) -> float:
    if b == 0:
        if a == 0 or a != a:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b
