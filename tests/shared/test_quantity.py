"""shared.quantity against the Go conformance data, hand-written tables and properties."""

from decimal import Decimal
from fractions import Fraction
from math import ceil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.quantity import Quantity, format_quantity, parse_quantity
from tests.conformance import load_conformance

QUANTITY = load_conformance("quantity.json")
BUILD_QUANTITY = load_conformance("hpa/build_quantity.json")["vectors"]


@pytest.mark.parametrize("case", QUANTITY["decimal_si_canonical"], ids=lambda c: c["value"])
def test_decimal_si_canonical(case: dict[str, str]) -> None:
    assert format_quantity(Decimal(case["value"])) == case["canonical"]
    assert str(Quantity.parse(case["value"])) == case["canonical"]
    assert parse_quantity(case["canonical"]) == Quantity.from_decimal(Decimal(case["value"])).value


@pytest.mark.parametrize("case", QUANTITY["binary_si_canonical"], ids=lambda c: c["value"])
def test_binary_si_canonical(case: dict[str, str]) -> None:
    assert format_quantity(Decimal(case["value"]), "BinarySI") == case["canonical"]
    assert parse_quantity(case["canonical"]) == Decimal(case["value"])


@pytest.mark.parametrize("case", QUANTITY["milli_value_ceil"], ids=lambda c: c["quantity"])
def test_milli_value_ceil(case: dict[str, object]) -> None:
    assert Quantity.parse(str(case["quantity"])).milli_value() == case["milli"]


@pytest.mark.parametrize("text", QUANTITY["parse_rejected"])
def test_parse_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="quantity"):
        Quantity.parse(text)


@pytest.mark.parametrize("vector", BUILD_QUANTITY, ids=lambda v: v["id"])
def test_build_quantity_vectors(vector: dict) -> None:
    # The HPA builds status quantities from milli values; BinarySI only for memory.
    fmt = "BinarySI" if vector["input"]["resource"] == "memory" else "DecimalSI"
    quantity = Quantity.from_milli(vector["input"]["raw_proposal_milli"], fmt)
    assert quantity.format == vector["expected"]["format"]
    assert quantity.milli_value() == vector["expected"]["milli_value"]
    assert Quantity.parse(str(quantity)).milli_value() == vector["expected"]["milli_value"]


@pytest.mark.parametrize(
    ("text", "value", "fmt"),
    [
        ("1n", "0.000000001", "DecimalSI"),
        ("2u", "0.000002", "DecimalSI"),
        ("3m", "0.003", "DecimalSI"),
        ("4", "4", "DecimalSI"),
        ("5k", "5000", "DecimalSI"),
        ("6M", "6000000", "DecimalSI"),
        ("7G", "7000000000", "DecimalSI"),
        ("8T", "8000000000000", "DecimalSI"),
        ("9P", "9000000000000000", "DecimalSI"),
        ("1E", "1000000000000000000", "DecimalSI"),
        ("1Ki", "1024", "BinarySI"),
        ("1Mi", "1048576", "BinarySI"),
        ("1Gi", "1073741824", "BinarySI"),
        ("1Ti", "1099511627776", "BinarySI"),
        ("1Pi", "1125899906842624", "BinarySI"),
        ("1Ei", "1152921504606846976", "BinarySI"),
        ("1.5Ki", "1536", "BinarySI"),
        ("1e3", "1000", "DecimalExponent"),
        ("1E3", "1000", "DecimalExponent"),
        ("1e+3", "1000", "DecimalExponent"),
        ("25e-1", "2.5", "DecimalExponent"),
        ("-1.5", "-1.5", "DecimalSI"),
        ("+1.5", "1.5", "DecimalSI"),
        ("5.", "5", "DecimalSI"),
        (".5", "0.5", "DecimalSI"),
        ("007", "7", "DecimalSI"),
        ("0", "0", "DecimalSI"),
        # Rounded away from zero to nano.
        ("0.0000000001", "0.000000001", "DecimalSI"),
        ("-0.0000000001", "-0.000000001", "DecimalSI"),
        ("1e-30", "0.000000001", "DecimalExponent"),
        ("1e-2147483648", "0.000000001", "DecimalExponent"),
        ("1." + "0" * 5000 + "1", "1.000000001", "DecimalSI"),
        # BinarySI is capped at 2^63-1; tiny binary values become DecimalSI.
        ("8Ei", "9223372036854775807", "BinarySI"),
        ("-16Ei", "-9223372036854775807", "BinarySI"),
        ("0.0001Ki", "0.1024", "DecimalSI"),
    ],
)
def test_parse_table(text: str, value: str, fmt: str) -> None:
    quantity = Quantity.parse(text)
    assert quantity.value == Decimal(value)
    assert quantity.format == fmt


