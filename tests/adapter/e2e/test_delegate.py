"""Acceptance of the multiplexer: Surge is the one server of both metrics APIs and forwards what it does not
serve to a delegate: a second `python -m adapter` with rules of its own (a stand-in for KEDA's metrics
server: the same aggregated API contract, delegated authentication and authorization included). The real
kubectl reads both through the simulated API server's aggregator; the delegate is killed and restarted
under a Surge that keeps running."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp

from shared.quantity import Quantity
from sim.apiserver import ApiServer, CertificateAuthority
from sim.apiserver.aggregator import APISERVICES, URL_ANNOTATION
from sim.prometheus import PrometheusProcess, free_port
from sim.runner import ServerThread
from tests.autoscaler.helpers import until
from tests.fixtures.apiserver import KubectlRunner

# Its metrics are Surge's series under other names, and `queue_depth`, which Surge serves too (by queue).
DELEGATE_CONFIG = """
rules:
- seriesQuery: '{__name__="queue_length",namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: "^queue_length$", as: "delegated_queue_length"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: '{__name__="queue_length"}'
  resources: {overrides: {namespace: {resource: namespace}}}
  name: {matches: "^queue_length$", as: "delegated_queue_total"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
- seriesQuery: '{__name__="queue_depth"}'
  resources: {overrides: {namespace: {resource: namespace}}}
  metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>})'
