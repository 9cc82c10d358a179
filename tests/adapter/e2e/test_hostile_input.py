"""Hostile names and selectors never reach Prometheus as broken PromQL: every answer is a well-formed
2xx/400/404, never a 500 caused by a query Prometheus could not parse. Values joined into a regex match
as in prometheus-adapter (a `.` matches any character) unless `--regex-escape-values` is given."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from yarl import URL

from sim.prometheus import PrometheusProcess
from tests.adapter.e2e.conftest import POD_METRICS

NASTY = st.text(
    alphabet=st.sampled_from([*list("a-\"\\\n|}{=~!,()*.^$[]?+' "), "é", "☃", "\x00", "\t", "𝄞"]),
    min_size=1,
    max_size=20,
)
CHECKS = settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)


async def _get(adapter: Any, raw_path: str) -> tuple[int, Any]:
    async with adapter.http.get(URL(adapter.url + raw_path, encoded=True)) as response:
        return response.status, await response.json()


@CHECKS
@given(name=NASTY.filter(lambda n: n not in (".", "..") and "/" not in n))
async def test_hostile_object_names(
    static_prometheus: PrometheusProcess, start_adapter: Any, name: str
) -> None:
    adapter = await _adapter(start_adapter, static_prometheus)
    status, body = await _get(
        adapter,
        f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/{quote(name, safe='')}/queue_length",
    )
    if name == "*" or name in POD_METRICS:
        assert status == 200
    else:
        assert (status, body["reason"]) == (404, "NotFound"), body
        # Names with a newline never match a route (aiohttp's `.` stops there): a plain NotFound then.
        assert body["message"] in (
            f"the server could not find the metric queue_length for pods {name}",
            "the server could not find the requested resource",
        )


@CHECKS
@given(selector=NASTY)
async def test_hostile_selectors(
    static_prometheus: PrometheusProcess, start_adapter: Any, selector: str
) -> None:
    adapter = await _adapter(start_adapter, static_prometheus)
    encoded = quote(selector, safe="")
    for path in (
        f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2A/queue_length?metricLabelSelector={encoded}",
        f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2A/queue_length?labelSelector={encoded}",
        f"/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth?labelSelector={encoded}",
    ):
        status, body = await _get(adapter, path)
        assert status in (200, 400, 404), (path, body)
        if status != 200:
            assert body["kind"] == "Status"


@pytest.mark.parametrize(
    ("flags", "pods"),
    [
        # prometheus-adapter's rendering: the single `in` value is a regex, `web.1` matches `web-1`.
        ((), ["web-1"]),
        # Escaped, `web\.1` matches only a pod named `web.1`, and there is none.
        (("--regex-escape-values",), []),
    ],
    ids=["pa-exact", "regex-escaped"],
)
async def test_selector_value_with_a_regex_character(
    static_prometheus: PrometheusProcess, start_adapter: Any, flags: tuple[str, ...], pods: list[str]
) -> None:
    adapter = await start_adapter(static_prometheus.url, *flags)
    path = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2A/queue_length"
    status, body = await _get(adapter, f"{path}?metricLabelSelector={quote('pod in (web.1)', safe='')}")
    assert status == 200, body
    assert [item["describedObject"]["name"] for item in body["items"]] == pods


_ADAPTERS: dict[int, Any] = {}


async def _adapter(start_adapter: Any, prometheus: PrometheusProcess) -> Any:
    """One adapter per test function (hypothesis calls the body many times with the same fixtures)."""
    key = id(start_adapter)
    if key not in _ADAPTERS:
        _ADAPTERS.clear()
        _ADAPTERS[key] = await start_adapter(prometheus.url)
    return _ADAPTERS[key]
