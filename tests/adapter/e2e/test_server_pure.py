"""The server's pure pieces: Accept negotiation, path parsing, sample → Quantity, RFC 3339 times."""

from __future__ import annotations

import pytest

from adapter.server.bodies import rfc3339, sample_quantity
from adapter.server.negotiation import accepts_plain_json
from adapter.server.routes import CustomRequest, parse_custom_path
from adapter.server.status import StatusError


@pytest.mark.parametrize(
    ("accept", "ok"),
    [
        (None, True),
        ("", True),
        ("*/*", True),
        ("application/json", True),
        ("application/json; charset=utf-8", True),
        ("application/*", True),
        ("application/vnd.kubernetes.protobuf, */*", True),
        ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json", True),
        ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", False),
        ("application/vnd.kubernetes.protobuf", False),
        ("text/plain", False),
        ("application/json;q=0", False),
    ],
)
def test_accept_negotiation(accept: str | None, ok: bool) -> None:
    assert accepts_plain_json(accept) is ok


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        ("namespaces/ns/pods/*/m", CustomRequest("pods", "ns", "*", "m", "s", "ms")),
        (
            "namespaces/ns/deployments.apps/web/m",
            CustomRequest("deployments.apps", "ns", "web", "m", "s", "ms"),
        ),
        ("namespaces/ns/metrics/m", CustomRequest("namespaces", "", "ns", "m", "s", "ms")),
        ("namespaces/*/metrics/m", CustomRequest("namespaces", "", "*", "m", "s", "ms")),
        ("nodes/n1/m", CustomRequest("nodes", "", "n1", "m", "s", "ms")),
    ],
)
def test_custom_paths(tail: str, expected: CustomRequest) -> None:
    assert parse_custom_path(tail, "s", "ms") == expected


@pytest.mark.parametrize(
    ("tail", "code"),
    [
        ("namespaces/ns", 400),
        ("namespaces/ns/m", 400),
        ("namespaces/ns/pods/bar", 404),
        ("namespaces/ns/pods/bar/m/extra", 404),
        ("nodes/foo", 404),
        ("blah", 404),
        ("nodes//m", 404),
    ],
)
def test_bad_custom_paths(tail: str, code: int) -> None:
    with pytest.raises(StatusError) as err:
        parse_custom_path(tail, "", "")
    assert err.value.code == code


@pytest.mark.parametrize(
    ("text", "quantity"),
    [
        ("0.30000000000000004", "300m"),
        ("0.1", "100m"),
        ("1.2345", "1235m"),
        ("12.5", "12500m"),
        ("1500", "1500"),
        ("2000", "2k"),
        ("-0.5", "-500m"),
        ("0.0004", "0"),
        ("0", "0"),
        ("1e+21", "1000E"),
        ("NaN", None),
        ("+Inf", None),
        ("-Inf", None),
        ("garbage", None),
    ],
)
def test_sample_quantity(text: str, quantity: str | None) -> None:
    assert sample_quantity(text) == quantity


def test_rfc3339() -> None:
    assert rfc3339(1714564800.75) == "2024-05-01T12:00:00Z"