@pytest.mark.parametrize(
    "text",
    [
        *["1e", "1k3", "1ee3", "1Ki5", "1.5.5", ".", "-", "+", "1 ", "\u0661", "1µ"],
        *["1e99999999999", "1e2147483648", "1e1000", "1." + "0" * 5000 + "1Ki"],
    ],
)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="quantity"):
        Quantity.parse(text)


@pytest.mark.parametrize(
    ("value", "fmt", "canonical"),
    [
        ("1500", "DecimalExponent", "1500"),
        ("2000", "DecimalExponent", "2e3"),
        ("0.0025", "DecimalExponent", "2500e-6"),
        ("-0.5", "DecimalExponent", "-500e-3"),
        ("1e21", "DecimalSI", "1000E"),
        ("-2048", "BinarySI", "-2Ki"),
        ("1536", "BinarySI", "1536"),
        ("1024.5", "BinarySI", "1024500m"),
        ("2361183241434822606848", "BinarySI", "2048Ei"),
        ("0", "BinarySI", "0"),
        ("0.5", "BinarySI", "500m"),
    ],
)
def test_format_table(value: str, fmt: str, canonical: str) -> None:
    assert format_quantity(Decimal(value), fmt) == canonical  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "milli", "integer"),
    [("1", 1000, 1), ("1.0001", 1001, 2), ("1n", 1, 1), ("-1.5", -1500, -2), ("-1n", -1, -1), ("0", 0, 0)],
)
def test_milli_value_and_value_int(text: str, milli: int, integer: int) -> None:
    quantity = Quantity.parse(text)
    assert quantity.milli_value() == milli
    assert quantity.value_int() == integer


def test_constructors_validate() -> None:
    assert Quantity.from_milli(1500) == Quantity(Decimal("1.5"), "DecimalSI")
    assert Quantity.from_decimal(2, "BinarySI").value == 2
    with pytest.raises(TypeError, match="float"):
        Quantity.from_decimal(0.1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="format"):
        Quantity.from_milli(1, "Binary")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finite"):
        Quantity.from_decimal(Decimal("NaN"))
    with pytest.raises(TypeError):
        Quantity.parse(5)  # type: ignore[arg-type]


def _reference_round_nano(value: Fraction) -> Fraction:
    """Away-from-zero rounding to 1e-9, computed with exact fractions."""
    scaled = value * 10**9
    magnitude = ceil(abs(scaled))
    return Fraction(magnitude if scaled >= 0 else -magnitude, 10**9)


def _decimals(bound: int, places: int) -> st.SearchStrategy[Decimal]:
    return st.decimals(
        allow_nan=False, allow_infinity=False, min_value=-bound, max_value=bound, places=places
    )


decimals = _decimals(10**25, 12)
nano_decimals = _decimals(10**25, 9)
# Go caps parsed BinarySI values at 2^63-1, so only smaller ones survive a round trip.
binary_safe = _decimals(2**63 - 1, 9)


@given(value=nano_decimals, fmt=st.sampled_from(["DecimalSI", "DecimalExponent"]))
def test_format_parse_round_trip(value: Decimal, fmt: str) -> None:
    text = format_quantity(value, fmt)  # type: ignore[arg-type]
    assert parse_quantity(text) == value


@given(value=binary_safe)
def test_binary_round_trip_keeps_value(value: Decimal) -> None:
    assert parse_quantity(format_quantity(value, "BinarySI")) == value


@given(value=decimals)
def test_values_round_away_from_zero_to_nano(value: Decimal) -> None:
    quantity = Quantity.from_decimal(value)
    assert Fraction(quantity.value) == _reference_round_nano(Fraction(value))
    expected_milli = ceil(abs(Fraction(quantity.value) * 1000))
    assert quantity.milli_value() == (expected_milli if value >= 0 else -expected_milli)


@given(
    sign=st.sampled_from(["", "+", "-"]),
    integer=st.integers(min_value=0, max_value=10**12),
    suffix=st.sampled_from(
        ["n", "u", "m", "", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "e3", "e-7", "E+2"]
    ),
)
def test_canonical_string_is_a_fixed_point(sign: str, integer: int, suffix: str) -> None:
    original = Quantity.parse(f"{sign}{integer}{suffix}")
    canonical = str(original)
    reparsed = Quantity.parse(canonical)
    assert reparsed.value == original.value
    assert str(Quantity(reparsed.value, original.format)) == canonical
