"""`*` requests are answered from a watch-based object cache: one LIST and one WATCH of pods reach the
API server however many requests arrive, and objects created later show up through the watch.

Requests are observed through the simulated API server's authorization policy, which sees the verb
(`list` vs `watch`) of every request made by a user outside system:masters.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from sim.apiserver.reviews import ALLOW, Decision
from sim.prometheus import PrometheusProcess
from sim.runner import ServerThread
from tests.adapter.e2e.conftest import NAMESPACE, POD_LABELS, TEST_CONFIG_YAML

PATH = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2A/queue_length?labelSelector=app%3Dweb"
REQUESTS = 25


async def _pod_names(adapter: Any) -> list[str]:
    status, body = await adapter.get(PATH)
    assert status == 200, body
    return [item["describedObject"]["name"] for item in body["items"]]


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": POD_LABELS[name]},
        "spec": {"containers": [{"name": "app", "image": "sim"}]},
    }


async def test_selector_requests_use_one_list_and_a_watch(
    apiserver: ServerThread, static_prometheus: PrometheusProcess, adapter_factory: Any, tmp_path: Path
) -> None:
    store = apiserver.server.store
    # web-2 (app=web, with data in Prometheus) is created only after the first answer.
    for name in ("web-1", "web-3"):
        apiserver.call(lambda n=name: store.create(("", "pods"), _pod(n)))
    pod_verbs: list[str] = []  # appended on the server's thread; list.append is atomic

    def recording_policy(spec: dict[str, Any]) -> Decision:
        attributes = spec.get("resourceAttributes", {})
        if attributes.get("resource") == "pods" and "name" not in attributes:
            pod_verbs.append(attributes["verb"])
        return ALLOW

    apiserver.server.reviews.policy = recording_policy
    kubeconfig = apiserver.write_kubeconfig(tmp_path / "adapter-kubeconfig", user="adapter")
    adapter = await adapter_factory(TEST_CONFIG_YAML, static_prometheus.url, kubeconfig)

    assert await _pod_names(adapter) == ["web-1"]
    apiserver.call(lambda: store.create(("", "pods"), _pod("web-2")))
    for _ in range(REQUESTS):
        await _pod_names(adapter)
    deadline = time.monotonic() + 20
    while await _pod_names(adapter) != ["web-1", "web-2"]:
        assert time.monotonic() < deadline, "the pod created after the first request never showed up"
        await asyncio.sleep(0.1)

    assert pod_verbs.count("list") == 1, pod_verbs
    assert pod_verbs.count("watch") == 1, pod_verbs
