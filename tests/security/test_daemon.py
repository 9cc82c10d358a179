"""The real adapter daemon with delegated auth wired in exactly as adapter/__main__.py should do it,
registered with the simulated kube-apiserver's aggregator and called through kubectl."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapter.config import default_config_yaml, parse_config
from adapter.flags import FLAG_GROUPS, parse_flags
from adapter.server.daemon import AdapterDaemon
from shared.auth import Security, add_auth_flags, auth_options_from_namespace
from sim.apiserver.reviews import Decision
from tests.security.conftest import ADAPTER_USER, DeniedOnSecondLook, Pki
from tests.security.test_aggregated import apiservice, available, kubectl_raw


@pytest.fixture
async def daemon(apiserver: Any, pki: Pki, tmp_path: Path) -> AsyncIterator[tuple[AdapterDaemon, Any]]:
    kubeconfig = apiserver.write_kubeconfig(tmp_path / "adapter.kubeconfig", user=ADAPTER_USER)
    cert_file, key_file = pki.serving_ca.serving("surge-adapter.surge.svc", "127.0.0.1").write(
        tmp_path, "serving"
    )
    argv = [
        "/adapter",
        "--config=unused-here",
        "--prometheus-url=http://127.0.0.1:9/",  # no Prometheus: discovery and auth still work
        f"--lister-kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        "--secure-port=0",
        f"--tls-cert-file={cert_file}",
        f"--tls-private-key-file={key_file}",
    ]
    options, namespace, _ = parse_flags(argv, (*FLAG_GROUPS, add_auth_flags))
    security = Security(auth_options_from_namespace(namespace), user_agent="surge-test")
    await security.start()
    adapter = AdapterDaemon(
        options,
        parse_config(default_config_yaml()),
        middlewares=[security.middleware],
        tls_hooks=[security.configure_tls],
    )
    await adapter.start()
    url = f"https://127.0.0.1:{adapter.port}"
    await asyncio.to_thread(
        apiserver.call,
        lambda: apiserver.server.seed(
            [apiservice(v, url, pki.serving_ca.pem, p) for v, p in (("v1beta1", 100), ("v1beta2", 200))]
        ),
    )
    deadline = time.monotonic() + 60
    while not await asyncio.to_thread(available, apiserver):
        assert time.monotonic() < deadline, "the APIServices never became Available"
        await asyncio.to_thread(apiserver.call, apiserver.server.aggregator.probe_all())
    yield adapter, apiserver
    await adapter.stop()
    await security.close()


async def test_discovery_through_the_aggregator_is_authorized_per_user(daemon: Any, tmp_path: Path) -> None:
    _, apiserver = daemon
    reviews = apiserver.server.reviews
    reviews.policy = lambda spec: Decision(spec["user"] in {"jane", ADAPTER_USER})
    reviews.access_reviews.clear()
    result = await kubectl_raw(apiserver, tmp_path, "jane", "/apis/custom.metrics.k8s.io/v1beta2")
    assert result.returncode == 0, result.stderr
    assert '"kind":"APIResourceList"' in result.stdout.replace(" ", "")
    assert [r["spec"] for r in reviews.access_reviews] == [
        {
            "nonResourceAttributes": {"path": "/apis/custom.metrics.k8s.io/v1beta2", "verb": "get"},
            "user": "jane",
            "groups": ["system:authenticated"],
        }
    ]
    reviews.policy = DeniedOnSecondLook("mallory")
    reviews.access_reviews.clear()
    denied = await kubectl_raw(apiserver, tmp_path, "mallory", "/apis/custom.metrics.k8s.io/v1beta2")
    assert [r["spec"]["user"] for r in reviews.access_reviews] == ["mallory"]
    assert 'Error from server (Forbidden): forbidden: User "mallory" cannot get path' in denied.stderr


async def test_health_is_open_and_everything_else_needs_credentials(daemon: Any, pki: Pki) -> None:
    adapter, apiserver = daemon
    apiserver.server.reviews.policy = lambda spec: Decision(spec["user"] == ADAPTER_USER)
    connector = aiohttp.TCPConnector(ssl=pki.client_context())
    async with aiohttp.ClientSession(connector=connector) as session:
        async with session.get(f"https://127.0.0.1:{adapter.port}/livez") as response:
            assert response.status == 200
        async with session.get(f"https://127.0.0.1:{adapter.port}/metrics") as response:
            assert response.status == 403
            assert (await response.json())["message"] == (
                'forbidden: User "system:anonymous" cannot get path "/metrics"'
            )
