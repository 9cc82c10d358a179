"""The autoscaler's port through the real daemon: HTTPS, delegated authentication (TokenReview) and
authorization (SubjectAccessReview) against the simulated API server, whose policy each test sets.

/metrics is the non-resource URL `/metrics`; `/debug/decisions/<namespace>/<name>` is `get` on that
autoscaler of the kind the daemon serves; health paths are open to anyone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from shared.kube import KubeClient
from sim.apiserver.reviews import Decision
from sim.runner import ServerThread
from tests.autoscaler.harness import (
    autoscaler_spec,
    create_hza,
    daemon_get,
    install_crd,
    running_daemon,
    workload,
)
from tests.autoscaler.helpers import eventually, reconciles
from tests.autoscaler.metrics_backend import MetricsBackend

TENANT = "tenant-a"
TENANT_TOKEN = "tenant-a-token"
SCRAPER = "prometheus"
SCRAPER_TOKEN = "prometheus-token"


def allow(apiserver: ServerThread, rule: Callable[[dict[str, Any]], bool]) -> None:
    """The cluster's authorization: `rule` for TENANT and SCRAPER, nothing for anyone else (the daemon's
    own requests, as the cluster's admin, are not reviewed)."""
    apiserver.server.reviews.policy = lambda spec: Decision(spec["user"] in (TENANT, SCRAPER) and rule(spec))
    apiserver.call(lambda: apiserver.server.add_token(TENANT_TOKEN, TENANT))
    apiserver.call(lambda: apiserver.server.add_token(SCRAPER_TOKEN, SCRAPER))


def tenant_reads_autoscalers_in(namespace: str, plural: str, group: str) -> Callable[[dict[str, Any]], bool]:
    """RBAC's `get` on `plural` in `namespace` for TENANT, nonResourceURLs /metrics for SCRAPER."""

    def rule(spec: dict[str, Any]) -> bool:
        if spec["user"] == SCRAPER:
            return spec.get("nonResourceAttributes") == {"path": "/metrics", "verb": "get"}
        attributes = spec.get("resourceAttributes") or {}
        return (
            attributes.get("verb") == "get"
            and attributes.get("group") == group
            and attributes.get("resource") == plural
            and attributes.get("namespace") == namespace
            and not attributes.get("subresource")
        )

    return rule


async def test_health_is_open_and_everything_else_needs_credentials_and_a_grant(
    kube: KubeClient, apiserver: ServerThread, kubeconfig_path: Path, backend: MetricsBackend
) -> None:
    await install_crd(kube)
    pods = workload(apiserver, "web", 2)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, 100.0)
    await create_hza(kube, "web", autoscaler_spec("web", "http_requests", "100"))
    allow(apiserver, tenant_reads_autoscalers_in("default", "horizontalautoscalers", "autoscaling.surge.dev"))
    async with running_daemon(kubeconfig_path, backend.url) as daemon:
        await eventually(lambda: reconciles(daemon.controller) >= 1)
        for path in ("/healthz", "/livez", "/readyz"):
            assert await daemon_get(daemon, path, token=None) == (200, "ok")

        # Anonymous: authenticated as system:anonymous, then refused by the review.
        code, text = await daemon_get(daemon, "/metrics", token=None)
        assert code == 403
        assert json.loads(text) == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'forbidden: User "system:anonymous" cannot get path "/metrics"',
            "reason": "Forbidden",
            "details": {},
            "code": 403,
        }
        code, text = await daemon_get(daemon, "/debug/decisions/default/web", token=None)
        assert code == 403 and "system:anonymous" in json.loads(text)["message"]

        # A token the cluster does not know: 401, as kube answers it.
        code, text = await daemon_get(daemon, "/metrics", token="forged")
        assert code == 401
        assert json.loads(text) == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Unauthorized",
            "reason": "Unauthorized",
            "code": 401,
        }

        # The scraper may read /metrics and nothing else; the tenant its namespace's autoscalers only.
        code, text = await daemon_get(daemon, "/metrics", token=SCRAPER_TOKEN)
        assert code == 200 and "surge_autoscaler_reconciles_total" in text
        assert (await daemon_get(daemon, "/debug/decisions/default/web", token=SCRAPER_TOKEN))[0] == 403
        assert (await daemon_get(daemon, "/metrics", token=TENANT_TOKEN))[0] == 403
        code, text = await daemon_get(daemon, "/debug/decisions/default/web", token=TENANT_TOKEN)
        assert code == 200 and json.loads(text)["target"] == "default/web"
        code, text = await daemon_get(daemon, "/debug/decisions/other/web", token=TENANT_TOKEN)
        assert code == 403
        refusal = json.loads(text)
        assert refusal["message"] == (
            'horizontalautoscalers.autoscaling.surge.dev "web" is forbidden: User "tenant-a" cannot get '
            'resource "horizontalautoscalers" in API group "autoscaling.surge.dev" in the namespace "other"'
        )
        assert refusal["details"] == {
            "name": "web",
            "group": "autoscaling.surge.dev",
            "kind": "horizontalautoscalers",
        }

    # What the daemon asked the cluster about the tenant's reads: get on the object, no subresource.
    asked = [
        review["spec"]["resourceAttributes"]
        for review in apiserver.server.reviews.access_reviews
        if review["spec"]["user"] == TENANT and "resourceAttributes" in review["spec"]
    ]
    assert {
        "namespace": "default",
        "verb": "get",
        "group": "autoscaling.surge.dev",
        "version": "v1alpha1",
        "resource": "horizontalautoscalers",
        "name": "web",
    } in asked


@pytest.mark.parametrize("name", ["web", "a%2Fb"])
async def test_with_source_hpa_decisions_are_a_read_of_the_hpa(
    apiserver: ServerThread, kubeconfig_path: Path, backend: MetricsBackend, name: str
) -> None:
    allow(apiserver, tenant_reads_autoscalers_in("default", "horizontalpodautoscalers", "autoscaling"))
    async with running_daemon(kubeconfig_path, backend.url, source="hpa") as daemon:
        code, text = await daemon_get(daemon, f"/debug/decisions/default/{name}", token=TENANT_TOKEN)
        if name == "web":
            # Authorized; the daemon does not know it: the 404 Status, not a refusal.
            assert code == 404 and json.loads(text)["reason"] == "NotFound"
        else:
            # A name that decodes with a slash is no object's name: the path stays a non-resource URL,
            # which the tenant holds no grant for.
            assert code == 403
            assert json.loads(text)["message"].startswith('forbidden: User "tenant-a" cannot get path')