"""
SURGE_USER = "system:serviceaccount:surge:surge-adapter"
CUSTOM = "/apis/custom.metrics.k8s.io/v1beta2"
EXTERNAL = "/apis/external.metrics.k8s.io/v1beta1"
DELEGATED_EXTERNAL = f"{EXTERNAL}/namespaces/default/delegated_queue_total"
DELEGATED_CUSTOM = f"{CUSTOM}/namespaces/default/pods/*/delegated_queue_length?labelSelector=app%3Dweb"
SURGE_EXTERNAL = f"{EXTERNAL}/namespaces/default/queue_depth"


class Delegate:
    """`python -m adapter` on a fixed port, so it comes back at the same address after a kill."""

    def __init__(self, argv: list[str], port: int) -> None:
        self.argv = argv
        self.port = port
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "adapter", *self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as http:
            for _ in range(400):
                assert self.process.returncode is None, "the delegate exited"
                try:
                    async with http.get(f"https://127.0.0.1:{self.port}/readyz") as response:
                        if response.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.025)
        raise AssertionError("the delegate did not become ready")

    async def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()


def _apiservice(group: str, version: str, url: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": f"{version}.{group}", "annotations": {URL_ANNOTATION: url}},
        "spec": {
            "group": group,
            "version": version,
            "service": {"name": "surge-adapter", "namespace": "surge"},
            "insecureSkipTLSVerify": True,
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
        },
    }


async def _get(kubectl: KubectlRunner, path: str) -> subprocess.CompletedProcess[str]:
    # kubectl blocks; the adapter it reaches through the aggregator runs on this loop.
    return await asyncio.to_thread(kubectl, "get", "--raw", path, check=False)


async def _read(kubectl: KubectlRunner, path: str) -> dict[str, Any]:
    result = await _get(kubectl, path)
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


async def test_surge_serves_its_metrics_and_the_delegates_under_one_apiservice(
    static_prometheus: PrometheusProcess,
    apiserver: ServerThread[ApiServer],
    apiserver_ca: CertificateAuthority,
    kubeconfig_path: Path,
    start_adapter: Any,
    kubectl: KubectlRunner,
    tmp_path: Path,
) -> None:
    server = apiserver.server
    token = tmp_path / "surge-token"
    token.write_text("surge-service-account-token\n")
    apiserver.call(lambda: server.add_token("surge-service-account-token", SURGE_USER))
    pair = apiserver_ca.issue_server(["127.0.0.1"])
    (tmp_path / "delegate.crt").write_bytes(pair.cert_pem)
    (tmp_path / "delegate.key").write_bytes(pair.key_pem)
    (tmp_path / "delegate.yaml").write_text(DELEGATE_CONFIG)
    port = free_port()
    delegate = Delegate(
        [
            f"--config={tmp_path / 'delegate.yaml'}",
            f"--prometheus-url={static_prometheus.url}",
            f"--lister-kubeconfig={kubeconfig_path}",
            f"--authentication-kubeconfig={kubeconfig_path}",
            f"--authorization-kubeconfig={kubeconfig_path}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--tls-cert-file={tmp_path / 'delegate.crt'}",
            f"--tls-private-key-file={tmp_path / 'delegate.key'}",
            "--metrics-relist-interval=1m",
        ],
        port,
    )
    try:
        surge, _ = await asyncio.gather(
            start_adapter(
                static_prometheus.url,
                f"--delegate-url=https://127.0.0.1:{port}",
                f"--delegate-ca-file={apiserver.ca_file}",
                f"--delegate-token-file={token}",
                "--delegate-refresh-interval=1s",
            ),
            delegate.start(),
        )
        await _run_scenario(surge, delegate, apiserver, kubectl)
    finally:
        await delegate.kill()


async def _run_scenario(
    surge: Any, delegate: Delegate, apiserver: ServerThread[ApiServer], kubectl: KubectlRunner
) -> None:
    server = apiserver.server

    async def delegated() -> bool:
        _, document = await surge.get(EXTERNAL)
        return "delegated_queue_total" in {r["name"] for r in document["resources"]}

    await until(delegated, True)  # the delegate's lists are read every second; it may have started later
    for group, version in (("custom.metrics.k8s.io", "v1beta2"), ("external.metrics.k8s.io", "v1beta1")):
        apiserver.call(
            lambda g=group, v=version: server.store.create(APISERVICES, _apiservice(g, v, surge.url))
        )
    await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(server.aggregator.probe_all(), apiserver.loop))

    # One list per API: Surge's metrics and the delegate's, a name both serve once.
    external = [r["name"] for r in (await _read(kubectl, EXTERNAL))["resources"]]
    assert sorted(external) == ["delegated_queue_total", "queue_depth"]
    custom = {r["name"] for r in (await _read(kubectl, CUSTOM))["resources"]}
    assert {"pods/queue_length", "pods/delegated_queue_length", "namespaces/delegated_queue_length"} <= custom

    # The delegate's metrics, computed by the delegate: sum(queue_length) = 0.1 + 0.3 + 7.
    items = (await _read(kubectl, DELEGATED_EXTERNAL))["items"]
    assert [float(Quantity.parse(i["value"]).value) for i in items] == [7.4]
    assert [i["value"] for i in (await _read(kubectl, DELEGATED_CUSTOM))["items"]] == ["100m", "300m"]
    # Surge's own metric wins the clash: grouped by queue as Surge's rule says, not the delegate's max.
    assert sorted(i["value"] for i in (await _read(kubectl, SURGE_EXTERNAL))["items"]) == ["42", "8"]
    # The delegate's errors come back unchanged (its 404 names the object, as Surge's would not).
    missing = await _get(kubectl, f"{CUSTOM}/namespaces/default/pods/nope/delegated_queue_length")
    assert "Error from server (NotFound)" in missing.stderr and "delegated_queue_length" in missing.stderr

    # Surge asked the delegate with its own credentials: the delegate authorized Surge's identity.
    reviews = apiserver.call(lambda: list(server.reviews.access_reviews))
    delegated = [r["spec"] for r in reviews if r["spec"].get("user") == SURGE_USER]
    resources = {s["resourceAttributes"]["resource"] for s in delegated if "resourceAttributes" in s}
    assert {"delegated_queue_total", "pods"} <= resources

    await delegate.kill()
    down = await _get(kubectl, DELEGATED_EXTERNAL)
    assert down.returncode != 0
    assert "(ServiceUnavailable)" in down.stderr and "delegated_queue_total" in down.stderr
    assert (await _read(kubectl, SURGE_EXTERNAL))["items"]  # Surge's own: still served
    _, metrics = await surge.get("/metrics")
    forwarded = [
        line for line in metrics.splitlines() if line.startswith("surge_adapter_delegate_requests_total")
    ]
    assert any('code="503"' in line for line in forwarded), forwarded

    await delegate.start()  # the same Surge, not restarted
    items = (await _read(kubectl, DELEGATED_EXTERNAL))["items"]
    assert [float(Quantity.parse(i["value"]).value) for i in items] == [7.4]
