"""Kubernetes `resource.Quantity`: exact parsing and canonical formatting.

Follows apimachinery's pkg/api/resource (quantity.go, suffix.go): values are held as exact `Decimal`s
rounded away from zero to nano, and `str()` emits the canonical form a Go server would.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import MAX_EMAX, MIN_EMIN, ROUND_UP, Context, Decimal, Inexact
from typing import Literal

QuantityFormat = Literal["DecimalSI", "BinarySI", "DecimalExponent"]
FORMATS: tuple[QuantityFormat, ...] = ("DecimalSI", "BinarySI", "DecimalExponent")

# Go's number grammar: digits, digits.digits, digits. or .digits; ASCII digits only (Python's \d is Unicode).
_QUANTITY_RE = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<suffix>[A-Za-z0-9+-]*)"
)
_EXPONENT_SUFFIX_RE = re.compile(r"[eE][+-]?[0-9]+")
# The regular expression Go quotes in its parse errors; repeated so users recognise the message.
_GO_FORMAT = "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"

_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIX_BY_EXPONENT = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIX_BY_POWER = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]  # index k ↔ 1024**k

_NANO = Decimal("1e-9")
_MILLI_SCALE = 3
# Go caps BinarySI values at parse time (decimal ones are unbounded).
_BINARY_MAX = Decimal(2**63 - 1)
# Go wraps exponents to int32; we refuse instead of silently changing the value.
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
# Canonical strings grow with the magnitude (Go writes every digit), so absurd magnitudes are refused
# rather than letting one request allocate gigabytes.
_MAX_INTEGER_DIGITS = 1000
# Rounding to nano of a value below 10**_MAX_INTEGER_DIGITS needs at most this many digits of precision.
_EXACT = Context(prec=_MAX_INTEGER_DIGITS + 64, Emax=MAX_EMAX, Emin=MIN_EMIN)
_PRODUCT = Context(prec=_MAX_INTEGER_DIGITS + 64, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[Inexact])


def _round_nano(value: Decimal) -> Decimal:
    """Round away from zero to 9 fractional digits, as Go does so that tiny requests never become 0."""
    if value.is_zero():
        return Decimal(0)
    if int(value.as_tuple().exponent) >= -9:
        return value
    return value.quantize(_NANO, rounding=ROUND_UP, context=_EXACT)


def _power_of_ten(exponent: int) -> Decimal:
    return Decimal((0, (1,), exponent))


def _exact_product(text: str, number: Decimal, multiplier: Decimal) -> Decimal:
    """`number * multiplier` exactly: Decimal arithmetic would silently round to the context precision."""
    sign, digits, exponent = number.as_tuple()
    _, multiplier_digits, multiplier_exponent = multiplier.as_tuple()
    if multiplier_digits == (1,):  # a power of ten only moves the exponent
        return Decimal((sign, digits, int(exponent) + int(multiplier_exponent)))
    try:
        return _PRODUCT.multiply(number, multiplier)
    except Inexact:
        raise ValueError(f"quantity {text!r} has too many digits") from None


def _check_representable(value: Decimal) -> None:
    if not value.is_finite():
        raise ValueError(f"quantity value must be finite, got {value}")
    if not value.is_zero() and value.adjusted() >= _MAX_INTEGER_DIGITS:
        raise ValueError(f"quantity value too large: more than {_MAX_INTEGER_DIGITS} integer digits")


def _scaled_away_from_zero(value: Decimal, fractional_digits: int) -> int:
    """`value * 10**fractional_digits` rounded away from zero (Go's ScaledValue on its int64 form)."""
    scaled = value.scaleb(fractional_digits, context=_EXACT)
    return int(scaled.to_integral_value(rounding=ROUND_UP, context=_EXACT))


def _mantissa_exponent(value: Decimal) -> tuple[int, int]:
    """Write a non-zero value as `M * 10**E` with M free of trailing zeros."""
    sign, digits, exponent = value.as_tuple()
    text = "".join(map(str, digits))
    stripped = text.rstrip("0")
    mantissa = int(stripped)
    return (-mantissa if sign else mantissa), int(exponent) + len(text) - len(stripped)


def _format_decimal(value: Decimal, exponent_form: bool) -> str:
    mantissa, exponent = _mantissa_exponent(value)
    # Go lowers the exponent to a multiple of 3 (toward -inf) and grows the mantissa to match.
    remainder = exponent % 3
    mantissa *= 10**remainder
    exponent -= remainder
    if exponent_form:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    if exponent > 18:
        mantissa *= 10 ** (exponent - 18)
        exponent = 18
    return f"{mantissa}{_DECIMAL_SUFFIX_BY_EXPONENT[exponent]}"


def _format_binary(value: Decimal) -> str:
    # Go prints small and fractional values as DecimalSI so nothing is rounded away.
    if -1024 < value < 1024 or value != value.to_integral_value():
        return _format_decimal(value, exponent_form=False)
    mantissa = int(value)
    power = 0
    while power < len(_BINARY_SUFFIX_BY_POWER) - 1 and mantissa % 1024 == 0:
        mantissa //= 1024
        power += 1
    return f"{mantissa}{_BINARY_SUFFIX_BY_POWER[power]}"


def _parse_suffix(text: str, suffix: str) -> tuple[Decimal, QuantityFormat]:
    """Return (multiplier, format) for a suffix, or raise ValueError."""
    if suffix in _DECIMAL_SUFFIXES:
        return _power_of_ten(_DECIMAL_SUFFIXES[suffix]), "DecimalSI"
    if suffix in _BINARY_SUFFIXES:
        return Decimal(2 ** _BINARY_SUFFIXES[suffix]), "BinarySI"
    if _EXPONENT_SUFFIX_RE.fullmatch(suffix):
        # Bounded length first: int() of a huge digit string is slow (and refused past 4300 digits).
        exponent = int(suffix[1:]) if len(suffix.lstrip("eE+-0")) <= 10 else None
        if exponent is None or not _INT32_MIN <= exponent <= _INT32_MAX:
            raise ValueError(f"quantity {text!r}: exponent {suffix[1:]} out of the int32 range")
        return _power_of_ten(exponent), "DecimalExponent"
    raise ValueError(f"quantity {text!r}: unable to parse quantity's suffix {suffix!r}")


@dataclass(frozen=True)
class Quantity:
    """An exact quantity and the format it is written in.

    The value is always rounded away from zero to nano (Go's precision), also when constructed directly.
    """

    value: Decimal
    format: QuantityFormat = "DecimalSI"

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"unknown quantity format {self.format!r}; expected one of {', '.join(FORMATS)}")
        if not isinstance(self.value, Decimal):
            raise TypeError(f"Quantity.value must be a Decimal, got {type(self.value).__name__}")
        _check_representable(self.value)
        object.__setattr__(self, "value", _round_nano(self.value))

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """Parse a quantity string as Go's `resource.ParseQuantity` does."""
        if not isinstance(text, str):
            raise TypeError(f"quantity must be a string, got {type(text).__name__}")
        if not text:
            raise ValueError("quantity must not be empty")
        match = _QUANTITY_RE.fullmatch(text)
        if match is None:
            raise ValueError(f"quantity {text!r} must match the regular expression {_GO_FORMAT}")
        multiplier, fmt = _parse_suffix(text, match["suffix"])
        number = Decimal(match["number"].rstrip("."))
        if not number.is_zero() and number.adjusted() + multiplier.adjusted() >= _MAX_INTEGER_DIGITS:
            raise ValueError(f"quantity {text!r} too large: more than {_MAX_INTEGER_DIGITS} integer digits")
        value = _exact_product(text, number, multiplier)
        if match["sign"] == "-":
            value = value.copy_negate()  # unary minus would round to the default 28 digits
        value = _round_nano(value)
        if fmt == "BinarySI":
            value = max(-_BINARY_MAX, min(_BINARY_MAX, value))
            if 0 < value.copy_abs() < 1:
                fmt = "DecimalSI"
        return cls(value, fmt)

    @classmethod
    def from_decimal(cls, value: Decimal | int, format: QuantityFormat = "DecimalSI") -> Quantity:
        """Build from an exact number. Floats are refused: build the Decimal from `repr(x)` or round first."""
        if isinstance(value, float):
            raise TypeError("Quantity.from_decimal needs a Decimal or int, not a float: quantities are exact")
        return cls(Decimal(value), format)

    @classmethod
    def from_milli(cls, milli: int, format: QuantityFormat = "DecimalSI") -> Quantity:
        """Go's `NewMilliQuantity(milli, format)`."""
        return cls(Decimal(milli).scaleb(-_MILLI_SCALE, context=_EXACT), format)

    def milli_value(self) -> int:
        """Go's `MilliValue()`: value * 1000, rounded up (away from zero, like Go's int64 representation).

        Unlike Go this never overflows int64; callers that must mimic the overflow do so themselves.
        """
        return _scaled_away_from_zero(self.value, _MILLI_SCALE)

    def value_int(self) -> int:
        """Go's `Value()`: the value rounded up (away from zero) to an integer."""
        return _scaled_away_from_zero(self.value, 0)

    def __str__(self) -> str:
        if self.value.is_zero():
            return "0"
        if self.format == "BinarySI":
            return _format_binary(self.value)
        return _format_decimal(self.value, exponent_form=self.format == "DecimalExponent")


def parse_quantity(text: str) -> Decimal:
    """The exact value of a quantity string."""
    return Quantity.parse(text).value


def format_quantity(value: Decimal | int, format: QuantityFormat = "DecimalSI") -> str:
    """The canonical string Go emits for `value` in `format`."""
    return str(Quantity.from_decimal(value, format))
