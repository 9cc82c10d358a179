"""End to end through the simulated kube-apiserver's aggregation layer, as in a cluster:

kubectl ──token──► simulated kube-apiserver ──front-proxy cert + X-Remote-*──► secured adapter
                          ▲                                                        │
                          └──────────── SubjectAccessReview for the original user ─┘
"""

from __future__ import annotations

import asyncio
import base64
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from shared.auth import Security, auth_options_from_namespace
from sim.apiserver.reviews import Decision
from tests.security.conftest import (
    ADAPTER_USER,
    METRIC_PATH,
    DeniedOnSecondLook,
    Pki,
    auth_args,
    install,
    routes_app,
    serving_context,
    start_site,
)

GROUP = "custom.metrics.k8s.io"


def apiservice(version: str, url: str, ca_pem: bytes, priority: int) -> dict[str, Any]:
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": f"{version}.{GROUP}", "annotations": {"sim.surge.dev/url": url}},
        "spec": {
            "group": GROUP,
            "version": version,
            "service": {"name": "surge-adapter", "namespace": "surge", "port": 443},
            "caBundle": base64.b64encode(ca_pem).decode(),
            "groupPriorityMinimum": 100,
            "versionPriority": priority,
        },
    }


@pytest.fixture
async def aggregated(apiserver: Any, pki: Pki, tmp_path: Path) -> AsyncIterator[Any]:
    """The secured adapter registered with the simulator as v1beta1/v1beta2 custom metrics."""
    kubeconfig = apiserver.write_kubeconfig(tmp_path / "adapter.kubeconfig", user=ADAPTER_USER)
    security = Security(auth_options_from_namespace(auth_args(kubeconfig)), user_agent="surge-test")
    await security.start()
    app = routes_app()
    install(app, security)
    serving = pki.serving_ca.serving("surge-adapter.surge.svc", "127.0.0.1")
    cert_file, key_file = serving.write(tmp_path, "serving")
    runner, port = await start_site(app, serving_context(security, cert_file, key_file))
    server = apiserver.server
    await asyncio.to_thread(
        apiserver.call,
        lambda: server.seed(
            [
                apiservice(v, f"https://127.0.0.1:{port}", pki.serving_ca.pem, p)
                for v, p in (("v1beta1", 100), ("v1beta2", 200))
            ]
        ),
    )
    deadline = time.monotonic() + 60
    while not await asyncio.to_thread(available, apiserver):
        assert time.monotonic() < deadline, "the APIServices never became Available"
        await asyncio.to_thread(apiserver.call, server.aggregator.probe_all())
    yield apiserver
    await runner.cleanup()
    await security.close()


def available(apiserver: Any) -> bool:
    def check() -> bool:
        for version in ("v1beta1", "v1beta2"):
            obj = apiserver.server.store.get_ref(
                ("apiregistration.k8s.io", "apiservices"), None, f"{version}.{GROUP}"
            )
            conditions = obj.get("status", {}).get("conditions") or []
            if not any(c["type"] == "Available" and c["status"] == "True" for c in conditions):
                return False
        return True

    return apiserver.call(check)


async def kubectl_raw(
    apiserver: Any, directory: Path, user: str, path: str
) -> subprocess.CompletedProcess[str]:
    config = apiserver.write_kubeconfig(directory / f"{user}.kubeconfig", user=user)
    return await asyncio.to_thread(
        subprocess.run,
        ["kubectl", f"--kubeconfig={config}", f"--cache-dir={directory / 'cache'}", "get", "--raw", path],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


async def test_kubectl_through_the_aggregator_is_authorized_for_the_original_user(
    aggregated: Any, tmp_path: Path
) -> None:
    reviews = aggregated.server.reviews
    reviews.policy = lambda spec: Decision(spec["user"] in {"jane", ADAPTER_USER})
    reviews.access_reviews.clear()
    result = await kubectl_raw(aggregated, tmp_path, "jane", METRIC_PATH)
    assert result.returncode == 0, result.stderr
    assert '"kind":"MetricValueList"' in result.stdout.replace(" ", "")
    specs = [r["spec"] for r in reviews.access_reviews if r["spec"].get("user") == "jane"]
    assert specs == [
        {
            "resourceAttributes": {
                "namespace": "default",
                "verb": "get",
                "group": GROUP,
                "version": "v1beta2",
                "resource": "pods",
                "subresource": "http_requests",
                "name": "*",
            },
            "user": "jane",
            "groups": ["system:authenticated"],
        }
    ]


async def test_denied_user_sees_the_upstream_forbidden_message(aggregated: Any, tmp_path: Path) -> None:
    aggregated.server.reviews.policy = DeniedOnSecondLook("mallory")
    aggregated.server.reviews.access_reviews.clear()
    result = await kubectl_raw(aggregated, tmp_path, "mallory", METRIC_PATH)
    assert result.returncode != 0
    # The simulator let the request through; the adapter's own review for mallory refused it.
    assert [r["spec"]["user"] for r in aggregated.server.reviews.access_reviews] == ["mallory"]
    assert (
        'Error from server (Forbidden): pods.custom.metrics.k8s.io "*" is forbidden: '
        'User "mallory" cannot get resource "pods/http_requests" in API group "custom.metrics.k8s.io" '
        'in the namespace "default"'
    ) in result.stderr
