"""decode_json: every answer decodes as json.loads decodes it, orjson's refusals included."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.kube.json_decode import decode_json

# What Go's encoder writes for the API's types: strings, int64s, float64s, bools, nulls, nested.
_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=30,
)


@given(_VALUES)
def test_what_the_api_server_writes_decodes_as_json_decodes_it(value: object) -> None:
    raw = json.dumps(value).encode()
    assert decode_json(raw) == json.loads(raw)


def test_what_orjson_refuses_falls_back_to_json() -> None:
    assert math.isnan(decode_json(b'{"value": NaN}')["value"])
    assert decode_json(b"[Infinity, -Infinity]") == [math.inf, -math.inf]
    assert decode_json(b'"\\ud800"') == "\ud800"  # a lone surrogate


def test_what_neither_reads_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        decode_json(b'{"kind": "Status"')
    with pytest.raises(ValueError):  # invalid UTF-8: json's own error, as before
        decode_json(b'"\xff"')
