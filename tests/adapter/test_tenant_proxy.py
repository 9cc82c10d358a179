"""The tenant proxy (tests/adapter/tenant_proxy.py) in front of a real Prometheus: its tenant's queries
pass on both verbs, other tenants and requests without an org id get 401 and never reach Prometheus (its
query log says so), and a MetricBackend naming the proxy reads through it with its X-Scope-OrgID."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest

from adapter.prometheus import PrometheusBadResponse, PrometheusSettings
from adapter.tenancy.backends import backend_client, backend_settings, parse_backend
from adapter.tenancy.options import TenantOptions
from sim.prometheus import PrometheusProcess
from tests.adapter.tenant_proxy import ORG_ID, TenantProxy

LOOPBACK = TenantOptions(allowed_backend_urls=(r"http://127\.0\.0\.1:[0-9]+/",))


@pytest.fixture(scope="module")
def tenant_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    """A Prometheus logging its queries and scraping itself as a target of namespace `shop`."""
    sd = tmp_path_factory.mktemp("tenant-proxy") / "targets.json"
    sd.write_text("[]")
    process = PrometheusProcess(sd, query_log=True)
    process.start()
    try:
        # Its port is known once it runs; a rename, so that no scrape reads half a file.
        staged = sd.with_suffix(".tmp")
        staged.write_text(
            json.dumps([{"targets": [f"127.0.0.1:{process.port}"], "labels": {"namespace": "shop"}}])
        )
        staged.rename(sd)
        process.wait_for_data_sync('up{namespace="shop"} == 1', timeout_seconds=30)
        yield process
    finally:
        process.stop()


@pytest.fixture
async def proxy(tenant_prometheus: PrometheusProcess) -> AsyncIterator[TenantProxy]:
    proxy = await TenantProxy(tenant_prometheus.url, "shop").start()
    try:
        yield proxy
    finally:
        await proxy.stop()


def logged_queries(prometheus: PrometheusProcess) -> list[str]:
    lines = prometheus.query_log_path.read_text().splitlines()
    return [json.loads(line)["params"]["query"] for line in lines]


async def answer(response: aiohttp.ClientResponse) -> tuple[int, Any]:
    if response.content_type == "application/json":
        return response.status, (await response.json())["data"]["result"]
    return response.status, await response.text()


async def test_the_tenants_queries_pass_on_both_verbs(
    proxy: TenantProxy, tenant_prometheus: PrometheusProcess
) -> None:
    query = f"{proxy.url}/api/v1/query"
    headers = {ORG_ID: "shop"}
    async with aiohttp.ClientSession() as session:
        async with session.get(query, params={"query": "vector(7)"}, headers=headers) as response:
            status, result = await answer(response)
            assert (status, result[0]["metric"], result[0]["value"][1]) == (200, {}, "7")
        async with session.post(query, data={"query": "vector(8)"}, headers=headers) as response:
            status, result = await answer(response)
            assert (status, result[0]["metric"], result[0]["value"][1]) == (200, {}, "8")
    seen = [
        (r.method, r.path, r.query, r.form, r.headers.getall(ORG_ID), r.forwarded) for r in proxy.requests
    ]
    assert seen == [
        ("GET", "/api/v1/query", (("query", "vector(7)"),), (), ["shop"], True),
        ("POST", "/api/v1/query", (), (("query", "vector(8)"),), ["shop"], True),
    ]
    assert logged_queries(tenant_prometheus)[-2:] == ["vector(7)", "vector(8)"]


async def test_no_org_id_or_another_tenants_gets_401_and_reaches_nothing(
    proxy: TenantProxy, tenant_prometheus: PrometheusProcess
) -> None:
    query = f"{proxy.url}/api/v1/query"
    refused: list[tuple[int, Any]] = []
    async with aiohttp.ClientSession() as session:
        for number, headers in enumerate(({}, {ORG_ID: "web"}, {ORG_ID: "Shop"}, {ORG_ID: ""}), start=101):
            async with session.get(query, params={"query": f"vector({number})"}, headers=headers) as response:
                refused.append(await answer(response))
        async with session.get(query, params={"query": "vector(200)"}, headers={ORG_ID: "shop"}) as response:
            assert response.status == 200
    assert refused == [
        (401, "no org id\n"),
        (401, "org id web is not served here\n"),
        (401, "org id Shop is not served here\n"),
        (401, "org id  is not served here\n"),
    ]
    assert [request.forwarded for request in proxy.requests] == [False, False, False, False, True]
    # The query sent last is logged, so the four refused before it would have been too.
    logged = logged_queries(tenant_prometheus)
    assert logged[-1] == "vector(200)"
    assert not {f"vector({number})" for number in range(101, 105)} & set(logged)


async def test_a_metric_backend_reads_through_the_proxy_with_its_org_id(proxy: TenantProxy) -> None:
    base = PrometheusSettings(url="http://prometheus.invalid/")
    for tenant in ("shop", "web"):
        obj = {
            "kind": "MetricBackend",
            "metadata": {"name": "mimir", "namespace": tenant},
            "spec": {"url": f"{proxy.url}/", "headers": {ORG_ID: tenant}},
        }
        client = backend_client(backend_settings(parse_backend(obj, LOOPBACK), None, base))
        try:
            if tenant == "shop":
                result = await client.query('up{namespace="shop"}')
                assert [sample.value for sample in result.samples] == ["1"]
                series = await client.series(['up{namespace="shop"}'], start=0)
                assert [labels["namespace"] for labels in series] == ["shop"]
            else:
                with pytest.raises(PrometheusBadResponse, match="401"):
                    await client.query('up{namespace="shop"}')
        finally:
            await client.close()
    seen = [(r.path, r.headers.getall(ORG_ID), r.forwarded) for r in proxy.requests]
    assert seen == [
        ("/api/v1/query", ["shop"], True),
        ("/api/v1/series", ["shop"], True),
        ("/api/v1/query", ["web"], False),
    ]
