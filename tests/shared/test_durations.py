"""shared.durations: Go's time.ParseDuration grammar."""

import pytest

from shared.durations import parse_go_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("-0", 0.0),
        ("1h1m1s", 3661.0),
        ("1.1s100ms", 1.2),
        (".5m", 30.0),
        ("2µs", 2e-6),
        ("+3ns", 3e-9),
    ],
)
def test_valid(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == seconds


# Go refuses a bare sign, a unitless number, spaces and non-ASCII digits (Python's \d would take ٣).
@pytest.mark.parametrize("text", ["+", "-", "5", "1s ", "1 s", "٣s", "1d", "s"])
def test_invalid(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_go_duration(text)
