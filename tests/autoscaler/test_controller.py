"""The reconcile shell against the simulated API server and a metrics API it controls.

Tests about timing (periods, debounce, stabilization, deadline) run the controller on a `FakeClock`: time
passes only when the test advances it, while the API server and the metrics API answer for real (waited
for with generous deadlines).
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import pytest

from shared.clock import FakeClock
from shared.kube import KubeClient
from sim.runner import ServerThread
from tests.autoscaler.harness import (
    autoscaler_spec,
    condition,
    create_hza,
    events_of,
    install_crd,
    replicas_of,
    running_controller,
    until_rescale_recorded,
    workload,
)
from tests.autoscaler.helpers import advance, eventually, reconciles, until
from tests.autoscaler.metrics_backend import MetricsBackend

HZA = "/apis/autoscaling.surge.dev/v1alpha1/namespaces/default/horizontalautoscalers"


@pytest.fixture
async def cluster(kube: KubeClient) -> KubeClient:
    await install_crd(kube)
    return kube


async def test_pods_metric_above_target_scales_up_and_reports(
    cluster: KubeClient, apiserver: ServerThread, kubeconfig_path: Path, backend: MetricsBackend
) -> None:
    pods = workload(apiserver, "web", 2)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, 150.0)
    await create_hza(cluster, "web", autoscaler_spec("web", "http_requests", "100", syncPeriodSeconds=1))
    async with running_controller(kubeconfig_path, backend.url):
        await until(lambda: replicas_of(cluster, "web"), 3)
        await until_rescale_recorded(cluster, f"{HZA}/web", "web", 3)
        hza = await cluster.get(f"{HZA}/web")
        status = hza["status"]
        assert status["desiredReplicas"] == 3
        assert status["currentMetrics"][0]["pods"]["current"]["averageValue"] == "150"
        assert status["targets"] == "150/100"
        assert status["reference"] == "Deployment/web"
        able = condition(hza, "AbleToScale")
        assert able is not None and able["reason"] == "SucceededRescale"
        assert able["message"] == "the HPA controller was able to update the target scale to 3"
        active = condition(hza, "ScalingActive")
        assert active is not None and active["status"] == "True" and active["reason"] == "ValidMetricFound"
        events = await events_of(cluster, "web")
        rescale = [e for e in events if e["reason"] == "SuccessfulRescale"]
        assert [e["message"] for e in rescale] == [
            "New size: 3; reason: pods metric http_requests above target"
        ]
        assert (
            rescale[0]["type"] == "Normal" and rescale[0]["involvedObject"]["kind"] == "HorizontalAutoscaler"
        )
    # Parameters exactly as the HPA sends them: the pods selector from /scale, no metric selector.
    path, query = backend.requests[0]
    assert path.startswith("/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2A/http_requests")
    assert query == {"labelSelector": "app=web"}


async def test_missing_target_reports_failed_get_scale_once_prefixed(
    cluster: KubeClient, kubeconfig_path: Path, backend: MetricsBackend
) -> None:
    await create_hza(cluster, "gone", autoscaler_spec("gone", "http_requests", "100", syncPeriodSeconds=1))
    async with running_controller(kubeconfig_path, backend.url):

        async def able_reason() -> str | None:
            found = condition(await cluster.get(f"{HZA}/gone"), "AbleToScale")
            return None if found is None else str(found["reason"])

        await until(able_reason, "FailedGetScale")
        able = condition(await cluster.get(f"{HZA}/gone"), "AbleToScale")
        assert able is not None
        assert able["message"] == (
            "the HPA controller was unable to get the target's current scale: "
            'deployments.apps "gone" not found'
        )
        failed = [e for e in await events_of(cluster, "gone") if e["reason"] == "FailedGetScale"]
        assert failed and failed[0]["type"] == "Warning"
        assert failed[0]["message"] == 'deployments.apps "gone" not found'


async def test_metrics_api_failure_does_not_scale_and_reports_upstream_reason(
    cluster: KubeClient, apiserver: ServerThread, kubeconfig_path: Path, backend: MetricsBackend
) -> None:
    workload(apiserver, "web", 2)
    backend.failures[("default", "http_requests")] = 500
    await create_hza(cluster, "web", autoscaler_spec("web", "http_requests", "100", syncPeriodSeconds=1))
    async with running_controller(kubeconfig_path, backend.url) as controller:
        await until(lambda: _condition_reason(cluster, "web", "ScalingActive"), "FailedGetPodsMetric")
        hza = await cluster.get(f"{HZA}/web")
        active = condition(hza, "ScalingActive")
        assert active is not None and active["status"] == "False"
        assert active["message"].startswith("the HPA was unable to compute the replica count: ")
        upstream_chain = "unable to fetch metrics from custom metrics API: Internal error occurred"
        assert upstream_chain in active["message"]
        assert hza["status"]["targets"] == "<unknown>/100"
        reasons = {e["reason"] for e in await events_of(cluster, "web")}
        assert {"FailedGetPodsMetric", "FailedComputeMetricsReplicas"} <= reasons
        assert "SuccessfulRescale" not in reasons
        assert await replicas_of(cluster, "web") == 2
        assert controller.telemetry.scale_writes.labels(result="ok")._value.get() == 0


async def test_conflicting_write_on_scale_is_retried_with_a_fresh_read(
    cluster: KubeClient, apiserver: ServerThread, kubeconfig_path: Path, backend: MetricsBackend
) -> None:
    pods = workload(apiserver, "web", 2)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, 150.0)
    deployments = ("apps", "deployments")
    store = apiserver.server.store

    def someone_else_edits_the_deployment() -> None:
        # Lands between the autoscaler's read of /scale and its write: the write meets a 409.
        obj = store.get(deployments, "default", "web")
        obj["metadata"].setdefault("annotations", {})["edited-by"] = "someone-else"
        store.update(deployments, obj)

    backend.on_pods_request = lambda: apiserver.call(someone_else_edits_the_deployment)
    await create_hza(cluster, "web", autoscaler_spec("web", "http_requests", "100", syncPeriodSeconds=1))
    async with running_controller(kubeconfig_path, backend.url) as controller:
        await until(lambda: replicas_of(cluster, "web"), 3)
        assert controller.telemetry.scale_conflicts._value.get() >= 1
    deployment = await cluster.get("/apis/apps/v1/namespaces/default/deployments/web")
    assert deployment["metadata"]["annotations"]["edited-by"] == "someone-else"


async def test_spec_change_is_reconciled_at_once_not_after_the_period(
    cluster: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
) -> None:
    pods = workload(apiserver, "web", 2)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, 100.0)
    await create_hza(cluster, "web", autoscaler_spec("web", "http_requests", "100", syncPeriodSeconds=600))
    async with running_controller(kubeconfig_path, backend.url, clock=fake_clock) as controller:
        await until(lambda: _condition_reason(cluster, "web", "ScalingActive"), "ValidMetricFound")
        await eventually(lambda: reconciles(controller) == 1)
        assert await replicas_of(cluster, "web") == 2
        await cluster.request(
            "PATCH",
            f"{HZA}/web",
            content_type="application/merge-patch+json",
            body={"spec": {"metrics": autoscaler_spec("web", "http_requests", "50")["metrics"]}},
        )
        # The clock stands still, so no period can pass: only the edit can trigger this reconcile.
        await until(lambda: replicas_of(cluster, "web"), 4)
        await eventually(lambda: reconciles(controller) == 2)
        assert controller.queue.waiting_count() == 1  # the next period is still ahead


async def test_pod_readiness_change_triggers_a_debounced_reconcile(
    cluster: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
) -> None:
    pods = workload(apiserver, "web", 2)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, 100.0)
    await create_hza(cluster, "web", autoscaler_spec("web", "http_requests", "100", syncPeriodSeconds=600))
    async with running_controller(kubeconfig_path, backend.url, clock=fake_clock) as controller:
        await eventually(lambda: reconciles(controller) == 1)
        assert len(backend.requests) == 1
        store = apiserver.server.store

        def flap_readiness() -> str:
            # Several changes in a burst: one reconcile, not one per change.
            for ready in ("False", "True", "False"):
                pod = store.get(("", "pods"), "default", pods[0])
                pod["status"]["conditions"][0]["status"] = ready
                pod = store.update(("", "pods"), pod, subresource="status")
            return str(pod["metadata"]["resourceVersion"])

        last = apiserver.call(flap_readiness)

        def cached_version() -> str | None:
            cached = controller.pods.store.get("default", pods[0])
            return None if cached is None else str(cached["metadata"]["resourceVersion"])

        # All three changes have reached the controller; debounced, none has reconciled yet.
        await eventually(lambda: cached_version() == last)
        assert reconciles(controller) == 1 and len(controller.queue) == 0
        await advance(fake_clock, controller, controller.options.readiness_debounce)
        assert len(backend.requests) == 2
        # Nothing else is queued, and only the 600 s period waits: the burst made one reconcile.
        assert reconciles(controller) == 2
        assert len(controller.queue) == 0 and controller.queue.waiting_count() == 1


async def test_load_drop_scales_down_after_the_stabilization_window(
    cluster: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
) -> None:
    pods = workload(apiserver, "web", 4)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, 50.0)
    window = 2
    spec = autoscaler_spec(
        "web",
        "http_requests",
        "100",
        syncPeriodSeconds=1,
        behavior={"scaleDown": {"stabilizationWindowSeconds": window}},
    )
    await create_hza(cluster, "web", spec)
    async with running_controller(kubeconfig_path, backend.url, clock=fake_clock) as controller:
        await eventually(lambda: reconciles(controller) == 1)
        elapsed = 0
        while await replicas_of(cluster, "web") == 4 and elapsed <= window:
            await advance(fake_clock, controller, 1.0)
            elapsed += 1
        assert await replicas_of(cluster, "web") == 2
        # The first recommendation (4, the current size) holds the size for the window; the first
        # period past it scales down.
        assert window <= elapsed <= window + 1

        async def able_to_scale_reason() -> str | None:
            able = condition(await cluster.get(f"{HZA}/web"), "AbleToScale")
            return None if able is None else able["reason"]

        async def rescale_messages() -> list[str]:
            events = await events_of(cluster, "web")
            return [e["message"] for e in events if e["reason"] == "SuccessfulRescale"]

        # Status and event were written by the reconcile that scaled (the clock has not moved since).
        assert await able_to_scale_reason() == "SucceededRescale"
        assert await rescale_messages() == ["New size: 2; reason: All metrics below target"]


async def test_slow_metrics_backend_does_not_delay_other_autoscalers(
    cluster: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
) -> None:
    for app in ("slow", "fast"):
        pods = workload(apiserver, app, 2)
        backend.pod_values[("default", f"{app}_requests")] = dict.fromkeys(pods, 100.0)
        await create_hza(cluster, app, autoscaler_spec(app, f"{app}_requests", "100", syncPeriodSeconds=1))
    # Real seconds, far more than the test takes: the slow fetch hangs until the (fake) deadline.
    backend.delays[("default", "slow_requests")] = 60.0

    def fetches(app: str) -> int:
        return sum(f"{app}_requests" in p for p, _ in backend.requests)

    async with running_controller(
        kubeconfig_path, backend.url, reconcile_deadline=3.0, clock=fake_clock
    ) as controller:
        await eventually(lambda: fetches("slow") == 1 and reconciles(controller) == 1)
        # The fast one keeps its 1 s period while the slow one hangs in its first fetch.
        for _ in range(2):
            await advance(fake_clock, controller, 1.0)
        assert fetches("fast") == 3 and fetches("slow") == 1
        # At 3 s both the fast one's period and the slow one's deadline are due.
        await advance(fake_clock, controller, 1.0, reconciled=2)
        assert fetches("fast") == 4 and fetches("slow") == 1
        assert controller.telemetry.reconciles.labels(outcome="deadline")._value.get() == 1


async def test_kubectl_get_and_describe_show_the_decision(
    cluster: KubeClient, apiserver: ServerThread, kubeconfig_path: Path, backend: MetricsBackend, kubectl: Any
) -> None:
    pods = workload(apiserver, "web", 2)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, 150.0)
    await create_hza(cluster, "web", autoscaler_spec("web", "http_requests", "100", syncPeriodSeconds=1))
    async with running_controller(kubeconfig_path, backend.url):
        await until(lambda: replicas_of(cluster, "web"), 3)
        await until(lambda: _condition_reason(cluster, "web", "AbleToScale"), "ReadyForNewScale")
    table = kubectl("get", "hza").stdout.splitlines()
    assert table[0].split() == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    assert table[1].split()[:6] == ["web", "Deployment/web", "150/100", "1", "10", "3"]
    described = kubectl("describe", "hza", "web").stdout
    assert "SuccessfulRescale" in described
    assert "New size: 3; reason: pods metric http_requests above target" in described
    assert "ValidMetricFound" in described


async def _condition_reason(kube: KubeClient, name: str, type_: str) -> str | None:
    found = condition(await kube.get(f"{HZA}/{name}"), type_)
    return None if found is None else str(found["reason"])


async def test_source_hpa_reconciles_plain_hpas_selected_by_label(
    kube: KubeClient, apiserver: ServerThread, kubeconfig_path: Path, backend: MetricsBackend
) -> None:
    from autoscaler.sources import SYNC_PERIOD_ANNOTATION

    hpas = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
    for app, managed in (("web", "true"), ("other", "false")):
        pods = workload(apiserver, app, 2)
        backend.pod_values[("default", "http_requests")] = {
            **backend.pod_values.get(("default", "http_requests"), {}),
            **dict.fromkeys(pods, 150.0),
        }
        body = {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {
                "name": app,
                "namespace": "default",
                "labels": {"surge": managed},
                "annotations": {SYNC_PERIOD_ANNOTATION: "1"},
            },
            "spec": autoscaler_spec(app, "http_requests", "100"),
        }
        await kube.request("POST", hpas, body=body)
    async with running_controller(
        kubeconfig_path, backend.url, source="hpa", selector="surge=true"
    ) as controller:
        await until(lambda: replicas_of(kube, "web"), 3)
        await until_rescale_recorded(kube, f"{hpas}/web", "web", 3)
        hpa = await kube.get(f"{hpas}/web")
        assert hpa["status"]["desiredReplicas"] == 3
        assert "targets" not in hpa["status"]  # the HPA status has no printer-column extras
        active = condition(hpa, "ScalingActive")
        assert active is not None and active["reason"] == "ValidMetricFound"
        messages = [e["message"] for e in await events_of(kube, "web") if e["reason"] == "SuccessfulRescale"]
        assert messages == ["New size: 3; reason: pods metric http_requests above target"]
        assert (await events_of(kube, "web"))[0]["involvedObject"]["kind"] == "HorizontalPodAutoscaler"
        # Not selected: never even cached, so never reconciled; left to someone else.
        assert controller.autoscalers.store.get("default", "other") is None
        assert await replicas_of(kube, "other") == 2
        other = await kube.get(f"{hpas}/other")
        assert not (other.get("status") or {}).get("conditions")


async def test_two_autoscalers_on_the_same_pods_are_reported_ambiguous(
    cluster: KubeClient, apiserver: ServerThread, kubeconfig_path: Path, backend: MetricsBackend
) -> None:
    pods = workload(apiserver, "web", 2)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, 150.0)
    for name in ("first", "second"):
        await create_hza(cluster, name, autoscaler_spec("web", "http_requests", "100", syncPeriodSeconds=1))
    async with running_controller(kubeconfig_path, backend.url):
        for name in ("first", "second"):
            reason = functools.partial(_condition_reason, cluster, name, "ScalingActive")
            await until(reason, "AmbiguousSelector")
        active = condition(await cluster.get(f"{HZA}/second"), "ScalingActive")
        assert active is not None
        assert active["message"] == (
            "pods by selector app=web are controlled by multiple HPAs: [default/first default/second]"
        )
        reasons = {e["reason"] for e in await events_of(cluster, "second")}
        assert "AmbiguousSelector" in reasons


async def test_metrics_through_the_aggregation_layer_fall_back_to_v1beta1(
    cluster: KubeClient, apiserver: ServerThread, kubeconfig_path: Path, backend: MetricsBackend
) -> None:
    pods = workload(apiserver, "web", 2)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, 150.0)
    # The adapter registered for v1beta1 only: discovery offers no v1beta2, so the client uses v1beta1.
    apiservice = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {
            "name": "v1beta1.custom.metrics.k8s.io",
            "annotations": {"sim.surge.dev/url": backend.url},
        },
        "spec": {
            "group": "custom.metrics.k8s.io",
            "version": "v1beta1",
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
            "insecureSkipTLSVerify": True,
            "service": {"name": "adapter", "namespace": "monitoring", "port": 443},
        },
    }
    await cluster.request("POST", "/apis/apiregistration.k8s.io/v1/apiservices", body=apiservice)
    # From a thread: the probe needs this loop free, since the backend answers on it.
    await asyncio.to_thread(apiserver.call, apiserver.server.aggregator.probe_all())
    await create_hza(cluster, "web", autoscaler_spec("web", "http_requests", "100", syncPeriodSeconds=1))
    async with running_controller(kubeconfig_path, None):
        await until(lambda: replicas_of(cluster, "web"), 3)
    path, query = backend.requests[0]
    assert path.startswith("/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/pods/")
    assert path.split("?")[0].endswith("/http_requests")
    assert query == {"labelSelector": "app=web"}


async def test_a_spec_the_api_would_refuse_is_reported_and_never_acted_on(
    cluster: KubeClient, apiserver: ServerThread, kubeconfig_path: Path, backend: MetricsBackend
) -> None:
    """An autoscaling/v2 HPA with maxReplicas < minReplicas from a server that did not validate it (the
    simulated one's HPA validation is off for the write): the daemon checks the API's rules itself."""
    from autoscaler.sources import SYNC_PERIOD_ANNOTATION

    pods = workload(apiserver, "web", 2)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, 150.0)
    hpas = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
    spec = {**autoscaler_spec("web", "http_requests", "100"), "minReplicas": 2, "maxReplicas": 1}
    body = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default", "annotations": {SYNC_PERIOD_ANNOTATION: "1"}},
        "spec": spec,
    }
    hpa_type = apiserver.server.store.type_of(("autoscaling", "horizontalpodautoscalers"))
    validator, hpa_type.validator = hpa_type.validator, None
    try:
        await cluster.request("POST", hpas, body=body)
    finally:
        hpa_type.validator = validator
    async with running_controller(kubeconfig_path, backend.url, source="hpa") as controller:
        await eventually(lambda: reconciles(controller) >= 3)  # several periods: still one event
        hpa = await cluster.get(f"{hpas}/web")
    active = condition(hpa, "ScalingActive")
    assert active is not None and (active["status"], active["reason"]) == ("False", "InvalidSpec")
    assert active["message"] == (
        "the HPA spec is invalid: spec.maxReplicas: maxReplicas must be greater than or equal to minReplicas"
    )
    warnings = [e for e in await events_of(cluster, "web") if e["reason"] == "InvalidSpec"]
    assert len(warnings) == 1 and warnings[0]["type"] == "Warning"
    assert warnings[0].get("count", 1) == 1
    assert await replicas_of(cluster, "web") == 2  # no scale write, although 150/100 asks for 3
    assert backend.requests == []  # nor a metric read
