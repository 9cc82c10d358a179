"""The lean body pieces agree with their references: Quantity text with shared.quantity's canonical form,
timestamps with datetime, JSON with the json module."""

from __future__ import annotations

import datetime as dt
import json
from decimal import ROUND_HALF_UP, Context, Decimal

from hypothesis import given
from hypothesis import strategies as st

from adapter.server.bodies import encode, milli_quantity, rfc3339, sample_quantity
from shared.quantity import format_quantity


def reference_quantity(text: str) -> str:
    """Go's NewMilliQuantity of the value rounded to milli, through the exact Quantity formatter."""
    exact = Context(prec=400)  # more digits than any float64's, in milli
    return format_quantity(Decimal(text).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP, context=exact))


@given(st.integers(min_value=-(10**27), max_value=10**27))
def test_milli_quantity_is_the_canonical_quantity(milli: int) -> None:
    assert milli_quantity(milli) == format_quantity(Decimal(milli).scaleb(-3))


@given(
    st.one_of(
        st.floats(allow_nan=False, allow_infinity=False, min_value=-1e20, max_value=1e20).map(repr),
        st.floats(allow_nan=False, allow_infinity=False).map(repr),  # up to ±1.8e308 (a 500 from 1e25 once)
        st.decimals(allow_nan=False, allow_infinity=False, min_value=-(10**20), max_value=10**20).map(str),
        st.integers(min_value=-(10**24), max_value=10**24).map(str),
    )
)
def test_sample_quantity_matches_the_exact_formatter(text: str) -> None:
    assert sample_quantity(text) == reference_quantity(text)


def test_sample_quantity_edges() -> None:
    assert sample_quantity("1e21") == "1000E"  # Go writes past exa with the E suffix
    assert sample_quantity("-0.0004") == "0"
    assert sample_quantity("NaN") is None
    assert sample_quantity("+Inf") is None
    assert sample_quantity("not a number") is None
    assert sample_quantity("1e+308") == "1" + "0" * 290 + "E"
    assert sample_quantity("-1e+308") == "-1" + "0" * 290 + "E"
    assert sample_quantity("1e+309") is None  # beyond float64: Prometheus would have written +Inf


@given(st.floats(min_value=0, max_value=4e9))
def test_rfc3339_is_utc_seconds(timestamp: float) -> None:
    expected = dt.datetime.fromtimestamp(int(timestamp), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert rfc3339(timestamp) == expected


def test_encode_is_compact_json() -> None:
    document = {"kind": "MetricValueList", "items": [{"value": "300m", "labels": {"é": "x<y"}}], "n": None}
    body = encode(document)
    assert json.loads(body) == document
    assert b" " not in body


def test_encode_keeps_a_lone_surrogate_as_json_does() -> None:
    document = {"metricName": "bad\ud800name"}
    assert json.loads(encode(document)) == document
